package kv

// Pending is how many Batch calls wait for a commit (tests).
func (e *Etcd) Pending() int {
	e.bmu.Lock()
	defer e.bmu.Unlock()
	return len(e.pending)
}

// RangesRead is how many pages of entries the write transaction of tx
// read from etcd so far (tests).
func RangesRead(tx Tx) int { return len(tx.(etcdRoot).b.t.ranges) }
