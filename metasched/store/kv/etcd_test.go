package kv_test

import (
	"context"
	"errors"
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

// TestEtcdReadFails: a read that fails (here, its context canceled in the
// middle of a transaction) fails the transaction with its error, whatever
// the function made of the nil it read, and a write transaction commits
// nothing.
func TestEtcdReadFails(t *testing.T) {
	c := etcdtest.Start(t, 1)
	db := &kv.Etcd{Client: c.Client(t), Prefix: "/readfails/"}
	if err := db.Update(context.Background(), func(tx kv.Tx) error {
		b, err := tx.CreateBucket([]byte("b"))
		if err != nil {
			return err
		}
		return b.Put([]byte("k"), []byte("v"))
	}); err != nil {
		t.Fatal(err)
	}
	for _, write := range []bool{false, true} {
		ctx, cancel := context.WithCancel(context.Background())
		run := db.View
		if write {
			run = db.Update
		}
		err := run(ctx, func(tx kv.Tx) error {
			cancel()
			b := tx.Bucket([]byte("b"))
			if b == nil {
				return errors.New("the bucket is missing")
			}
			if b.Get([]byte("k")) == nil && write {
				return b.Put([]byte("k2"), []byte("v2"))
			}
			return nil
		})
		if !errors.Is(err, context.Canceled) {
			t.Errorf("write %v: a transaction whose read failed: %v, want context.Canceled", write, err)
		}
	}
	if err := db.View(context.Background(), func(tx kv.Tx) error {
		if tx.Bucket([]byte("b")).Get([]byte("k2")) != nil {
			t.Error("a write transaction whose read failed committed")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}
