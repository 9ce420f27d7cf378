package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	hp "github.com/metasched/metasched/hypervisorproxy"
	"github.com/metasched/metasched/hypervisorproxy/client"
	"github.com/metasched/metasched/hypervisorproxy/netlab"
	"github.com/metasched/metasched/internal/tlsx"
	"github.com/metasched/metasched/internal/tlsx/tlsxtest"
	"github.com/rs/zerolog"
)

// helperEnv selects the role of the test binary when a test re-executes it
// inside a network namespace: a probe's client, or a relay that records
// what crosses it.
const (
	helperEnv = "METASCHED_TEST_PROBE_CLIENT"
	relayEnv  = "METASCHED_TEST_RELAY"
)

// probeJob is what the helper process does: wait for the agents, then ask
// Agent (of site AgentSite) to probe Target (the agent of TargetSite),
// presenting the daemon's certificate.
type probeJob struct {
	Agent, AgentSite, Target, TargetSite string
	Cert, Key, CA                        string
	Bytes                                int64
}

// TestHelperProbeClient is not a test: inside a network namespace it asks an
// agent for a bandwidth probe and prints the result as JSON.
func TestHelperProbeClient(t *testing.T) {
	spec := os.Getenv(helperEnv)
	if spec == "" {
		t.Skip("the probe client TestAgentProbeShapedLink runs, not a test of its own")
	}
	var job probeJob
	if err := json.Unmarshal([]byte(spec), &job); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(3)
	}
	creds, err := tlsx.NewSource(tlsx.Files{Cert: job.Cert, Key: job.Key, CA: job.CA}, tlsx.KindDaemon, zerolog.Nop(), nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(3)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var agent *client.Client
	for _, a := range [][2]string{{job.Target, job.TargetSite}, {job.Agent, job.AgentSite}} {
		c, err := client.NewTLS(a[0], creds, a[1])
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(3)
		}
		for {
			if _, err := c.Inventory(ctx); err == nil {
				break
			} else if ctx.Err() != nil {
				fmt.Fprintln(os.Stderr, "agent", a[0], "never answered:", err)
				os.Exit(3)
			}
			time.Sleep(100 * time.Millisecond)
		}
		agent = c
	}
	p, err := agent.Probe(ctx, hp.ProbeRequest{Target: job.Target, Site: job.TargetSite, Bytes: job.Bytes})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(3)
	}
	if err := json.NewEncoder(os.Stdout).Encode(p); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(3)
	}
	os.Exit(0)
}

// relayJob is a TCP relay: connections to Listen go on to Target, and
// the bytes the clients send are appended to Capture.
type relayJob struct{ Listen, Target, Capture string }

// TestHelperRelay is not a test: inside a network namespace it relays
// TCP connections and records what the clients send, until killed.
func TestHelperRelay(t *testing.T) {
	spec := os.Getenv(relayEnv)
	if spec == "" {
		t.Skip("the relay TestAgentProbeShapedLink runs, not a test of its own")
	}
	var job relayJob
	if err := json.Unmarshal([]byte(spec), &job); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(3)
	}
	ln, err := net.Listen("tcp", job.Listen)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(3)
	}
	capture, err := os.OpenFile(job.Capture, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(3)
	}
	var mu sync.Mutex
	for {
		c, err := ln.Accept()
		if err != nil {
			os.Exit(3)
		}
		go func() {
			defer c.Close()
			up, err := net.Dial("tcp", job.Target)
			if err != nil {
				return
			}
			defer up.Close()
			go func() { _, _ = io.Copy(c, up) }() // the answers: the client's side checks them
			buf := make([]byte, 64<<10)
			for {
				n, err := c.Read(buf)
				if n > 0 {
					mu.Lock()
					if _, err := capture.Write(buf[:n]); err != nil {
						fmt.Fprintln(os.Stderr, err)
						os.Exit(3)
					}
					mu.Unlock()
					if _, werr := up.Write(buf[:n]); werr != nil {
						return
					}
				}
				if err != nil {
					return
				}
			}
		}()
	}
}

// Two agents (the real binary) in their own network namespaces on their
// own addresses, joined by a veth link shaped to 20 Mbit/s with tc, each
// with its certificate of the test's CA: the probe from one to the other
// goes over mutual TLS, through a relay on the path that records every
// byte the sender sends, and measures the shaped rate within 15%. What
// the relay saw is TLS records, not a byte of HTTP, and the agents hold
// no token that could travel; the probe request names the target's site
// and carries no credential.
func TestAgentProbeShapedLink(t *testing.T) {
	if err := netlab.Check(); err != nil {
		t.Fatal(err)
	}
	const rate = 20.0
	bin := buildBinary(t)
	pair := netlab.NewPairT(t, netlab.Options{RateMbit: rate})
	dir := t.TempDir()
	pki := tlsxtest.New(t)
	grid, err := filepath.Abs(example + "grid-paper.yaml")
	if err != nil {
		t.Fatal(err)
	}
	sites := []string{"latam-a", "spain"}
	var addrs []string
	for i, site := range sites {
		addr := pair.Addr(i) + ":9101"
		addrs = append(addrs, "https://"+addr)
		f := pki.Issue(t, "agent-"+site, tlsx.Request{Identity: tlsx.Agent(site), Hosts: []string{pair.Addr(i)}})
		file := filepath.Join(dir, site+".yaml")
		if err := os.WriteFile(file, []byte(fmt.Sprintf("site: %s\nlisten: %s\ntls: {cert_file: %s, key_file: %s, ca_file: %s}\ngrid: %s\n",
			site, addr, f.Cert, f.Key, f.CA, grid)), 0o600); err != nil {
			t.Fatal(err)
		}
		cmd := pair.Command(context.Background(), i, bin, "agent", "--config", file, "--log-format", "json")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = cmd.Process.Signal(syscall.SIGTERM) // fails only if it has exited: the wait below sees that
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			select {
			case <-done:
			case <-time.After(15 * time.Second):
				_ = cmd.Process.Kill() // by PID: this test's own child; the error below says why
				<-done
				t.Errorf("agent %s did not stop on SIGTERM", site)
			}
			if t.Failed() {
				t.Logf("agent %s log:\n%s", site, stderr.String())
			}
		})
	}
	// The relay stands on spain's side of the link, at spain's address.
	capture := filepath.Join(dir, "capture")
	relayAddr := pair.Addr(1) + ":9201"
	rj, err := json.Marshal(relayJob{Listen: relayAddr, Target: pair.Addr(1) + ":9101", Capture: capture})
	if err != nil {
		t.Fatal(err)
	}
	relay := pair.Command(context.Background(), 1, os.Args[0], "-test.run=^TestHelperRelay$")
	relay.Env = append(os.Environ(), relayEnv+"="+string(rj))
	if err := relay.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = relay.Process.Kill() // by PID: this test's own child, which runs until killed
		_ = relay.Wait()         // the kill is its exit status
	})

	d := pki.Issue(t, "daemon", tlsx.Request{Identity: tlsx.Daemon()})
	target := "https://" + relayAddr
	req := hp.ProbeRequest{Target: target, Site: "spain", Bytes: 8 << 20}
	body, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(bytes.ToLower(body), []byte("token")) {
		t.Errorf("the probe request carries a token field: %s", body)
	}
	job, err := json.Marshal(probeJob{Agent: addrs[0], AgentSite: sites[0], Target: target, TargetSite: sites[1],
		Cert: d.Cert, Key: d.Key, CA: d.CA, Bytes: req.Bytes})
	if err != nil {
		t.Fatal(err)
	}
	cmd := pair.Command(context.Background(), 0, os.Args[0], "-test.run=^TestHelperProbeClient$")
	cmd.Env = append(os.Environ(), helperEnv+"="+string(job))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("probe client: %v\n%s", err, stderr.String())
	}
	var p hp.Probe
	if err := json.Unmarshal(stdout.Bytes(), &p); err != nil {
		t.Fatalf("probe client output %q: %v", stdout.String(), err)
	}
	t.Logf("probe %s -> %s over a %.0f Mbit/s link, over mutual TLS: %.2f Mbit/s (%d bytes in %.2f s)", sites[0], sites[1], rate, p.Mbps, p.Bytes, p.Seconds)
	if math.Abs(p.Mbps-rate)/rate > 0.15 {
		t.Errorf("measured %.2f Mbit/s, want %.0f within 15%%", p.Mbps, rate)
	}
	if p.Target != target {
		t.Errorf("probe target %q, want %q", p.Target, target)
	}
	seen, err := os.ReadFile(capture)
	if err != nil {
		t.Fatal(err)
	}
	// A TLS handshake record (0x16, version 3.x) opens the stream, and
	// nothing readable crosses: no request line, header or token.
	if len(seen) < int(req.Bytes) || seen[0] != 0x16 || seen[1] != 0x03 {
		t.Fatalf("the relay saw %d bytes starting %x: want the probe's stream over TLS", len(seen), seen[:min(len(seen), 8)])
	}
	for _, clear := range []string{"PUT /v1/probe/sink", "Authorization", "Bearer", "metasched bandwidth probe"} {
		if bytes.Contains(seen, []byte(clear)) {
			t.Errorf("the relay saw %q in clear", clear)
		}
	}
}

func TestAgentBadUsage(t *testing.T) {
	dir := t.TempDir()
	write := func(name, data string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	write("token", "t0k\n")
	write("empty-token", "\n")
	if err := os.WriteFile(filepath.Join(dir, "open-token"), []byte("t0k\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	grid, err := filepath.Abs(example + "grid-paper.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no config", []string{"agent"}, "--config: required"},
		{"missing config", []string{"agent", "--config", filepath.Join(dir, "nope.yaml")}, "--config: open"},
		{"bad field", []string{"agent", "--config", write("a.yaml", "site: spain\ntoken_file: token\ngrid: "+grid+"\nport: 1\n")}, "a.yaml: port: unknown field"},
		{"missing token file", []string{"agent", "--config", write("b.yaml", "site: spain\ntoken_file: nope\ninsecure_http: true\ngrid: "+grid+"\n")}, "b.yaml: token_file: open"},
		{"empty token", []string{"agent", "--config", write("c.yaml", "site: spain\ntoken_file: empty-token\ninsecure_http: true\ngrid: "+grid+"\n")}, "c.yaml: token_file: " + filepath.Join(dir, "empty-token") + ": the token file is empty"},
		{"open token", []string{"agent", "--config", write("c2.yaml", "site: spain\ntoken_file: open-token\ninsecure_http: true\ngrid: "+grid+"\n")},
			"c2.yaml: token_file: " + filepath.Join(dir, "open-token") + ": the token file may be read by its group or others (mode 0644)"},
		{"unknown site", []string{"agent", "--config", write("d.yaml", "site: mars\ntoken_file: token\ninsecure_http: true\ngrid: "+grid+"\n")}, `d.yaml: site: site "mars": not found: no such cluster in the grid`},
		{"no tls", []string{"agent", "--config", write("g.yaml", "site: spain\ngrid: "+grid+"\n")}, "g.yaml: tls: is required"},
		{"missing certificate", []string{"agent", "--config", write("h.yaml", "site: spain\ngrid: "+grid+"\ntls: {cert_file: none.pem, key_file: none-key.pem, ca_file: ca.pem}\n")},
			"h.yaml: tls: cert_file: stat " + filepath.Join(dir, "none.pem") + ": no such file or directory"},
		{"a site twice", []string{"agent", "--config", write("i.yaml", "site: spain\ntoken_file: token\ninsecure_http: true\ngrid: "+grid+"\n"),
			"--config", write("j.yaml", "site: spain\ntoken_file: token\ninsecure_http: true\ngrid: "+grid+"\nlisten: 127.0.0.1:9102\n")},
			`j.yaml: site: "spain" is ` + filepath.Join(dir, "i.yaml") + "'s too: a site has one agent"},
		{"a data directory twice", []string{"agent", "--config", write("k.yaml", "site: spain\ntoken_file: token\ninsecure_http: true\ngrid: "+grid+"\ndata_dir: d\n"),
			"--config", write("l.yaml", "site: latam-a\ntoken_file: token\ninsecure_http: true\ngrid: "+grid+"\ndata_dir: d\n")},
			"l.yaml: data_dir: " + filepath.Join(dir, "d") + " is " + filepath.Join(dir, "k.yaml") + "'s too"},
		{"bad log level", []string{"agent", "--config", write("e.yaml", "site: spain\ntoken_file: token\ngrid: "+grid+"\n"), "--log-level", "loud"}, `--log-level: must be debug, info, warn or error, not "loud"`},
		{"bad log format", []string{"agent", "--config", write("f.yaml", "site: spain\ntoken_file: token\ngrid: "+grid+"\n"), "--log-format", "xml"}, `--log-format: must be json, console or auto, not "xml"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := runCmd(t, tc.args...)
			if code != exitUsage || !strings.Contains(stderr, tc.want) || stdout != "" {
				t.Errorf("exit %d, stderr %q; want %d and %q", code, stderr, exitUsage, tc.want)
			}
		})
	}
}

// The example site files stay valid.
func TestExampleSites(t *testing.T) {
	files, err := filepath.Glob(example + "site-*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 2 {
		t.Fatalf("example site files: %v", files)
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := hp.ParseSite(f, data); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
}
