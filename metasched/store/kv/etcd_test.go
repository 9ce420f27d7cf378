package kv_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

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

// TestEtcdQuorumLost: with two of three members down, a transaction ends
// with ErrNoAnswer after the engine's timeout (etcd would hold it until
// its quorum returns), and the same transaction commits once it returns.
func TestEtcdQuorumLost(t *testing.T) {
	c := etcdtest.Start(t, 3)
	db := &kv.Etcd{Client: c.Client(t), Prefix: "/quorum/", Timeout: 3 * time.Second}
	put := func(ctx context.Context) error {
		return db.Update(ctx, func(tx kv.Tx) error {
			b, err := tx.CreateBucketIfNotExists([]byte("b"))
			if err != nil {
				return err
			}
			return b.Put([]byte("k"), []byte("v"))
		})
	}
	if err := put(context.Background()); err != nil {
		t.Fatal(err)
	}
	c.Members[1].Kill()
	c.Members[2].Kill()
	if err := put(context.Background()); !errors.Is(err, kv.ErrNoAnswer) {
		t.Errorf("a write without a quorum: %v, want ErrNoAnswer", err)
	} else {
		t.Logf("a write without a quorum: %v", err)
	}
	if err := db.View(context.Background(), func(tx kv.Tx) error { _ = tx.Bucket([]byte("b")); return nil }); !errors.Is(err, kv.ErrNoAnswer) {
		t.Errorf("a read without a quorum: %v, want ErrNoAnswer", err)
	}
	// A context of its own that ends first keeps its own error.
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	if err := put(ctx); !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, kv.ErrNoAnswer) {
		t.Errorf("a write with a shorter deadline of its own: %v, want its deadline's error", err)
	}
	for _, m := range c.Members[1:] {
		if err := m.Start(); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.WaitHealthy(time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := put(context.Background()); err != nil {
		t.Errorf("a write once the quorum returned: %v", err)
	}
}
