package kv

// Pending is how many Batch calls wait for a commit (tests).
func (e *Etcd) Pending() int {
	e.bmu.Lock()
	defer e.bmu.Unlock()
	return len(e.pending)
}
