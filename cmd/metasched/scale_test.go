package main

import (
	"encoding/csv"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestScaleExperiment runs the scale experiment as a user would, on a
// small row (100 simulated hosts, a backlog of 300, a stream of 20/s for
// 3 s): every job of the backlog is placed and counted, every job of the
// stream reaches running and has a latency, and the files are written.
func TestScaleExperiment(t *testing.T) {
	bin := buildBinary(t)
	out := t.TempDir()
	cmd := exec.Command(bin, "experiment", "scale", "--out", out, "--hosts", "100", "--backlog", "300", "--rate", "20",
		"--stream-for", "3s", "--clients", "4", "--cpu-profile")
	cmd.Dir = t.TempDir()
	text, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v:\n%s", err, text)
	}
	f, err := os.Open(filepath.Join(out, "scale.csv"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	recs, err := csv.NewReader(f).ReadAll()
	if err != nil || len(recs) != 2 {
		t.Fatalf("scale.csv: %v, %v", recs, err)
	}
	row := map[string]string{}
	for i, k := range recs[0] {
		row[k] = recs[1][i]
	}
	num := func(k string) float64 {
		x, err := strconv.ParseFloat(row[k], 64)
		if err != nil {
			t.Fatalf("scale.csv: %s %q: %v", k, row[k], err)
		}
		return x
	}
	if row["hosts"] != "100" || row["submitted"] != "300" || row["drained"] != "true" || row["stream_jobs"] != "60" {
		t.Errorf("scale.csv: %v: want 100 hosts, 300 submitted and drained, 60 jobs of the stream run", row)
	}
	if num("placements_mean") <= 0 || num("latency_p99_s") <= 0 || num("rss_max_mib") <= 0 || num("store_mib") <= 0 || num("commits_per_s") <= 0 {
		t.Errorf("scale.csv: %v: want placements, latencies, memory, a store and its commits", row)
	}
	if p := num("plans_reused_pct"); !(p >= 0 && p < 100) {
		t.Errorf("scale.csv: plans_reused_pct %g: want a share of the plans, some searched", p)
	}
	samples, err := os.ReadFile(filepath.Join(out, "scale-samples.csv"))
	if err != nil {
		t.Fatal(err)
	}
	placed := 0
	for _, line := range strings.Split(strings.TrimSpace(string(samples)), "\n")[1:] {
		f := strings.Split(line, ",")
		if f[1] == "drain" {
			n, _ := strconv.Atoi(f[3])
			placed += n
		}
	}
	if placed != 300 {
		t.Errorf("the drain's samples count %d placements, want the backlog's 300:\n%s", placed, samples)
	}
	for _, name := range []string{"scale.svg", "scale.png", "scale-samples.svg", "scale-samples.png", "cpu-100.pprof"} {
		if fi, err := os.Stat(filepath.Join(out, name)); err != nil || fi.Size() == 0 {
			t.Errorf("%s: %v", name, err)
		}
	}
	if !strings.Contains(string(text), "PLACEMENTS/S MEAN/P50/P99") {
		t.Errorf("no table printed:\n%s", text)
	}
}

// TestScaleExperimentBadFlags: each bad flag is named, and nothing runs.
func TestScaleExperimentBadFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "--out: required"},
		{[]string{"--out", "x", "--hosts", "100,0", "--backlog", "1,1", "--rate", "1,1"}, `--hosts: "0" is not a whole number within 1 and 100000`},
		{[]string{"--out", "x", "--hosts", "100,200"}, "--hosts, --backlog and --rate: give as many of each (2, 3 and 3)"},
		{[]string{"--out", "x", "--rate", "a,b,c"}, `--rate: "a" is not a whole number`},
		{[]string{"--out", "x", "--clients", "0"}, "--clients: must be within 1 and 1024, not 0"},
		{[]string{"--out", "x", "--stream-for", "10ms"}, "--stream-for: must be within 1s and 24h, not 10ms"},
	} {
		code, _, stderr := runCmd(t, append([]string{"experiment", "scale"}, tc.args...)...)
		if code != 2 || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit %d, %q; want 2 and %q", tc.args, code, stderr, tc.want)
		}
	}
}
