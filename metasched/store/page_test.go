package store

import (
	"context"
	"encoding/json"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// A page of jobs costs what it holds: the index keys and records a listing
// reads stay within a few per job returned however many jobs the store
// holds, with any filter (before, a state filter gathered every job of the
// states and a state with a type read every job of the states).
func TestJobsPageCost(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, Options{NoSync: true, MaxBatchSize: 1})
	const n = 3000
	var all []Job
	for i := range n {
		typ := "sim"
		if i%300 == 299 {
			typ = "render" // 10 render jobs among 2,990 sim jobs
		}
		j, err := s.SubmitJob(ctx, typ, json.RawMessage(`{}`), "submitted")
		if err != nil {
			t.Fatal(err)
		}
		if i%7 == 0 { // planned
			if j, err = s.Transition(ctx, j.ID, Queued, Planned, "planned"); err != nil {
				t.Fatal(err)
			}
		}
		all = append(all, j)
	}
	for _, tc := range []struct {
		name string
		f    JobFilter
	}{
		{"first page", JobFilter{Limit: 5}},
		{"a page far on", JobFilter{After: all[2500].ID, Limit: 5}},
		{"queued", JobFilter{States: []JobState{Queued}, Limit: 5}},
		{"queued far on", JobFilter{States: []JobState{Queued}, After: all[2700].ID, Limit: 5}},
		{"queued and planned", JobFilter{States: []JobState{Planned, Queued, Planned}, After: all[1000].ID, Limit: 5}},
		{"render", JobFilter{Type: "render", After: all[1499].ID, Limit: 3}},
		{"queued render", JobFilter{States: []JobState{Queued}, Type: "render", Limit: 3}},
		{"queued render far on", JobFilter{States: []JobState{Queued}, Type: "render", After: all[2000].ID, Limit: 3}},
		{"done render: none", JobFilter{States: []JobState{Done}, Type: "render", Limit: 3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var want []string
			for _, j := range all {
				if j.ID > tc.f.After && (len(tc.f.States) == 0 || slices.Contains(tc.f.States, j.State)) &&
					(tc.f.Type == "" || j.Type == tc.f.Type) && len(want) < tc.f.Limit {
					want = append(want, j.ID)
				}
			}
			before := s.visits.Load()
			got, err := s.Jobs(ctx, tc.f)
			if err != nil {
				t.Fatal(err)
			}
			visits := s.visits.Load() - before
			if diff := cmp.Diff(want, ids(got), cmpEmpty); diff != "" {
				t.Errorf("jobs (-want +got):\n%s", diff)
			}
			// Per job returned: its index key and its record; per index
			// scanned: After's own key and the key past the page.
			if limit := uint64(2*tc.f.Limit + 2*max(1, len(tc.f.States))); visits > limit {
				t.Errorf("read %d index keys and records for a page of %d, want at most %d", visits, len(got), limit)
			}
		})
	}
}

var cmpEmpty = cmp.Comparer(func(a, b []string) bool { return slices.Equal(a, b) })
