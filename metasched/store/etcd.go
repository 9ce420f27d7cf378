package store

import (
	"fmt"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/metasched/metasched/metasched/store/kv"
)

// etcdTxnItems bounds the records a housekeeping transaction drops in
// etcd: each costs up to two reads (conditions) and three deletes, within
// the 128 operations a transaction may hold by default.
const etcdTxnItems = 24

// EtcdOptions place a store in an etcd cluster.
type EtcdOptions struct {
	// Prefix is the root of the store's keys (default "/metasched/"):
	// several grids may share a cluster under prefixes of their own.
	Prefix string
	// Guard, when set, conditions every write (the daemon's leadership:
	// kv.Etcd.Guard); a write it refuses fails with kv.ErrFenced.
	Guard func() []clientv3.Cmp
}

// OpenEtcd opens the store kept in an etcd cluster, through a client the
// caller made (and closes): it creates the store's buckets under the
// prefix if needed, or migrates an older layout, and counts the jobs.
func OpenEtcd(c *clientv3.Client, eo EtcdOptions, opt Options) (*Store, error) {
	prefix := eo.Prefix
	if prefix == "" {
		prefix = "/metasched/"
	}
	if !strings.HasSuffix(prefix, "/") {
		prefix += "/"
	}
	db := &kv.Etcd{Client: c, Prefix: prefix, Guard: eo.Guard}
	s, err := openOn(db, fmt.Sprintf("etcd %s%s", strings.Join(c.Endpoints(), ","), prefix), opt)
	if err != nil {
		return nil, err
	}
	s.txnItems = etcdTxnItems
	return s, nil
}
