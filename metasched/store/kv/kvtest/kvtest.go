// Package kvtest holds the behaviour every kv engine must have, as one test
// suite that each engine's tests run on a fresh database of their own.
package kvtest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/metasched/metasched/metasched/store/kv"
)

// Run runs the suite; open returns a fresh, empty database, closed by the
// caller's cleanup.
func Run(t *testing.T, open func(t *testing.T) kv.DB) {
	for _, tc := range []struct {
		name string
		f    func(t *testing.T, db kv.DB)
	}{
		{"buckets", buckets},
		{"keys", keys},
		{"cursor", cursor},
		{"nested", nested},
		{"sequence", sequence},
		{"rollback", rollback},
		{"read-only", readOnly},
		{"concurrent increments", concurrentIncrements},
		{"commits", commits},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.f(t, open(t)) })
	}
}

var ctx = context.Background()

func update(t *testing.T, db kv.DB, fn func(kv.Tx) error) {
	t.Helper()
	if err := db.Update(ctx, fn); err != nil {
		t.Fatal(err)
	}
}

func view(t *testing.T, db kv.DB, fn func(kv.Tx) error) {
	t.Helper()
	if err := db.View(ctx, fn); err != nil {
		t.Fatal(err)
	}
}

func buckets(t *testing.T, db kv.DB) {
	view(t, db, func(tx kv.Tx) error {
		if tx.Bucket([]byte("a")) != nil {
			t.Error("a bucket in a new database")
		}
		return nil
	})
	update(t, db, func(tx kv.Tx) error {
		for _, n := range []string{"b", "a", "c"} {
			if _, err := tx.CreateBucket([]byte(n)); err != nil {
				return err
			}
		}
		if _, err := tx.CreateBucket([]byte("a")); !errors.Is(err, kv.ErrBucketExists) {
			t.Errorf("CreateBucket of an existing bucket: %v", err)
		}
		if b, err := tx.CreateBucketIfNotExists([]byte("a")); err != nil || b == nil {
			t.Errorf("CreateBucketIfNotExists of an existing bucket: %v", err)
		}
		return nil
	})
	var names []string
	view(t, db, func(tx kv.Tx) error {
		return tx.ForEach(func(name []byte) error {
			names = append(names, string(name))
			return nil
		})
	})
	if !slices.Equal(names, []string{"a", "b", "c"}) {
		t.Errorf("buckets %v, want a b c", names)
	}
	update(t, db, func(tx kv.Tx) error {
		if err := tx.Bucket([]byte("b")).Put([]byte("k"), []byte("v")); err != nil {
			return err
		}
		if err := tx.DeleteBucket([]byte("b")); err != nil {
			return err
		}
		if err := tx.DeleteBucket([]byte("b")); !errors.Is(err, kv.ErrBucketNotFound) {
			t.Errorf("DeleteBucket of a deleted bucket: %v", err)
		}
		return nil
	})
	update(t, db, func(tx kv.Tx) error {
		b, err := tx.CreateBucket([]byte("b"))
		if err != nil {
			return err
		}
		if v := b.Get([]byte("k")); v != nil {
			t.Errorf("a bucket made again holds %q of the one deleted", v)
		}
		return nil
	})
}

func keys(t *testing.T, db kv.DB) {
	update(t, db, func(tx kv.Tx) error {
		b, err := tx.CreateBucket([]byte("k"))
		if err != nil {
			return err
		}
		if err := b.Put([]byte("x"), []byte("1")); err != nil {
			return err
		}
		if got := string(b.Get([]byte("x"))); got != "1" {
			t.Errorf("read its own write: %q", got)
		}
		if err := b.Put([]byte("empty"), []byte{}); err != nil {
			return err
		}
		if err := b.Put(nil, []byte("v")); !errors.Is(err, kv.ErrKeyRequired) {
			t.Errorf("Put of an empty key: %v", err)
		}
		return nil
	})
	view(t, db, func(tx kv.Tx) error {
		b := tx.Bucket([]byte("k"))
		if got := string(b.Get([]byte("x"))); got != "1" {
			t.Errorf("committed x = %q", got)
		}
		if v := b.Get([]byte("empty")); v == nil || len(v) != 0 {
			t.Errorf("an empty value reads %v, want empty and not nil", v)
		}
		if v := b.Get([]byte("missing")); v != nil {
			t.Errorf("a missing key reads %q", v)
		}
		if err := b.Put([]byte("y"), []byte("2")); !errors.Is(err, kv.ErrReadOnly) {
			t.Errorf("Put in a read transaction: %v", err)
		}
		return nil
	})
	update(t, db, func(tx kv.Tx) error {
		b := tx.Bucket([]byte("k"))
		if err := b.Delete([]byte("x")); err != nil {
			return err
		}
		if v := b.Get([]byte("x")); v != nil {
			t.Errorf("a deleted key reads %q in its transaction", v)
		}
		return b.Delete([]byte("never")) // deleting a missing key is no error
	})
	view(t, db, func(tx kv.Tx) error {
		if v := tx.Bucket([]byte("k")).Get([]byte("x")); v != nil {
			t.Errorf("a deleted key reads %q", v)
		}
		return nil
	})
}

// walk lists the keys from a cursor's move on, forward or back.
func walk(c kv.Cursor, k []byte, back bool) []string {
	var out []string
	for ; k != nil; k, _ = step(c, back) {
		out = append(out, string(k))
	}
	return out
}

func step(c kv.Cursor, back bool) ([]byte, []byte) {
	if back {
		return c.Prev()
	}
	return c.Next()
}

func cursor(t *testing.T, db kv.DB) {
	all := []string{"a", "a/1", "a/2", "b", "b/1", "c\xff", "d"}
	update(t, db, func(tx kv.Tx) error {
		b, err := tx.CreateBucket([]byte("c"))
		if err != nil {
			return err
		}
		for _, k := range []string{"d", "a/2", "b", "a", "c\xff", "b/1", "a/1"} {
			if err := b.Put([]byte(k), []byte("v"+k)); err != nil {
				return err
			}
		}
		// Uncommitted writes show in the transaction's cursor.
		c := b.Cursor()
		if got := walk(c, first(c), false); !slices.Equal(got, all) {
			t.Errorf("in the writing transaction: %q, want %q", got, all)
		}
		return nil
	})
	view(t, db, func(tx kv.Tx) error {
		b := tx.Bucket([]byte("c"))
		c := b.Cursor()
		if got := walk(c, first(c), false); !slices.Equal(got, all) {
			t.Errorf("forward %q, want %q", got, all)
		}
		k, v := c.Last()
		if string(k) != "d" || string(v) != "vd" {
			t.Errorf("Last %q %q", k, v)
		}
		back := slices.Clone(all)
		slices.Reverse(back)
		if got := walk(c, k, true); !slices.Equal(got, back) {
			t.Errorf("backward %q, want %q", got, back)
		}
		for seek, want := range map[string][]string{"a/": {"a/1", "a/2", "b", "b/1", "c\xff", "d"}, "b/2": {"c\xff", "d"}, "e": nil, "": all} {
			k, _ := c.Seek([]byte(seek))
			if got := walk(c, k, false); !slices.Equal(got, want) {
				t.Errorf("from Seek(%q): %q, want %q", seek, got, want)
			}
		}
		k, _ = c.Seek([]byte("b/5"))
		if k2, _ := c.Prev(); string(k) != "c\xff" || string(k2) != "b/1" {
			t.Errorf("Seek(b/5) then Prev: %q, %q", k, k2)
		}
		var each []string
		if err := b.ForEach(func(k, v []byte) error {
			if string(v) != "v"+string(k) {
				t.Errorf("ForEach %q: %q", k, v)
			}
			each = append(each, string(k))
			return nil
		}); err != nil {
			return err
		}
		if !slices.Equal(each, all) {
			t.Errorf("ForEach %q", each)
		}
		return nil
	})
	// Deleting while walking forward (as the store drops expired keys).
	update(t, db, func(tx kv.Tx) error {
		b := tx.Bucket([]byte("c"))
		c := b.Cursor()
		for k, _ := c.Seek([]byte("a")); k != nil && string(k) < "b"; k, _ = c.Seek([]byte("a")) {
			if err := b.Delete(k); err != nil {
				return err
			}
		}
		return nil
	})
	view(t, db, func(tx kv.Tx) error {
		c := tx.Bucket([]byte("c")).Cursor()
		if got := walk(c, first(c), false); !slices.Equal(got, []string{"b", "b/1", "c\xff", "d"}) {
			t.Errorf("after the deletes: %q", got)
		}
		return nil
	})
	view(t, db, func(tx kv.Tx) error {
		b, err := tx.CreateBucketIfNotExists([]byte("e"))
		if err == nil || b != nil {
			t.Errorf("CreateBucketIfNotExists in a read transaction: %v", err)
		}
		return nil
	})
}

func first(c kv.Cursor) []byte {
	k, _ := c.First()
	return k
}

func nested(t *testing.T, db kv.DB) {
	update(t, db, func(tx kv.Tx) error {
		top, err := tx.CreateBucket([]byte("top"))
		if err != nil {
			return err
		}
		in, err := top.CreateBucketIfNotExists([]byte("in"))
		if err != nil {
			return err
		}
		if err := in.Put([]byte("k"), []byte("inner")); err != nil {
			return err
		}
		if err := top.Put([]byte("j"), []byte("outer")); err != nil {
			return err
		}
		if _, err := top.CreateBucketIfNotExists([]byte("in")); err != nil {
			t.Errorf("CreateBucketIfNotExists of an existing nested bucket: %v", err)
		}
		return nil
	})
	view(t, db, func(tx kv.Tx) error {
		top := tx.Bucket([]byte("top"))
		if got := string(top.Bucket([]byte("in")).Get([]byte("k"))); got != "inner" {
			t.Errorf("nested k = %q", got)
		}
		if v := top.Get([]byte("k")); v != nil {
			t.Errorf("the nested bucket's key shows in its parent: %q", v)
		}
		if top.Bucket([]byte("j")) != nil || top.Bucket([]byte("none")) != nil {
			t.Error("a key, or nothing, read as a nested bucket")
		}
		var ks []string
		var vals []bool
		err := top.ForEach(func(k, v []byte) error {
			ks = append(ks, string(k))
			vals = append(vals, v != nil)
			return nil
		})
		if err != nil || !slices.Equal(ks, []string{"in", "j"}) || !slices.Equal(vals, []bool{false, true}) {
			t.Errorf("ForEach of a bucket with a nested one: %q %v %v", ks, vals, err)
		}
		return nil
	})
	update(t, db, func(tx kv.Tx) error { return tx.Bucket([]byte("top")).DeleteBucket([]byte("in")) })
	view(t, db, func(tx kv.Tx) error {
		top := tx.Bucket([]byte("top"))
		if top.Bucket([]byte("in")) != nil || string(top.Get([]byte("j"))) != "outer" {
			t.Error("after DeleteBucket(in): in is left, or j is gone")
		}
		return nil
	})
}

func sequence(t *testing.T, db kv.DB) {
	update(t, db, func(tx kv.Tx) error {
		b, err := tx.CreateBucket([]byte("s"))
		if err != nil {
			return err
		}
		if b.Sequence() != 0 {
			t.Errorf("a new bucket's sequence is %d", b.Sequence())
		}
		for want := uint64(1); want <= 3; want++ {
			if n, err := b.NextSequence(); err != nil || n != want {
				t.Errorf("NextSequence %d %v, want %d", n, err, want)
			}
		}
		return nil
	})
	update(t, db, func(tx kv.Tx) error {
		b := tx.Bucket([]byte("s"))
		if b.Sequence() != 3 {
			t.Errorf("committed sequence %d, want 3", b.Sequence())
		}
		return b.SetSequence(41)
	})
	update(t, db, func(tx kv.Tx) error {
		if n, _ := tx.Bucket([]byte("s")).NextSequence(); n != 42 {
			t.Errorf("after SetSequence(41): %d", n)
		}
		return nil
	})
}

func rollback(t *testing.T, db kv.DB) {
	update(t, db, func(tx kv.Tx) error {
		b, err := tx.CreateBucket([]byte("r"))
		if err != nil {
			return err
		}
		return b.Put([]byte("kept"), []byte("1"))
	})
	boom := errors.New("boom")
	err := db.Update(ctx, func(tx kv.Tx) error {
		b := tx.Bucket([]byte("r"))
		if err := b.Put([]byte("lost"), []byte("1")); err != nil {
			return err
		}
		if err := b.Delete([]byte("kept")); err != nil {
			return err
		}
		if _, err := b.NextSequence(); err != nil {
			return err
		}
		if _, err := tx.CreateBucket([]byte("lost")); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("Update returned %v, want its function's error", err)
	}
	view(t, db, func(tx kv.Tx) error {
		b := tx.Bucket([]byte("r"))
		if b.Get([]byte("lost")) != nil || b.Get([]byte("kept")) == nil || b.Sequence() != 0 || tx.Bucket([]byte("lost")) != nil {
			t.Error("a failed Update left some of its writes")
		}
		return nil
	})
	canceled, cancel := context.WithCancel(ctx)
	cancel()
	if err := db.Update(canceled, func(kv.Tx) error { return nil }); !errors.Is(err, context.Canceled) {
		t.Errorf("Update with a canceled context: %v", err)
	}
}

func readOnly(t *testing.T, db kv.DB) {
	update(t, db, func(tx kv.Tx) error {
		_, err := tx.CreateBucket([]byte("ro"))
		if !tx.Writable() {
			t.Error("an Update's transaction is not writable")
		}
		return err
	})
	view(t, db, func(tx kv.Tx) error {
		if tx.Writable() {
			t.Error("a View's transaction is writable")
		}
		if err := tx.DeleteBucket([]byte("ro")); err == nil {
			t.Error("DeleteBucket in a read transaction")
		}
		if _, err := tx.Bucket([]byte("ro")).NextSequence(); err == nil {
			t.Error("NextSequence in a read transaction")
		}
		return nil
	})
}

// concurrentIncrements: writers that read a counter and write it plus one,
// concurrently, lose no increment (the transactions are serializable,
// whether the engine serializes them or retries conflicts), with Update
// and Batch alike.
func concurrentIncrements(t *testing.T, db kv.DB) {
	update(t, db, func(tx kv.Tx) error {
		_, err := tx.CreateBucket([]byte("n"))
		return err
	})
	const writers, each = 4, 25
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Go(func() {
			run := db.Update
			if w%2 == 1 {
				run = db.Batch
			}
			for range each {
				err := run(ctx, func(tx kv.Tx) error {
					b := tx.Bucket([]byte("n"))
					n := 0
					if v := b.Get([]byte("count")); v != nil {
						fmt.Sscan(string(v), &n)
					}
					return b.Put([]byte("count"), fmt.Appendf(nil, "%d", n+1))
				})
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	view(t, db, func(tx kv.Tx) error {
		if got := string(tx.Bucket([]byte("n")).Get([]byte("count"))); got != fmt.Sprint(writers*each) {
			t.Errorf("count %s after %d increments", got, writers*each)
		}
		return nil
	})
}

// commits: each write transaction committed counts once, one rolled
// back not at all, and calls of Batch that share a commit count once
// together.
func commits(t *testing.T, db kv.DB) {
	put := func(key string) func(kv.Tx) error {
		return func(tx kv.Tx) error {
			b, err := tx.CreateBucketIfNotExists([]byte("c"))
			if err != nil {
				return err
			}
			return b.Put([]byte(key), []byte("v"))
		}
	}
	before := db.Commits()
	for i := range 3 {
		update(t, db, put(fmt.Sprint("u", i)))
	}
	if got := db.Commits() - before; got != 3 {
		t.Errorf("%d commits after 3 updates", got)
	}
	if err := db.Update(ctx, func(tx kv.Tx) error {
		if err := put("no")(tx); err != nil {
			return err
		}
		return errors.New("rolled back")
	}); err == nil {
		t.Fatal("a failing update committed")
	}
	if got := db.Commits() - before; got != 3 {
		t.Errorf("%d commits after a rolled back update, want 3", got)
	}
	const calls = 20
	var wg sync.WaitGroup
	for i := range calls {
		wg.Go(func() {
			if err := db.Batch(ctx, put(fmt.Sprint("b", i))); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if got := db.Commits() - before - 3; got < 1 || got > calls {
		t.Errorf("%d commits for %d batched calls, want 1 to %d", got, calls, calls)
	}
}
