package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/metasched/metasched/internal/syncbuf"
)

// The secure set-up of three sites of docs/guide/tls-and-users.md ("Three
// sites, step by step"), with the real binary on this machine (every party on
// 127.0.0.1): a CA, the daemon's and each agent's certificates, three agents
// and the daemon over mutual TLS, a user's token made by the operator; the
// user submits a job and sees it done, and may not see the hosts; the agents'
// probes measure the links with no token; the CLI refuses a daemon its CA did
// not sign.
func TestSecureThreeSites(t *testing.T) {
	bin := buildBinary(t)
	dir := t.TempDir()
	pki := filepath.Join(dir, "pki")
	run := func(env []string, args ...string) (int, string, string) {
		t.Helper()
		return runBin(t, bin, env, time.Minute, args...)
	}
	must := func(args ...string) string {
		t.Helper()
		code, out, errOut := run(serveEnv(), args...)
		if code != 0 {
			t.Fatalf("%v: exit %d\n%s%s", args, code, out, errOut)
		}
		return out
	}
	must("tls", "ca", "--out", pki)
	must("tls", "cert", "--ca", pki, "--out", pki, "--daemon", "--host", "127.0.0.1")
	sites := []string{"latam-a", "latam-b", "spain"}
	grid, err := filepath.Abs(example + "grid-paper.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var agents strings.Builder
	for _, site := range sites {
		must("tls", "cert", "--ca", pki, "--out", pki, "--agent", site, "--host", "127.0.0.1")
		addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
		file := writeFile(t, "site-"+site+".yaml", fmt.Sprintf(`site: %s
listen: %s
tls: {cert_file: %s/agent-%s.pem, key_file: %s/agent-%s-key.pem, ca_file: %s/ca.pem}
grid: %s
`, site, addr, pki, site, pki, site, pki, grid))
		startAgentProc(t, bin, site, file)
		fmt.Fprintf(&agents, "  - {site: %s, address: https://%s}\n", site, addr)
	}
	serve := writeFile(t, "serve.yaml", fmt.Sprintf(`listen: 127.0.0.1:%d
tls: {cert_file: %s/daemon.pem, key_file: %s/daemon-key.pem, ca_file: %s/ca.pem}
data_dir: %s/data
grid: %s
job_types:
  - {name: render, vm: {vcpus: 1, memory_mib: 512}}
agents:
%spolicy: {name: none}
min_pool_hosts: 0
`, freePort(t), pki, pki, pki, dir, grid, agents.String()))
	logPath := filepath.Join(dir, "daemon.log")
	d := startServe(t, bin, dir, logPath, "--config", serve, "--log-format", "json")
	if !strings.HasPrefix(d.base, "https://127.0.0.1:") {
		t.Fatalf("the daemon serves %s, want https", d.base)
	}
	operator := serveEnv(envServer+"="+d.base, envTokenFile+"="+filepath.Join(dir, "data", "token"), envCAFile+"="+filepath.Join(pki, "ca.pem"))

	// The operator makes alice's token; alice keeps it in a private file.
	code, out, errOut := run(operator, "token", "create", "--name", "alice", "--role", "user")
	if code != 0 || !regexp.MustCompile(`^[A-Za-z0-9_-]{43}\n$`).MatchString(out) {
		t.Fatalf("token create: exit %d, %q %q", code, out, errOut)
	}
	aliceToken := filepath.Join(dir, "alice.token")
	if err := os.WriteFile(aliceToken, []byte(out), 0o600); err != nil {
		t.Fatal(err)
	}
	alice := serveEnv(envServer+"="+d.base, envTokenFile+"="+aliceToken, envCAFile+"="+filepath.Join(pki, "ca.pem"))
	job := writeFile(t, "job.yaml", "name: secure-1\ntype: render\ntasks: 20\ntask_ops: 1.0e10\ntask_bytes: 1.0e5\n")
	code, out, errOut = run(alice, "submit", job)
	m := regexp.MustCompile(`^(j-\d{12}) queued\n$`).FindStringSubmatch(out)
	if code != 0 || m == nil {
		t.Fatalf("alice's submit: exit %d, %q %q", code, out, errOut)
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		_, out, _ = run(alice, "status", m[1], "--output", "json")
		if strings.Contains(out, `"state": "done"`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("alice's job did not end in 2 minutes:\n%s", out)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if !strings.Contains(out, `"owner": "alice"`) {
		t.Errorf("alice's job does not record her:\n%s", out)
	}
	if code, _, errOut = run(alice, "hosts"); code != 1 || !strings.Contains(errOut, "GET /v1/hosts is an operator's: alice has the role user") {
		t.Errorf("alice's hosts: exit %d, %q", code, errOut)
	}
	// Every site's hosts, once the daemon has read every agent's inventory.
	deadline = time.Now().Add(time.Minute)
	for {
		code, out, errOut = run(operator, "hosts")
		if code == 0 && strings.Count(out, "\n") == 17 { // a header and 16 hosts
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the operator's hosts: exit %d, %q %q; want the 16 hosts of the three sites; the daemon's log:\n%s", code, out, errOut, readFile(t, logPath))
		}
		time.Sleep(500 * time.Millisecond)
	}
	if code, out, errOut = run(operator, "token", "list"); code != 0 || !strings.Contains(out, "alice") || strings.Contains(out, readFile(t, aliceToken)[:20]) {
		t.Errorf("token list: exit %d, %q %q", code, out, errOut)
	}

	// An operator's client certificate instead of a token.
	must("tls", "cert", "--ca", pki, "--out", pki, "--client", "ops", "--role", "operator")
	byCert := serveEnv(envServer+"="+d.base, envCAFile+"="+filepath.Join(pki, "ca.pem"),
		envCertFile+"="+filepath.Join(pki, "client-ops.pem"), envKeyFile+"="+filepath.Join(pki, "client-ops-key.pem"))
	if code, out, errOut = run(byCert, "jobs"); code != 0 || !strings.Contains(out, m[1]) {
		t.Errorf("jobs with an operator's certificate: exit %d, %q %q", code, out, errOut)
	}

	// The CLI refuses the daemon with another CA's file, and says why.
	other := filepath.Join(dir, "other")
	must("tls", "ca", "--out", other)
	code, _, errOut = run(serveEnv(envServer+"="+d.base, envTokenFile+"="+aliceToken, envCAFile+"="+filepath.Join(other, "ca.pem")), "jobs")
	if code != 1 || !strings.Contains(errOut, "the daemon at "+d.base+": its certificate is not signed by the CA this side trusts") {
		t.Errorf("a CLI with another CA: exit %d, %q", code, errOut)
	}

	// The agents' probes over mutual TLS measure every link, and no
	// token travels (the agents have none).
	deadline = time.Now().Add(90 * time.Second)
	for {
		log := readFile(t, logPath)
		if strings.Count(log, `"message":"link measured"`) >= 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the links were not measured in 90 s; the daemon's log:\n%s", log)
		}
		time.Sleep(time.Second)
	}
	log := readFile(t, logPath)
	for _, secret := range []string{strings.TrimSpace(readFile(t, filepath.Join(dir, "data", "token"))), strings.TrimSpace(readFile(t, aliceToken))} {
		if strings.Contains(log, secret) {
			t.Errorf("the daemon's log holds a token")
		}
	}
	if code := d.interrupt(t, time.Minute); code != 0 {
		t.Errorf("the daemon exited %d on SIGINT", code)
	}
}

// startAgentProc runs `bin agent --config file` until the test ends
// (SIGTERM, then SIGKILL, by PID), its log shown if the test fails.
func startAgentProc(t *testing.T, bin, site, file string) {
	t.Helper()
	cmd := exec.Command(bin, "agent", "--config", file, "--log-format", "json")
	cmd.Env = serveEnv()
	stderr := &syncbuf.Buffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }() // stopped by the cleanup: its status says nothing
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM) // fails only if it has exited: done is closed then
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill() // by PID: this test's own child
			<-done
		}
		if t.Failed() {
			t.Logf("agent %s log:\n%s", site, stderr.String())
		}
	})
}
