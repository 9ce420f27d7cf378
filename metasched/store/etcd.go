package store

import (
	"context"
	"fmt"
	"maps"
	"os"
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

// Migrate copies the store of a stopped daemon (the bbolt file at from) into
// etcd under the prefix, which must hold nothing, and checks that the copy
// holds what the file does (its jobs per state, hosts, switches, tokens and
// layout). A migration that fails removes what it wrote.
func Migrate(ctx context.Context, from string, c *clientv3.Client, prefix string) (Summary, error) {
	if prefix == "" {
		prefix = "/metasched/"
	}
	if !strings.HasSuffix(prefix, "/") {
		prefix += "/"
	}
	if _, err := os.Stat(from); err != nil {
		return Summary{}, fmt.Errorf("migrate: %w", err)
	}
	if InUse(from) {
		return Summary{}, fmt.Errorf("migrate %s: %w: a daemon has it open; stop the daemon first", from, ErrInUse)
	}
	src, err := Open(from, Options{})
	if err != nil {
		return Summary{}, fmt.Errorf("migrate: %w", err)
	}
	defer src.Close()
	want, err := src.Summary(ctx)
	if err != nil {
		return Summary{}, fmt.Errorf("migrate: %w", err)
	}
	r, err := c.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		return Summary{}, fmt.Errorf("migrate: read etcd: %w", err)
	}
	if r.Count > 0 {
		return Summary{}, fmt.Errorf("migrate: etcd holds %d keys under %s already (another grid's store, or an earlier migration): choose another prefix, or delete them first", r.Count, prefix)
	}
	undo := func() { _, _ = c.Delete(context.WithoutCancel(ctx), prefix, clientv3.WithPrefix()) }
	if _, err := kv.Copy(ctx, src.db, &kv.Etcd{Client: c, Prefix: prefix}, etcdTxnItems*2); err != nil {
		undo()
		return Summary{}, fmt.Errorf("migrate %s to etcd %s: %w", from, prefix, err)
	}
	dst, err := OpenEtcd(c, EtcdOptions{Prefix: prefix}, Options{})
	if err == nil {
		var got Summary
		if got, err = dst.Summary(ctx); err == nil {
			got.Bytes = want.Bytes // a file's size: etcd has none
			if !maps.Equal(got.Jobs, want.Jobs) || got.Hosts != want.Hosts || got.Switches != want.Switches || got.Tokens != want.Tokens || got.Layout != want.Layout {
				err = fmt.Errorf("the copy holds %+v, the file %+v", got, want)
			}
		}
	}
	if err != nil {
		undo()
		return Summary{}, fmt.Errorf("migrate %s to etcd %s: %w", from, prefix, err)
	}
	return want, nil
}
