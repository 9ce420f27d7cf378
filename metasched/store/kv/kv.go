// Package kv is the key-value engine under the daemon's store: ordered
// buckets of byte keys, nested buckets and per-bucket sequences, read and
// written in serializable transactions. The store's logic (jobs and their
// indexes, switches, hosts, tokens, sessions, keys, logs) is written once
// against these interfaces; an engine carries it out: bbolt (a file, one
// process) or etcd (a cluster, several daemons).
//
// The semantics are bbolt's, which the store was first written for:
//
//   - A read transaction (View) sees one consistent state.
//   - A write transaction (Update) sees its own writes and commits all of
//     them or none. The engine may run its function more than once (a
//     batch shared with other writers, or a conflict with another writer
//     retried), so the function computes its result afresh each time and
//     reports refusals through variables it resets, never by failing the
//     transaction.
//   - Keys within a bucket are ordered byte-wise; a cursor walks them in
//     order, both ways. A key and a nested bucket never share a name.
//   - A value returned by Get or a cursor is valid until the transaction
//     ends; copy it to keep it.
package kv

import (
	"context"
	"errors"
)

// Errors of the engines.
var (
	// ErrBucketExists: CreateBucket of a bucket that exists.
	ErrBucketExists = errors.New("bucket exists")
	// ErrBucketNotFound: DeleteBucket of a bucket that does not exist.
	ErrBucketNotFound = errors.New("bucket not found")
	// ErrReadOnly: a write in a read transaction.
	ErrReadOnly = errors.New("read-only transaction")
	// ErrKeyRequired: an empty key or bucket name.
	ErrKeyRequired = errors.New("key required")
)

// DB is an engine's database.
type DB interface {
	// View runs fn in a read transaction.
	View(ctx context.Context, fn func(Tx) error) error
	// Update runs fn in a write transaction, committed when fn returns
	// nil; fn may run more than once (see the package comment).
	Update(ctx context.Context, fn func(Tx) error) error
	// Batch is Update that may share its commit with concurrent callers
	// (group commit); fn may run more than once.
	Batch(ctx context.Context, fn func(Tx) error) error
	// Commits counts the write transactions committed so far that wrote
	// something (a group commit is one).
	Commits() int64
	// Close releases the database; transactions in flight end first.
	Close() error
}

// Tx is a transaction: its top-level buckets.
type Tx interface {
	// Bucket is the top-level bucket name, or nil when it does not exist.
	Bucket(name []byte) Bucket
	// CreateBucket makes a top-level bucket (ErrBucketExists if it
	// exists).
	CreateBucket(name []byte) (Bucket, error)
	// CreateBucketIfNotExists makes a top-level bucket unless it exists,
	// and returns it.
	CreateBucketIfNotExists(name []byte) (Bucket, error)
	// DeleteBucket removes a top-level bucket and all it holds.
	DeleteBucket(name []byte) error
	// ForEach calls fn with the name of every top-level bucket, in order.
	ForEach(fn func(name []byte) error) error
	// Writable reports whether this is a write transaction.
	Writable() bool
}

// Bucket is an ordered set of keys and nested buckets.
type Bucket interface {
	Get(key []byte) []byte
	Put(key, value []byte) error
	Delete(key []byte) error
	// Cursor walks the bucket's keys (and nested buckets, with a nil
	// value) in order.
	Cursor() Cursor
	// ForEach calls fn for every key in order (a nested bucket's value
	// is nil).
	ForEach(fn func(k, v []byte) error) error
	// Bucket is the nested bucket name, or nil.
	Bucket(name []byte) Bucket
	CreateBucketIfNotExists(name []byte) (Bucket, error)
	DeleteBucket(name []byte) error
	// Sequence is the bucket's sequence number; NextSequence increments
	// it and returns the new value; SetSequence sets it.
	Sequence() uint64
	NextSequence() (uint64, error)
	SetSequence(v uint64) error
}

// Cursor walks a bucket. Each move returns the key and value it lands on,
// or a nil key past either end.
type Cursor interface {
	First() (key, value []byte)
	Last() (key, value []byte)
	Next() (key, value []byte)
	Prev() (key, value []byte)
	// Seek moves to the first key at or after seek.
	Seek(seek []byte) (key, value []byte)
}
