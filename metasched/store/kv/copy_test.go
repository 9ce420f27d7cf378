package kv_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	bolt "go.etcd.io/bbolt"

	"github.com/metasched/metasched/internal/etcdtest"
	"github.com/metasched/metasched/metasched/store/kv"
)

func openBolt(t *testing.T) kv.DB {
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
	return kv.NewBolt(db)
}

// dump is every bucket's keys, values and sequence, by path.
func dump(t *testing.T, db kv.DB) map[string]string {
	t.Helper()
	out := map[string]string{}
	var walk func(path string, b kv.Bucket) error
	walk = func(path string, b kv.Bucket) error {
		out[path+"#seq"] = fmt.Sprint(b.Sequence())
		return b.ForEach(func(k, v []byte) error {
			if v == nil {
				return walk(path+"/"+string(k), b.Bucket(k))
			}
			out[path+"/"+string(k)] = string(v)
			return nil
		})
	}
	if err := db.View(context.Background(), func(tx kv.Tx) error {
		return tx.ForEach(func(name []byte) error { return walk(string(name), tx.Bucket(name)) })
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestCopy copies a bbolt database with nested buckets, sequences and
// empty values into another engine in transactions of 3 writes: the two
// hold the same; a second copy into it is refused.
func TestCopy(t *testing.T) {
	c := etcdtest.Start(t, 1)
	cl := c.Client(t)
	src := openBolt(t)
	ctx := context.Background()
	if err := src.Update(ctx, func(tx kv.Tx) error {
		for i, name := range []string{"jobs", "meta", "idempotency"} {
			b, err := tx.CreateBucket([]byte(name))
			if err != nil {
				return err
			}
			for k := range 7 {
				if err := b.Put(fmt.Appendf(nil, "k%02d", k), fmt.Appendf(nil, "v%d-%d", i, k)); err != nil {
					return err
				}
			}
			if err := b.SetSequence(uint64(40 + i)); err != nil {
				return err
			}
		}
		in, err := tx.Bucket([]byte("idempotency")).CreateBucketIfNotExists([]byte("keys"))
		if err != nil {
			return err
		}
		if err := in.Put([]byte("a"), []byte{}); err != nil {
			return err
		}
		_, err = tx.CreateBucket([]byte("empty"))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	want := dump(t, src)
	for name, dst := range map[string]kv.DB{"bbolt": openBolt(t), "etcd": &kv.Etcd{Client: cl, Prefix: "/copytest/"}} {
		n, err := kv.Copy(ctx, src, dst, 3)
		if err != nil || n != 22 {
			t.Fatalf("%s: copied %d keys (%v), want 22", name, n, err)
		}
		if diff := cmp.Diff(want, dump(t, dst)); diff != "" {
			t.Errorf("%s: the copy differs (-source +copy):\n%s", name, diff)
		}
		if _, err := kv.Copy(ctx, src, dst, 3); !errors.Is(err, kv.ErrBucketExists) {
			t.Errorf("%s: a copy into a database that holds buckets: %v", name, err)
		}
	}
}
