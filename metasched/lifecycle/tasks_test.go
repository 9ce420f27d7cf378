package lifecycle

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/metasched/metasched/gramvm"
	"github.com/metasched/metasched/selection"
)

// TestPredictedTasks: a plan's per-cluster tasks are the whole tasks its
// clusters finish by its run time; a plan stored before plans counted them
// (no cluster has tasks) falls back to T·rate_c/R; a cluster without
// workers (a master's cluster whose machines are not needed) predicts
// none.
func TestPredictedTasks(t *testing.T) {
	whole := &gramvm.Placement{Plan: selection.Plan{Tasks: 4, Rate: 4, Clusters: []selection.ClusterPlan{
		{Name: "latam-a", Master: true, Machines: 0},
		{Name: "spain", Machines: 4, Tasks: 4, Rate: 4},
	}}}
	want := []ClusterTasks{{Name: "spain", Predicted: 4}}
	if diff := cmp.Diff(want, PredictedTasks(whole)); diff != "" {
		t.Errorf("whole tasks (-want +got):\n%s", diff)
	}
	old := &gramvm.Placement{Plan: selection.Plan{Tasks: 300, Rate: 0.105, Clusters: []selection.ClusterPlan{
		{Name: "spain", Master: true, Machines: 7, Rate: 0.07},
		{Name: "latam-b", Machines: 5, Rate: 0.035},
	}}}
	want = []ClusterTasks{{Name: "spain", Predicted: 200}, {Name: "latam-b", Predicted: 100}}
	if diff := cmp.Diff(want, PredictedTasks(old), cmp.Comparer(func(a, b float64) bool { return a-b < 1e-9 && b-a < 1e-9 })); diff != "" {
		t.Errorf("a plan stored before whole tasks (-want +got):\n%s", diff)
	}
	if got := PredictedTasks(&gramvm.Placement{}); got != nil {
		t.Errorf("infeasible plan: %v, want none", got)
	}
}
