package main

import (
	"encoding/json"
	"math"
	"os"
	"strings"
	"testing"
)

const (
	paperGrid = "../../examples/grid-paper.yaml"
	renderJob = "../../examples/job-render.yaml"
)

func TestPlanJSON(t *testing.T) {
	code, out, errOut := runCmd(t, "plan", "--job", renderJob, "--grid", paperGrid, "--output", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var p struct {
		Algorithm string     `json:"algorithm"`
		Master    string     `json:"master"`
		Rate      float64    `json:"rate_tasks_per_s"`
		Runtime   float64    `json:"runtime_s"`
		Machines  int        `json:"machines"`
		Zones     [][]string `json:"zones"`
		Clusters  []struct {
			Name      string  `json:"name"`
			Machines  int     `json:"machines"`
			Bandwidth float64 `json:"bandwidth_mbps"`
			Rate      float64 `json:"rate_tasks_per_s"`
			Limit     string  `json:"limit"`
		} `json:"clusters"`
		Excluded []struct{ Name, Reason string } `json:"excluded"`
	}
	if err := json.Unmarshal([]byte(out), &p); err != nil {
		t.Fatalf("%v in %s", err, out)
	}
	if p.Algorithm != "hillclimb" || p.Master != "spain" || p.Machines != 15 || math.Abs(p.Runtime-3004.8) > 1e-9 || len(p.Clusters) != 3 || len(p.Zones) != 3 ||
		p.Clusters[0].Name != "spain" || p.Clusters[1].Bandwidth != 8 || p.Clusters[1].Limit != "free" || p.Excluded == nil {
		t.Errorf("unexpected plan: %+v", p)
	}
}

// The paper's point: choosing the master matters.
func TestPlanMasterMatters(t *testing.T) {
	_, free, _ := runCmd(t, "plan", "--job", renderJob, "--grid", paperGrid)
	code, forced, errOut := runCmd(t, "plan", "--job", renderJob, "--grid", paperGrid, "--master", "latam-a", "--algorithm", "exhaustive")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{"Master on spain. 15 machines", "in 50.1 min (3005 s)", "latam-a", "fed at 8 Mbit/s from spain"} {
		if !strings.Contains(free, want) {
			t.Errorf("free choice: no %q in\n%s", want, free)
		}
	}
	for _, want := range []string{"Master on latam-a (forced). 8 machines", "2.5 h (8880 s)", "Left out:", "spain: adding it makes the job end later, at 9072 s"} {
		if !strings.Contains(forced, want) {
			t.Errorf("master latam-a: no %q in\n%s", want, forced)
		}
	}
}

// The job file's master and placement choose the plan as --master and
// --algorithm do; the flags override them.
func TestPlanJobPlacement(t *testing.T) {
	job, err := os.ReadFile(renderJob)
	if err != nil {
		t.Fatal(err)
	}
	forced := writeFile(t, "forced.yaml", string(job)+"master: latam-a\n")
	code, out, errOut := runCmd(t, "plan", "--job", forced, "--grid", paperGrid)
	if code != 0 || !strings.Contains(out, "Master on latam-a (forced). 8 machines") {
		t.Errorf("master latam-a in the job file: exit %d: %s%s", code, out, errOut)
	}
	code, out, errOut = runCmd(t, "plan", "--job", forced, "--grid", paperGrid, "--master", "spain")
	if code != 0 || !strings.Contains(out, "Master on spain (forced).") {
		t.Errorf("--master spain over the job file's latam-a: exit %d: %s%s", code, out, errOut)
	}
	for _, p := range []string{"met", "mct", "olb"} {
		placed := writeFile(t, p+".yaml", string(job)+"placement: "+p+"\n")
		code, out, errOut := runCmd(t, "plan", "--job", placed, "--grid", paperGrid)
		if code != 0 || !strings.Contains(out, "Algorithm: "+p) {
			t.Errorf("placement %s in the job file: exit %d: %s%s", p, code, out, errOut)
		}
		code, out, errOut = runCmd(t, "plan", "--job", placed, "--grid", paperGrid, "--algorithm", "hillclimb")
		if code != 0 || !strings.Contains(out, "Algorithm: hillclimb") {
			t.Errorf("--algorithm hillclimb over placement %s: exit %d: %s%s", p, code, out, errOut)
		}
	}
	mars := writeFile(t, "mars.yaml", string(job)+"master: mars\n")
	code, _, errOut = runCmd(t, "plan", "--job", mars, "--grid", paperGrid)
	if code != 2 || !strings.Contains(errOut, mars+`: master: no cluster "mars" in `+paperGrid) {
		t.Errorf("a master the grid lacks: exit %d, stderr %q", code, errOut)
	}
	code, _, errOut = runCmd(t, "plan", "--job", forced, "--grid", paperGrid, "--algorithm", "met")
	if code != 2 || !strings.Contains(errOut, forced+": master: the single-cluster baselines (met) choose their own cluster") {
		t.Errorf("a master with --algorithm met: exit %d, stderr %q", code, errOut)
	}
}

func TestPlanBaselines(t *testing.T) {
	for _, alg := range []string{"met", "mct", "olb"} {
		code, out, errOut := runCmd(t, "plan", "--job", renderJob, "--grid", paperGrid, "--algorithm", alg)
		if code != 0 || !strings.Contains(out, "Algorithm: "+alg) {
			t.Errorf("%s: exit %d: %s%s", alg, code, out, errOut)
		}
	}
}

func TestPlanBadInput(t *testing.T) {
	// Without --grid, plan asks the daemon: none is configured here.
	clearDaemonEnv(t)
	bad := writeFile(t, "grid.yaml", "clusters:\n  - {name: a, machines: 0, cores: 1, memory_mib: 1, perf: 1, lan_mbps: 1, uplink_mbps: 1}\n")
	badJob := writeFile(t, "job.yaml", "name: j\ntype: t\ntasks: 1\ntask_ops: 1\n")
	huge := writeFile(t, "huge.yaml", "name: j\ntype: t\ntasks: 1\ntask_ops: 1\ntask_bytes: 1\nvm: {vcpus: 64}\n")
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--job", renderJob}, 2, "no token for the daemon at http://127.0.0.1:8080: give --token-file FILE, or set METASCHED_TOKEN_FILE or METASCHED_TOKEN"},
		{[]string{"--grid", paperGrid}, 2, "--job: required"},
		{[]string{"--job", renderJob, "--grid", bad}, 2, "clusters[0].machines: must be an integer >= 1, got 0"},
		{[]string{"--job", badJob, "--grid", paperGrid}, 2, "task_bytes: missing required field"},
		{[]string{"--job", renderJob, "--grid", paperGrid, "--algorithm", "best"}, 2, `--algorithm: unknown algorithm "best"`},
		{[]string{"--job", renderJob, "--grid", paperGrid, "--master", "mars"}, 2, `--master: no cluster "mars"`},
		{[]string{"--job", renderJob, "--grid", paperGrid, "--master", "spain", "--algorithm", "mct"}, 2, "--master: the single-cluster baselines"},
		{[]string{"--job", renderJob, "--grid", paperGrid, "--restarts", "0"}, 2, "--restarts: must be >= 1"},
		{[]string{"--job", renderJob, "--grid", paperGrid, "--output", "xml"}, 2, "--output: must be table or json"},
		{[]string{"--job", huge, "--grid", paperGrid}, 1, "no plan: no cluster can take part"},
	} {
		code, _, errOut := runCmd(t, append([]string{"plan"}, tc.args...)...)
		if code != tc.code || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", tc.args, code, errOut, tc.code, tc.want)
		}
	}
}
