package main

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"
)

func selectionArgs(extra ...string) []string {
	return append([]string{"simulate", "selection", "--grid", example + "grid-8x8.yaml", "--job", example + "job-render.yaml"}, extra...)
}

func TestSimulateSelectionTable(t *testing.T) {
	code, out, errOut := runCmd(t, selectionArgs("--rate", "0.0005", "--algorithm", "hillclimb,mct,olb")...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{
		"19 requests of 300 processes (render-42), uniform arrivals at 0.0005 requests/s, seed 1\ngrid: ../../examples/grid-8x8.yaml\n",
		"REQUEST  ARRIVAL S  ALGORITHM  WAIT S  RUN S  TOTAL S  MACHINES  MASTER",
		"1        0          hillclimb  0       1213   1213     41        japan",
		"1        0          mct        0       2934   2934     8         japan",
		"japan+spain+france+italy+argentina+brazil+\n                                                                            chile+india\n",
		"ALGORITHM  MEAN WAIT S  MEAN RUN S  MEAN TOTAL S  MAKESPAN S  VS MCT",
		"reference",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	// 19 requests × 3 algorithms.
	if n := strings.Count(out, " hillclimb ") + strings.Count(out, " mct ") + strings.Count(out, " olb "); n != 57 {
		t.Errorf("%d request rows, want 57:\n%s", n, out)
	}
	if !strings.Contains(out, "\nhillclimb  ") || !strings.Contains(out, "%\n") {
		t.Errorf("no summary with an improvement in %%:\n%s", out)
	}
	checkWidth(t, out)
	// Five algorithms: a request's clusters on the 8×8 grid no longer fit
	// and go on under their column.
	code, out, errOut = runCmd(t, selectionArgs("--rate", "0.002", "--algorithm", "hillclimb,exhaustive,mct,met,olb")...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	checkWidth(t, out)
	if want := "1        0          hillclimb   0       1213   1213     41        japan      japan+spain+france+italy+argentina+brazil+\n" +
		"                                                                             chile+india\n"; !strings.Contains(out, want) {
		t.Errorf("output lacks %q:\n%s", want, out)
	}
}

// checkWidth fails the test for a line of out wider than tableWidth.
func checkWidth(t *testing.T, out string) {
	t.Helper()
	for i, line := range strings.Split(out, "\n") {
		if n := utf8.RuneCountInString(line); n > tableWidth {
			t.Errorf("line %d is %d wide, over %d: %q", i+1, n, tableWidth, line)
		}
	}
}

func TestSimulateSelectionJSON(t *testing.T) {
	args := selectionArgs("--rate", "0.002", "--arrivals", "exponential", "--requests", "5", "--processes", "100",
		"--algorithm", "mct,hillclimb,met", "--seed", "4", "--output", "json")
	code, out, errOut := runCmd(t, args...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var got struct {
		Requests   int       `json:"requests"`
		Processes  int       `json:"processes"`
		Arrivals   string    `json:"arrivals"`
		Rate       float64   `json:"rate"`
		Seed       uint64    `json:"seed"`
		Times      []float64 `json:"arrivals_s"`
		Algorithms []struct {
			Algorithm string           `json:"algorithm"`
			Requests  []map[string]any `json:"requests"`
			Summary   map[string]any   `json:"summary"`
		} `json:"algorithms"`
		Files []string `json:"files"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, out)
	}
	if got.Requests != 5 || got.Processes != 100 || got.Arrivals != "exponential" || got.Rate != 0.002 || got.Seed != 4 ||
		len(got.Times) != 5 || got.Times[0] != 0 || len(got.Algorithms) != 3 || got.Files != nil {
		t.Fatalf("figures: %s", out)
	}
	for i, alg := range []string{"mct", "hillclimb", "met"} {
		a := got.Algorithms[i]
		if a.Algorithm != alg || len(a.Requests) != 5 {
			t.Errorf("algorithm %d: %s with %d requests", i, a.Algorithm, len(a.Requests))
			continue
		}
		for _, k := range []string{"index", "arrival_s", "start_s", "wait_s", "run_s", "total_s", "master", "machines", "clusters"} {
			if _, ok := a.Requests[0][k]; !ok {
				t.Errorf("%s: request lacks %q", alg, k)
			}
		}
		for _, k := range []string{"mean_wait_s", "mean_run_s", "mean_total_s", "makespan_s", "improvement_vs_mct"} {
			if _, ok := a.Summary[k]; !ok {
				t.Errorf("%s: summary lacks %q", alg, k)
			}
		}
	}
	if got.Algorithms[0].Summary["improvement_vs_mct"] != 0.0 {
		t.Errorf("mct against itself: %v", got.Algorithms[0].Summary["improvement_vs_mct"])
	}
	// The same seed gives the same output; without mct there is no
	// improvement.
	if _, again, _ := runCmd(t, args...); again != out {
		t.Error("same seed, different output")
	}
	_, out, _ = runCmd(t, selectionArgs("--rate", "0.002", "--requests", "3", "--algorithm", "olb", "--output", "json")...)
	if strings.Contains(out, "improvement_vs_mct") {
		t.Errorf("improvement without mct: %s", out)
	}
}

func TestSimulateSelectionOut(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "results")
	code, out, errOut := runCmd(t, selectionArgs("--rate", "0.001", "--requests", "7", "--out", dir)...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if !strings.Contains(out, "wrote "+filepath.Join(dir, "selection.csv")) {
		t.Errorf("output does not say what it wrote:\n%s", out)
	}
	f, err := os.Open(filepath.Join(dir, "selection.csv"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close() // read-only
	recs, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 1+7*2 || strings.Join(recs[0], ",") != "algorithm,request,arrival_s,start_s,wait_s,run_s,total_s,end_s,master,machines,clusters" {
		t.Fatalf("csv: %d records, header %v", len(recs), recs[0])
	}
	if r := recs[1]; r[0] != "hillclimb" || r[1] != "1" || r[2] != "0" || r[8] != "japan" {
		t.Errorf("first row %v", r)
	}
	svg, err := os.ReadFile(filepath.Join(dir, "selection.svg"))
	if err != nil || !bytes.Contains(svg, []byte("<svg")) || !bytes.Contains(svg, []byte("hillclimb wait")) {
		t.Errorf("svg: %v, %d bytes", err, len(svg))
	}
	png, err := os.ReadFile(filepath.Join(dir, "selection.png"))
	if err != nil || !bytes.HasPrefix(png, []byte("\x89PNG\r\n\x1a\n")) || len(png) < 1000 {
		t.Errorf("png: %v, %d bytes", err, len(png))
	}
	// With --output json the files are listed.
	code, out, _ = runCmd(t, selectionArgs("--rate", "0.001", "--requests", "2", "--out", dir, "--output", "json")...)
	var rep struct{ Files []string }
	if code != 0 || json.Unmarshal([]byte(out), &rep) != nil || len(rep.Files) != 3 {
		t.Errorf("json files: exit %d, %s", code, out)
	}
}

func TestSimulateSelectionBadInput(t *testing.T) {
	grid, job := example+"grid-8x8.yaml", example+"job-render.yaml"
	bigVM := writeFile(t, "job.yaml", "name: big\ntype: render\ntasks: 1\ntask_ops: 1e9\ntask_bytes: 0\nvm: {vcpus: 64}\n")
	blocker := writeFile(t, "file", "")
	for _, tt := range []struct {
		args []string
		want string
		code int
	}{
		{[]string{"--job", job, "--rate", "1"}, "--grid: required", 2},
		{[]string{"--grid", grid, "--rate", "1"}, "--job: required", 2},
		{[]string{"--grid", grid, "--job", job}, "--rate: required", 2},
		{[]string{"--grid", grid, "--job", job, "--rate", "0"}, "--rate: must be a number > 0 (requests per second), got 0", 2},
		{[]string{"--grid", grid, "--job", job, "--rate", "-1"}, "--rate: must be a number > 0", 2},
		{[]string{"--grid", grid, "--job", job, "--rate", "x"}, `invalid argument "x" for "--rate"`, 2},
		{[]string{"--grid", grid, "--job", job, "--rate", "1", "--requests", "0"}, "--requests: must be >= 1, got 0", 2},
		{[]string{"--grid", grid, "--job", job, "--rate", "1", "--processes", "0"}, "--processes: must be >= 1, got 0", 2},
		{[]string{"--grid", grid, "--job", job, "--rate", "1", "--arrivals", "poisson"}, `--arrivals: must be uniform or exponential, got "poisson"`, 2},
		{[]string{"--grid", grid, "--job", job, "--rate", "1", "--algorithm", "hillclimb,random"}, `--algorithm: unknown algorithm "random"`, 2},
		{[]string{"--grid", grid, "--job", job, "--rate", "1", "--algorithm", "mct,mct"}, "--algorithm: mct given twice", 2},
		{[]string{"--grid", grid, "--job", job, "--rate", "1", "--algorithm", ""}, "--algorithm: empty name", 2},
		{[]string{"--grid", grid, "--job", job, "--rate", "1", "--restarts", "0"}, "--restarts: must be >= 1, got 0", 2},
		{[]string{"--grid", grid, "--job", job, "--rate", "1", "--output", "xml"}, "--output: must be table or json", 2},
		{[]string{"--grid", grid, "--job", job, "--rate", "1", "--out", filepath.Join(blocker, "sub")}, "--out: ", 2},
		{[]string{"--grid", "/nonexistent/grid.yaml", "--job", job, "--rate", "1"}, "--grid: open /nonexistent/grid.yaml", 2},
		{[]string{"--grid", grid, "--job", writeFile(t, "job.yaml", "name: x\n"), "--rate", "1"}, "job.yaml: type: missing required field", 2},
		{[]string{"--grid", grid, "--job", job, "--rate", "1", "extra"}, `unexpected argument "extra"`, 2},
		// A job whose VM fits no cluster cannot run: a failure, as for plan.
		{[]string{"--grid", grid, "--job", bigVM, "--rate", "1", "--algorithm", "hillclimb"}, "hillclimb: request 1: no plan can run the request", 1},
	} {
		args := append([]string{"simulate", "selection"}, tt.args...)
		code, out, errOut := runCmd(t, args...)
		if code != tt.code || !strings.Contains(errOut, tt.want) || out != "" {
			t.Errorf("%v: exit %d, stderr %q, stdout %q; want exit %d and %q", tt.args, code, errOut, out, tt.code, tt.want)
		}
	}
}

// A cancelled context (Ctrl-C) stops the simulation: exit 130.
func TestSimulateSelectionInterrupted(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var out, errOut bytes.Buffer
	code := run(ctx, selectionArgs("--rate", "0.001"), &out, &errOut)
	if code != exitInterrupted || !strings.Contains(errOut.String(), "interrupted") || out.Len() != 0 {
		t.Errorf("exit %d, stdout %q, stderr %q", code, out.String(), errOut.String())
	}
}
