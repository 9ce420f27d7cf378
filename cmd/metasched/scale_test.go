package main

import (
	"encoding/csv"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/metasched/metasched/internal/etcdtest"
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
	row, num := scaleRow(t, out)
	if row["hosts"] != "100" || row["store"] != "bbolt" || row["agents"] != "0" || row["submitted"] != "300" || row["drained"] != "true" || row["stream_jobs"] != "60" {
		t.Errorf("scale.csv: %v: want 100 hosts on bbolt and in-process sites, 300 submitted and drained, 60 jobs of the stream run", row)
	}
	if num("placements_mean") <= 0 || num("latency_p99_s") <= 0 || num("rss_max_mib") <= 0 || num("store_mib") <= 0 || num("commits_per_s") <= 0 {
		t.Errorf("scale.csv: %v: want placements, latencies, memory, a store and its commits", row)
	}
	if p := num("plans_reused_pct"); !(p >= 0 && p < 100) {
		t.Errorf("scale.csv: plans_reused_pct %g: want a share of the plans, some searched", p)
	}
	if placed := drainPlaced(t, out); placed != 300 {
		t.Errorf("the drain's samples count %d placements, want the backlog's 300", placed)
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

// TestScaleExperimentRemote runs a small row on etcd with the clusters
// in two agent processes over TLS (100 simulated hosts in 3 clusters, a
// backlog of 100, a stream of 20/s for 2 s): every job of the backlog and
// of the stream reaches running, the row says what it ran on, the files
// it wrote name the etcd and the agents, and when it ends etcd and the
// agents are gone (their ports refuse).
func TestScaleExperimentRemote(t *testing.T) {
	bin := buildBinary(t)
	if _, err := etcdtest.Binary(); err != nil {
		t.Fatal(err)
	}
	out, work := t.TempDir(), t.TempDir()
	cmd := exec.Command(bin, "experiment", "scale", "--out", out, "--hosts", "100", "--backlog", "100", "--rate", "20",
		"--stream-for", "2s", "--clients", "4", "--store", "etcd", "--agents", "2", "--dir", work, "--keep")
	cmd.Dir = t.TempDir()
	text, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v:\n%s", err, text)
	}
	row, num := scaleRow(t, out)
	if row["hosts"] != "100" || row["clusters"] != "3" || row["store"] != "etcd" || row["agents"] != "2" ||
		row["submitted"] != "100" || row["drained"] != "true" || row["stream_jobs"] != "40" {
		t.Errorf("scale.csv: %v: want 100 hosts in 3 clusters on etcd and 2 agents, 100 submitted and drained, 40 jobs of the stream run", row)
	}
	if num("placements_mean") <= 0 || num("latency_p99_s") <= 0 || num("store_mib") <= 0 || num("commits_per_s") <= 0 ||
		num("others_cpu_mean_cores") <= 0 || num("others_rss_max_mib") <= 0 {
		t.Errorf("scale.csv: %v: want placements, latencies, etcd's database and commits, and the other processes' CPU and memory", row)
	}
	if placed := drainPlaced(t, out); placed != 100 {
		t.Errorf("the drain's samples count %d placements, want the backlog's 100", placed)
	}
	if !strings.Contains(string(text), "etcd   2 ") {
		t.Errorf("the table does not say etcd and 2 agents:\n%s", text)
	}
	rowDir := filepath.Join(work, "row-0-hosts-100")
	serve, err := os.ReadFile(filepath.Join(rowDir, "serve.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var addrs []string
	for _, m := range regexp.MustCompile(`(?:address: https|endpoints: \[http)://(127\.0\.0\.1:\d+)`).FindAllStringSubmatch(string(serve), -1) {
		addrs = append(addrs, m[1])
	}
	if len(addrs) != 4 || !strings.Contains(string(serve), "tls: {cert_file: daemon.pem") {
		t.Fatalf("serve.yaml: want the daemon's certificate, 3 agents over https and an etcd endpoint:\n%s", serve)
	}
	for _, a := range addrs {
		if c, err := net.DialTimeout("tcp", a, time.Second); err == nil {
			c.Close()
			t.Errorf("%s still answers after the row: a process was left running", a)
		}
	}
	logs, err := filepath.Glob(filepath.Join(rowDir, "agents-*.log"))
	if err != nil {
		t.Fatal(err)
	}
	if len(logs) != 2 {
		t.Errorf("agent logs %v: want one per agent process", logs)
	}
}

// scaleRow reads the one row of DIR/scale.csv, by column name.
func scaleRow(t *testing.T, dir string) (map[string]string, func(string) float64) {
	t.Helper()
	recs := readCSV(t, filepath.Join(dir, "scale.csv"))
	if len(recs) != 2 {
		t.Fatalf("scale.csv: %v: want a header and a row", recs)
	}
	row := map[string]string{}
	for i, k := range recs[0] {
		row[k] = recs[1][i]
	}
	return row, func(k string) float64 {
		x, err := strconv.ParseFloat(row[k], 64)
		if err != nil {
			t.Fatalf("scale.csv: %s %q: %v", k, row[k], err)
		}
		return x
	}
}

// drainPlaced counts the placements of DIR/scale-samples.csv's drain.
func drainPlaced(t *testing.T, dir string) int {
	t.Helper()
	recs := readCSV(t, filepath.Join(dir, "scale-samples.csv"))
	col := map[string]int{}
	for i, k := range recs[0] {
		col[k] = i
	}
	placed := 0
	for _, r := range recs[1:] {
		if r[col["phase"]] == "drain" {
			n, err := strconv.Atoi(r[col["placed"]])
			if err != nil {
				t.Fatalf("scale-samples.csv: %v: %v", r, err)
			}
			placed += n
		}
	}
	return placed
}

func readCSV(t *testing.T, path string) [][]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close() // read-only
	recs, err := csv.NewReader(f).ReadAll()
	if err != nil || len(recs) == 0 {
		t.Fatalf("%s: %v, %v", path, recs, err)
	}
	return recs
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
		{[]string{"--out", "x", "--store", "sqlite"}, `--store: must be bbolt or etcd, not "sqlite"`},
		{[]string{"--out", "x", "--agents", "-1"}, "--agents: must be within 0 and 100000, not -1"},
		{[]string{"--out", "x", "--hosts", "1000,100", "--backlog", "1,1", "--rate", "1,1", "--agents", "10"}, "--agents: 10 agents for the 3 clusters of --hosts 100: at most one a cluster"},
	} {
		code, _, stderr := runCmd(t, append([]string{"experiment", "scale"}, tc.args...)...)
		if code != 2 || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit %d, %q; want 2 and %q", tc.args, code, stderr, tc.want)
		}
	}
}
