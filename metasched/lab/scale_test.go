package lab

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/metasched/metasched/graph"
	hp "github.com/metasched/metasched/hypervisorproxy"
	"github.com/metasched/metasched/metasched"
)

// The agents' shares are consecutive clusters, every cluster in exactly
// one, their sizes differing by at most one.
func TestScaleShares(t *testing.T) {
	for _, tc := range []struct {
		clusters, n int
		want        [][]string
	}{
		{3, 1, [][]string{{"c0", "c1", "c2"}}},
		{3, 2, [][]string{{"c0"}, {"c1", "c2"}}},
		{3, 3, [][]string{{"c0"}, {"c1"}, {"c2"}}},
		{7, 3, [][]string{{"c0", "c1"}, {"c2", "c3"}, {"c4", "c5", "c6"}}},
	} {
		if d := cmp.Diff(tc.want, ScaleShares(tc.clusters, tc.n)); d != "" {
			t.Errorf("%d clusters, %d agents (-want +got):\n%s", tc.clusters, tc.n, d)
		}
	}
	// The 1,000-host row's 31 clusters on 10 agents: 3 or 4 each.
	_, clusters := ScaleGrid(1000, 1)
	seen := 0
	for k, sh := range ScaleShares(clusters, 10) {
		if len(sh) != 3 && len(sh) != 4 {
			t.Errorf("agent %d serves %d clusters of %d: %v", k, len(sh), clusters, sh)
		}
		for _, c := range sh {
			if want := scaleCluster(seen); c != want {
				t.Errorf("agent %d serves %s, want %s next", k, c, want)
			}
			seen++
		}
	}
	if seen != clusters {
		t.Errorf("the shares hold %d clusters, want %d", seen, clusters)
	}
}

// A row's serve.yaml: in-process sites on bbolt (plain HTTP on loopback,
// as before the options), and remote agents over TLS on etcd (the
// daemon's certificate, an agent per cluster, no calibration of the
// simulated hosts); both parse as the daemon reads them, and so do the
// agents' site files.
func TestScaleFiles(t *testing.T) {
	dir := t.TempDir()
	grid, clusters := ScaleGrid(100, 1)
	if err := os.WriteFile(filepath.Join(dir, "grid.yaml"), []byte(grid), 0o600); err != nil {
		t.Fatal(err)
	}
	common := `data_dir: daemon
grid: grid.yaml
job_types:
  - {name: a, vm: {vcpus: 1, memory_mib: 1024}}
  - {name: b, vm: {vcpus: 1, memory_mib: 1024}}
policy: {name: none}
executor: {name: emulated, time_scale: 0.0001}
`
	var agents []*Agent
	for i := range clusters {
		site := scaleCluster(i)
		agents = append(agents, &Agent{Site: site, URL: fmt.Sprintf("https://127.0.0.1:%d", 9100+i)})
	}
	for _, tc := range []struct {
		name string
		s    scaleServe
		want string
	}{
		{"bbolt, in-process", scaleServe{Port: 8080}, "listen: 127.0.0.1:8080\ninsecure_http: true\n" + common},
		{"etcd, agents", scaleServe{Port: 8080, Etcd: "http://127.0.0.1:2379", Agents: agents},
			"listen: 127.0.0.1:8080\ntls: {cert_file: daemon.pem, key_file: daemon-key.pem, ca_file: ca.pem}\n" + common + `agents:
  - {site: c0, address: https://127.0.0.1:9100}
  - {site: c1, address: https://127.0.0.1:9101}
  - {site: c2, address: https://127.0.0.1:9102}
calibration: {auto: false}
store: {etcd: {endpoints: [http://127.0.0.1:2379], prefix: /metasched/}}
`},
	} {
		got := tc.s.file()
		if d := cmp.Diff(tc.want, got); d != "" {
			t.Errorf("%s: serve.yaml (-want +got):\n%s", tc.name, d)
		}
		c, err := metasched.ParseConfig(filepath.Join(dir, "serve.yaml"), []byte(got))
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if len(c.Agents) != len(tc.s.Agents) || (c.Store != nil) != (tc.s.Etcd != "") {
			t.Errorf("%s: the daemon reads %d agents and store %+v", tc.name, len(c.Agents), c.Store)
		}
	}

	g, err := graph.ParseGrid("grid.yaml", []byte(grid))
	if err != nil {
		t.Fatal(err)
	}
	text := scaleSite("c1", 9101)
	want := `site: c1
listen: 127.0.0.1:9101
tls: {cert_file: agent-c1.pem, key_file: agent-c1-key.pem, ca_file: ca.pem}
grid: grid.yaml
data_dir: agent-c1
`
	if d := cmp.Diff(want, text); d != "" {
		t.Errorf("site file (-want +got):\n%s", d)
	}
	s, err := hp.ParseSite(filepath.Join(dir, "site-c1.yaml"), []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	hosts, _, err := hp.GenerateHosts(g, s.Site, "", func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	if c, _ := g.Index("c1"); len(hosts) != g.Clusters[c].Machines || !strings.HasPrefix(hosts[0].URI, "sim:") {
		t.Errorf("the agent of c1 makes %d hosts (the first %+v), want the cluster's %d simulated machines", len(hosts), hosts[0], g.Clusters[c].Machines)
	}
}

// Bad options are refused before anything runs, each naming its field.
func TestScaleOptionsRefused(t *testing.T) {
	_, clusters := ScaleGrid(100, 1)
	for _, tc := range []struct {
		opt  ScaleOptions
		want string
	}{
		{ScaleOptions{Store: "sqlite"}, `scale: store: "sqlite" is none of bbolt, etcd`},
		{ScaleOptions{Agents: -1}, "scale: agents: -1 is negative"},
		{ScaleOptions{Agents: clusters + 1, Seed: 1, Rows: []ScaleRow{{Hosts: 1000}, {Hosts: 100}}},
			fmt.Sprintf("scale: agents: %d agents for the %d clusters of 100 hosts: at most one a cluster", clusters+1, clusters)},
	} {
		tc.opt.Dir = t.TempDir()
		_, err := RunScale(t.Context(), tc.opt)
		if err == nil || err.Error() != tc.want {
			t.Errorf("%+v: %v, want %q", tc.opt, err, tc.want)
		}
	}
}

// procUsage reads a process's CPU time and memory: this one's.
func TestProcUsage(t *testing.T) {
	cpu, rss, err := procUsage(os.Getpid())
	if err != nil || cpu < 0 || rss < 1<<20 {
		t.Errorf("this process: %g s of CPU, %g bytes resident, %v", cpu, rss, err)
	}
	if _, _, err := procUsage(0); err == nil {
		t.Error("process 0 has a usage")
	}
}
