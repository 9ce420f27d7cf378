package kv

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"
)

// Bolt is the engine on one bbolt file: the store of a daemon on one
// machine. Its Tx is the bolt transaction, reachable with BoltTx for what
// only a file has (its size, a copy, a check).
type Bolt struct {
	DB *bolt.DB

	// batches are the writes waiting for the next group commit (Batch).
	batches batches

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

// Batch runs fn in a write transaction shared with the other writes that
// wait meanwhile (group commit), and returns once that transaction is
// committed. A write that comes when no commit is under way waits up to
// the DB's MaxBatchDelay for others (MaxBatchSize of them end the wait);
// the writes that come while a commit runs all go into the next one,
// which starts as soon as that ends.
//
// bbolt's own DB.Batch starts a commit at each MaxBatchDelay and queues
// the commits behind its write lock: under load they stack up, each with
// the writes of one delay, and a write waits behind all of them.
//
// As with DB.Batch, a function that fails (or panics) is taken out of the
// batch and run in a transaction of its own, whose error it returns (or
// in which it panics again, in its caller's goroutine); the others run
// again together.
func (b *Bolt) Batch(ctx context.Context, fn func(Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c := &batchCall{fn: fn, done: make(chan error, 1)}
	if b.batches.add(c) {
		go b.commitLoop()
	}
	if err := <-c.done; err != errSolo {
		return err
	}
	return b.Update(ctx, fn)
}

// errSolo tells a write that its function failed in a batch: it runs
// again alone, for its own error.
var errSolo = errors.New("batch function failed: run it alone")

// commitLoop commits the queued writes, a transaction at a time, until
// none is left. Its first commit waits MaxBatchDelay for writes to share
// it; each next takes all that came while the one before committed.
func (b *Bolt) commitLoop() {
	b.batches.gather(max(b.DB.MaxBatchSize, 1), b.DB.MaxBatchDelay)
	for calls := b.batches.take(); len(calls) > 0; calls = b.batches.take() {
		b.commit(calls)
	}
}

// commit runs the calls in one transaction, as bbolt's batch does: a call
// whose function fails (or panics) is told to run alone, and the rest
// run again together.
func (b *Bolt) commit(calls []*batchCall) {
	for len(calls) > 0 {
		failed := -1
		err := b.DB.Update(func(tx *bolt.Tx) error {
			for i, c := range calls {
				if err := safely(func() error { return b.write(tx, c.fn) }); err != nil {
					failed = i
					return err
				}
			}
			return nil
		})
		if failed >= 0 {
			calls[failed].done <- errSolo
			calls = slices.Delete(calls, failed, failed+1)
			continue
		}
		for _, c := range calls {
			c.done <- boltErr(err)
		}
		return
	}
}

// safely runs fn, a panic in it an error (the call runs again alone, in
// its caller's goroutine, where it panics again).
func safely(fn func() error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panic in a batch function: %v", p)
		}
	}()
	return fn()
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
