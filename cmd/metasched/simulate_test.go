package main

import (
	"encoding/csv"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSimulatePoliciesJSON(t *testing.T) {
	code, out, errOut := runCmd(t, "simulate", "policies", "--model", example+"fisher-fig4-load3.4.yaml",
		"--policy", "heuristic", "--K", "5", "--completions", "20000", "--seed", "3", "--output", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var got map[string]any
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, out)
	}
	for _, k := range []string{"policy", "mean_cost", "ci95", "completions", "warmup_completions", "events", "switches", "seconds", "events_per_second", "mean_jobs", "transit_fraction"} {
		if _, ok := got[k]; !ok {
			t.Errorf("JSON lacks %q: %s", k, out)
		}
	}
	ci := got["ci95"].([]any)
	mean := got["mean_cost"].(float64)
	if got["policy"] != "heuristic" || got["K"] != 5.0 || got["completions"] != 20000.0 || got["warmup_completions"] != 2000.0 ||
		!(ci[0].(float64) < mean && mean < ci[1].(float64)) || got["events"].(float64) < 40000 || got["switches"].(float64) == 0 ||
		got["seconds"].(float64) <= 0 {
		t.Errorf("figures: %s", out)
	}
	if _, ok := got["boundary_fraction"]; ok {
		t.Errorf("boundary_fraction for a policy without a table: %s", out)
	}
	// The same seed gives the same numbers.
	_, again, _ := runCmd(t, "simulate", "policies", "--model", example+"fisher-fig4-load3.4.yaml",
		"--policy", "heuristic", "--K", "5", "--completions", "20000", "--seed", "3", "--output", "json")
	var got2 map[string]any
	if err := json.Unmarshal([]byte(again), &got2); err != nil {
		t.Fatal(err)
	}
	if got2["mean_cost"] != got["mean_cost"] || got2["events"] != got["events"] {
		t.Errorf("same seed, different runs: %v vs %v", got2["mean_cost"], got["mean_cost"])
	}
}

func TestSimulatePoliciesTable(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want []string
	}{
		{[]string{"--model", example + "fisher-fig3-n6.yaml", "--policy", "static", "--K", "-3"}, // --K ignored
			[]string{"policy        static", "allocation    [3 1 2]", "mean cost", "speed"}},
		{[]string{"--model", example + "fisher-fig3-n6.yaml", "--policy", "best-static"},
			[]string{"allocation    [2 2 2]"}},
		{[]string{"--model", example + "fisher-fig4-load3.4.yaml", "--policy", "cmu"},
			[]string{"policy        cmu", "servers in transit"}},
		{[]string{"--model", example + "palmer-fig2-n4.yaml", "--policy", "static",
			"--phases", "high=2.9702970297029703,low=0.0297029702970297,mean=100"},
			[]string{"phases        high 2.9703, low 0.029703, mean length 100", "alloc. ph. 1  [3 1]", "alloc. ph. 2  [1 3]"}},
		{[]string{"--model", example + "palmer-fig2-n4.yaml", "--policy", "optimal",
			"--phases", "high=2.9702970297029703,low=0.0297029702970297,mean=100"},
			[]string{"solve ph. 1   average criterion", "solve ph. 2   average criterion", "converged", "boundary      a queue sat at its table's limit J−1 (J = 40) for "}},
	} {
		args := append([]string{"simulate", "policies", "--completions", "5000"}, tt.args...)
		code, out, errOut := runCmd(t, args...)
		if code != 0 {
			t.Errorf("%v: exit %d: %s", tt.args, code, errOut)
			continue
		}
		for _, w := range tt.want {
			if !strings.Contains(out, w) {
				t.Errorf("%v: output lacks %q:\n%s", tt.args, w, out)
			}
		}
	}
}

// A table saved by policy solve is simulated as the optimal policy.
func TestSimulatePoliciesSavedTable(t *testing.T) {
	table := filepath.Join(t.TempDir(), "t2.policy")
	if code, _, errOut := runCmd(t, "policy", "solve", "--model", example+"palmer-table2.yaml", "--criterion", "discounted", "--save", table); code != 0 {
		t.Fatalf("solve: %s", errOut)
	}
	code, out, errOut := runCmd(t, "simulate", "policies", "--model", example+"palmer-table2.yaml", "--policy", "optimal",
		"--table", table, "--completions", "5000", "--output", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var got map[string]any
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatal(err)
	}
	if got["criterion"] != "discounted" || got["boundary_fraction"] == nil || got["queue_limit"] != 30.0 || got["solves"] != nil {
		t.Errorf("figures: %s", out)
	}
	code, _, errOut = runCmd(t, "simulate", "policies", "--model", example+"fisher-fig4-load3.4.yaml", "--policy", "optimal", "--table", table)
	if code != 2 || !strings.Contains(errOut, "solved for 2 servers and 2 pools, the model has 4 and 3") {
		t.Errorf("table of another model: exit %d, %s", code, errOut)
	}
}

func TestSimulatePoliciesBadInput(t *testing.T) {
	m := example + "fisher-fig4-load3.4.yaml"
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--policy", "static"}, "--model: required"},
		{[]string{"--model", m}, "--policy: required: one of optimal, heuristic, static, best-static, cmu"},
		{[]string{"--model", m, "--policy", "random"}, `--policy: "random": must be one of`},
		{[]string{"--model", m, "--policy", "heuristic", "--K", "0"}, "--K: must be a positive number, got 0"},
		{[]string{"--model", m, "--policy", "static", "--completions", "5"}, "--completions: must be at least 20"},
		{[]string{"--model", m, "--policy", "static", "--warmup", "-1"}, "--warmup: must be a fraction >= 0"},
		{[]string{"--model", m, "--policy", "static", "--output", "xml"}, "--output: must be table or json"},
		{[]string{"--model", m, "--policy", "optimal", "--criterion", "total"}, "--criterion: must be average or discounted"},
		{[]string{"--model", m, "--policy", "static", "--phases", "high=1,low=0.1"}, "--phases: mean missing"},
		{[]string{"--model", m, "--policy", "static", "--phases", "high=1,low=x,mean=3"}, `--phases: low: "x" is not a number`},
		{[]string{"--model", m, "--policy", "static", "--phases", "high=1,low=0.1,mean=0"}, "--phases: mean: must be > 0"},
		{[]string{"--model", m, "--policy", "static", "--phases", "high=1,peak=2,mean=3"}, `--phases: unknown key "peak"`},
		{[]string{"--model", m, "--policy", "static", "--phases", "high=1,high=2,low=1,mean=3"}, "--phases: high given twice"},
		{[]string{"--model", m, "--policy", "static", "--phases", "high"}, `--phases: "high": want key=value`},
		{[]string{"--model", m, "--policy", "heuristic", "--table", "x.policy"}, "--table: a policy table is the optimal policy"},
		{[]string{"--model", m, "--policy", "optimal", "--table", "missing.policy"}, "--table: open missing.policy"},
		{[]string{"--model", m, "--policy", "best-static"}, "no allocation of the servers is stable: 4 servers for offered loads ρ = (1.133, 1.133, 1.133)"},
		{[]string{"--model", m, "--policy", "optimal", "--max-states", "1000"}, "state space too large"},
	} {
		args := append([]string{"simulate", "policies"}, tt.args...)
		code, out, errOut := runCmd(t, args...)
		if code != 2 || !strings.Contains(errOut, tt.want) || out != "" {
			t.Errorf("%v: exit %d, stderr %q, stdout %q; want exit 2 and %q", tt.args, code, errOut, out, tt.want)
		}
	}
}

func TestSimulateExperiment(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "results")
	code, out, errOut := runCmd(t, "simulate", "experiment", "palmer-fig2", "--out", dir, "--x", "3,4",
		"--policies", "heuristic K=1, static,best-static", "--completions", "4000")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{"palmer-fig2", "heuristic K=1", "static", "x=3 best-static: no stable fixed allocation", "wrote "} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	f, err := os.Open(filepath.Join(dir, "palmer-fig2.csv"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close() // read-only
	recs, err := csv.NewReader(f).ReadAll()
	if err != nil || len(recs) != 7 {
		t.Fatalf("csv: %v, %d records", err, len(recs))
	}
	for _, ext := range []string{"svg", "png"} {
		if st, err := os.Stat(filepath.Join(dir, "palmer-fig2."+ext)); err != nil || st.Size() < 1000 {
			t.Errorf("%s plot: %v", ext, err)
		}
	}
	code, out, errOut = runCmd(t, "simulate", "experiment", "palmer-fig2", "--out", dir, "--x", "4",
		"--policies", "static,optimal (average)", "--completions", "2000", "--output", "json", "--queue-limit", "12")
	var rep struct {
		Experiment string
		Files      []string
		Rows       []map[string]any
	}
	if code != 0 || json.Unmarshal([]byte(out), &rep) != nil || rep.Experiment != "palmer-fig2" || len(rep.Files) != 3 ||
		len(rep.Rows) != 2 || rep.Rows[0]["mean_cost"] == nil || rep.Rows[0]["policy"] != "static" ||
		rep.Rows[1]["policy"] != "optimal (average)" || rep.Rows[1]["boundary_fraction"] == nil || rep.Rows[1]["solve_sweeps"] == nil {
		t.Errorf("json: exit %d, %s %s", code, out, errOut)
	}
	// The optimal column's truncation, grown from 12 by default (each
	// phase's table its own), and kept with --truncation fixed.
	if tr, _ := rep.Rows[1]["truncation"].(string); !strings.Contains(tr, "phase 1: J = ") || !strings.Contains(tr, "grown from 12 in") ||
		!strings.Contains(tr, "the optimum settled") || len(rep.Rows[1]["phase_queue_limits"].([]any)) != 2 {
		t.Errorf("grown: %v", rep.Rows[1])
	}
	code, out, errOut = runCmd(t, "simulate", "experiment", "palmer-fig2", "--out", dir, "--x", "4",
		"--policies", "optimal (average)", "--completions", "2000", "--queue-limit", "12", "--truncation", "fixed")
	if code != 0 || !strings.Contains(out, "(average, J = 12)") || strings.Contains(out, "grown") {
		t.Errorf("fixed: exit %d, %s %s", code, out, errOut)
	}
}

func TestSimulateExperimentBadInput(t *testing.T) {
	dir := t.TempDir()
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--out", dir}, "want one experiment name: fisher-fig4, fisher-fig3, palmer-fig2, palmer-fig3"},
		{[]string{"fisher-fig9", "--out", dir}, `experiment "fisher-fig9": unknown`},
		{[]string{"fisher-fig4"}, "--out: required"},
		{[]string{"fisher-fig4", "--out", dir, "--policies", "heuristic K=2"}, `--policies: policy "heuristic K=2": not in fisher-fig4`},
		{[]string{"fisher-fig4", "--out", dir, "--x", "2.7"}, "--x: x = 2.7: not on the x-axis"},
		{[]string{"fisher-fig4", "--out", dir, "--x", "a"}, `--x: "a" is not a number`},
		{[]string{"fisher-fig4", "--out", dir, "--completions", "0"}, "--completions: must be at least 20"},
		{[]string{"fisher-fig4", "--out", dir, "--queue-limit", "1"}, "--queue-limit: must be at least 2, got 1"},
		{[]string{"fisher-fig4", "--out", dir, "--truncation", "grown"}, `--truncation: must be fixed or auto, got "grown"`},
		{[]string{"fisher-fig4", "--out", dir, "--boundary-tolerance", "0"}, "--boundary-tolerance: must be > 0 and < 1, got 0"},
		{[]string{"fisher-fig4", "--out", dir, "--time-limit", "-1s"}, "--time-limit: must be 0 (none) or more, got -1s"},
	} {
		args := append([]string{"simulate", "experiment"}, tt.args...)
		code, _, errOut := runCmd(t, args...)
		if code != 2 || !strings.Contains(errOut, tt.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 and %q", tt.args, code, errOut, tt.want)
		}
	}
}

// The experiment's table fits in 120 columns.
func TestSimulateExperimentTableWidth(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "results")
	code, out, errOut := runCmd(t, "simulate", "experiment", "fisher-fig4", "--out", dir, "--x", "2.6,3.6",
		"--policies", "heuristic K=5,heuristic K=1,static,best-static,cmu", "--completions", "2000")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	table, _, _ := strings.Cut(out, "\nwrote ")
	checkWidth(t, table)
	for _, want := range []string{"x    heuristic K=5", "3.6", "x=3.6 best-static: no stable fixed allocation"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	// The figure's notes are in the JSON too.
	code, out, errOut = runCmd(t, "simulate", "experiment", "fisher-fig4", "--out", dir, "--x", "2.6,3.6",
		"--policies", "static,best-static", "--completions", "2000", "--output", "json")
	var rep struct{ Notes []string }
	if code != 0 || json.Unmarshal([]byte(out), &rep) != nil {
		t.Fatalf("exit %d: %s %s", code, out, errOut)
	}
	if want := "static = best-static at 2.6 (both allocate (2,1,1))"; len(rep.Notes) < 2 || !strings.Contains(rep.Notes[0], want) ||
		!strings.HasPrefix(rep.Notes[1], "best-static: no point at 3.6: no fixed allocation is stable") {
		t.Errorf("notes %q", rep.Notes)
	}
}
