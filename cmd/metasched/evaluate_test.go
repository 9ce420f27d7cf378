package main

import (
	"encoding/json"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// policy evaluate gives a policy's exact long-run cost with certified
// bounds: the heuristic's lies at or above the optimum policy solve
// certifies, and the optimal table saved by policy solve evaluates to the
// solve's own optimum.
func TestPolicyEvaluate(t *testing.T) {
	model := example + "palmer-table2.yaml"
	table := filepath.Join(t.TempDir(), "opt.policy")
	code, out, errOut := runCmd(t, "policy", "solve", "--model", model, "--output", "json", "--boundary=false", "--save", table)
	if code != 0 {
		t.Fatalf("solve: exit %d: %s", code, errOut)
	}
	var opt solveReport
	if err := json.Unmarshal([]byte(out), &opt); err != nil {
		t.Fatalf("solve output is not JSON: %v\n%s", err, out)
	}
	evaluate := func(args ...string) evaluateReport {
		t.Helper()
		code, out, errOut := runCmd(t, append([]string{"policy", "evaluate", "--model", model, "--output", "json"}, args...)...)
		if code != 0 {
			t.Fatalf("evaluate %v: exit %d: %s", args, code, errOut)
		}
		var r evaluateReport
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatalf("evaluate output is not JSON: %v\n%s", err, out)
		}
		if !r.Converged || !(r.AverageLower <= r.AverageCost && r.AverageCost <= r.AverageUpper) || r.AverageUpper-r.AverageLower > 1e-5*r.AverageUpper {
			t.Fatalf("evaluate %v: converged %v, bounds [%g, %g] around %g", args, r.Converged, r.AverageLower, r.AverageUpper, r.AverageCost)
		}
		return r
	}
	h := evaluate("--policy", "heuristic", "--K", "5")
	if h.Policy != "heuristic K=5" || h.States != 9_000 {
		t.Errorf("policy %q over %d states", h.Policy, h.States)
	}
	if h.AverageUpper < *opt.AverageLower {
		t.Errorf("the heuristic costs at most %g, below the certified optimum [%g, %g]", h.AverageUpper, *opt.AverageLower, *opt.AverageUpper)
	}
	o := evaluate("--policy", "optimal", "--table", table)
	if o.AverageLower > *opt.AverageUpper+1e-9 || *opt.AverageLower > o.AverageUpper+1e-9 {
		t.Errorf("the saved optimal table costs [%g, %g], the solve certified [%g, %g]", o.AverageLower, o.AverageUpper, *opt.AverageLower, *opt.AverageUpper)
	}
	if h.AverageCost < o.AverageCost {
		t.Errorf("heuristic %g below the optimum %g", h.AverageCost, o.AverageCost)
	}
	code, out, errOut = runCmd(t, "policy", "evaluate", "--model", model, "--policy", "cmu")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{`(?m)^policy:    cmu$`, `(?m)^cost:      \d+\.\d+ per time unit in the long run \(holding and blocking\)$`,
		`(?m)^           certified in \[\d+\.\d+, \d+\.\d+\] \(gap \S+ relative\)$`, `(?m)^solve:     \d+ BiCGSTAB iterations, \d+\.\d s, converged$`} {
		if !regexp.MustCompile(want).MatchString(out) {
			t.Errorf("table output without %s:\n%s", want, out)
		}
	}
}

// Bad flags are refused by name, and so is a policy that strands servers
// (one long-run cost per closed class).
func TestPolicyEvaluateErrors(t *testing.T) {
	stranded := writeFile(t, "stranded.yaml", `servers: 2
queue_limit: 4
pools:
  - {name: a, arrival_rate: 0.3, service_rate: 1, holding_cost: 1}
  - {name: b, arrival_rate: 0.3, service_rate: 1, holding_cost: 1}
switch_rates: [[0, 0], [0, 0]]
`)
	model := example + "palmer-table2.yaml"
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--model", model}, "--policy: required"},
		{[]string{"--model", model, "--policy", "never"}, `--policy: "never": must be one of`},
		{[]string{"--model", model, "--policy", "heuristic", "--K", "0"}, "--K: must be a positive number"},
		{[]string{"--model", model, "--policy", "cmu", "--tolerance", "-1"}, "--tolerance: must be a positive number"},
		{[]string{"--model", model, "--policy", "cmu", "--max-sweeps", "0"}, "--max-sweeps: must be at least 1"},
		{[]string{"--model", model, "--policy", "cmu", "--output", "yaml"}, "--output: must be table or json"},
		{[]string{"--model", model, "--policy", "cmu", "--max-states", "10"}, "raise --max-states"},
		{[]string{"--model", model, "--policy", "heuristic", "--table", model}, "--table: a policy table is the optimal policy"},
		{[]string{"--model", model, "--policy", "optimal", "--criterion", "best"}, "--criterion: must be average or discounted"},
		{[]string{"--policy", "cmu"}, "--model"},
		{[]string{"--model", stranded, "--policy", "cmu"}, "chain splits"},
	} {
		code, _, errOut := runCmd(t, append([]string{"policy", "evaluate"}, tc.args...)...)
		if code == 0 || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want an error saying %q", tc.args, code, errOut, tc.want)
		}
	}
}
