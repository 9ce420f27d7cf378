package tuning

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/metasched/metasched/internal/deptest"
	"github.com/metasched/metasched/metasched/api"
)

var t0 = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

const gap = 5 * time.Second

// A decision carried out: evaluations wait for its end, its migrations
// count in flight until each ends, and its record gets what came of it
// and, as the two jobs end, their measured run times.
func TestBook(t *testing.T) {
	b := NewBook()
	if !b.Idle(t0, gap) {
		t.Fatal("a new book is not idle")
	}
	done, ok := b.Evaluate(t0, gap)
	if !ok {
		t.Fatal("the first evaluation did not start")
	}
	// Another pool's round evaluates once this one is over, and finds the
	// gap not yet past.
	second := make(chan bool)
	go func() {
		d, ok := b.Evaluate(t0.Add(time.Second), gap)
		d()
		second <- ok
	}()
	select {
	case <-second:
		t.Fatal("a second evaluation ran beside the first")
	case <-time.After(10 * time.Millisecond):
	}
	b.Add(api.TuningRecord{NewJobID: "j-2", Outcome: "rejected"}, false, nil)
	seq := b.Add(api.TuningRecord{NewJobID: "j-2", Outcome: "carrying out",
		TuningDecision: api.TuningDecision{Target: "j-1"},
		Measured:       &api.TuningMeasured{TargetPredictedS: 100, NewJobPredictedS: 50}},
		true, []Move{{From: "a-1", To: "a-2", LAN: "lan:a"}, {From: "a-3", To: "a-2", LAN: "lan:a"}})
	done()
	if <-second {
		t.Error("a second evaluation within the gap started")
	}
	if seq != 2 {
		t.Errorf("the second record is number %d", seq)
	}
	if want := map[string]int{"a-1": 1, "a-2": 2, "a-3": 1, "lan:a": 2}; !cmp.Equal(b.InFlight(), want) {
		t.Errorf("in flight %v, want %v", b.InFlight(), want)
	}
	if b.Idle(t0.Add(time.Hour), gap) {
		t.Error("idle while a decision is carried out")
	}
	b.MigrationEnded(Move{From: "a-1", To: "a-2", LAN: "lan:a"})
	b.Migrating(Move{From: "a-2", To: "a-4", LAN: "lan:a"}) // a drain's
	if want := map[string]int{"a-2": 2, "a-3": 1, "a-4": 1, "lan:a": 2}; !cmp.Equal(b.InFlight(), want) || b.Moving("a-1") || !b.Moving("a-4") {
		t.Errorf("in flight %v, want %v", b.InFlight(), want)
	}
	migs := []api.TuningMigration{{VM: "v1", From: "a-1", To: "a-2", Seconds: 3, Live: true}}
	b.Ended(seq, "carried out", t0.Add(10*time.Second), migs, nil, 3)
	if !b.Idle(t0.Add(time.Hour), gap) {
		t.Error("not idle once the decision ended")
	}
	b.JobEnded("j-1", "done", 130)
	b.JobEnded("j-2", "failed", 0)
	recs := b.Records()
	want := []api.TuningRecord{
		{Seq: 2, NewJobID: "j-2", Outcome: "carried out", TuningDecision: api.TuningDecision{Target: "j-1"}, Ended: t0.Add(10 * time.Second),
			Migrations: migs, MigrationS: 3,
			Measured: &api.TuningMeasured{TargetPredictedS: 100, NewJobPredictedS: 50, TargetState: "done", TargetMeasuredS: 130, TargetSlowdownS: 30, NewJobState: "failed"}},
		{Seq: 1, NewJobID: "j-2", Outcome: "rejected"},
	}
	if diff := cmp.Diff(want, recs); diff != "" {
		t.Errorf("records (-want +got):\n%s", diff)
	}
	// What Records hands out is the caller's.
	recs[0].Measured.TargetMeasuredS = 1
	if b.Records()[0].Measured.TargetMeasuredS != 130 {
		t.Error("a record handed out shares its measures with the book")
	}
}

// The book keeps the last MaxRecords records.
func TestBookBound(t *testing.T) {
	b := NewBook()
	if recs := b.Records(); recs == nil || len(recs) != 0 {
		t.Errorf("an empty book lists %#v, want an empty list", recs)
	}
	for range MaxRecords + 5 {
		b.Add(api.TuningRecord{Outcome: "rejected"}, false, nil)
	}
	recs := b.Records()
	if len(recs) != MaxRecords || recs[0].Seq != MaxRecords+5 || recs[len(recs)-1].Seq != 6 {
		t.Errorf("%d records, %d to %d", len(recs), recs[0].Seq, recs[len(recs)-1].Seq)
	}
}

// The tuning's book links the API's types and the standard library only.
func TestDeps(t *testing.T) {
	deptest.Allow(t, "github.com/metasched/metasched/metasched/tuning", false,
		deptest.Rule{Path: "github.com/metasched/metasched/metasched/tuning"},
		deptest.Rule{Path: "github.com/metasched/metasched/metasched/api"})
}
