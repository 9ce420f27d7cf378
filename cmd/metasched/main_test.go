package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/metasched/metasched/switching"
	"github.com/metasched/metasched/switching/papers"
)

// runCmd runs the command line as a user would and returns its exit code
// and output.
func runCmd(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := run(context.Background(), args, &out, &errOut)
	return code, out.String(), errOut.String()
}

func writeFile(t *testing.T, name, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

const example = "../../examples/"

func TestPolicySolveTable2JSON(t *testing.T) {
	code, out, errOut := runCmd(t, "policy", "solve", "--model", example+"palmer-table2.yaml", "--criterion", "discounted", "--output", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var got solveReport
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, out)
	}
	if got.Criterion != switching.Discounted || got.States != 9000 || got.Configurations != 10 || !got.Converged ||
		got.Sweeps < 100 || got.Seconds <= 0 || got.Residual >= 1e-6 || got.AverageCost != nil {
		t.Errorf("unexpected figures: %+v", got)
	}
	if got.View.Rows != "j1" || got.View.Cols != "j2" || got.View.Size != 11 || !cmp.Equal(got.View.K, []int{1, 1}) || len(got.View.Fixed) != 0 {
		t.Errorf("view = %+v", got.View)
	}
	want := papers.References()[1]
	if want.Name != "palmer-table2" {
		t.Fatal("reference order changed")
	}
	if diff := cmp.Diff(want.Table, got.View.Actions); diff != "" {
		t.Errorf("Palmer–Mitrani Table 2 not reproduced (-paper +solved):\n%s", diff)
	}
}

// An average-cost solve reports its certified bounds, in JSON and in the
// table.
func TestPolicySolveCertifiedBounds(t *testing.T) {
	code, out, errOut := runCmd(t, "policy", "solve", "--model", example+"palmer-table2.yaml", "--output", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var got solveReport
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, out)
	}
	if got.AverageCost == nil || got.AverageLower == nil || got.AverageUpper == nil {
		t.Fatalf("an average solve without its cost and bounds:\n%s", out)
	}
	lo, c, hi := *got.AverageLower, *got.AverageCost, *got.AverageUpper
	if !(lo <= c && c <= hi) || hi-lo > 1e-5*hi || !strings.Contains(out, `"average_cost_lower"`) || !strings.Contains(out, `"average_cost_upper"`) {
		t.Errorf("bounds [%g, %g] around %g:\n%s", lo, hi, c, out)
	}
	if got.Method != switching.Krylov || !got.Converged {
		t.Errorf("the average criterion solved by %q (converged %v), want krylov by default", got.Method, got.Converged)
	}
	// Relative value iteration, asked for, certifies the same optimum.
	code, out, errOut = runCmd(t, "policy", "solve", "--model", example+"palmer-table2.yaml", "--output", "json", "--method", "value")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var vi solveReport
	if err := json.Unmarshal([]byte(out), &vi); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, out)
	}
	if vi.Method != switching.ValueIteration || *vi.AverageLower > hi || *vi.AverageUpper < lo {
		t.Errorf("value iteration: method %q, bounds [%g, %g] against krylov's [%g, %g]", vi.Method, *vi.AverageLower, *vi.AverageUpper, lo, hi)
	}
	code, out, errOut = runCmd(t, "policy", "solve", "--model", example+"palmer-table2.yaml")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if !regexp.MustCompile(`(?m)^           the optimum certified in \[1\.97\d+, 1\.97\d+\] \(gap \S+ relative\)$`).MatchString(out) {
		t.Errorf("no certified bounds in the table output:\n%s", out)
	}
}

func TestPolicySolveTableOutput(t *testing.T) {
	code, out, errOut := runCmd(t, "policy", "solve", "--model", example+"fisher-table1.yaml", "--criterion", "discounted",
		"--view", "k=1,1,1 m=0 j1=0 rows=j2 cols=j3 size=10")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{
		"3 pools (type1, type2, type3), N = 3 servers, J = 15",
		"discounted (α = 0.95) criterion, value iteration: converged after",
		"1 = type1→type2, 2 = type2→type1, 3 = type1→type3",
		"view:      k=1,1,1 m=0 j1=0 rows=j2 cols=j3 size=10",
		"j3", "j2",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestPolicySolveSaveAndLoad(t *testing.T) {
	path := filepath.Join(t.TempDir(), "t2.policy")
	code, _, errOut := runCmd(t, "policy", "solve", "--model", example+"palmer-table2.yaml", "--criterion", "discounted", "--save", path)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close() // read only: nothing to lose
	tab, err := switching.ReadTable(f, 0)
	if err != nil {
		t.Fatal(err)
	}
	v, err := switching.ParseView(tab.Model, "k=1,1 rows=j1 cols=j2 size=11")
	if err != nil {
		t.Fatal(err)
	}
	got := newViewReport(v, tab).Actions
	if diff := cmp.Diff(papers.References()[1].Table, got); diff != "" {
		t.Errorf("loaded table differs from the paper (-paper +loaded):\n%s", diff)
	}
}

func TestPolicySolveBadInput(t *testing.T) {
	good := "servers: 2\nqueue_limit: 5\npools:\n  - {name: a, arrival_rate: 0.1, service_rate: 1, holding_cost: 1}\n  - {name: b, arrival_rate: 0.1, service_rate: 1, holding_cost: 2}\nswitch_rate: 0.5\n"
	goodPath := writeFile(t, "good.yaml", good)
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no model", []string{"policy", "solve"}, "--model: required"},
		{"missing file", []string{"policy", "solve", "--model", "/nonexistent/model.yaml"}, "no such file"},
		{"bad field", []string{"policy", "solve", "--model", writeFile(t, "model.yaml", strings.Replace(good, "service_rate: 1,", "service_rate: 0,", 1))},
			"model.yaml: pools[0].service_rate: must be > 0"},
		{"unknown field", []string{"policy", "solve", "--model", writeFile(t, "model.yaml", good+"colour: red\n")}, "model.yaml: colour: unknown field"},
		{"small Λ", []string{"policy", "solve", "--model", writeFile(t, "model.yaml", good+"uniformization: 0.5\n")},
			"uniformization: 0.5 is smaller than the largest total transition rate 2.2"},
		{"bad criterion", []string{"policy", "solve", "--model", goodPath, "--criterion", "best"}, `criterion "best"`},
		{"bad method", []string{"policy", "solve", "--model", goodPath, "--method", "guess"}, `method "guess"`},
		{"krylov discounted", []string{"policy", "solve", "--model", goodPath, "--method", "krylov", "--criterion", "discounted"}, `method "krylov": solves the "average" criterion only`},
		{"bad output", []string{"policy", "solve", "--model", goodPath, "--output", "xml"}, "--output: must be table or json"},
		{"bad flag", []string{"policy", "solve", "--model", goodPath, "--frobnicate"}, "unknown flag: --frobnicate"},
		{"bad tolerance", []string{"policy", "solve", "--model", goodPath, "--tolerance", "x"}, "invalid argument"},
		{"stray argument", []string{"policy", "solve", "--model", goodPath, "extra"}, `unexpected argument "extra"`},
		{"view k sum", []string{"policy", "solve", "--model", goodPath, "--view", "k=2,1"}, "--view: k: must sum to N = 2, got 3"},
		{"view k count", []string{"policy", "solve", "--model", goodPath, "--view", "k=2"}, "--view: k: want 2 numbers (one per pool), got 1"},
		{"view m", []string{"policy", "solve", "--model", goodPath, "--view", "m=1"}, "--view: m: only m=0"},
		{"view rows", []string{"policy", "solve", "--model", goodPath, "--view", "rows=j3"}, `--view: rows: "j3" is not a queue: want j1 to j2`},
		{"view same axes", []string{"policy", "solve", "--model", goodPath, "--view", "rows=j1 cols=j1"}, "--view: rows and cols: must be two different queues"},
		{"view size", []string{"policy", "solve", "--model", goodPath, "--view", "size=6"}, "--view: size: must be a whole number from 1 to 5 (the truncation J of j1 and j2), got 6"},
		{"view junk", []string{"policy", "solve", "--model", goodPath, "--view", "colour=red"}, `--view: "colour": unknown key`},
		{"view no value", []string{"policy", "solve", "--model", goodPath, "--view", "k"}, `--view: "k": want key=value`},
		{"too large", []string{"policy", "solve", "--model", example + "fisher-fig4-n6.yaml", "--max-states", "1000"},
			"830250 states (246 configurations × 3375 queue states) need 13.5 MiB, over the limit of 1000 states"},
		{"horizon with average", []string{"policy", "solve", "--model", goodPath, "--horizon", "3", "--criterion", "average"}, "horizon: the finite-horizon recurrence uses the discounted criterion"},
		{"max sweeps", []string{"policy", "solve", "--model", goodPath, "--max-sweeps", "0"}, "--max-sweeps: must be at least 1, got 0"},
		{"max states", []string{"policy", "solve", "--model", goodPath, "--max-states", "-5"}, "--max-states: must be at least 1, got -5"},
		{"workers", []string{"policy", "solve", "--model", goodPath, "--workers", "-1"}, "--workers: must be 0 (one per CPU) or more, got -1"},
		{"horizon", []string{"policy", "solve", "--model", goodPath, "--horizon", "-2"}, "--horizon: must be 0 (infinite) or more, got -2"},
		{"boundary sweeps", []string{"policy", "solve", "--model", goodPath, "--boundary-sweeps", "-1"}, "--boundary-sweeps: must be 0 (the default budget) or more, got -1"},
		{"unknown command", []string{"policy", "dissolve"}, `unexpected argument "dissolve"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := runCmd(t, tc.args...)
			if code != 2 {
				t.Errorf("exit %d, want 2; stderr: %s", code, errOut)
			}
			if !strings.Contains(errOut, tc.want) {
				t.Errorf("stderr %q lacks %q", errOut, tc.want)
			}
			if out != "" {
				t.Errorf("stdout not empty on error: %q", out)
			}
		})
	}
}

func TestPolicySolveHorizon(t *testing.T) {
	code, out, errOut := runCmd(t, "policy", "solve", "--model", example+"palmer-table2.yaml", "--horizon", "5", "--output", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var got struct {
		Criterion string `json:"criterion"`
		Horizon   int    `json:"horizon"`
		Sweeps    int    `json:"sweeps"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("%v in %s", err, out)
	}
	if got.Criterion != "discounted" || got.Horizon != 5 || got.Sweeps != 5 {
		t.Errorf("got %+v, want discounted, horizon 5, 5 sweeps", got)
	}
}

func TestPolicyPapers(t *testing.T) {
	code, out, errOut := runCmd(t, "policy", "papers", "--output", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var got []paperReport
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 {
		t.Fatalf("%d tables, want 3", len(got))
	}
	for _, r := range got {
		if !r.Converged || r.Cells == 0 {
			t.Errorf("%s: converged %v, %d cells", r.Name, r.Converged, r.Cells)
		}
	}
	if got[0].Name != "palmer-table1" || got[0].Different != 7 || got[0].HorizonDifferent == nil || *got[0].HorizonDifferent != 0 {
		t.Errorf("Palmer–Mitrani Table 1: %+v, want 7 cells different, 0 with a horizon of 20", got[0])
	}
	if got[1].Name != "palmer-table2" || got[1].Different != 0 {
		t.Errorf("Palmer–Mitrani Table 2: %d cells differ, want 0", got[1].Different)
	}
	code, text, _ := runCmd(t, "policy", "papers")
	if code != 0 || !strings.Contains(text, "result: identical in all 121 cells") || !strings.Contains(text, "printed in the paper") {
		t.Errorf("table output:\n%s", text)
	}
}

// The top-level help names every command and every subcommand a user may
// run, so that none is found only by chance.
func TestHelpNamesEveryCommand(t *testing.T) {
	root := newRoot(&env{stdout: io.Discard, stderr: io.Discard})
	for _, c := range root.Commands() {
		if !c.IsAvailableCommand() || c.Name() == "help" || c.Name() == "version" {
			continue
		}
		if !strings.Contains(root.Long, c.Name()) {
			t.Errorf("the top-level help does not name %q", c.Name())
		}
		for _, sub := range c.Commands() {
			if sub.IsAvailableCommand() && !strings.Contains(root.Long, sub.Name()) && c.Name() != "completion" {
				t.Errorf("the top-level help does not name %q %q", c.Name(), sub.Name())
			}
		}
	}
}

func TestVersionAndHelp(t *testing.T) {
	for _, args := range [][]string{{"version"}, {"--version"}} {
		code, out, _ := runCmd(t, args...)
		if code != 0 || !strings.HasPrefix(out, "metasched ") || !strings.Contains(out, "commit ") {
			t.Errorf("%v: exit %d, %q", args, code, out)
		}
	}
	for _, args := range [][]string{{"--help"}, {"policy", "--help"}, {"policy", "solve", "--help"}, {"policy", "papers", "--help"}} {
		code, out, _ := runCmd(t, args...)
		if code != 0 || !strings.Contains(out, "Usage:") {
			t.Errorf("%v: exit %d\n%s", args, code, out)
		}
	}
}

// The experiments on QEMU VMs refuse bad flags before they start a lab,
// naming the flag.
func TestExperimentFlagsRefused(t *testing.T) {
	for _, tc := range []struct {
		args   []string
		stderr string
	}{
		{[]string{"experiment", "realgrid"}, "--out: required"},
		{[]string{"experiment", "realgrid", "--out", t.TempDir(), "--tasks", "0"}, "--tasks: must be within 1 and 100000, not 0"},
		{[]string{"experiment", "realgrid", "--out", t.TempDir(), "--compute-seconds", "-1"}, "--compute-seconds: must be within 0 and 60, not -1"},
		{[]string{"experiment", "realgrid", "--out", t.TempDir(), "--runs", "gramvm,fastest"}, `--runs: "fastest" is not a run: gramvm, gramvm-master-latam-a, met, mct, olb`},
		{[]string{"experiment", "demo-vms", "--jobs", "0"}, "--jobs: must be within 1 and 100, not 0"},
		{[]string{"experiment", "demo-vms", "--every", "-1s"}, "--every: must be within 0s and 1h, not -1s"},
		{[]string{"experiment", "demo-vms", "extra"}, `unexpected argument "extra"`},
	} {
		code, out, errOut := runCmd(t, tc.args...)
		if code != 2 || out != "" || !strings.Contains(errOut, tc.stderr) {
			t.Errorf("metasched %v: exit %d, stdout %q, stderr %q; want exit 2 and %q", tc.args, code, out, errOut, tc.stderr)
		}
	}
}

// The long-run analysis after a solve stops at its budget and says so,
// in the text (how far it went, the residual, how to ask for more) and in
// the JSON; with the default budget a small model's analysis converges.
func TestPolicySolveBoundaryBudget(t *testing.T) {
	args := []string{"policy", "solve", "--model", example + "palmer-table2.yaml", "--horizon", "5", "--boundary-sweeps", "10"}
	code, out, errOut := runCmd(t, args...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{
		"long run:  NOT CONVERGED: the analysis stopped after 10 sweeps",
		"its budget of 10 sweeps (--boundary-sweeps)",
		"After 10 steps from the empty system at the static allocation, not in the long run:",
		"--boundary-sweeps 100 runs it ten times longer, --boundary=false skips it.",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	code, out, errOut = runCmd(t, append(args, "--output", "json")...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var got struct {
		Stationary struct {
			Sweeps    int     `json:"sweeps"`
			MaxSweeps int     `json:"max_sweeps"`
			Converged bool    `json:"converged"`
			Residual  float64 `json:"residual"`
			Note      string  `json:"note"`
		} `json:"stationary"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatal(err)
	}
	if st := got.Stationary; st.Converged || st.Sweeps != 10 || st.MaxSweeps != 10 || !(st.Residual > 0) ||
		!strings.Contains(st.Note, "stopped at its budget of 10 sweeps") || !strings.Contains(st.Note, "--boundary-sweeps 100") {
		t.Errorf("JSON stationary = %+v, want stopped at 10 sweeps with a note", st)
	}

	code, out, errOut = runCmd(t, "policy", "solve", "--model", example+"palmer-table2.yaml", "--horizon", "5", "--output", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	got.Stationary.Note = ""
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatal(err)
	}
	if st := got.Stationary; !st.Converged || st.MaxSweeps != switching.DefaultBoundarySweeps(5, 9000) || st.Note != "" {
		t.Errorf("default budget: %+v, want converged within %d sweeps, no note", st, switching.DefaultBoundarySweeps(5, 9000))
	}
	code, out, _ = runCmd(t, "policy", "solve", "--model", example+"palmer-table2.yaml", "--horizon", "5")
	if code != 0 || !strings.Contains(out, "long run:  from the empty system at the static allocation (") {
		t.Errorf("converged analysis, text:\n%s", out)
	}
}

// Without --view, policy solve shows the slice where the policy acts and
// says how it was chosen and how to ask for another; with --view, the
// slice asked for.
func TestPolicySolveChosenView(t *testing.T) {
	code, out, errOut := runCmd(t, "policy", "solve", "--model", example+"fisher-table1.yaml", "--criterion", "discounted",
		"--boundary=false", "--output", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var got solveReport
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatal(err)
	}
	v := got.View
	switching := 0
	for _, row := range v.Actions {
		for _, a := range row {
			if a != 0 {
				switching++
			}
		}
	}
	if v.Chosen == nil || v.Chosen.Candidates != 6 || v.Chosen.Switching != switching || switching == 0 ||
		v.Chosen.Default != "k=1,1,1 m=0 j3=0 rows=j1 cols=j2 size=11" {
		t.Errorf("view %+v, chosen %+v: want a slice with switches chosen among 6", v, v.Chosen)
	}
	code, out, _ = runCmd(t, "policy", "solve", "--model", example+"fisher-table1.yaml", "--criterion", "discounted", "--boundary=false")
	if code != 0 || !strings.Contains(out, "view:      "+v.Spec+"\n           chosen among 6 slices as the one whose action changes most often ("+
		fmt.Sprint(switching)+" of 121 cells start a switch)\n") || !strings.Contains(out, "--view picks") {
		t.Errorf("text output:\n%s", out)
	}
	code, out, _ = runCmd(t, "policy", "solve", "--model", example+"palmer-table2.yaml", "--criterion", "discounted", "--boundary=false",
		"--view", "k=1,1 rows=j2 cols=j1")
	if code != 0 || !strings.Contains(out, "view:      k=1,1 m=0 rows=j2 cols=j1 size=11\n\n") || strings.Contains(out, "chosen") {
		t.Errorf("a view given: text output:\n%s", out)
	}
}

// Exchangeable pools are lumped by default, and the report says so; with
// --lump=false the space keeps every permutation, and the optimum is the
// same.
func TestPolicySolveLump(t *testing.T) {
	model := filepath.Join(t.TempDir(), "fig4.yaml")
	if err := os.WriteFile(model, []byte(`servers: 3
queue_limit: 8
pools:
  - {name: a, arrival_rate: 0.8, service_rate: 1, holding_cost: 2}
  - {name: b, arrival_rate: 0.8, service_rate: 1, holding_cost: 1}
  - {name: c, arrival_rate: 0.8, service_rate: 1, holding_cost: 1}
switch_rate: 0.1
blocking_cost: auto
`), 0o644); err != nil {
		t.Fatal(err)
	}
	solve := func(args ...string) solveReport {
		t.Helper()
		code, out, errOut := runCmd(t, append([]string{"policy", "solve", "--model", model, "--output", "json", "--tolerance", "1e-9"}, args...)...)
		var r solveReport
		if code != 0 || json.Unmarshal([]byte(out), &r) != nil {
			t.Fatalf("%v: exit %d: %s", args, code, errOut)
		}
		return r
	}
	lumped, whole := solve(), solve("--lump=false")
	if !cmp.Equal(lumped.Lumped, [][]string{{"b", "c"}}) || lumped.States != 32*512 || lumped.UnlumpedStates != 56*512 ||
		whole.Lumped != nil || whole.States != 56*512 {
		t.Errorf("lumped: %v, %d states (%d without); not: %v, %d states", lumped.Lumped, lumped.States, lumped.UnlumpedStates, whole.Lumped, whole.States)
	}
	if math.Abs(*lumped.AverageCost-*whole.AverageCost) > *whole.AverageUpper-*whole.AverageLower+*lumped.AverageUpper-*lumped.AverageLower {
		t.Errorf("optimum %.10g lumped, %.10g not", *lumped.AverageCost, *whole.AverageCost)
	}
	code, out, _ := runCmd(t, "policy", "solve", "--model", model)
	if code != 0 || !strings.Contains(out, "exchangeable pools lumped (b and c): 28672 states without that") {
		t.Errorf("table output:\n%s", out)
	}
}
