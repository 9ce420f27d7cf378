package kv

import (
	"context"
	"errors"
	"sync/atomic"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"
)

// Bolt is the engine on one bbolt file: the store of a daemon on one
// machine. Its Tx is the bolt transaction, reachable with BoltTx for what
// only a file has (its size, a copy, a check).
type Bolt struct {
	DB *bolt.DB

	commits atomic.Int64
	// last is the write transaction the last function ran in: bbolt
	// runs one at a time, so a function in another is the first of a new
	// one, whose commit is then counted.
	last atomic.Pointer[bolt.Tx]
}

// NewBolt wraps an open bbolt database.
func NewBolt(db *bolt.DB) *Bolt { return &Bolt{DB: db} }

// Commits counts the write transactions committed.
func (b *Bolt) Commits() int64 { return b.commits.Load() }

// write runs fn in the write transaction tx, counting tx's commit once.
func (b *Bolt) write(tx *bolt.Tx, fn func(Tx) error) error {
	if b.last.Swap(tx) != tx {
		tx.OnCommit(func() { b.commits.Add(1) })
	}
	return fn(boltTx{tx})
}

func (b *Bolt) View(ctx context.Context, fn func(Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return b.DB.View(func(tx *bolt.Tx) error { return fn(boltTx{tx}) })
}

func (b *Bolt) Update(ctx context.Context, fn func(Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return boltErr(b.DB.Update(func(tx *bolt.Tx) error { return b.write(tx, fn) }))
}

func (b *Bolt) Batch(ctx context.Context, fn func(Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return boltErr(b.DB.Batch(func(tx *bolt.Tx) error { return b.write(tx, fn) }))
}

func (b *Bolt) Close() error { return b.DB.Close() }

// BoltTx is the bolt transaction under tx, when tx is the Bolt engine's.
func BoltTx(tx Tx) (*bolt.Tx, bool) {
	t, ok := tx.(boltTx)
	return t.tx, ok
}

// boltErr maps bolt's errors to the package's.
func boltErr(err error) error {
	switch {
	case errors.Is(err, bolterrors.ErrBucketExists):
		return errors.Join(ErrBucketExists, err)
	case errors.Is(err, bolterrors.ErrBucketNotFound):
		return errors.Join(ErrBucketNotFound, err)
	case errors.Is(err, bolterrors.ErrTxNotWritable):
		return errors.Join(ErrReadOnly, err)
	case errors.Is(err, bolterrors.ErrBucketNameRequired), errors.Is(err, bolterrors.ErrKeyRequired):
		return errors.Join(ErrKeyRequired, err)
	}
	return err
}

type boltTx struct{ tx *bolt.Tx }

func (t boltTx) Bucket(name []byte) Bucket { return wrapBucket(t.tx.Bucket(name)) }

func (t boltTx) CreateBucket(name []byte) (Bucket, error) {
	b, err := t.tx.CreateBucket(name)
	return wrapBucket(b), boltErr(err)
}

func (t boltTx) CreateBucketIfNotExists(name []byte) (Bucket, error) {
	b, err := t.tx.CreateBucketIfNotExists(name)
	return wrapBucket(b), boltErr(err)
}

func (t boltTx) DeleteBucket(name []byte) error { return boltErr(t.tx.DeleteBucket(name)) }

func (t boltTx) ForEach(fn func(name []byte) error) error {
	return t.tx.ForEach(func(name []byte, _ *bolt.Bucket) error { return fn(name) })
}

func (t boltTx) Writable() bool { return t.tx.Writable() }

// wrapBucket is b as a Bucket: nil (an untyped nil) for none.
func wrapBucket(b *bolt.Bucket) Bucket {
	if b == nil {
		return nil
	}
	return boltBucket{b}
}

type boltBucket struct{ b *bolt.Bucket }

func (b boltBucket) Get(key []byte) []byte          { return b.b.Get(key) }
func (b boltBucket) Put(key, value []byte) error    { return boltErr(b.b.Put(key, value)) }
func (b boltBucket) Delete(key []byte) error        { return boltErr(b.b.Delete(key)) }
func (b boltBucket) Cursor() Cursor                 { return b.b.Cursor() }
func (b boltBucket) Bucket(name []byte) Bucket      { return wrapBucket(b.b.Bucket(name)) }
func (b boltBucket) DeleteBucket(name []byte) error { return boltErr(b.b.DeleteBucket(name)) }
func (b boltBucket) Sequence() uint64               { return b.b.Sequence() }
func (b boltBucket) SetSequence(v uint64) error     { return boltErr(b.b.SetSequence(v)) }

func (b boltBucket) ForEach(fn func(k, v []byte) error) error { return b.b.ForEach(fn) }

func (b boltBucket) CreateBucketIfNotExists(name []byte) (Bucket, error) {
	nb, err := b.b.CreateBucketIfNotExists(name)
	return wrapBucket(nb), boltErr(err)
}

func (b boltBucket) NextSequence() (uint64, error) {
	n, err := b.b.NextSequence()
	return n, boltErr(err)
}
