package kv

import (
	"cmp"
	"strings"
)

// The cache of keys. A write transaction reads a key from what this
// process last knew of it, if it knows, instead of asking etcd: its
// commit's conditions check every key it read (the modification revision
// it saw), so an entry that is out of date (another process wrote the key)
// fails the commit, which runs again, never commits on it. The daemon
// that leads is the only writer of its store (the others are fenced), so
// its entries are etcd's keys, and a transaction that reads what it
// committed last waits for no read at all. A key it never read nor wrote
// is still asked of etcd, but for the key of a Put, taken to be absent on
// the commit's condition (etcdTx.getting): a Put reads the key it writes
// only to know that no nested bucket has its name, and the keys that a
// job's transactions create (its entries in the indexes of the states it
// moves to, its output's) were most of the daemon's reads left at 1,000
// hosts.
//
// Bounds. A job's transactions know about 20 of its keys, about 6 KB as
// entrySize counts them: its record, rewritten at each transition; its
// entries in the indexes by type and owner, and by state and by state and
// type for each state it passed (absent once it left it); its output's
// bucket, size, sequence and lines. The daemon on etcd at 1,000 hosts
// held 442,000 keys and 133 MB after 20,000 jobs queued and half of them
// placed. 100,000 jobs' keys (2 million, 600 MB) would cost the daemon
// twice that in memory (Go's collector lets the heap grow to twice what is
// live), so the bound is 256 MiB (DefaultCacheBytes: the keys of about
// 40,000 jobs; the daemon's memory grows by up to about 512 MiB, within
// the 2 GiB asked of it at 100,000 jobs queued) and 1,048,576 keys
// (DefaultCacheKeys: the same at 250 bytes a key, for smaller values).
// Beyond either the cache forgets the keys used least lately, half of it
// at a time (keyCache): the jobs under way stay, the others' keys are read
// from etcd again when used, as before the cache.
const (
	DefaultCacheKeys  = 1 << 20
	DefaultCacheBytes = 256 << 20
)

// cacheEntryBytes is what an entry costs besides its key and value: the
// map's slot (the key's and the value's headers, the revision) and its
// share of the map's empty slots.
const cacheEntryBytes = 80

// keyCache is the keys a process's write transactions know: each with its
// value and modification revision as etcd has them (value nil, revision
// 0: absent), as last read or committed. It is guarded by Etcd.mu: only
// write transactions, which run under it, use it.
//
// It holds two generations: a key read or written goes into the young
// one; when that is full (half the bound in keys or in bytes), it becomes
// the old one and the old one is forgotten. A key found in the old one
// moves into the young one. So the keys used within the last generation
// stay, the memory stays under the bound (two generations), and a
// generation's end costs no more than a map's allocation, where dropping
// the oldest key one at a time would need a list of them in order.
type keyCache struct {
	young, old map[string]seenKey
	bytes      int // the young generation's
	// keys and most are a generation's bounds, in keys and bytes (keys
	// 0: not yet set; negative: no cache).
	keys, most int
}

// entrySize is what the entry costs in the cache's bound.
func entrySize(key string, k seenKey) int { return len(key) + len(k.val) + cacheEntryBytes }

// init sets the cache's bounds from the engine's, once.
func (c *keyCache) init(keys, bytes int) {
	if c.keys != 0 {
		return
	}
	if keys < 0 || bytes < 0 {
		c.keys = -1
		return
	}
	c.keys, c.most = max(1, cmp.Or(keys, DefaultCacheKeys)/2), max(1, cmp.Or(bytes, DefaultCacheBytes)/2)
}

// get returns what the cache knows of key.
func (c *keyCache) get(key string) (seenKey, bool) {
	if c.keys < 0 {
		return seenKey{}, false
	}
	if k, ok := c.young[key]; ok {
		return k, true
	}
	k, ok := c.old[key]
	if ok {
		delete(c.old, key)
		c.put(key, k)
	}
	return k, ok
}

// put notes key as etcd has it.
func (c *keyCache) put(key string, k seenKey) {
	if c.keys <= 0 {
		return
	}
	if prev, ok := c.young[key]; ok {
		c.bytes -= entrySize(key, prev)
	} else {
		delete(c.old, key)
		if len(c.young) >= c.keys || c.bytes >= c.most {
			c.old, c.young, c.bytes = c.young, nil, 0
		}
	}
	if c.young == nil {
		c.young = map[string]seenKey{}
	}
	c.young[key] = k
	c.bytes += entrySize(key, k)
}

// drop notes that every key under prefix is absent. It walks the whole
// cache: a bucket is deleted rarely (the daemon's store deletes none).
func (c *keyCache) drop(prefix string) {
	for key, k := range c.young {
		if strings.HasPrefix(key, prefix) {
			c.bytes -= len(k.val)
			c.young[key] = seenKey{}
		}
	}
	for key := range c.old {
		if strings.HasPrefix(key, prefix) {
			c.old[key] = seenKey{}
		}
	}
}

// clear forgets every key.
func (c *keyCache) clear() { c.young, c.old, c.bytes = nil, nil, 0 }

// len is how many keys the cache holds.
func (c *keyCache) len() int { return len(c.young) + len(c.old) }
