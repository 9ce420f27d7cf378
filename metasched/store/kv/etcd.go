package kv

import (
	"cmp"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Etcd is the engine on an etcd cluster: the store of several daemons, one
// of which writes at a time.
//
// Keys. A bucket is a prefix: the root's is the engine's Prefix, a
// bucket's is its parent's, "c", its name in hex and "/". Under a bucket's
// prefix P:
//
//	P "k" KEY   "v" VALUE for a key, or "b" for a nested bucket KEY
//	P "s"       its sequence, in decimal (absent: 0)
//
// so that the keys of a bucket (and its nested buckets, as bbolt lists
// them) are one range of etcd keys in the same byte order, and a bucket's
// whole content (its nested buckets' too) is the range of its prefix.
//
// Transactions. A read transaction reads at one revision of the cluster
// (the revision of its first read). A write transaction reads a key from
// the engine's cache of keys when it is there (etcdcache.go: the keys this
// process's write transactions read and wrote, as it last knew them), from
// etcd at one revision otherwise, and keeps its writes to itself. It
// commits them in one etcd transaction on the condition that nothing it
// read changed: every key it read has the modification revision it saw,
// and no key in a range its cursors walked was written after the revision
// it read the range at. If something did, the function runs again, on
// etcd's state and not the cache's (at most MaxRetries times). This is
// optimistic concurrency control: serializable, as bbolt's one writer is.
// A write transaction that commits nothing checks its keys read from the
// cache the same way before it returns (etcdTx.check), so what it returns
// was etcd's state at one moment, as a commit's is.
//
// Fencing. Guard, when set, adds its conditions to every write: a daemon
// that writes only while it leads passes the condition that its
// leadership's key still exists with its creation revision; a commit whose
// guard fails is refused with ErrFenced, never retried.
type Etcd struct {
	Client *clientv3.Client
	// Prefix is the root of the engine's keys ("/metasched/").
	Prefix string
	// Guard is the fencing condition of every write (nil: none).
	Guard func() []clientv3.Cmp
	// MaxRetries bounds the runs of a write transaction's function
	// that conflict with other writers (0: 100).
	MaxRetries int
	// Page is how many keys a cursor reads at a time (0: 256).
	Page int64
	// Timeout bounds a transaction whose context has no earlier deadline
	// (0: DefaultEtcdTimeout): without a quorum, etcd holds a request
	// until it has one again.
	Timeout time.Duration
	// MaxTxnOps and MaxTxnBytes bound a group commit's transaction (0:
	// DefaultMaxTxnOps, DefaultMaxTxnBytes).
	MaxTxnOps, MaxTxnBytes int
	// CacheKeys and CacheBytes bound the cache of keys of the write
	// transactions (0: DefaultCacheKeys, DefaultCacheBytes; either
	// negative: no cache).
	CacheKeys, CacheBytes int

	// mu runs this process's writes one at a time, as bbolt's one
	// writer: they never conflict with each other, only with another
	// process's (retried). It guards the cache, which only write
	// transactions use: the read transactions, which run beside them,
	// never touch it.
	mu    sync.Mutex
	cache keyCache
	// batches are the calls waiting for the next group commit (Batch).
	batches batches

	commits atomic.Int64
}

// Commits counts the write transactions committed.
func (e *Etcd) Commits() int64 { return e.commits.Load() }

// ErrFenced: a write whose fencing guard failed (its writer no longer
// holds what the guard names, such as the leadership).
var ErrFenced = errors.New("fenced: the writer no longer holds its lease")

// ErrConflicts: a write transaction conflicted with other writers more
// than MaxRetries times.
var ErrConflicts = errors.New("too many conflicting writes")

// ErrNoAnswer: etcd did not answer a transaction within its Timeout, or
// the member the client talked to went away with the request and no other
// answered it (most likely, a majority of its members is down or cut off).
var ErrNoAnswer = errors.New("etcd does not answer (is a majority of its members up?)")

// DefaultEtcdTimeout is Etcd.Timeout when it is not set.
const DefaultEtcdTimeout = 10 * time.Second

// bound gives ctx the engine's timeout, unless it ends earlier; done
// (which may be called more than once) releases it and names the error of
// a transaction that ran out of time: ErrNoAnswer for the timeout (and
// for a member that went away with the request: gRPC's Unavailable), the
// context's own error for its end (the client reports both as an unknown
// error).
func (e *Etcd) bound(ctx context.Context) (context.Context, func(error) error) {
	d := cmp.Or(e.Timeout, DefaultEtcdTimeout)
	bctx, cancel := ctx, context.CancelFunc(func() {})
	own := true // the deadline in force is ctx's own
	if dl, ok := ctx.Deadline(); !ok || time.Until(dl) > d {
		bctx, cancel = context.WithTimeout(ctx, d)
		own = false
	}
	return bctx, func(err error) error {
		cancel()
		// The server may answer that the deadline passed (the deadline
		// travels with the request) before this side's timer has ended
		// the context: the clock says which.
		dl, _ := bctx.Deadline()
		expired := errors.Is(bctx.Err(), context.DeadlineExceeded) || (!dl.IsZero() && !time.Now().Before(dl))
		switch {
		case err == nil:
			return nil
		case ctx.Err() != nil:
			if errors.Is(err, ctx.Err()) {
				return err
			}
			return fmt.Errorf("etcd: %w (%w)", ctx.Err(), err)
		case expired && own:
			return fmt.Errorf("etcd: %w (%w)", context.DeadlineExceeded, err)
		case expired:
			return fmt.Errorf("%w: nothing in %s (%w)", ErrNoAnswer, d, err)
		case status.Code(err) == codes.Unavailable:
			// The member the client talked to went away with the request
			// (killed, or its connection reset) and no other answered it.
			return fmt.Errorf("%w: the member went away (%w)", ErrNoAnswer, err)
		}
		return err
	}
}

// Value encodings under "k".
const (
	tagValue  = 'v'
	tagBucket = 'b'
)

func (e *Etcd) page() int64 {
	if e.Page > 0 {
		return e.Page
	}
	return 256
}

func (e *Etcd) View(ctx context.Context, fn func(Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	ctx, done := e.bound(ctx)
	return done(e.view(ctx, fn))
}

func (e *Etcd) view(ctx context.Context, fn func(Tx) error) error {
	t := &etcdTx{e: e, ctx: ctx}
	err := fn(t.root())
	if t.err != nil {
		return t.err // a read failed: what fn made of it does not count
	}
	return err
}

func (e *Etcd) Update(ctx context.Context, fn func(Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	ctx, done := e.bound(ctx)
	return done(e.update(ctx, fn))
}

func (e *Etcd) update(ctx context.Context, fn func(Tx) error) error {
	most := e.MaxRetries
	if most <= 0 {
		most = 100
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.cache.init(e.CacheKeys, e.CacheBytes)
	wait := time.Millisecond
	uncached := false
	for range most {
		t := &etcdTx{e: e, ctx: ctx, writable: true, uncached: uncached, writes: map[string]*write{}}
		failed := fn(t.root())
		if t.err != nil {
			return t.err // a read failed: what fn made of it does not count
		}
		var ok bool
		var err error
		if failed == nil {
			ok, err = t.commit()
		} else {
			// fn's error stands if what it read was etcd's: it may have
			// read a key from the cache that another process changed.
			ok, err = t.check()
		}
		if errors.Is(err, errUnchecked) {
			uncached = true
			continue
		}
		if err != nil {
			return err
		}
		if ok {
			return failed
		}
		uncached = uncached || t.blind
		select { // another writer was first: run again on what it wrote
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
		wait = min(2*wait, 50*time.Millisecond)
	}
	return fmt.Errorf("etcd: %w (%d runs)", ErrConflicts, most)
}

// Batch is Update with group commit: calls that come while a commit is in
// flight share the next one, run one after the other in one transaction
// (each sees the writes of those before it). A function that fails has
// its writes undone and gets its error, the others commit; a commit that
// conflicts runs them all again. A transaction takes functions up to
// MaxTxnOps operations (and about MaxTxnBytes): the rest go in the next.
// Once queued, a call waits for its commit (at most Timeout), whatever
// ctx does: a caller never hears "failed" of a write that landed.
func (e *Etcd) Batch(ctx context.Context, fn func(Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c := &batchCall{fn: fn, done: make(chan error, 1)}
	if e.batches.add(c) {
		go e.runBatches()
	}
	return <-c.done
}

// runBatches commits the queued calls, a transaction at a time, until
// none is left.
func (e *Etcd) runBatches() {
	for calls := e.batches.take(); len(calls) > 0; calls = e.batches.take() {
		for len(calls) > 0 {
			ctx, done := e.bound(context.Background())
			n, errs := e.commitBatch(ctx, calls)
			for i, c := range calls[:n] {
				c.done <- done(errs[i])
			}
			done(nil)
			calls = calls[n:]
		}
	}
}

// DefaultMaxTxnOps is Etcd.MaxTxnOps when it is not set: etcd's own
// default (--max-txn-ops), which bounds a transaction's conditions and
// its writes alike.
const DefaultMaxTxnOps = 128

// DefaultMaxTxnBytes is Etcd.MaxTxnBytes when it is not set: below etcd's
// default limit of a request (--max-request-bytes, 1.5 MiB).
const DefaultMaxTxnBytes = 1 << 20

// commitBatch runs the first calls that fit in one transaction and
// commits it, again while it conflicts; it returns how many it took and
// each one's error.
func (e *Etcd) commitBatch(ctx context.Context, calls []*batchCall) (int, []error) {
	maxOps, maxBytes := cmp.Or(e.MaxTxnOps, DefaultMaxTxnOps), cmp.Or(e.MaxTxnBytes, DefaultMaxTxnBytes)
	most := cmp.Or(e.MaxRetries, 100)
	e.mu.Lock()
	defer e.mu.Unlock()
	e.cache.init(e.CacheKeys, e.CacheBytes)
	errs := make([]error, len(calls))
	wait := time.Millisecond
	uncached := false
	for range most {
		t := &etcdTx{e: e, ctx: ctx, writable: true, uncached: uncached, writes: map[string]*write{}}
		n := 0
		for n < len(calls) {
			undo := t.mark()
			err := calls[n].fn(t.root())
			if t.err != nil { // a read failed: what ran with it does not commit
				return n + 1, fill(errs[:n+1], t.err)
			}
			if n > 0 && !t.fits(maxOps, maxBytes) {
				undo(true)
				break // the next transaction's
			}
			if errs[n] = err; err != nil {
				// Its writes go; what it read stays among the
				// conditions, so that its error stands only if what it
				// read (some from the cache, maybe) was etcd's.
				undo(false)
			}
			n++
		}
		ok, err := t.commit()
		if errors.Is(err, errUnchecked) {
			uncached = true
			continue
		}
		if err != nil {
			return n, fill(errs[:n], err)
		}
		if ok {
			return n, errs[:n]
		}
		uncached = uncached || t.blind
		select { // another writer was first: run them again on what it wrote
		case <-ctx.Done():
			return len(calls), fill(errs, ctx.Err())
		case <-time.After(wait):
		}
		wait = min(2*wait, 50*time.Millisecond)
	}
	return len(calls), fill(errs, fmt.Errorf("etcd: %w (%d runs)", ErrConflicts, most))
}

func fill(errs []error, err error) []error {
	for i := range errs {
		errs[i] = err
	}
	return errs
}

// mark notes the transaction's state; undo returns it there: the writes
// and drops of what ran since, and with all its reads too.
func (t *etcdTx) mark() (undo func(all bool)) {
	writes, dropped, reads, ranges := maps.Clone(t.writes), len(t.dropped), maps.Clone(t.reads), len(t.ranges)
	return func(all bool) {
		t.writes, t.dropped = writes, t.dropped[:dropped]
		if all {
			t.reads, t.ranges = reads, t.ranges[:ranges]
		}
	}
}

// fits reports whether the transaction stays within etcd's limits: its
// conditions and its writes each at most maxOps, its writes' bytes at
// most maxBytes.
func (t *etcdTx) fits(maxOps, maxBytes int) bool {
	bytes := 0
	for k, w := range t.writes {
		bytes += len(k) + len(w.val)
	}
	return len(t.reads)+len(t.ranges)+1 <= maxOps && len(t.writes)+len(t.dropped) <= maxOps && bytes <= maxBytes
}

// Close closes nothing: the client is the caller's.
func (e *Etcd) Close() error { return nil }

// write is a buffered write: a value (nil: deleted).
type write struct {
	val []byte
}

// etcdTx is one run of a transaction.
type etcdTx struct {
	e        *Etcd
	ctx      context.Context
	writable bool
	// rev is the revision it reads etcd at: that of its first read from
	// etcd (0: none yet). A key from the cache has no revision of its
	// own to agree with it: it is etcd's at some revision up to the
	// latest, and the commit's condition on its modification revision
	// checks it as it does a key read at rev. The ranges, read from etcd
	// only, are read at rev and checked against it. So a write
	// transaction whose keys all came from the cache and that walked no
	// range has no rev, and needs none.
	rev int64
	// cached: it read a key from the cache, or took one absent (blind);
	// uncached: it reads none from the cache and takes none absent (a
	// run after one that could not be checked, etcdTx.check, or after
	// one that took a key absent and failed its conditions).
	cached, uncached bool
	// blind: it took a key absent without asking etcd (getting).
	blind bool
	// keysRead counts the keys it asked etcd for (tests).
	keysRead int
	// reads are the keys read, with the modification revision seen (0:
	// absent), for a write's conditions.
	reads map[string]int64
	// ranges are the key ranges cursors walked, [from, to).
	ranges [][2]string
	// writes are the keys written, dropped the prefixes deleted (in
	// order: a write after a drop survives it).
	writes  map[string]*write
	dropped []string
	err     error // the first error of a write (refused later at commit)
	// seen are the keys read, from etcd at rev or from the cache: a key
	// read again (by a later function of a group commit, often) is read
	// as it was the first time.
	seen map[string]seenKey
}

// seenKey is a key as etcd had it at a revision (val nil: absent).
type seenKey struct {
	val []byte
	mod int64
}

func (t *etcdTx) root() etcdRoot { return etcdRoot{etcdBucket{t: t, prefix: t.e.Prefix}} }

// get reads key as the transaction sees it.
func (t *etcdTx) get(key string) ([]byte, error) { return t.getting(key, false) }

// getting reads key as get does; blind, a key the transaction does not
// know (it did not write, drop or see it, and the cache has not got it)
// is taken to be absent, with no request to etcd, on the commit's
// condition that it is (its modification revision 0, checked as a key
// from the cache is). A Put reads so the key it writes: it needs only to
// know that the key is not a nested bucket, and nearly every key the
// daemon puts without having read it is new (a job's entries in the
// indexes of the states it moves to, its output's lines). A key that
// exists after all fails the commit's conditions, and the run after reads
// etcd only (blind).
func (t *etcdTx) getting(key string, blind bool) ([]byte, error) {
	if t.err != nil {
		return nil, t.err
	}
	if w, ok := t.writes[key]; ok {
		return w.val, nil
	}
	if t.droppedKey(key) {
		return nil, nil
	}
	k, ok := t.seen[key]
	if !ok && t.writable && !t.uncached {
		if k, ok = t.e.cache.get(key); ok {
			t.cached = true
			if t.seen == nil {
				t.seen = map[string]seenKey{}
			}
			t.seen[key] = k
		}
	}
	if !ok && blind && t.writable && !t.uncached {
		k, ok, t.blind, t.cached = seenKey{}, true, true, true
		if t.seen == nil {
			t.seen = map[string]seenKey{}
		}
		t.seen[key] = k
	}
	if !ok {
		resp, err := t.read(key)
		if err != nil {
			return nil, fmt.Errorf("etcd get: %w", err)
		}
		t.keysRead++
		if t.rev == 0 {
			t.rev = resp.Header.Revision
		}
		if len(resp.Kvs) > 0 {
			k = seenKey{val: resp.Kvs[0].Value, mod: resp.Kvs[0].ModRevision}
		}
		if t.seen == nil {
			t.seen = map[string]seenKey{}
		}
		t.seen[key] = k
	}
	if t.writable {
		if t.reads == nil {
			t.reads = map[string]int64{}
		}
		t.reads[key] = k.mod
	}
	return k.val, nil
}

// read reads from etcd: the transaction's first read is linearizable (it
// sees every write committed before), and fixes the revision the others
// read at. Those are serializable: the member that answers need not ask
// the leader, the data of a revision being the same on every member. A
// member that has not applied that revision yet answers ErrFutureRev: then
// the read is linearizable.
func (t *etcdTx) read(key string, opts ...clientv3.OpOption) (*clientv3.GetResponse, error) {
	if t.rev == 0 {
		return t.e.Client.Get(t.ctx, key, opts...)
	}
	opts = append(opts, clientv3.WithRev(t.rev))
	resp, err := t.e.Client.Get(t.ctx, key, append(opts, clientv3.WithSerializable())...)
	if errors.Is(err, rpctypes.ErrFutureRev) {
		return t.e.Client.Get(t.ctx, key, opts...)
	}
	return resp, err
}

// droppedKey reports whether a prefix drop after the key's last write
// covers it (writes are dropped with their prefix, so a key in writes was
// written after the drop).
func (t *etcdTx) droppedKey(key string) bool {
	for _, p := range t.dropped {
		if len(key) >= len(p) && key[:len(p)] == p {
			return true
		}
	}
	return false
}

func (t *etcdTx) put(key string, val []byte) error {
	if !t.writable {
		return ErrReadOnly
	}
	t.writes[key] = &write{val: slices.Clone(val)}
	return nil
}

func (t *etcdTx) del(key string) error {
	if !t.writable {
		return ErrReadOnly
	}
	t.writes[key] = &write{}
	return nil
}

// drop deletes every key under prefix.
func (t *etcdTx) drop(prefix string) error {
	if !t.writable {
		return ErrReadOnly
	}
	for k := range t.writes {
		if len(k) >= len(prefix) && k[:len(prefix)] == prefix {
			delete(t.writes, k)
		}
	}
	t.dropped = append(t.dropped, prefix)
	return nil
}

// conds are the conditions that nothing the transaction read changed:
// every key it read has the modification revision it saw, no key in a
// range it walked was written after rev.
func (t *etcdTx) conds() []clientv3.Cmp {
	var cmps []clientv3.Cmp
	for k, mod := range t.reads {
		cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(k), "=", mod))
	}
	if t.rev > 0 {
		for _, r := range t.ranges {
			cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(r[0]).WithRange(r[1]), "<", t.rev+1))
		}
	}
	return cmps
}

// commit writes the transaction if nothing it read changed: false when
// something did (run it again). A transaction that writes nothing is
// checked instead (check).
func (t *etcdTx) commit() (bool, error) {
	if len(t.writes) == 0 && len(t.dropped) == 0 {
		return t.check()
	}
	cmps := t.conds()
	var guard []clientv3.Cmp
	if t.e.Guard != nil {
		guard = t.e.Guard()
		cmps = append(cmps, guard...)
	}
	var ops []clientv3.Op
	for _, p := range t.dropped {
		ops = append(ops, clientv3.OpDelete(p, clientv3.WithPrefix()))
	}
	keys := make([]string, 0, len(t.writes))
	for k := range t.writes {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if w := t.writes[k]; w.val == nil {
			ops = append(ops, clientv3.OpDelete(k))
		} else {
			ops = append(ops, clientv3.OpPut(k, string(w.val)))
		}
	}
	resp, err := t.e.Client.Txn(t.ctx).If(cmps...).Then(ops...).Commit()
	if err != nil {
		// It may have landed or not: the cache cannot tell its keys.
		t.e.cache.clear()
		return false, fmt.Errorf("etcd commit: %w", err)
	}
	if resp.Succeeded {
		t.e.commits.Add(1)
		t.remember(resp.Header.Revision)
		return true, nil
	}
	// Another process wrote under the prefix (or took the lead): any
	// key the cache knows may have changed with those this transaction
	// read, and the next run reads every key from etcd, at one revision,
	// as without the cache, so that the cache never makes it fail again.
	t.e.cache.clear()
	if len(guard) > 0 {
		g, err := t.e.Client.Txn(t.ctx).If(guard...).Commit()
		if err != nil {
			return false, fmt.Errorf("etcd commit: check the guard: %w", err)
		}
		if !g.Succeeded {
			return false, ErrFenced
		}
	}
	return false, nil
}

// errUnchecked: a transaction that commits nothing read keys from the
// cache, and its conditions are more than etcd lets a transaction hold:
// it runs again, reading etcd only.
var errUnchecked = errors.New("too many conditions to check")

// check confirms, for a write transaction that commits nothing, that the
// keys it read from the cache are etcd's (with every other key it read and
// the ranges it walked, so that all it saw was etcd's at one moment), in
// an etcd transaction of its conditions alone; with a read of one key in
// it, so that etcd answers it as a linearizable read (one with nothing
// but conditions may be answered from a member's own state, which may be
// behind). False: something changed (run it again). A transaction that
// read nothing from the cache read etcd at one revision, and needs no
// check.
func (t *etcdTx) check() (bool, error) {
	if t.cached {
		cmps := t.conds()
		if len(cmps) > cmp.Or(t.e.MaxTxnOps, DefaultMaxTxnOps) {
			return false, errUnchecked
		}
		// The read: of the root's sequence, whose name is never empty
		// (the prefix may be); whether it exists does not matter.
		read := clientv3.OpGet(t.e.Prefix+"s", clientv3.WithCountOnly())
		resp, err := t.e.Client.Txn(t.ctx).If(cmps...).Then(read).Commit()
		if err != nil {
			return false, fmt.Errorf("etcd check: %w", err)
		}
		if !resp.Succeeded {
			t.e.cache.clear() // as after a failed commit
			return false, nil
		}
	}
	t.remember(0)
	return true, nil
}

// remember puts in the cache what a transaction that committed at
// revision rev (0: that committed nothing, was checked) knows of etcd's
// keys: those it read, as it saw them (its conditions held them
// unchanged), then what it committed, as it is at rev: its drops (every
// key under a dropped prefix absent) and its writes.
func (t *etcdTx) remember(rev int64) {
	c := &t.e.cache
	for k := range t.reads {
		c.put(k, t.seen[k])
	}
	if rev == 0 {
		return
	}
	for _, p := range t.dropped {
		c.drop(p)
	}
	for k, w := range t.writes {
		if w.val == nil {
			c.put(k, seenKey{})
		} else {
			c.put(k, seenKey{val: slices.Clip(w.val), mod: rev})
		}
	}
}

// etcdRoot is the transaction's top level: the root bucket's nested
// buckets.
type etcdRoot struct{ b etcdBucket }

func (r etcdRoot) Bucket(name []byte) Bucket { return r.b.Bucket(name) }
func (r etcdRoot) CreateBucket(name []byte) (Bucket, error) {
	return r.b.createBucket(name, false)
}
func (r etcdRoot) CreateBucketIfNotExists(name []byte) (Bucket, error) {
	return r.b.createBucket(name, true)
}
func (r etcdRoot) DeleteBucket(name []byte) error { return r.b.DeleteBucket(name) }
func (r etcdRoot) Writable() bool                 { return r.b.t.writable }

func (r etcdRoot) ForEach(fn func(name []byte) error) error {
	return r.b.ForEach(func(k, v []byte) error {
		if v == nil {
			return fn(k)
		}
		return nil
	})
}

// etcdBucket is a bucket of a transaction.
type etcdBucket struct {
	t      *etcdTx
	prefix string
}

func (b etcdBucket) entry(key []byte) string { return b.prefix + "k" + string(key) }
func (b etcdBucket) child(name []byte) string {
	return b.prefix + "c" + hex.EncodeToString(name) + "/"
}

// read is the entry of key: its tag and value (tag 0: none).
func (b etcdBucket) read(key []byte) (byte, []byte) { return b.reading(key, false) }

// reading reads the entry of key, blind as etcdTx.getting does.
func (b etcdBucket) reading(key []byte, blind bool) (byte, []byte) {
	v, err := b.t.getting(b.entry(key), blind)
	if err != nil {
		b.fail(err)
		return 0, nil
	}
	if len(v) == 0 {
		return 0, nil
	}
	return v[0], v[1:]
}

// fail keeps the first error of a read or write that the interface cannot
// return: the transaction fails with it (View and Update return it,
// whatever the function returned), and every later read fails at once.
func (b etcdBucket) fail(err error) {
	if b.t.err == nil {
		b.t.err = err
	}
}

func (b etcdBucket) Get(key []byte) []byte {
	tag, v := b.read(key)
	if tag != tagValue {
		return nil
	}
	if v == nil {
		v = []byte{}
	}
	return v
}

func (b etcdBucket) Put(key, value []byte) error {
	if len(key) == 0 {
		return ErrKeyRequired
	}
	if !b.t.writable {
		return ErrReadOnly
	}
	if tag, _ := b.reading(key, true); tag == tagBucket {
		return fmt.Errorf("put %q: %w: a bucket has that name", key, ErrBucketExists)
	}
	return b.t.put(b.entry(key), append([]byte{tagValue}, value...))
}

func (b etcdBucket) Delete(key []byte) error {
	if !b.t.writable {
		return ErrReadOnly
	}
	if tag, _ := b.read(key); tag != tagValue {
		return nil
	}
	return b.t.del(b.entry(key))
}

func (b etcdBucket) Bucket(name []byte) Bucket {
	if len(name) == 0 {
		return nil
	}
	if tag, _ := b.read(name); tag != tagBucket && b.t.err == nil {
		return nil
	}
	// (After a failed read the bucket is taken to exist: the caller goes
	// on, its reads fail too, and the transaction fails with the error.)
	return etcdBucket{t: b.t, prefix: b.child(name)}
}

func (b etcdBucket) createBucket(name []byte, ifNotExists bool) (Bucket, error) {
	if len(name) == 0 {
		return nil, ErrKeyRequired
	}
	if !b.t.writable {
		return nil, ErrReadOnly
	}
	switch tag, _ := b.read(name); tag {
	case tagBucket:
		if ifNotExists {
			return etcdBucket{t: b.t, prefix: b.child(name)}, nil
		}
		return nil, ErrBucketExists
	case tagValue:
		return nil, fmt.Errorf("bucket %q: %w: a key has that name", name, ErrBucketExists)
	}
	if err := b.t.put(b.entry(name), []byte{tagBucket}); err != nil {
		return nil, err
	}
	return etcdBucket{t: b.t, prefix: b.child(name)}, nil
}

func (b etcdBucket) CreateBucketIfNotExists(name []byte) (Bucket, error) {
	return b.createBucket(name, true)
}

func (b etcdBucket) DeleteBucket(name []byte) error {
	if !b.t.writable {
		return ErrReadOnly
	}
	if tag, _ := b.read(name); tag != tagBucket {
		return ErrBucketNotFound
	}
	if err := b.t.drop(b.child(name)); err != nil {
		return err
	}
	return b.t.del(b.entry(name))
}

func (b etcdBucket) Sequence() uint64 {
	v, err := b.t.get(b.prefix + "s")
	if err != nil {
		b.fail(err)
		return 0
	}
	n, _ := strconv.ParseUint(string(v), 10, 64)
	return n
}

func (b etcdBucket) SetSequence(v uint64) error {
	if !b.t.writable {
		return ErrReadOnly
	}
	return b.t.put(b.prefix+"s", []byte(strconv.FormatUint(v, 10)))
}

func (b etcdBucket) NextSequence() (uint64, error) {
	if !b.t.writable {
		return 0, ErrReadOnly
	}
	n := b.Sequence() + 1
	return n, b.SetSequence(n)
}

func (b etcdBucket) ForEach(fn func(k, v []byte) error) error {
	c := b.Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		if err := fn(k, v); err != nil {
			return err
		}
	}
	return b.t.err
}

func (b etcdBucket) Cursor() Cursor {
	return &etcdCursor{b: b, lo: b.prefix + "k", hi: b.prefix + "l"}
}

// etcdCursor walks a bucket's entries, [lo, hi) in etcd's keys, as the
// transaction sees them: the entries at its revision and its own writes.
type etcdCursor struct {
	b      etcdBucket
	lo, hi string
	at     string // the entry it is on ("": none)
	// last is the page it fetched last, which the moves after it read
	// from while it covers them: a walk fetches a page per page of
	// entries, not per entry.
	last cursorPage
}

// cursorPage is a page of entries fetched from etcd: in the walk's order
// (back: descending), from from on (back: before it), more when the
// range holds entries after its last.
type cursorPage struct {
	ok, back, more bool
	from           string
	entries        []entry
}

// rest returns the page's entries from pos on (back: before pos) when the
// page covers pos: pos is within what the page read (no entry of etcd's
// between the page's start and pos is missing from it), and whether the
// range holds entries after the last of them.
func (p *cursorPage) rest(pos string, back bool) ([]entry, bool, bool) {
	if !p.ok || p.back != back || len(p.entries) == 0 {
		return nil, false, false
	}
	last := p.entries[len(p.entries)-1].key
	var i int
	if back {
		if pos > p.from || p.more && pos <= last {
			return nil, false, false
		}
		i = sort.Search(len(p.entries), func(i int) bool { return p.entries[i].key < pos })
	} else {
		if pos < p.from || p.more && pos > last {
			return nil, false, false
		}
		i = sort.Search(len(p.entries), func(i int) bool { return p.entries[i].key >= pos })
	}
	return p.entries[i:], p.more, true
}

// entry is an entry seen: its etcd key and raw value.
type entry struct {
	key string
	val []byte
}

// fetch reads up to one page of entries from etcd: from from on (or, back,
// before it), in order of the walk.
func (c *etcdCursor) fetch(from string, back bool) []entry {
	t := c.b.t
	if t.err != nil {
		return nil
	}
	start, end := from, c.hi
	opts := []clientv3.OpOption{clientv3.WithLimit(t.e.page())}
	if back {
		start, end = c.lo, from
		opts = append(opts, clientv3.WithSort(clientv3.SortByKey, clientv3.SortDescend))
	}
	if start >= end {
		return nil
	}
	opts = append(opts, clientv3.WithRange(end))
	resp, err := t.read(start, opts...)
	if err != nil {
		c.b.fail(fmt.Errorf("etcd range: %w", err))
		return nil
	}
	if t.rev == 0 {
		t.rev = resp.Header.Revision
	}
	out := make([]entry, len(resp.Kvs))
	for i, kv := range resp.Kvs {
		out[i] = entry{string(kv.Key), kv.Value}
	}
	// What the walk saw: the range up to the last entry read, or to its
	// end when the page is the range's last.
	seen := [2]string{start, end}
	if resp.More && len(out) > 0 {
		last := out[len(out)-1].key
		if back {
			seen[0] = last
		} else {
			seen[1] = last + "\x00"
		}
	}
	if t.writable {
		t.ranges = append(t.ranges, seen)
	}
	return out
}

// move goes to the first entry from from on (inclusive) forward, or the
// last before from backward, as the transaction sees the bucket: the
// entries at its revision that it did not write or drop, and its own
// writes.
func (c *etcdCursor) move(from string, back bool) ([]byte, []byte) {
	t := c.b.t
	before := func(a, b string) bool { return (!back && a < b) || (back && a > b) }
	// The first of its own writes (not deletes) in the walk's order.
	var own *entry
	for k, w := range t.writes {
		if w.val == nil || k < c.lo || k >= c.hi || (!back && k < from) || (back && k >= from) {
			continue
		}
		if own == nil || before(k, own.key) {
			own = &entry{k, w.val}
		}
	}
	// The first entry of etcd's that it neither wrote nor dropped.
	var stored *entry
	for pos := from; stored == nil; {
		page, more, ok := c.last.rest(pos, back)
		if !ok {
			page = c.fetch(pos, back)
			more = len(page) == int(t.e.page())
			c.last = cursorPage{ok: t.err == nil, back: back, more: more, from: pos, entries: page}
		}
		for i := range page {
			if _, ok := t.writes[page[i].key]; !ok && !t.droppedKey(page[i].key) {
				stored = &page[i]
				break
			}
		}
		if stored != nil || !more || len(page) == 0 || t.err != nil {
			break
		}
		last := page[len(page)-1].key
		if own != nil && !before(last, own.key) {
			break // the rest of etcd's entries come after its own write
		}
		if back {
			pos = last
		} else {
			pos = last + "\x00"
		}
	}
	found := stored
	if own != nil && (found == nil || before(own.key, found.key)) {
		found = own
	}
	if found == nil {
		c.at = ""
		return nil, nil
	}
	c.at = found.key
	return c.decode(*found)
}

// decode is an entry as the cursor returns it: its key in the bucket, and
// its value (nil for a nested bucket).
func (c *etcdCursor) decode(e entry) ([]byte, []byte) {
	key := []byte(e.key[len(c.lo):])
	if len(e.val) == 0 || e.val[0] == tagBucket {
		return key, nil
	}
	v := e.val[1:]
	if v == nil {
		v = []byte{}
	}
	return key, v
}

func (c *etcdCursor) First() ([]byte, []byte) { return c.move(c.lo, false) }
func (c *etcdCursor) Last() ([]byte, []byte)  { return c.move(c.hi, true) }

func (c *etcdCursor) Seek(seek []byte) ([]byte, []byte) {
	return c.move(c.lo+string(seek), false)
}

func (c *etcdCursor) Next() ([]byte, []byte) {
	if c.at == "" {
		return nil, nil
	}
	return c.move(c.at+"\x00", false)
}

func (c *etcdCursor) Prev() ([]byte, []byte) {
	if c.at == "" {
		return nil, nil
	}
	return c.move(c.at, true)
}

// compile-time checks
var (
	_ DB     = (*Etcd)(nil)
	_ Tx     = etcdRoot{}
	_ Bucket = etcdBucket{}
	_ Cursor = (*etcdCursor)(nil)
)
