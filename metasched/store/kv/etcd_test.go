package kv_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

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
	cl := c.Client(t)
	db := &kv.Etcd{Client: cl, Prefix: "/readfails/"}
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
		// An engine of its own, whose cache is empty: its write
		// transaction reads etcd too.
		fresh := &kv.Etcd{Client: cl, Prefix: "/readfails/"}
		run := fresh.View
		if write {
			run = fresh.Update
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

// A member that goes away with a request (its connection reset: gRPC's
// Unavailable, which the quorum test meets when the client talked to a
// member it killed) is no answer, like a timeout; other errors stay theirs.
func TestEtcdUnavailableIsNoAnswer(t *testing.T) {
	db := &kv.Etcd{Timeout: time.Minute}
	_, done := db.Bound(context.Background())
	gone := fmt.Errorf("etcd commit: %w", status.Error(codes.Unavailable, "error reading from server: EOF"))
	if err := done(gone); !errors.Is(err, kv.ErrNoAnswer) || !strings.Contains(err.Error(), "EOF") {
		t.Errorf("a member gone with the request: %v, want ErrNoAnswer with its cause", err)
	}
	other := status.Error(codes.InvalidArgument, "too many operations in txn request")
	if err := done(other); errors.Is(err, kv.ErrNoAnswer) || !errors.Is(err, other) {
		t.Errorf("another error: %v, want it as it was", err)
	}
}

// TestEtcdGroupCommit: Batch calls that come while a commit is in flight
// share the next commits, as many per transaction as etcd's limit of
// operations lets; a function that fails gets its error and its writes are
// undone, the others land.
func TestEtcdGroupCommit(t *testing.T) {
	c := etcdtest.Start(t, 1)
	cl := c.Client(t)
	db := &kv.Etcd{Client: cl, Prefix: "/group/", MaxTxnOps: 10}
	ctx := context.Background()
	if err := db.Update(ctx, func(tx kv.Tx) error { _, err := tx.CreateBucket([]byte("b")); return err }); err != nil {
		t.Fatal(err)
	}
	put := func(key string, fail error) func(kv.Tx) error {
		return func(tx kv.Tx) error {
			if err := tx.Bucket([]byte("b")).Put([]byte(key), []byte("v")); err != nil {
				return err
			}
			return fail
		}
	}
	// The first call holds its commit until the others wait.
	release := make(chan struct{})
	first := make(chan error, 1)
	go func() {
		first <- db.Batch(ctx, func(tx kv.Tx) error {
			<-release
			return put("first", nil)(tx)
		})
	}()
	r0, err := cl.Get(ctx, "/group/")
	if err != nil {
		t.Fatal(err)
	}
	const n = 30
	failing := errors.New("this call fails")
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		var fail error
		if i == 7 {
			fail = failing
		}
		wg.Go(func() { errs[i] = db.Batch(ctx, put(fmt.Sprintf("k%02d", i), fail)) })
	}
	deadline := time.Now().Add(time.Minute)
	for db.Pending() < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d calls wait, want %d", db.Pending(), n)
		}
		time.Sleep(time.Millisecond)
	}
	close(release)
	wg.Wait()
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	for i, err := range errs {
		if i == 7 && !errors.Is(err, failing) || i != 7 && err != nil {
			t.Errorf("call %d: %v", i, err)
		}
	}
	r1, err := cl.Get(ctx, "/group/")
	if err != nil {
		t.Fatal(err)
	}
	txns := r1.Header.Revision - r0.Header.Revision
	// 29 writes, at most 10 a transaction, after the first's own.
	if txns < 1+3 || txns > 1+6 {
		t.Errorf("%d transactions for 1+%d calls, want 4 to 7", txns, n)
	}
	t.Logf("1+%d calls in %d transactions", n, txns)
	if err := db.View(ctx, func(tx kv.Tx) error {
		b := tx.Bucket([]byte("b"))
		for i := range n {
			if got := b.Get([]byte(fmt.Sprintf("k%02d", i))); (got == nil) != (i == 7) {
				t.Errorf("key k%02d: %q", i, got)
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// TestEtcdCursorReadsPages: a walk over a bucket reads a page of entries
// from etcd per page, forward and back, not a page per entry (a page of
// GET /v1/jobs took 0.7 s with 20,000 jobs when each step fetched a page
// of 256 job records and kept the first).
func TestEtcdCursorReadsPages(t *testing.T) {
	c := etcdtest.Start(t, 1)
	db := &kv.Etcd{Client: c.Client(t), Prefix: "/pages/", Page: 5}
	ctx := context.Background()
	fillBucket(t, db, 20)
	for _, back := range []bool{false, true} {
		if err := db.Update(ctx, func(tx kv.Tx) error {
			b := tx.Bucket([]byte("b"))
			before := kv.RangesRead(tx)
			cur := b.Cursor()
			n := 0
			var k []byte
			if back {
				k, _ = cur.Last()
			} else {
				k, _ = cur.First()
			}
			for ; k != nil; n++ {
				if back {
					k, _ = cur.Prev()
				} else {
					k, _ = cur.Next()
				}
			}
			// 20 entries in pages of 5: 4 full pages and the empty one
			// that says the range has no more.
			if got := kv.RangesRead(tx) - before; n != 20 || got > 5 {
				t.Errorf("back %t: %d entries walked with %d pages read, want 20 with at most 5", back, n, got)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
}

// fillBucket makes bucket b of db with n keys k00, k01, ... valued v.
func fillBucket(t *testing.T, db *kv.Etcd, n int) {
	t.Helper()
	if err := db.Update(context.Background(), func(tx kv.Tx) error {
		b, err := tx.CreateBucket([]byte("b"))
		if err != nil {
			return err
		}
		for i := range n {
			if err := b.Put(fmt.Appendf(nil, "k%02d", i), []byte("v")); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}
