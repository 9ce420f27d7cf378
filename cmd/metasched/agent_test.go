package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	hp "github.com/metasched/metasched/hypervisorproxy"
	"github.com/metasched/metasched/hypervisorproxy/client"
	"github.com/metasched/metasched/hypervisorproxy/netlab"
)

// helperEnv selects the role of the test binary when a test re-executes it
// inside a network namespace.
const helperEnv = "METASCHED_TEST_PROBE_CLIENT"

// probeJob is what the helper process does: wait for the agents, then ask
// Agent to probe Target.
type probeJob struct {
	Agent, Target, Token string
	Bytes                int64
}

// TestHelperProbeClient is not a test: inside a network namespace it asks an
// agent for a bandwidth probe and prints the result as JSON.
func TestHelperProbeClient(t *testing.T) {
	spec := os.Getenv(helperEnv)
	if spec == "" {
		return
	}
	var job probeJob
	if err := json.Unmarshal([]byte(spec), &job); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(3)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	for _, base := range []string{job.Agent, job.Target} {
		c := client.New(base, job.Token)
		for {
			if _, err := c.Healthz(ctx); err == nil {
				break
			} else if ctx.Err() != nil {
				fmt.Fprintln(os.Stderr, "agent", base, "never answered:", err)
				os.Exit(3)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	p, err := client.New(job.Agent, job.Token).Probe(ctx, hp.ProbeRequest{Target: job.Target, Bytes: job.Bytes})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(3)
	}
	json.NewEncoder(os.Stdout).Encode(p)
	os.Exit(0)
}

// Two agents (the real binary) in their own network namespaces on their
// own addresses, joined by a veth link shaped to 20 Mbit/s with tc: the
// probe from one to the other measures the shaped rate within 15%.
func TestAgentProbeShapedLink(t *testing.T) {
	if err := netlab.Check(); err != nil {
		t.Fatal(err)
	}
	const rate = 20.0
	bin := buildBinary(t)
	pair := netlab.NewPairT(t, netlab.Options{RateMbit: rate})
	dir := t.TempDir()
	token := "probe-token"
	os.WriteFile(filepath.Join(dir, "token"), []byte(token), 0o600)
	grid, err := filepath.Abs(example + "grid-paper.yaml")
	if err != nil {
		t.Fatal(err)
	}
	sites := []string{"latam-a", "spain"}
	var addrs []string
	for i, site := range sites {
		addr := pair.Addr(i) + ":9101"
		addrs = append(addrs, "http://"+addr)
		file := filepath.Join(dir, site+".yaml")
		os.WriteFile(file, []byte(fmt.Sprintf("site: %s\nlisten: %s\ntoken_file: token\ngrid: %s\n", site, addr, grid)), 0o600)
		cmd := pair.Command(context.Background(), i, bin, "agent", "--config", file, "--log-format", "json")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			cmd.Process.Signal(syscall.SIGTERM)
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			select {
			case <-done:
			case <-time.After(15 * time.Second):
				cmd.Process.Kill()
				<-done
				t.Errorf("agent %s did not stop on SIGTERM", site)
			}
			if t.Failed() {
				t.Logf("agent %s log:\n%s", site, stderr.String())
			}
		})
	}
	job, _ := json.Marshal(probeJob{Agent: addrs[0], Target: addrs[1], Token: token, Bytes: 8 << 20})
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
	t.Logf("probe %s -> %s over a %.0f Mbit/s link: %.2f Mbit/s (%d bytes in %.2f s)", sites[0], sites[1], rate, p.Mbps, p.Bytes, p.Seconds)
	if math.Abs(p.Mbps-rate)/rate > 0.15 {
		t.Errorf("measured %.2f Mbit/s, want %.0f within 15%%", p.Mbps, rate)
	}
	if p.Target != addrs[1] || !strings.HasPrefix(p.Target, "http://10.") {
		t.Errorf("probe target %q", p.Target)
	}
}

func TestAgentBadUsage(t *testing.T) {
	dir := t.TempDir()
	write := func(name, data string) string {
		p := filepath.Join(dir, name)
		os.WriteFile(p, []byte(data), 0o600)
		return p
	}
	write("token", "t0k\n")
	write("empty-token", "\n")
	os.WriteFile(filepath.Join(dir, "open-token"), []byte("t0k\n"), 0o644)
	grid, _ := filepath.Abs(example + "grid-paper.yaml")
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
	files, _ := filepath.Glob(example + "site-*.yaml")
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
