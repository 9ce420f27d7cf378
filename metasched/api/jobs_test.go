package api

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// jsonKeys lists the keys of a JSON object in the order they are written.
func jsonKeys(t *testing.T, v any) []string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		t.Fatalf("%s: not an object", b)
	}
	var keys []string
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, tok.(string))
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			t.Fatal(err)
		}
	}
	return keys
}

// Job and JobSummary share JobHead and RunTimes, and write their fields
// in the order they always had.
func TestJobJSONFields(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	code := 0
	j := Job{
		JobHead: JobHead{ID: "j-000000000007", Name: "render-42", Type: "render", State: Done, Reason: "exit code 0",
			Submitted: t0, Updated: t0.Add(12 * time.Second)},
		Spec:        JobSpec{Name: "render-42", Type: "render", Tasks: 300},
		Transitions: []Transition{{To: Queued, At: t0, Reason: "submitted"}},
		Placement: &Placement{Plan: Plan{Feasible: true, Master: "spain", Machines: 5,
			Clusters: []ClusterPlan{{Name: "spain", Machines: 3}, {Name: "latam-a", Machines: 1}}}},
		VMs:      []JobVM{{Name: "j-000000000007-0", Site: "spain", Host: "es-1", Master: true}},
		RunTimes: RunTimes{PredictedS: 8.5, MeasuredS: 8.75, Ratio: 8.75 / 8.5},
		Clusters: []ClusterTasks{{Name: "spain", TasksPredicted: 240, TasksDone: ptr(236)}, {Name: "latam-a", TasksPredicted: 60, TasksDone: ptr(64)}},
		ExitCode: &code, Attempts: 1, Explanation: "job render-42: master spain",
	}
	want := []string{"id", "name", "type", "state", "reason", "submitted", "updated", "spec", "transitions", "placement", "vms",
		"predicted_s", "measured_s", "ratio", "clusters", "exit_code", "attempts", "explanation"}
	if diff := cmp.Diff(want, jsonKeys(t, j)); diff != "" {
		t.Errorf("Job's JSON fields (-want +got):\n%s", diff)
	}

	s := j.Summary()
	wantSummary := JobSummary{JobHead: j.JobHead, Master: "spain", Machines: 5,
		Clusters: []ClusterShare{{Name: "spain", Machines: 3, TasksPredicted: 240, TasksDone: ptr(236)},
			{Name: "latam-a", Machines: 1, TasksPredicted: 60, TasksDone: ptr(64)}},
		RunTimes: j.RunTimes, Attempts: 1}
	if diff := cmp.Diff(wantSummary, s); diff != "" {
		t.Errorf("Summary (-want +got):\n%s", diff)
	}
	want = []string{"id", "name", "type", "state", "reason", "submitted", "updated", "master", "clusters", "machines",
		"predicted_s", "measured_s", "ratio", "attempts"}
	if diff := cmp.Diff(want, jsonKeys(t, s)); diff != "" {
		t.Errorf("JobSummary's JSON fields (-want +got):\n%s", diff)
	}

	// A job not planned (or whose plan is infeasible) has no plan to sum up.
	j.Placement.Plan.Feasible = false
	if s := j.Summary(); s.Master != "" || s.Machines != 0 || s.Clusters != nil {
		t.Errorf("the summary of an infeasible plan: %+v", s)
	}
}

func ptr[T any](v T) *T { return &v }
