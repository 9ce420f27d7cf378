package kv_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/metasched/metasched/internal/etcdtest"
	"github.com/metasched/metasched/metasched/store/kv"
)

// etcdKey is the etcd key of key in the top-level bucket b under prefix.
func etcdKey(prefix, b, key string) string { return fmt.Sprintf("%sc%x/k%s", prefix, b, key) }

// engine is an engine under a prefix of its own (/NAME/BATCH/) and its
// Batch, or its Update.
func engine(cl *clientv3.Client, name string, batch bool) (*kv.Etcd, string, func(context.Context, func(kv.Tx) error) error) {
	prefix := fmt.Sprintf("/%s/%t/", name, batch)
	db := &kv.Etcd{Client: cl, Prefix: prefix}
	if batch {
		return db, prefix, db.Batch
	}
	return db, prefix, db.Update
}

// counter reads the decimal count under key "n" of bucket "b" (0: none).
func counter(t *testing.T, tx kv.Tx) int {
	v := tx.Bucket([]byte("b")).Get([]byte("n"))
	if v == nil {
		return 0
	}
	n, err := strconv.Atoi(string(v))
	if err != nil {
		t.Fatalf("the count %q: %v", v, err)
	}
	return n
}

// TestEtcdCacheServesWrites: a write transaction reads the keys that
// earlier ones read or wrote from the engine's cache, without a request to
// etcd (Update and Batch alike, a bucket's sequence too), and what it
// commits is in etcd; a read transaction still reads etcd.
func TestEtcdCacheServesWrites(t *testing.T) {
	c := etcdtest.Start(t, 1)
	cl := c.Client(t)
	db := &kv.Etcd{Client: cl, Prefix: "/cache/"}
	ctx := context.Background()
	if err := db.Update(ctx, func(tx kv.Tx) error {
		b, err := tx.CreateBucket([]byte("b"))
		if err != nil {
			return err
		}
		for i := range 3 {
			if err := b.Put(fmt.Appendf(nil, "k%d", i), []byte("v")); err != nil {
				return err
			}
		}
		_, err = b.NextSequence()
		return err
	}); err != nil {
		t.Fatal(err)
	}
	for _, batch := range []bool{false, true} {
		run := db.Update
		if batch {
			run = db.Batch
		}
		want := fmt.Sprintf("v%t", batch)
		if err := run(ctx, func(tx kv.Tx) error {
			b := tx.Bucket([]byte("b"))
			for i := range 3 {
				if got := b.Get(fmt.Appendf(nil, "k%d", i)); got == nil {
					t.Errorf("batch %t: key k%d is missing", batch, i)
				}
			}
			if b.Get(fmt.Appendf(nil, "none-%t", batch)) != nil {
				t.Errorf("batch %t: a key never written is there", batch)
			}
			if _, err := b.NextSequence(); err != nil {
				return err
			}
			if n := kv.KeysRead(tx); n != 1 {
				// The key "none-…", never read before; the others came
				// from the cache.
				t.Errorf("batch %t: %d keys asked of etcd, want 1 (the one never read before)", batch, n)
			}
			return b.Put([]byte("k0"), []byte(want))
		}); err != nil {
			t.Fatal(err)
		}
		r, err := cl.Get(ctx, etcdKey("/cache/", "b", "k0"))
		if err != nil {
			t.Fatal(err)
		}
		if len(r.Kvs) != 1 || string(r.Kvs[0].Value[1:]) != want {
			t.Errorf("batch %t: etcd holds %v, want %q", batch, r.Kvs, want)
		}
		if val, mod, ok := kv.Cached(db, "b", "k0"); !ok || len(val) == 0 || string(val[1:]) != want || mod != r.Kvs[0].ModRevision {
			t.Errorf("batch %t: the cache has %q at %d (known %t), want %q at %d", batch, val, mod, ok, want, r.Kvs[0].ModRevision)
		}
	}
	if err := db.Update(ctx, func(tx kv.Tx) error {
		if n := tx.Bucket([]byte("b")).Sequence(); n != 3 {
			t.Errorf("sequence %d, want 3", n)
		}
		if n := kv.KeysRead(tx); n != 0 {
			t.Errorf("%d keys asked of etcd, want 0", n)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// TestEtcdCacheOutOfDate: another client writes a key behind the engine's
// back. The next write transaction that reads it from the cache fails its
// commit's condition once, runs again on etcd's value and commits what it
// computes from it: a count incremented by both writers. A transaction
// that commits nothing, or whose function fails on what it read, is
// checked the same way and runs again on etcd's value.
func TestEtcdCacheOutOfDate(t *testing.T) {
	c := etcdtest.Start(t, 1)
	cl := c.Client(t)
	ctx := context.Background()
	for _, batch := range []bool{false, true} {
		db, prefix, run := engine(cl, "stale", batch)
		// incr adds one to the count and returns what each run read.
		incr := func() []int {
			var seen []int
			if err := run(ctx, func(tx kv.Tx) error {
				n := counter(t, tx)
				seen = append(seen, n)
				return tx.Bucket([]byte("b")).Put([]byte("n"), []byte(strconv.Itoa(n+1)))
			}); err != nil {
				t.Fatal(err)
			}
			return seen
		}
		if err := db.Update(ctx, func(tx kv.Tx) error { _, err := tx.CreateBucket([]byte("b")); return err }); err != nil {
			t.Fatal(err)
		}
		incr()
		incr()
		// Behind its back: the count is 100, as another writer left it.
		put := func(n int) {
			if _, err := cl.Put(ctx, etcdKey(prefix, "b", "n"), "v"+strconv.Itoa(n)); err != nil {
				t.Fatal(err)
			}
		}
		put(100)
		if seen := incr(); len(seen) != 2 || seen[0] != 2 || seen[1] != 100 {
			t.Errorf("batch %t: the runs read %v, want [2 100] (the cache's value, then etcd's)", batch, seen)
		}
		r, err := cl.Get(ctx, etcdKey(prefix, "b", "n"))
		if err != nil {
			t.Fatal(err)
		}
		if len(r.Kvs) != 1 || string(r.Kvs[0].Value) != "v101" {
			t.Errorf("batch %t: etcd holds %v, want v101", batch, r.Kvs)
		}
		// The next reads it from the cache again.
		if err := run(ctx, func(tx kv.Tx) error {
			if n := counter(t, tx); n != 101 || kv.KeysRead(tx) != 0 {
				t.Errorf("batch %t: read %d with %d keys asked of etcd, want 101 with none", batch, n, kv.KeysRead(tx))
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		// A transaction that writes nothing, and one whose function fails
		// on the cache's value, are checked before they return.
		put(500)
		var seen []int
		if err := run(ctx, func(tx kv.Tx) error {
			seen = append(seen, counter(t, tx))
			return nil
		}); err != nil || len(seen) != 2 || seen[1] != 500 {
			t.Errorf("batch %t: a transaction that writes nothing read %v (%v), want [101 500]", batch, seen, err)
		}
		put(600)
		seen = nil
		if err := run(ctx, func(tx kv.Tx) error {
			n := counter(t, tx)
			seen = append(seen, n)
			if n != 600 {
				return errors.New("the count is out of date")
			}
			return tx.Bucket([]byte("b")).Put([]byte("m"), []byte("x"))
		}); err != nil || len(seen) != 2 || seen[1] != 600 {
			t.Errorf("batch %t: a function that failed on the cache's value: runs read %v, error %v; want [500 600] and none", batch, seen, err)
		}
	}
}

// TestEtcdCacheDeletes: a deleted key and the keys of a deleted bucket are
// absent in the cache after the commit, and a transaction reads them as
// absent without asking etcd.
func TestEtcdCacheDeletes(t *testing.T) {
	c := etcdtest.Start(t, 1)
	cl := c.Client(t)
	db := &kv.Etcd{Client: cl, Prefix: "/deletes/"}
	ctx := context.Background()
	if err := db.Update(ctx, func(tx kv.Tx) error {
		b, err := tx.CreateBucket([]byte("b"))
		if err != nil {
			return err
		}
		if err := b.Put([]byte("k"), []byte("v")); err != nil {
			return err
		}
		d, err := tx.CreateBucket([]byte("d"))
		if err != nil {
			return err
		}
		for _, k := range []string{"x", "y"} {
			if err := d.Put([]byte(k), []byte("v")); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if val, _, ok := kv.Cached(db, "d", "x"); !ok || val == nil {
		t.Fatalf("before the drop the cache has d/x as %q (known %t)", val, ok)
	}
	if err := db.Update(ctx, func(tx kv.Tx) error {
		return errors.Join(tx.Bucket([]byte("b")).Delete([]byte("k")), tx.DeleteBucket([]byte("d")))
	}); err != nil {
		t.Fatal(err)
	}
	for _, path := range [][]string{{"b", "k"}, {"d"}, {"d", "x"}, {"d", "y"}} {
		if val, mod, ok := kv.Cached(db, path...); !ok || val != nil || mod != 0 {
			t.Errorf("%v: the cache has %q at %d (known %t), want it known absent", path, val, mod, ok)
		}
	}
	if err := db.Update(ctx, func(tx kv.Tx) error {
		if tx.Bucket([]byte("b")).Get([]byte("k")) != nil {
			t.Error("a deleted key is there")
		}
		d, err := tx.CreateBucketIfNotExists([]byte("d"))
		if err != nil {
			return err
		}
		if d.Get([]byte("x")) != nil || d.Get([]byte("y")) != nil {
			t.Error("a key of a deleted bucket is there")
		}
		if n := kv.KeysRead(tx); n != 0 {
			t.Errorf("%d keys asked of etcd, want 0", n)
		}
		return d.Put([]byte("z"), []byte("v"))
	}); err != nil {
		t.Fatal(err)
	}
	r, err := cl.Get(ctx, "/deletes/", clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, e := range r.Kvs {
		keys = append(keys, string(e.Key))
	}
	if want := fmt.Sprint([]string{etcdKey("/deletes/", "d", "z"), "/deletes/kb", "/deletes/kd"}); fmt.Sprint(keys) != want {
		t.Errorf("etcd holds %v, want %v", keys, want)
	}
}

// TestEtcdCacheRange: a transaction whose keys come from the cache reads
// etcd first when a cursor walks a range, and its commit holds the
// condition that nothing was written in that range since: another
// client's write there, after the walk, fails it once, and the next run
// sees the new entry.
func TestEtcdCacheRange(t *testing.T) {
	c := etcdtest.Start(t, 1)
	cl := c.Client(t)
	db := &kv.Etcd{Client: cl, Prefix: "/range/"}
	ctx := context.Background()
	if err := db.Update(ctx, func(tx kv.Tx) error {
		b, err := tx.CreateBucket([]byte("b"))
		if err != nil {
			return err
		}
		if _, err := tx.CreateBucket([]byte("r")); err != nil {
			return err
		}
		return b.Put([]byte("n"), []byte("0"))
	}); err != nil {
		t.Fatal(err)
	}
	var walked []int
	if err := db.Update(ctx, func(tx kv.Tx) error {
		n := counter(t, tx)
		if len(walked) == 0 && kv.KeysRead(tx) != 0 {
			t.Errorf("%d keys asked of etcd before the walk, want 0", kv.KeysRead(tx))
		}
		entries := 0
		if err := tx.Bucket([]byte("r")).ForEach(func(_, _ []byte) error { entries++; return nil }); err != nil {
			return err
		}
		walked = append(walked, entries)
		if len(walked) == 1 {
			if _, err := cl.Put(ctx, etcdKey("/range/", "r", "new"), "vx"); err != nil {
				return err
			}
		}
		return tx.Bucket([]byte("b")).Put([]byte("n"), []byte(strconv.Itoa(n+entries)))
	}); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(walked) != "[0 1]" {
		t.Errorf("the runs walked %v entries, want [0 1]", walked)
	}
	if err := db.View(ctx, func(tx kv.Tx) error {
		if n := counter(t, tx); n != 1 {
			t.Errorf("the count is %d, want 1", n)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// TestEtcdCacheBound: the cache holds at most CacheKeys keys, the ones
// used last, and what transactions read past its bound is still right.
func TestEtcdCacheBound(t *testing.T) {
	c := etcdtest.Start(t, 1)
	db := &kv.Etcd{Client: c.Client(t), Prefix: "/bound/", CacheKeys: 8}
	ctx := context.Background()
	if err := db.Update(ctx, func(tx kv.Tx) error { _, err := tx.CreateBucket([]byte("b")); return err }); err != nil {
		t.Fatal(err)
	}
	for i := range 40 {
		if err := db.Update(ctx, func(tx kv.Tx) error {
			return tx.Bucket([]byte("b")).Put(fmt.Appendf(nil, "k%02d", i), fmt.Appendf(nil, "v%d", i))
		}); err != nil {
			t.Fatal(err)
		}
		if n := kv.CacheLen(db); n > 8 {
			t.Fatalf("after %d writes the cache holds %d keys, want at most 8", i+1, n)
		}
	}
	if err := db.Update(ctx, func(tx kv.Tx) error {
		b := tx.Bucket([]byte("b"))
		if got := b.Get([]byte("k39")); string(got) != "v39" {
			t.Errorf("k39 is %q", got)
		}
		if n := kv.KeysRead(tx); n != 0 {
			t.Errorf("the key written last: %d keys asked of etcd, want 0", n)
		}
		for i := range 40 {
			if got := b.Get(fmt.Appendf(nil, "k%02d", i)); string(got) != fmt.Sprintf("v%d", i) {
				t.Errorf("k%02d is %q", i, got)
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// TestEtcdCacheUnchecked: a transaction that commits nothing but read more
// keys from the cache than a transaction's conditions may hold cannot be
// checked: it runs again, reading etcd only, and returns that run's
// result.
func TestEtcdCacheUnchecked(t *testing.T) {
	c := etcdtest.Start(t, 1)
	db := &kv.Etcd{Client: c.Client(t), Prefix: "/unchecked/", MaxTxnOps: 10}
	ctx := context.Background()
	fillBucket(t, db, 20)
	var read []int
	if err := db.Update(ctx, func(tx kv.Tx) error {
		b := tx.Bucket([]byte("b"))
		for i := range 20 {
			if b.Get(fmt.Appendf(nil, "k%02d", i)) == nil {
				t.Errorf("k%02d is missing", i)
			}
		}
		read = append(read, kv.KeysRead(tx))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(read) != "[0 21]" {
		t.Errorf("the runs asked etcd for %v keys, want [0 21] (the cache's, then etcd's)", read)
	}
}

// TestEtcdBlindPut: a Put of a key the engine does not know asks etcd
// nothing and commits on the condition that the key is absent. When
// another client made it meanwhile, a value or a nested bucket of that
// name, the commit fails its condition and the run after reads etcd: the
// value is overwritten, the bucket's name refused (ErrBucketExists),
// with Update and Batch alike.
func TestEtcdBlindPut(t *testing.T) {
	c := etcdtest.Start(t, 1)
	cl := c.Client(t)
	ctx := context.Background()
	for _, batch := range []bool{false, true} {
		db, prefix, run := engine(cl, "blind", batch)
		if err := db.Update(ctx, func(tx kv.Tx) error { _, err := tx.CreateBucket([]byte("b")); return err }); err != nil {
			t.Fatal(err)
		}
		var runs, read []int
		put := func(key string) error {
			runs, read = nil, nil
			return run(ctx, func(tx kv.Tx) error {
				b := tx.Bucket([]byte("b"))
				before := kv.KeysRead(tx)
				err := b.Put([]byte(key), []byte("mine"))
				runs, read = append(runs, len(runs)+1), append(read, kv.KeysRead(tx)-before)
				return err
			})
		}
		// A new key: no read.
		if err := put("new"); err != nil || !slices.Equal(read, []int{0}) {
			t.Errorf("batch %t: a new key: error %v, keys asked of etcd per run %v, want none and [0]", batch, err, read)
		}
		// A key another client wrote: the condition fails, the second
		// run reads it and overwrites it.
		if _, err := cl.Put(ctx, etcdKey(prefix, "b", "theirs"), "vtheirs"); err != nil {
			t.Fatal(err)
		}
		if err := put("theirs"); err != nil || !slices.Equal(read, []int{0, 1}) {
			t.Errorf("batch %t: a key written behind its back: error %v, keys asked per run %v, want none and [0 1]", batch, err, read)
		}
		if r, err := cl.Get(ctx, etcdKey(prefix, "b", "theirs")); err != nil || len(r.Kvs) != 1 || string(r.Kvs[0].Value) != "vmine" {
			t.Errorf("batch %t: etcd holds %v (%v), want vmine", batch, r.Kvs, err)
		}
		// A nested bucket another client made: refused on the second run.
		other := &kv.Etcd{Client: cl, Prefix: prefix}
		if err := other.Update(ctx, func(tx kv.Tx) error {
			_, err := tx.Bucket([]byte("b")).CreateBucketIfNotExists([]byte("nest"))
			return err
		}); err != nil {
			t.Fatal(err)
		}
		if err := put("nest"); !errors.Is(err, kv.ErrBucketExists) || len(runs) != 2 {
			t.Errorf("batch %t: a Put on a bucket's name: %v after %d runs, want ErrBucketExists after 2", batch, err, len(runs))
		}
	}
}
