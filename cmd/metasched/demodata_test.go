package main

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestSetAsideDemoData: only a directory the demo marked is set aside, to
// NAME.previous-TIME (-2 when taken), whole; a missing or foreign
// directory stays; a directory whose database a daemon holds is refused.
func TestSetAsideDemoData(t *testing.T) {
	now := time.Date(2026, 11, 30, 9, 15, 4, 0, time.FixedZone("x", 3600))
	root := t.TempDir()

	if to, err := setAsideDemoData(filepath.Join(root, "missing"), now); to != "" || err != nil {
		t.Errorf("missing: %q, %v; want nothing", to, err)
	}

	foreign := filepath.Join(root, "foreign")
	writeIn(t, foreign, "metasched.db", "db")
	writeIn(t, foreign, "token", "x")
	if to, err := setAsideDemoData(foreign, now); to != "" || err != nil {
		t.Errorf("foreign: %q, %v; want nothing", to, err)
	}
	if _, err := os.Stat(filepath.Join(foreign, "metasched.db")); err != nil {
		t.Errorf("a directory the demo did not mark was touched: %v", err)
	}

	demo := filepath.Join(root, "metasched-data")
	writeIn(t, demo, "metasched.db", "db")
	if err := markDemoData(demo); err != nil {
		t.Fatal(err)
	}
	if !isDemoData(demo) || isDemoData(foreign) {
		t.Fatalf("isDemoData: %v for the demo's, %v for the foreign", isDemoData(demo), isDemoData(foreign))
	}
	want := demo + ".previous-20261130T081504Z"
	to, err := setAsideDemoData(demo, now)
	if err != nil || to != want {
		t.Fatalf("demo: %q, %v; want %q", to, err, want)
	}
	if _, err := os.Stat(demo); !os.IsNotExist(err) {
		t.Errorf("the demo's directory is still there: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(want, "metasched.db")); err != nil || string(b) != "db" {
		t.Errorf("set aside: %q, %v; want the whole directory", b, err)
	}

	// The same second again: another name.
	writeIn(t, demo, "metasched.db", "db2")
	if err := markDemoData(demo); err != nil {
		t.Fatal(err)
	}
	if to, err := setAsideDemoData(demo, now); err != nil || to != want+"-2" {
		t.Errorf("taken name: %q, %v; want %q", to, err, want+"-2")
	}

	// A daemon holds the database (the store locks its file): refused.
	writeIn(t, demo, "metasched.db", "db3")
	if err := markDemoData(demo); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(filepath.Join(demo, "metasched.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close() // opened to hold its lock: read-only
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		t.Fatal(err)
	}
	if to, err := setAsideDemoData(demo, now.Add(time.Second)); err == nil || !strings.Contains(err.Error(), "in use by another daemon") || to != "" {
		t.Errorf("database in use: %q, %v; want refused", to, err)
	}
	if _, err := os.Stat(filepath.Join(demo, "metasched.db")); err != nil {
		t.Errorf("a directory in use was moved: %v", err)
	}
}

func writeIn(t *testing.T, dir, name, text string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestServeDemoFreshData runs the demo (one job) in the process three
// times on one data directory, then serve with a configuration on it: the
// second demo sets the first's data aside and says so, --keep-data
// continues from the data, and serve --config moves nothing. The paths
// printed are absolute.
func TestServeDemoFreshData(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the demo four times (about 20 s)")
	}
	wd := t.TempDir()
	writePaperGrid(t, wd)
	t.Chdir(wd)
	data := filepath.Join(wd, "metasched-data")
	demo := func(extra ...string) string {
		t.Helper()
		args := append([]string{"serve", "--listen", "127.0.0.1:0", "--demo-jobs", "1", "--demo-gap", "10ms", "--exit-after-demo"}, extra...)
		code, out, errOut := runCmd(t, args...)
		if code != 0 {
			t.Fatalf("%v: exit %d\n%s\n%s", args, code, out, errOut)
		}
		return out
	}
	out := demo()
	tokenFile := filepath.Join(data, "token")
	for _, want := range []string{"(data in " + data + ")\n", "operator token in " + tokenFile + "\n",
		"(log in with the operator token: cat " + tokenFile + ")\n", "\n  export METASCHED_TOKEN_FILE=" + tokenFile + "\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("first demo: no %q in\n%s", want, out)
		}
	}
	if strings.Contains(out, "set aside") || strings.Contains(out, "continuing") || !isDemoData(data) {
		t.Errorf("first demo on no data: want a fresh start and the directory marked (%v):\n%s", isDemoData(data), out)
	}

	out = demo()
	prev, err := filepath.Glob(data + ".previous-*")
	if err != nil {
		t.Fatal(err)
	}
	if len(prev) != 1 || !strings.Contains(out, "demo: the previous demo's data is set aside in "+prev[0]+", and this run starts fresh") {
		t.Fatalf("second demo: set aside %v:\n%s", prev, out)
	}
	for _, f := range []string{"metasched.db", "token", demoMarker} {
		if _, err := os.Stat(filepath.Join(prev[0], f)); err != nil {
			t.Errorf("the set-aside directory lacks %s: %v", f, err)
		}
	}
	if strings.Contains(out, "holds") {
		t.Errorf("second demo: says it reuses data:\n%s", out)
	}

	out = demo("--keep-data")
	if n, err := filepath.Glob(data + ".previous-*"); err != nil {
		t.Fatal(err)
	} else if len(n) != 1 || !strings.Contains(out, "demo: continuing from the earlier run in "+data+" (--keep-data)") {
		t.Errorf("--keep-data: %d set aside:\n%s", len(n), out)
	}

	// serve with a configuration never moves a data directory, the demo's
	// marked one included.
	cfg := filepath.Join(wd, "serve.yaml")
	if err := os.WriteFile(cfg, []byte("grid: grid.yaml\ninsecure_http: true\n"+demoJobTypes), 0o644); err != nil {
		t.Fatal(err)
	}
	out = demo("--config", cfg, "--demo", "--data-dir", data)
	if n, err := filepath.Glob(data + ".previous-*"); err != nil {
		t.Fatal(err)
	} else if len(n) != 1 || strings.Contains(out, "set aside") {
		t.Errorf("serve --config: %d set aside:\n%s", len(n), out)
	}
	if code, _, errOut := runCmd(t, "serve", "--config", cfg, "--keep-data"); code != 2 || !strings.Contains(errOut, "--keep-data: applies to the built-in demo only") {
		t.Errorf("--keep-data with --config: exit %d: %s", code, errOut)
	}
	if code, _, errOut := runCmd(t, "serve", "--demo=false", "--keep-data"); code != 2 || !strings.Contains(errOut, "--keep-data: applies to the built-in demo only") {
		t.Errorf("--keep-data without the demo: exit %d: %s", code, errOut)
	}
}
