package kv

import (
	"context"
	"encoding/hex"
)

// Pending is how many Batch calls wait for a commit (tests).
func (e *Etcd) Pending() int { return e.batches.waiting() }

// Pending is how many Batch calls wait for a commit (tests).
func (b *Bolt) Pending() int { return b.batches.waiting() }

// waiting is how many calls wait.
func (q *batches) waiting() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.pending)
}

// RangesRead is how many pages of entries the write transaction of tx
// read from etcd so far (tests).
func RangesRead(tx Tx) int { return len(tx.(etcdRoot).b.t.ranges) }

// KeysRead is how many keys the write transaction of tx asked etcd for
// so far, each a request of its own (tests).
func KeysRead(tx Tx) int { return tx.(etcdRoot).b.t.keysRead }

// Cached is what e's cache knows of a key: path is its buckets from the
// top level, then its name. It returns the key's value as stored (its tag
// first; nil: absent) and modification revision, and whether the cache
// knows the key at all (tests).
func Cached(e *Etcd, path ...string) ([]byte, int64, bool) {
	key := e.Prefix
	for _, b := range path[:len(path)-1] {
		key += "c" + hex.EncodeToString([]byte(b)) + "/"
	}
	key += "k" + path[len(path)-1]
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, m := range []map[string]seenKey{e.cache.young, e.cache.old} {
		if k, ok := m[key]; ok {
			return k.val, k.mod, true
		}
	}
	return nil, 0, false
}

// CacheLen is how many keys e's cache holds (tests).
func CacheLen(e *Etcd) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.cache.len()
}

// Bound is e.bound (tests).
func (e *Etcd) Bound(ctx context.Context) (context.Context, func(error) error) { return e.bound(ctx) }
