package kv

import (
	"context"
	"fmt"
	"slices"
)

// CopyChunkBytes bounds the bytes of keys and values one of Copy's
// transactions writes (etcd takes requests of 1.5 MiB by default).
const CopyChunkBytes = 512 << 10

// Copy copies every bucket of src (its keys, nested buckets and sequences)
// into dst, which must hold no bucket, reading src in one transaction and
// writing dst in transactions of at most chunk writes and about
// CopyChunkBytes (etcd bounds a transaction's operations and a request's
// size). It returns how many keys it copied. A copy
// that fails part way leaves dst partly written: the caller empties it.
func Copy(ctx context.Context, src, dst DB, chunk int) (int, error) {
	if chunk < 1 {
		chunk = 1
	}
	empty := true
	if err := dst.View(ctx, func(tx Tx) error {
		return tx.ForEach(func([]byte) error {
			empty = false
			return nil
		})
	}); err != nil {
		return 0, fmt.Errorf("copy: read the target: %w", err)
	}
	if !empty {
		return 0, fmt.Errorf("copy: the target holds buckets already: %w", ErrBucketExists)
	}
	// One write: make a bucket (path), or put a key in it, or set its
	// sequence.
	type op struct {
		path     [][]byte
		key, val []byte
		bucket   bool
		seq      uint64
		setSeq   bool
	}
	var pending []op
	n, size := 0, 0
	flush := func() error {
		if len(pending) == 0 {
			return nil
		}
		ops := pending
		err := dst.Update(ctx, func(tx Tx) error {
			for _, o := range ops {
				var b Bucket
				var err error
				for i, name := range o.path {
					if i == 0 {
						b, err = tx.CreateBucketIfNotExists(name)
					} else {
						b, err = b.CreateBucketIfNotExists(name)
					}
					if err != nil {
						return fmt.Errorf("bucket %q: %w", o.path, err)
					}
				}
				switch {
				case o.setSeq:
					err = b.SetSequence(o.seq)
				case o.key != nil:
					err = b.Put(o.key, o.val)
				}
				if err != nil {
					return fmt.Errorf("bucket %q, key %q: %w", o.path, o.key, err)
				}
			}
			return nil
		})
		pending, size = pending[:0], 0
		return err
	}
	add := func(o op) error {
		pending = append(pending, o)
		size += len(o.key) + len(o.val)
		if len(pending) >= chunk || size >= CopyChunkBytes {
			return flush()
		}
		return nil
	}
	var walk func(path [][]byte, b Bucket) error
	walk = func(path [][]byte, b Bucket) error {
		if err := add(op{path: path, bucket: true}); err != nil {
			return err
		}
		if s := b.Sequence(); s != 0 {
			if err := add(op{path: path, seq: s, setSeq: true}); err != nil {
				return err
			}
		}
		return b.ForEach(func(k, v []byte) error {
			if v == nil {
				if nb := b.Bucket(k); nb != nil {
					return walk(append(slices.Clone(path), slices.Clone(k)), nb)
				}
			}
			n++
			return add(op{path: path, key: slices.Clone(k), val: slices.Clone(v)})
		})
	}
	err := src.View(ctx, func(tx Tx) error {
		return tx.ForEach(func(name []byte) error {
			return walk([][]byte{slices.Clone(name)}, tx.Bucket(name))
		})
	})
	if err == nil {
		err = flush()
	}
	if err != nil {
		return n, fmt.Errorf("copy: %w", err)
	}
	return n, nil
}
