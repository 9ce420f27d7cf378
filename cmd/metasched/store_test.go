package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/metasched/metasched/internal/etcdtest"
	"github.com/metasched/metasched/metasched/api"
)

// TestStoreBackupRestore, with the real binary as an operator uses it: a
// backup of the running daemon's store, refusals (an existing file, a
// restore under a running daemon, a backup of its directory), then a
// restore into a new data directory on which a daemon resumes the same
// jobs, with the same operator token, and runs them to their end.
func TestStoreBackupRestore(t *testing.T) {
	bin := buildBinary(t)
	work := t.TempDir()
	data1, data2 := filepath.Join(work, "data1"), filepath.Join(work, "data2")
	if err := os.Mkdir(data2, 0o700); err != nil {
		t.Fatal(err)
	}
	d := startServe(t, bin, work, filepath.Join(work, "serve1.log"), "--listen", serveAddr(t), "--data-dir", data1, "--demo=false")
	tokenFile := filepath.Join(data1, "token")
	env := serveEnv(envServer+"="+d.base, envTokenFile+"="+tokenFile)
	cli := func(args ...string) (int, string, string) {
		t.Helper()
		return runBin(t, bin, env, 2*time.Minute, args...)
	}
	job := writeFile(t, "job.yaml", serveJobFile)
	var ids []string
	for range 3 {
		code, out, errOut := cli("submit", job)
		if code != 0 {
			t.Fatalf("submit: exit %d: %s%s", code, out, errOut)
		}
		ids = append(ids, strings.Fields(out)[0])
	}

	backup := filepath.Join(work, "backup.db")
	code, out, errOut := cli("store", "backup", "--out", backup)
	if code != 0 || !regexp.MustCompile(`^backed up the daemon at http://\S+ to `+regexp.QuoteMeta(backup)+`: 3 jobs \(.*\), \d+ hosts, \d+ switch(es)?, 0 tokens; layout \d+, \d+ KiB\n$`).MatchString(out) {
		t.Fatalf("backup: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	t.Logf("%s", out)
	if fi, err := os.Stat(backup); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("the backup: %v, %v: want a file private to its owner", fi, err)
	}
	if _, err := os.Stat(backup + ".partial"); !os.IsNotExist(err) {
		t.Errorf("the backup's partial file is left: %v", err)
	}
	if code, _, errOut := cli("store", "backup", "--out", backup); code != 2 || !strings.Contains(errOut, "exists") {
		t.Errorf("a backup over an existing file: exit %d, %q", code, errOut)
	}
	if code, _, errOut := cli("store", "restore", "--data-dir", data1, backup); code != 1 || !strings.Contains(errOut, "stop the daemon first") {
		t.Errorf("a restore under the running daemon: exit %d, %q", code, errOut)
	}
	if code, _, errOut := cli("store", "backup", "--data-dir", data1, "--out", filepath.Join(work, "other.db")); code != 1 || !strings.Contains(errOut, "running daemon") {
		t.Errorf("a backup of the running daemon's directory: exit %d, %q", code, errOut)
	}
	if code := d.interrupt(t, time.Minute); code != 0 {
		t.Fatalf("the daemon exited %d on SIGINT", code)
	}

	code, out, errOut = cli("store", "restore", "--data-dir", data2, backup)
	if code != 0 || !strings.HasPrefix(out, "restored "+filepath.Join(data2, "metasched.db")+" from "+backup+": 3 jobs") || strings.Contains(out, "replaced") {
		t.Fatalf("restore: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	t.Logf("%s", out)
	d2 := startServe(t, bin, work, filepath.Join(work, "serve2.log"), "--listen", serveAddr(t), "--data-dir", data2, "--demo=false")
	tok1, err := os.ReadFile(tokenFile)
	if err != nil {
		t.Fatal(err)
	}
	tok2, err := os.ReadFile(filepath.Join(data2, "token"))
	if err != nil {
		t.Fatal(err)
	}
	if len(tok1) == 0 || string(tok1) != string(tok2) {
		t.Errorf("the restored daemon's operator token differs from the backed-up one's")
	}
	env = serveEnv(envServer+"="+d2.base, envTokenFile+"="+filepath.Join(data2, "token"))
	deadline := time.Now().Add(3 * time.Minute)
	for {
		code, out, errOut = runBin(t, bin, env, time.Minute, "jobs", "--output", "json")
		if code != 0 {
			t.Fatalf("jobs: exit %d: %s", code, errOut)
		}
		var l api.JobList
		if err := json.Unmarshal([]byte(out), &l); err != nil {
			t.Fatal(err)
		}
		var got []string
		done := 0
		for _, j := range l.Jobs {
			got = append(got, j.ID)
			if j.State == "done" {
				done++
			}
		}
		slices.Sort(got)
		if !slices.Equal(got, ids) {
			t.Fatalf("the restored daemon lists %v, want the backed-up %v", got, ids)
		}
		if done == len(ids) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the restored jobs are not done after 3 minutes:\n%s", out)
		}
		time.Sleep(500 * time.Millisecond)
	}
	if code := d2.interrupt(t, time.Minute); code != 0 {
		t.Errorf("the restored daemon exited %d on SIGINT", code)
	}
	// Restoring over a store keeps the one it replaces.
	code, out, _ = cli("store", "restore", "--data-dir", data2, backup)
	if code != 0 || !strings.Contains(out, "the store it replaced is kept as "+filepath.Join(data2, "metasched.db.replaced-")) {
		t.Errorf("restore over a store: exit %d, %q", code, out)
	}
}

// TestStoreMigrate, with the real binary: a daemon's store with jobs,
// stopped, moved into a real etcd with metasched store migrate; a daemon
// served on it (store: {etcd}) lists the same jobs and runs a new one.
func TestStoreMigrate(t *testing.T) {
	bin := buildBinary(t)
	work := t.TempDir()
	data := filepath.Join(work, "data")
	d := startServe(t, bin, work, filepath.Join(work, "serve1.log"), "--listen", serveAddr(t), "--data-dir", data, "--demo=false")
	env := serveEnv(envServer+"="+d.base, envTokenFile+"="+filepath.Join(data, "token"))
	job := writeFile(t, "job.yaml", serveJobFile)
	var ids []string
	for range 2 {
		code, out, errOut := runBin(t, bin, env, time.Minute, "submit", job)
		if code != 0 {
			t.Fatalf("submit: exit %d: %s%s", code, out, errOut)
		}
		ids = append(ids, strings.Fields(out)[0])
	}
	c := etcdtest.Start(t, 1)
	ep := c.Endpoints()[0]
	if code, _, errOut := runBin(t, bin, env, time.Minute, "store", "migrate", "--from", "bbolt:"+data, "--to", "etcd:"+ep); code != 1 || !strings.Contains(errOut, "stop the daemon first") {
		t.Errorf("migrate of a running daemon's store: exit %d, %q", code, errOut)
	}
	if code := d.interrupt(t, time.Minute); code != 0 {
		t.Fatalf("the daemon exited %d on SIGINT", code)
	}
	for _, bad := range [][]string{{"--from", data, "--to", "etcd:" + ep}, {"--from", "bbolt:" + data, "--to", ep},
		{"--from", "bbolt:" + data, "--to", "etcd:http://10.9.9.9:2379"}, {"--from", "bbolt:" + data, "--to", "etcd:" + ep, "--prefix", "grid"}} {
		if code, _, errOut := runBin(t, bin, env, time.Minute, append([]string{"store", "migrate"}, bad...)...); code != 2 || errOut == "" {
			t.Errorf("migrate %q: exit %d, %q: want a usage error", bad, code, errOut)
		}
	}
	code, out, errOut := runBin(t, bin, env, time.Minute, "store", "migrate", "--from", "bbolt:"+data, "--to", "etcd:"+ep, "--prefix", "/grid-a/")
	if code != 0 || !strings.HasPrefix(out, "migrated "+filepath.Join(data, "metasched.db")+" to etcd "+ep+" under /grid-a/: 2 jobs") {
		t.Fatalf("migrate: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	t.Logf("%s", out)

	// The demo's configuration, its store in etcd now.
	grid, err := filepath.Abs("../../examples/grid-paper.yaml")
	if err != nil {
		t.Fatal(err)
	}
	conf := writeFile(t, "serve.yaml", fmt.Sprintf("listen: %s\ninsecure_http: true\ndata_dir: %s\ngrid: %s\n"+
		"job_types:\n  - {name: render, vm: {vcpus: 2, memory_mib: 2048}, holding_cost: 2}\n"+
		"  - {name: sim, vm: {vcpus: 1, memory_mib: 1024}}\n  - {name: etl, vm: {vcpus: 1, memory_mib: 1024}}\n"+
		"executor: {name: emulated, time_scale: 0.001}\nstore: {etcd: {endpoints: [%s], prefix: /grid-a/}}\n",
		serveAddr(t), filepath.Join(work, "data2"), grid, ep))
	d2 := startServe(t, bin, work, filepath.Join(work, "serve2.log"), "--config", conf)
	env = serveEnv(envServer+"="+d2.base, envTokenFile+"="+filepath.Join(work, "data2", "token"))
	code, out, errOut = runBin(t, bin, env, time.Minute, "jobs", "--output", "json")
	if code != 0 {
		t.Fatalf("jobs on etcd: exit %d: %s", code, errOut)
	}
	for _, id := range ids {
		if !strings.Contains(out, `"id": "`+id+`"`) {
			t.Errorf("the daemon on etcd does not list %s:\n%s", id, out)
		}
	}
	if code, out, errOut := runBin(t, bin, env, time.Minute, "submit", job); code != 0 || !strings.HasPrefix(out, "j-000000000003 ") {
		t.Errorf("a job on etcd: exit %d, %q %q: want j-000000000003", code, out, errOut)
	}
	if code := d2.interrupt(t, time.Minute); code != 0 {
		t.Errorf("the daemon on etcd exited %d on SIGINT", code)
	}
}
