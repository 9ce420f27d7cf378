// Package tuning is the daemon's bandwidth tuning subsystem
// (docs/internals/daemon.md, "Subsystems"; its model in
// docs/research/selection.md, "Bandwidth tuning's model"): the record of every
// candidate evaluated (GET /v1/tuning), the decisions being carried out, and
// the live migrations in flight per host and per cluster LAN that the caps
// count, behind a lock of its own. gramvm decides (Service.Tune, a pure
// evaluation of the candidates); the daemon carries a decision out through the
// agents and tells the Book what came of it.
package tuning

import (
	"slices"
	"sync"
	"time"

	"github.com/metasched/metasched/metasched/api"
)

// MaxRecords bounds the records kept: the oldest go first.
const MaxRecords = 200

// Book is the tuning's state. Its lock is a leaf: no other lock is taken
// under it, so the daemon may call it holding its own.
type Book struct {
	// eval is held by the one evaluation under way (Evaluate).
	eval sync.Mutex

	mu      sync.Mutex
	records []api.TuningRecord
	seq     int
	// active counts the decisions being carried out; lastEval is when
	// the last evaluation started.
	active   int
	lastEval time.Time
	// migrating counts the live migrations in flight (the tuning's and
	// the drains') from and to each host and on each LAN key.
	migrating map[string]int
}

// NewBook is an empty book.
func NewBook() *Book { return &Book{migrating: map[string]int{}} }

// Idle reports whether an evaluation may start at now: no decision is
// being carried out, and the last evaluation started gap or more ago (an
// evaluation weighs every running job of the clusters that hold a plan
// back).
func (b *Book) Idle(now time.Time, gap time.Duration) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.idleLocked(now, gap)
}

func (b *Book) idleLocked(now time.Time, gap time.Duration) bool {
	return b.active == 0 && now.Sub(b.lastEval) >= gap
}

// Evaluate starts an evaluation at now when Idle says one may, one at a
// time (the pools' rounds, which run at once, evaluate theirs in turn):
// ok says it started, and done ends it.
func (b *Book) Evaluate(now time.Time, gap time.Duration) (done func(), ok bool) {
	b.eval.Lock()
	b.mu.Lock()
	ok = b.idleLocked(now, gap)
	if ok {
		b.lastEval = now
	}
	b.mu.Unlock()
	if !ok {
		b.eval.Unlock()
		return func() {}, false
	}
	return b.eval.Unlock, true
}

// Move is a live migration of a decision: a VM of site's LAN (lan, its
// key) from a host to another.
type Move struct {
	From, To, LAN string
}

// Add records an evaluated candidate and returns its number; with moves
// non-nil it is the one carried out, counted active until Ended, its
// migrations in flight until each ends (MigrationEnded).
func (b *Book) Add(rec api.TuningRecord, carried bool, moves []Move) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.seq++
	rec.Seq = b.seq
	b.records = append(b.records, rec)
	if len(b.records) > MaxRecords {
		b.records = slices.Delete(b.records, 0, len(b.records)-MaxRecords)
	}
	if carried {
		b.active++
		for _, m := range moves {
			b.countLocked(m, 1)
		}
	}
	return rec.Seq
}

// Migrating counts a live migration in flight that no tuning decision
// started (a drain's): the caps count it too.
func (b *Book) Migrating(m Move) {
	b.mu.Lock()
	b.countLocked(m, 1)
	b.mu.Unlock()
}

// MigrationEnded counts a migration out, whatever came of it.
func (b *Book) MigrationEnded(m Move) {
	b.mu.Lock()
	b.countLocked(m, -1)
	b.mu.Unlock()
}

func (b *Book) countLocked(m Move, n int) {
	for _, k := range []string{m.From, m.To, m.LAN} {
		if b.migrating[k] += n; b.migrating[k] <= 0 {
			delete(b.migrating, k)
		}
	}
}

// InFlight is the migrations in flight per host and LAN key.
func (b *Book) InFlight() map[string]int {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make(map[string]int, len(b.migrating))
	for k, v := range b.migrating {
		out[k] = v
	}
	return out
}

// Moving reports whether a migration from or to host is in flight.
func (b *Book) Moving(host string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.migrating[host] > 0
}

// Ended records the end of the decision seq carried out: its outcome,
// what the agents did, and the migrations' time in all (0: none).
func (b *Book) Ended(seq int, outcome string, end time.Time, migs []api.TuningMigration, resizes []api.TuningResize, migrationS float64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.active--
	for i := range b.records {
		if r := &b.records[i]; r.Seq == seq {
			r.Outcome, r.Ended, r.Migrations, r.Resizes = outcome, end, migs, resizes
			r.MigrationS = migrationS
		}
	}
}

// JobEnded fills in the measured run times of the records carried out
// with the job as their target or their new job, now that it has ended in
// state (measured: its run time, from the start of its last attempt to
// its end; 0 when it did not end done).
func (b *Book) JobEnded(id, state string, measured float64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for i := range b.records {
		m := b.records[i].Measured
		if m == nil {
			continue
		}
		if b.records[i].Target == id {
			m.TargetState = state
			if measured > 0 {
				m.TargetMeasuredS = measured
				m.TargetSlowdownS = measured - m.TargetPredictedS
			}
		}
		if b.records[i].NewJobID == id {
			m.NewJobState = state
			if measured > 0 {
				m.NewJobMeasuredS = measured
				m.NewJobGainS = m.NewJobPredictedS - measured
			}
		}
	}
}

// Records lists the records, newest first, as copies.
func (b *Book) Records() []api.TuningRecord {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := slices.Clone(b.records)
	slices.Reverse(out)
	for i := range out {
		if m := out[i].Measured; m != nil {
			c := *m // filled in later under the lock
			out[i].Measured = &c
		}
	}
	if out == nil {
		out = []api.TuningRecord{}
	}
	return out
}
