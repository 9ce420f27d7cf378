package kv

import (
	"sync"
	"time"
)

// batchCall is a function queued by an engine's Batch, and where its
// error goes once its transaction is committed (or not).
type batchCall struct {
	fn   func(Tx) error
	done chan error
}

// batches is an engine's group commit queue: the calls waiting for the
// next commit, and whether a committer runs. One committer at a time
// takes all the calls queued, commits them, and takes those that came
// meanwhile, until none is left: under load a commit takes every write
// that waited for the one before, however many.
type batches struct {
	mu      sync.Mutex
	pending []*batchCall
	running bool
	// enough, while the committer gathers its first calls, is closed
	// once want calls are queued.
	enough chan struct{}
	want   int
}

// add queues c and reports whether the caller is to start the committer
// (none runs).
func (q *batches) add(c *batchCall) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.pending = append(q.pending, c)
	if q.enough != nil && len(q.pending) >= q.want {
		close(q.enough)
		q.enough = nil
	}
	start := !q.running
	q.running = true
	return start
}

// gather waits up to d, or until n calls are queued, for calls to share
// the committer's first commit.
func (q *batches) gather(n int, d time.Duration) {
	q.mu.Lock()
	if len(q.pending) >= n || d <= 0 {
		q.mu.Unlock()
		return
	}
	enough := make(chan struct{})
	q.enough, q.want = enough, n
	q.mu.Unlock()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-enough:
	case <-t.C:
	}
	q.mu.Lock()
	if q.enough == enough {
		q.enough = nil
	}
	q.mu.Unlock()
}

// take takes the calls queued; with none, the committer ends (the next
// call starts another).
func (q *batches) take() []*batchCall {
	q.mu.Lock()
	defer q.mu.Unlock()
	calls := q.pending
	q.pending = nil
	if len(calls) == 0 {
		q.running = false
	}
	return calls
}
