package kv_test

import (
	"fmt"
	"testing"

	"github.com/metasched/metasched/internal/etcdtest"
	"github.com/metasched/metasched/metasched/store/kv"
	"github.com/metasched/metasched/metasched/store/kv/kvtest"
)

// TestEtcd runs the engines' suite on a real one-member etcd cluster, each
// case under a prefix of its own; with a page of 2 keys, so that every
// cursor crosses pages.
func TestEtcd(t *testing.T) {
	c := etcdtest.Start(t, 1)
	cl := c.Client(t)
	n := 0
	kvtest.Run(t, func(t *testing.T) kv.DB {
		n++
		return &kv.Etcd{Client: cl, Prefix: fmt.Sprintf("/kvtest/%d/", n), Page: 2}
	})
}
