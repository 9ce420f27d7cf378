package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/metasched/metasched/hypervisorproxy/netlab"
	"github.com/metasched/metasched/internal/etcdtest"
	"github.com/metasched/metasched/internal/tlsx"
	"github.com/metasched/metasched/internal/tlsx/tlsxtest"
	"github.com/metasched/metasched/metasched/api"
)

// TestPartitionedLeader cuts the leader off: two network namespaces joined
// by a veth link, the leading daemon and its etcd member on one side, the
// two other members, the three agents and the two other daemons on the
// other (over TLS: the grid's CA for the daemons and agents, one of its
// own for etcd). With jobs under way, the link goes down: the leader can
// reach neither the other members nor the agents. It must stop acting
// (its log says so) before another daemon leads (its log too: times to
// the millisecond, one clock); the new leader finishes the jobs and takes
// new ones; when the link returns, the old leader stands by.
func TestPartitionedLeader(t *testing.T) {
	if err := netlab.Check(); err != nil {
		t.Skip(err)
	}
	// Parallel: the package's longest tests run two at a time once its
	// other tests are done (the QEMU one beside one that boots no guest),
	// each with processes, directories and ports of its own.
	t.Parallel()
	bin := buildBinary(t)
	dir := t.TempDir()
	p := netlab.NewPairT(t, netlab.Options{})
	const cut, rest = 1, 0 // the sides
	in := func(side int) func(string, ...string) *exec.Cmd {
		return func(name string, args ...string) *exec.Cmd {
			return p.Command(context.Background(), side, name, args...)
		}
	}

	grid, etcdPKI := tlsxtest.New(t), tlsxtest.New(t)
	hosts := []string{p.Addr(0), p.Addr(1), "127.0.0.1"}
	member := etcdPKI.Issue(t, "etcd-member", tlsx.Request{Identity: tlsx.Daemon(), Hosts: hosts})
	etcdClient := etcdPKI.Issue(t, "etcd-client", tlsx.Request{Identity: tlsx.Daemon()})
	daemonCert := grid.Issue(t, "daemon", tlsx.Request{Identity: tlsx.Daemon(), Hosts: hosts})
	ec := etcdtest.StartWith(t, []etcdtest.MemberSpec{
		{Host: p.Addr(cut), Loopback: true, Command: in(cut), TLS: &member},
		{Host: p.Addr(rest), Loopback: true, Command: in(rest), TLS: &member},
		{Host: p.Addr(rest), Loopback: true, Command: in(rest), TLS: &member},
	})
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("etcd:\n%s", ec.Logs())
		}
	})
	writePaperGrid(t, dir)
	write := func(name, text string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	tlsLine := func(f tlsx.Files) string {
		return fmt.Sprintf("{cert_file: %s, key_file: %s, ca_file: %s}", f.Cert, f.Key, f.CA)
	}
	var logs []string
	t.Cleanup(func() {
		if t.Failed() {
			for _, l := range logs {
				data, err := os.ReadFile(l)
				if err != nil {
					t.Logf("%s: %v", filepath.Base(l), err)
					continue
				}
				t.Logf("%s:\n%s", filepath.Base(l), tail(string(data), 40))
			}
		}
	})
	start := func(name string, side int, args ...string) *servedDaemon {
		cmd := p.Command(context.Background(), side, bin, args...)
		cmd.Dir = dir
		logs = append(logs, filepath.Join(dir, name+".log"))
		d, _, _ := startCmd(t, cmd, logs[len(logs)-1])
		return d
	}

	// The agents, on the rest's side.
	var agents strings.Builder
	for _, site := range []string{"latam-a", "latam-b", "spain"} {
		port := freePort(t)
		f := grid.Issue(t, "agent-"+site, tlsx.Request{Identity: tlsx.Agent(site), Hosts: []string{p.Addr(rest)}})
		cfg := write("agent-"+site+".yaml", fmt.Sprintf("site: %s\nlisten: %s:%d\ntls: %s\ngrid: grid.yaml\nswitch_delay: 1s\n",
			site, p.Addr(rest), port, tlsLine(f)))
		a := start("agent-"+site, rest, "agent", "--config", cfg, "--log-format", "json")
		waitLogLine(t, a, logs[len(logs)-1], "agent listening", time.Minute)
		fmt.Fprintf(&agents, "  - {site: %s, address: https://%s:%d}\n", site, p.Addr(rest), port)
	}

	// The daemons: d0 on the side to be cut, with its member's loopback
	// URL first; d1 and d2 on the rest's side.
	type daemon struct {
		name, log, server string
		side              int
		proc              *servedDaemon
	}
	var ds []*daemon
	for i, side := range []int{cut, rest, rest} {
		port := freePort(t)
		endpoints := []string{ec.Members[1].ClientURL, ec.Members[2].ClientURL}
		if side == cut {
			endpoints = append([]string{ec.Members[0].LoopbackURL}, endpoints...)
		}
		d := &daemon{name: fmt.Sprintf("d%d", i), side: side, server: fmt.Sprintf("https://%s:%d", p.Addr(side), port)}
		cfg := write(d.name+".yaml", fmt.Sprintf(`listen: %s:%d
tls: %s
data_dir: %s
grid: grid.yaml
`+demoJobTypes+`policy: {name: heuristic, K: 2}
executor: {name: emulated, time_scale: 0.02}
agents:
%sstore: {etcd: {endpoints: [%s], prefix: /partition/, tls: %s}}
`, p.Addr(side), port, tlsLine(daemonCert), filepath.Join(dir, d.name), agents.String(), strings.Join(endpoints, ", "), tlsLine(etcdClient)))
		d.proc = start(d.name, side, "serve", "--config", cfg, "--log-format", "json")
		d.log = logs[len(logs)-1]
		ds = append(ds, d)
		if i == 0 {
			waitLogLine(t, d.proc, d.log, "metasched daemon serving", 2*time.Minute) // it leads
		}
	}
	for _, d := range ds[1:] {
		waitLogLine(t, d.proc, d.log, "another daemon leads", time.Minute)
	}
	cli := func(d *daemon, args ...string) (string, error) {
		cmd := p.Command(context.Background(), d.side, bin, args...)
		cmd.Dir = dir
		cmd.Env = serveEnv(envServer+"="+d.server, envTokenFile+"="+filepath.Join(dir, "d0", "token"), envCAFile+"="+grid.CAFile())
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	job := write("job.yaml", "name: before\ntype: sim\ntasks: 12\ntask_ops: 1.0e11\ntask_bytes: 1.0e5\n")
	for range 4 {
		if out, err := cli(ds[0], "submit", job); err != nil {
			t.Fatalf("submit to the leader: %v: %q", err, out)
		}
	}
	waitLogLine(t, ds[0].proc, ds[0].log, "job running", time.Minute)

	// The cut.
	if out, err := exec.Command("ip", "-n", p.Namespace(cut), "link", "set", p.Interface(cut), "down").CombinedOutput(); err != nil {
		t.Fatalf("cut the link: %v: %s", err, out)
	}
	cutAt := time.Now()
	stopped := waitLogLine(t, ds[0].proc, ds[0].log, "lost the leadership", time.Minute)
	var next *daemon
	var leads logLine
	deadline := time.Now().Add(time.Minute)
	for next == nil {
		for _, d := range ds[1:] {
			if l, ok := findLogLine(t, d.log, "leading: this daemon acts"); ok {
				next, leads = d, l
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("no daemon leads a minute after the cut")
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("the cut leader stopped acting %s after the cut (%s); %s leads %s after the cut",
		stopped.Time.Sub(cutAt).Round(time.Millisecond), stopped.Why, next.name, leads.Time.Sub(cutAt).Round(time.Millisecond))
	if !stopped.Time.Before(leads.Time) {
		t.Errorf("the cut leader stopped at %s, after %s led at %s", stopped.Time.Format(logTimeFormat), next.name, leads.Time.Format(logTimeFormat))
	}
	for _, l := range logLines(t, ds[0].log) {
		// A job's driver that sees the stop may say so after the
		// leadership line ("daemon stopping: …"): that is not an act.
		if l.Time.After(stopped.Time) && (l.Job != "" || l.Switch != "") && !strings.HasPrefix(l.Message, "daemon stopping:") {
			t.Errorf("the cut leader acted after it stopped: %s", l.raw)
		}
	}

	// The new leader finishes the jobs and takes a new one.
	if out, err := cli(next, "submit", job); err != nil {
		t.Fatalf("submit to the new leader: %v\n%s", err, out)
	}
	deadline = time.Now().Add(2 * time.Minute)
	for {
		out, err := cli(next, "jobs", "--output", "json")
		if err != nil {
			t.Fatalf("jobs: %v\n%s", err, out)
		}
		var list api.JobList
		if err := json.Unmarshal([]byte(out), &list); err != nil {
			t.Fatalf("jobs: %v\n%s", err, out)
		}
		jobs := list.Jobs
		done := 0
		for _, j := range jobs {
			if j.State == api.Done {
				done++
			} else if j.State.Terminal() {
				t.Fatalf("job %s %s: %s", j.ID, j.State, j.Reason)
			}
		}
		if len(jobs) == 5 && done == 5 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d jobs done two minutes after the cut:\n%s", done, len(jobs), out)
		}
		time.Sleep(500 * time.Millisecond)
	}

	// The link returns: the old leader stands by, and forwards to the new.
	if out, err := exec.Command("ip", "-n", p.Namespace(cut), "link", "set", p.Interface(cut), "up").CombinedOutput(); err != nil {
		t.Fatalf("restore the link: %v: %s", err, out)
	}
	deadline = time.Now().Add(time.Minute)
	for {
		out, err := cli(ds[0], "jobs", "--output", "json")
		if err == nil && strings.Count(out, `"state": "done"`) == 5 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the old leader does not answer for the new one a minute after the link returned: %v\n%s", err, out)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// logLine is a line of a daemon's JSON log.
type logLine struct {
	Time    time.Time `json:"time"`
	Message string    `json:"message"`
	Why     string    `json:"why"`
	Job     string    `json:"job"`
	Switch  string    `json:"switch"`
	raw     string
}

func logLines(t testing.TB, path string) []logLine {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) { // none yet: no lines
		t.Fatal(err)
	}
	var out []logLine
	for _, s := range strings.Split(string(data), "\n") {
		var l logLine
		if json.Unmarshal([]byte(s), &l) == nil {
			l.raw = s
			out = append(out, l)
		}
	}
	return out
}

// findLogLine is the first line of the log whose message starts with msg.
func findLogLine(t testing.TB, path, msg string) (logLine, bool) {
	t.Helper()
	for _, l := range logLines(t, path) {
		if strings.HasPrefix(l.Message, msg) {
			return l, true
		}
	}
	return logLine{}, false
}

// waitLogLine waits for the first line of the process's log whose message
// starts with msg.
func waitLogLine(t testing.TB, p *servedDaemon, path, msg string, limit time.Duration) logLine {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		if l, ok := findLogLine(t, path, msg); ok {
			return l
		}
		select {
		case <-p.done:
			t.Fatalf("%s: the process exited (%v) before it logged %q", filepath.Base(path), p.cmd.ProcessState, msg)
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: no %q in %s", filepath.Base(path), msg, limit)
		}
	}
}
