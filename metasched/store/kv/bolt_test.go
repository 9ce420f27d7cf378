package kv_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/metasched/metasched/metasched/store/kv"
	"github.com/metasched/metasched/metasched/store/kv/kvtest"
)

func TestBolt(t *testing.T) {
	kvtest.Run(t, func(t *testing.T) kv.DB {
		db, err := bolt.Open(filepath.Join(t.TempDir(), "kv.db"), 0o600, &bolt.Options{NoSync: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := db.Close(); err != nil {
				t.Error(err)
			}
		})
		return kv.NewBolt(db)
	})
}

// openBatching opens a bbolt file for the Batch tests, whose first commit
// waits delay for size calls.
func openBatching(t *testing.T, size int, delay time.Duration) *kv.Bolt {
	t.Helper()
	db, err := bolt.Open(filepath.Join(t.TempDir(), "kv.db"), 0o600, &bolt.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := db.Close(); err != nil {
			t.Error(err)
		}
	})
	db.MaxBatchSize, db.MaxBatchDelay = size, delay
	b := kv.NewBolt(db)
	if err := b.Update(context.Background(), func(tx kv.Tx) error {
		_, err := tx.CreateBucket([]byte("b"))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return b
}

func put(key string) func(kv.Tx) error {
	return func(tx kv.Tx) error { return tx.Bucket([]byte("b")).Put([]byte(key), []byte("v")) }
}

// batchAll runs the functions in Batch at once and returns their errors.
func batchAll(b *kv.Bolt, fns ...func(kv.Tx) error) []error {
	errs := make([]error, len(fns))
	var wg sync.WaitGroup
	for i, fn := range fns {
		wg.Go(func() { errs[i] = b.Batch(context.Background(), fn) })
	}
	wg.Wait()
	return errs
}

// keys lists the keys of bucket b.
func keys(t *testing.T, b *kv.Bolt) []string {
	t.Helper()
	var out []string
	if err := b.View(context.Background(), func(tx kv.Tx) error {
		return tx.Bucket([]byte("b")).ForEach(func(k, _ []byte) error {
			out = append(out, string(k))
			return nil
		})
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestBoltBatchSize: the first commit waits for MaxBatchSize writes (its
// delay is an hour) and takes them all in one transaction.
func TestBoltBatchSize(t *testing.T) {
	b := openBatching(t, 8, time.Hour)
	before := b.Commits()
	var fns []func(kv.Tx) error
	for i := range 8 {
		fns = append(fns, put(fmt.Sprint("k", i)))
	}
	for i, err := range batchAll(b, fns...) {
		if err != nil {
			t.Errorf("call %d: %v", i, err)
		}
	}
	if got := b.Commits() - before; got != 1 {
		t.Errorf("%d commits for 8 calls, want 1", got)
	}
	if got := keys(t, b); len(got) != 8 {
		t.Errorf("keys %v, want 8", got)
	}
}

// TestBoltBatchJoinsNext: the writes that come while a commit runs all go
// into the next one, whatever MaxBatchSize (bbolt's DB.Batch commits each
// of them alone at a size of 1).
func TestBoltBatchJoinsNext(t *testing.T) {
	b := openBatching(t, 1, time.Hour)
	before := b.Commits()
	inside, release := make(chan struct{}), make(chan struct{})
	first := make(chan error, 1)
	go func() {
		first <- b.Batch(context.Background(), func(tx kv.Tx) error {
			close(inside)
			<-release
			return put("first")(tx)
		})
	}()
	<-inside
	const later = 5
	errs := make(chan error, later)
	for i := range later {
		go func() { errs <- b.Batch(context.Background(), put(fmt.Sprint("later", i))) }()
	}
	for b.Pending() < later {
		runtime.Gosched()
	}
	close(release)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	for range later {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	if got := b.Commits() - before; got != 2 {
		t.Errorf("%d commits, want 2: the first, and the %d that waited for it together", got, later)
	}
}

// TestBoltBatchFails: a function that fails gets its own error and
// commits nothing; the others of its batch commit.
func TestBoltBatchFails(t *testing.T) {
	b := openBatching(t, 3, time.Hour)
	bad := errors.New("bad write")
	errs := batchAll(b, put("a"), func(tx kv.Tx) error {
		if err := put("bad")(tx); err != nil {
			return err
		}
		return bad
	}, put("c"))
	if errs[0] != nil || errs[2] != nil {
		t.Errorf("the good writes failed: %v", errs)
	}
	if !errors.Is(errs[1], bad) {
		t.Errorf("the bad write returned %v, want %v", errs[1], bad)
	}
	if got := keys(t, b); !slices.Equal(got, []string{"a", "c"}) {
		t.Errorf("keys %v, want [a c]", got)
	}
}

// TestBoltBatchPanics: a function that panics panics in its caller's
// goroutine, and the others of its batch commit.
func TestBoltBatchPanics(t *testing.T) {
	b := openBatching(t, 2, time.Hour)
	var got any
	var wg sync.WaitGroup
	wg.Go(func() {
		defer func() { got = recover() }()
		_ = b.Batch(context.Background(), func(kv.Tx) error { panic("boom") }) // it panics before it returns
	})
	if err := b.Batch(context.Background(), put("a")); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if got != "boom" {
		t.Errorf("recovered %v, want boom", got)
	}
	if got := keys(t, b); !slices.Equal(got, []string{"a"}) {
		t.Errorf("keys %v, want [a]", got)
	}
}
