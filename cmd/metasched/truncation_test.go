package main

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
)

// growModelFile is two pools of unequal load on three servers, with a
// truncation of 4 for both to start from, and the second pool's own 5.
const growModelFile = `servers: 3
queue_limit: 4
switch_rate: 0.5
pools:
  - {name: busy, arrival_rate: 0.9, service_rate: 0.5, holding_cost: 1}
  - {name: light, arrival_rate: 0.2, service_rate: 0.5, holding_cost: 2, queue_limit: 5}
`

// policy solve --truncation auto grows the pools' truncations, a line per
// solve on stderr, and reports where it settled, in JSON and in the
// table.
func TestPolicySolveTruncationAuto(t *testing.T) {
	model := writeFile(t, "grow.yaml", growModelFile)
	code, out, errOut := runCmd(t, "policy", "solve", "--model", model, "--truncation", "auto", "--boundary-tolerance", "1e-5", "--output", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var got solveReport
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, out)
	}
	tr := got.Truncation
	if tr == nil || !tr.Settled || tr.Stopped != "" || len(tr.Steps) < 3 {
		t.Fatalf("truncation %+v:\n%s", tr, out)
	}
	busy, light := got.QueueLimits["busy"], got.QueueLimits["light"]
	if busy <= light || light < 5 {
		t.Errorf("queue limits %v: the busy pool should need the longer truncation, the light one at least its 5", got.QueueLimits)
	}
	last := tr.Steps[len(tr.Steps)-1]
	if last.Limits[0] != busy || last.Limits[1] != light || last.States != got.States {
		t.Errorf("the last step %+v is not the solve reported (%v, %d states)", last, got.QueueLimits, got.States)
	}
	for i, b := range last.Boundary {
		if b >= 1e-5 {
			t.Errorf("pool %d: boundary mass %g at the end", i, b)
		}
	}
	if n := strings.Count(errOut, "truncation: J = "); n != len(tr.Steps) {
		t.Errorf("%d lines on stderr for %d solves:\n%s", n, len(tr.Steps), errOut)
	}
	if !strings.Contains(errOut, "truncation: J = 4/5, ") {
		t.Errorf("the first solve is not at the model's own truncations:\n%s", errOut)
	}

	code, out, errOut = runCmd(t, "policy", "solve", "--model", model, "--truncation", "auto", "--boundary-tolerance", "1e-5")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if !regexp.MustCompile(`(?m)^truncation: grown in \d+ solves \(\S+ s\) to J = \d+/\d+; at the boundary in the long run: busy \S+ light \S+\n {11}every pool under 1e-05, and the optimum moved by \S+ from J = \d+/\d+, within the solves' gap \S+$`).MatchString(out) {
		t.Errorf("the table output does not say where the truncation settled:\n%s", out)
	}
	if !regexp.MustCompile(`N = 3 servers, J = \d+/\d+,`).MatchString(out) {
		t.Errorf("the model line does not give each pool's J:\n%s", out)
	}

	// Out of states: the largest truncation reached, NOT SETTLED and why.
	code, out, errOut = runCmd(t, "policy", "solve", "--model", model, "--truncation", "auto", "--boundary-tolerance", "1e-9", "--max-states", "3000")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if !strings.Contains(out, "NOT SETTLED: the next truncation, J = ") || !strings.Contains(out, "has more states than the 3000 given") {
		t.Errorf("a growth out of states:\n%s", out)
	}
}

func TestPolicySolveTruncationErrors(t *testing.T) {
	model := writeFile(t, "grow.yaml", growModelFile)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--truncation", "grow"}, `--truncation: must be fixed or auto, got "grow"`},
		{[]string{"--truncation", "auto", "--boundary-tolerance", "0"}, "--boundary-tolerance: must be > 0 and < 1, got 0"},
		{[]string{"--truncation", "auto", "--time-limit", "-1s"}, "--time-limit: must be 0 (none) or more, got -1s"},
		{[]string{"--truncation", "auto", "--criterion", "discounted"}, "--truncation auto: grows the truncation of the average criterion only"},
		{[]string{"--truncation", "auto", "--boundary=false"}, "--truncation auto: needs the long-run analysis"},
		{[]string{"--truncation", "auto", "--max-states", "10"}, "state space too large: J = 4/5 has more than the 10 states given"},
	} {
		code, _, errOut := runCmd(t, append([]string{"policy", "solve", "--model", model}, tc.args...)...)
		if code != 2 || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d, %q; want 2 and %q", tc.args, code, errOut, tc.want)
		}
	}
}

// With blocking_cost: lower the solve says its optimum bounds the
// untruncated system's from below: at a short J well under the settled
// optimum, grown to the settled one within the gap. Priced the default way
// it says nothing of the kind.
func TestPolicySolveLowerBlocking(t *testing.T) {
	solve := func(file string, args ...string) solveReport {
		t.Helper()
		code, out, errOut := runCmd(t, append([]string{"policy", "solve", "--model", writeFile(t, "m.yaml", file), "--output", "json"}, args...)...)
		if code != 0 {
			t.Fatalf("exit %d: %s", code, errOut)
		}
		var r solveReport
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatalf("output is not JSON: %v\n%s", err, out)
		}
		return r
	}
	lower := growModelFile + "blocking_cost: lower\n"
	settled := solve(growModelFile, "--truncation", "auto", "--boundary-tolerance", "1e-7")
	if settled.UntruncatedAtLeast != nil {
		t.Errorf("blocking priced auto reports a bound on the untruncated optimum: %v", *settled.UntruncatedAtLeast)
	}
	short := solve(lower)
	grown := solve(lower, "--truncation", "auto", "--boundary-tolerance", "1e-7")
	for _, r := range []solveReport{short, grown} {
		if r.UntruncatedAtLeast == nil || *r.UntruncatedAtLeast != *r.AverageLower {
			t.Fatalf("J = %v: untruncated_cost_at_least %v, want the certified lower end %v", r.QueueLimits, r.UntruncatedAtLeast, *r.AverageLower)
		}
		if *r.UntruncatedAtLeast > *settled.AverageUpper {
			t.Errorf("J = %v: the bound %.9g is above the settled optimum's upper end %.9g", r.QueueLimits, *r.UntruncatedAtLeast, *settled.AverageUpper)
		}
	}
	if *short.UntruncatedAtLeast > 0.9**settled.AverageCost {
		t.Errorf("at J = 4/5 the bound %.9g is within 10%% of the settled optimum %.9g: the model no longer shows a short truncation", *short.UntruncatedAtLeast, *settled.AverageCost)
	}
	if gap := *settled.AverageUpper - *settled.AverageLower + *grown.AverageUpper - *grown.AverageLower; *settled.AverageCost-*grown.UntruncatedAtLeast > gap {
		t.Errorf("grown, the bound %.9g is not within the solves' gap %.3g of the settled optimum %.9g", *grown.UntruncatedAtLeast, gap, *settled.AverageCost)
	}
	code, out, errOut := runCmd(t, "policy", "solve", "--model", writeFile(t, "m.yaml", lower))
	if code != 0 || !regexp.MustCompile(`\n {11}blocking priced at the least it costs the untruncated system: its optimum is at least \S+\n`).MatchString(out) {
		t.Errorf("exit %d, the table output does not give the bound:\n%s%s", code, out, errOut)
	}
}
