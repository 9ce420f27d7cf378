package hypervisorproxy_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/rs/zerolog"

	"github.com/metasched/metasched/graph"
	hp "github.com/metasched/metasched/hypervisorproxy"
	"github.com/metasched/metasched/hypervisorproxy/client"
	"github.com/metasched/metasched/hypervisorproxy/virt"
)

const testGrid = `
clusters:
  - {name: lab, machines: 2, cores: 4, memory_mib: 8192, perf: 1.0e9, lan_mbps: 1000, uplink_mbps: 100}
  - {name: far, machines: 1, cores: 2, memory_mib: 2048, perf: 1.0e9, lan_mbps: 1000, uplink_mbps: 100}
links:
  - {between: [lab, far], mbps: 10}
`

const testToken = "s3cret-token"

type harness struct {
	agent  *hp.Agent
	srv    *httptest.Server
	client *client.Client
	dir    string
}

// startAgent runs an agent for site "lab" of testGrid (two generated
// test-driver hosts of 4 CPUs and 8 GiB) behind an HTTP test server. extra
// is appended to the site file.
func startAgent(t testing.TB, dir, extra string) *harness {
	t.Helper()
	if dir == "" {
		dir = t.TempDir()
	}
	site, g := labSite(t, dir, extra)
	log := zerolog.Nop() // benchmarks
	if _, ok := t.(*testing.T); ok {
		log = zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.InfoLevel)
	}
	h := serveAgent(t, hp.Config{Site: site, Token: testToken, Grid: g, Connect: virt.Connector(log), Logger: log})
	h.dir = dir
	return h
}

// labSite writes, in dir, the site file of site "lab" of testGrid (its
// hosts generated from the grid, in pool render) with extra appended, its
// token and the grid, and returns the parsed site file and grid.
func labSite(t testing.TB, dir, extra string) (*hp.Site, *graph.Grid) {
	t.Helper()
	for name, data := range map[string]string{"grid.yaml": testGrid, "token": testToken + "\n",
		"site.yaml": "site: lab\ntoken_file: token\ninsecure_http: true\ngrid: grid.yaml\npool: render\n" + extra} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	data, err := os.ReadFile(filepath.Join(dir, "site.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	site, err := hp.ParseSite(filepath.Join(dir, "site.yaml"), data)
	if err != nil {
		t.Fatal(err)
	}
	g, err := graph.ParseGrid("grid.yaml", []byte(testGrid))
	if err != nil {
		t.Fatal(err)
	}
	return site, g
}

// serveAgent starts an agent behind an HTTP test server with a client
// for it; both stop when the test ends.
func serveAgent(t testing.TB, cfg hp.Config) *harness {
	t.Helper()
	a, err := hp.New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(a.Handler())
	h := &harness{agent: a, srv: srv, client: client.New(srv.URL, cfg.Token)}
	t.Cleanup(h.stop)
	return h
}

func (h *harness) stop() {
	h.srv.Close()
	_ = h.agent.Close() // closes the hypervisor connections: nothing a test checks is lost
}

// hostView is what tests compare of a host.
type hostView struct {
	Name, Pool         string
	State              hp.HostState
	FreeVCPUs, FreeMiB int
	VMs                []string
}

func view(t *testing.T, c *client.Client) []hostView {
	t.Helper()
	inv, err := c.Inventory(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var out []hostView
	for _, h := range inv.Hosts {
		v := hostView{Name: h.Name, Pool: h.Pool, State: h.State, FreeVCPUs: h.FreeVCPUs, FreeMiB: h.FreeMemoryMiB, VMs: []string{}}
		for _, vm := range h.VMs {
			v.VMs = append(v.VMs, vm.Name)
		}
		out = append(out, v)
	}
	return out
}

func TestAgentLifecycle(t *testing.T) {
	ctx := context.Background()
	h := startAgent(t, "", "")
	c := h.client
	if site, err := c.Healthz(ctx); err != nil || site != "lab" {
		t.Fatalf("healthz = %q, %v", site, err)
	}
	inv, err := c.Inventory(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if inv.Site != "lab" || len(inv.Hosts) != 2 || inv.Hosts[0].CPUs != 4 || inv.Hosts[0].MemoryMiB != 8192 ||
		!strings.HasPrefix(inv.Hosts[0].URI, "test:///") {
		t.Fatalf("inventory = %+v", inv)
	}
	for _, h := range inv.Hosts {
		if !h.VCPUUnplug {
			t.Errorf("test-driver host %s: vcpu_unplug false, want true (the test driver unplugs vCPUs)", h.Name)
		}
	}
	empty := []hostView{
		{Name: "lab-0", Pool: "render", State: hp.HostReady, FreeVCPUs: 4, FreeMiB: 8192, VMs: []string{}},
		{Name: "lab-1", Pool: "render", State: hp.HostReady, FreeVCPUs: 4, FreeMiB: 8192, VMs: []string{}},
	}
	if diff := cmp.Diff(empty, view(t, c)); diff != "" {
		t.Fatalf("inventory before (-want +got):\n%s", diff)
	}

	// Placement: the most free vCPUs, ties to the first host.
	vm1, err := c.Create(ctx, hp.VMSpec{Name: "vm-1", Job: "job-1", VCPUs: 2, MaxVCPUs: 4, MemoryMiB: 1024, MaxMemoryMiB: 2048})
	if err != nil {
		t.Fatal(err)
	}
	want1 := hp.VM{Name: "vm-1", Host: "lab-0", Pool: "render", Job: "job-1", State: hp.StateRunning, VCPUs: 2, MaxVCPUs: 4,
		MemoryMiB: 1024, MaxMemoryMiB: 2048, Managed: true}
	if diff := cmp.Diff(want1, vm1); diff != "" {
		t.Errorf("create vm-1 (-want +got):\n%s", diff)
	}
	vm2, err := c.Create(ctx, hp.VMSpec{Name: "vm-2", Job: "job-1", VCPUs: 1, MemoryMiB: 512})
	if err != nil {
		t.Fatal(err)
	}
	if vm2.Host != "lab-1" || vm2.MaxVCPUs != 1 || vm2.MaxMemoryMiB != 512 {
		t.Errorf("vm-2 = %+v, want it on lab-1 with maxima equal to its sizes", vm2)
	}
	after := []hostView{
		{Name: "lab-0", Pool: "render", State: hp.HostReady, FreeVCPUs: 2, FreeMiB: 7168, VMs: []string{"vm-1"}},
		{Name: "lab-1", Pool: "render", State: hp.HostReady, FreeVCPUs: 3, FreeMiB: 7680, VMs: []string{"vm-2"}},
	}
	if diff := cmp.Diff(after, view(t, c)); diff != "" {
		t.Errorf("inventory after creates (-want +got):\n%s", diff)
	}

	// Resize within the limits, read back.
	got, err := c.Resize(ctx, "vm-1", hp.Resize{VCPUs: 4, MemoryMiB: 2048})
	if err != nil || got.VCPUs != 4 || got.MemoryMiB != 2048 {
		t.Errorf("resize to 4 vcpus, 2048 MiB = %+v, %v", got, err)
	}
	if got, err = c.Resize(ctx, "vm-1", hp.Resize{MemoryMiB: 1536}); err != nil || got.VCPUs != 4 || got.MemoryMiB != 1536 {
		t.Errorf("shrink memory = %+v, %v", got, err)
	}
	// Beyond the maxima: 422, unchanged.
	if _, err = c.Resize(ctx, "vm-1", hp.Resize{VCPUs: 5}); !errors.Is(err, hp.ErrLimit) {
		t.Errorf("resize beyond max_vcpus: err = %v, want ErrLimit", err)
	}
	if _, err = c.Resize(ctx, "vm-1", hp.Resize{MemoryMiB: 4096}); !errors.Is(err, hp.ErrLimit) {
		t.Errorf("resize beyond max_memory_mib: err = %v, want ErrLimit", err)
	}
	got, err = c.VM(ctx, "vm-1")
	if err != nil {
		t.Fatal(err)
	}
	if got.VCPUs != 4 || got.MemoryMiB != 1536 {
		t.Errorf("after refused resizes vm-1 = %+v", got)
	}

	// The test driver unplugs vCPUs.
	if got, err = c.Resize(ctx, "vm-1", hp.Resize{VCPUs: 3}); err != nil || got.VCPUs != 3 {
		t.Errorf("resize to 3 vcpus = %+v, %v", got, err)
	}
	// A move between test hosts is not live; the capacity follows the VM.
	m, err := c.Migrate(ctx, "vm-2", "lab-0")
	if err != nil {
		t.Fatal(err)
	}
	if m.Live || m.From != "lab-1" || m.To != "lab-0" || m.VM.Host != "lab-0" || m.VM.State != hp.StateRunning {
		t.Errorf("migration = %+v", m)
	}
	// lab-0 is now full on vCPUs: a new VM must go to lab-1, and cannot
	// move to lab-0.
	vm3, err := c.Create(ctx, hp.VMSpec{Name: "vm-3", VCPUs: 2, MemoryMiB: 256})
	if err != nil || vm3.Host != "lab-1" {
		t.Errorf("vm-3 = %+v, %v; want it on lab-1", vm3, err)
	}
	if _, err := c.Migrate(ctx, "vm-3", "lab-0"); !errors.Is(err, hp.ErrCapacity) {
		t.Errorf("migrate onto a full host: err = %v, want ErrCapacity", err)
	}
	for _, n := range []string{"vm-1", "vm-2", "vm-3"} {
		if err := c.Destroy(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	if diff := cmp.Diff(empty, view(t, c)); diff != "" {
		t.Errorf("inventory after destroys (-want +got):\n%s", diff)
	}
}

// keepSpec is the VM the agent of TestAgentBadRequests and FuzzAgentAPI
// runs: it lands on lab-0.
var keepSpec = hp.VMSpec{Name: "keep", Job: "j", VCPUs: 1, MaxVCPUs: 2, MemoryMiB: 256}

// agentBadRequests are requests the agent refuses (with an agent that runs
// keepSpec), with the status and a part of the message
// (TestAgentBadRequests), and seeds of FuzzAgentAPI. A token "" is the
// agent's, "-" none.
var agentBadRequests = []badRequest{
	{"no token", "GET", "/v1/inventory", "", "-", 401, "missing bearer token"},
	{"wrong token", "GET", "/v1/inventory", "", "nope", 401, "wrong bearer token"},
	{"wrong token on create", "POST", "/v1/vms", `{"name":"x","vcpus":1,"memory_mib":64}`, "nope", 401, "wrong bearer token"},
	{"unknown vm", "GET", "/v1/vms/ghost", "", "", 404, `vm "ghost": not found`},
	{"destroy unknown vm", "DELETE", "/v1/vms/ghost", "", "", 404, "destroy vm ghost: not found"},
	{"resize unknown vm", "POST", "/v1/vms/ghost/resize", `{"vcpus":2}`, "", 404, "resize vm ghost: not found"},
	{"negative vcpus", "POST", "/v1/vms", `{"name":"x","vcpus":-1,"memory_mib":64}`, "", 400, "vcpus: must be >= 1, not -1"},
	{"negative memory", "POST", "/v1/vms", `{"name":"x","vcpus":1,"memory_mib":-5}`, "", 400, "memory_mib: must be >= 1, not -5"},
	{"negative walltime", "POST", "/v1/vms", `{"name":"x","vcpus":1,"memory_mib":64,"walltime_seconds":-1}`, "", 400, "walltime_seconds: must be from 0 (none) to 31622400, not -1"},
	{"walltime over a year", "POST", "/v1/vms", `{"name":"x","vcpus":1,"memory_mib":64,"walltime_seconds":99999999}`, "", 400, "walltime_seconds: must be from 0 (none) to 31622400, not 99999999"},
	{"negative resize", "POST", "/v1/vms/keep/resize", `{"vcpus":-2}`, "", 400, "vcpus: must be >= 1, not -2"},
	{"empty resize", "POST", "/v1/vms/keep/resize", `{}`, "", 400, "give at least one"},
	{"max below current", "POST", "/v1/vms", `{"name":"x","vcpus":4,"max_vcpus":2,"memory_mib":64}`, "", 400, "max_vcpus: must be >= vcpus (4), not 2"},
	{"bad name", "POST", "/v1/vms", `{"name":"a b","vcpus":1,"memory_mib":64}`, "", 400, "name:"},
	{"bad ssh key", "POST", "/v1/vms", `{"name":"x","vcpus":1,"memory_mib":64,"ssh_authorized_keys":["ssh-ed25519 nope"]}`, "", 400,
		"ssh_authorized_keys[0]: not an ssh public key"},
	{"ssh key with options", "POST", "/v1/vms", `{"name":"x","vcpus":1,"memory_mib":64,"ssh_authorized_keys":["command=\"sh\" ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHk0RSsbkSP5D37Gc6fdqaWtGIYB5hWQ/xW6DFqYxkYZ"]}`, "", 400,
		"ssh_authorized_keys[0]: must have no options"},
	{"over capacity", "POST", "/v1/vms", `{"name":"big","vcpus":5,"memory_mib":64}`, "", 409, "not enough free capacity for 5 vcpus and 64 MiB: lab-0 has 3 vcpus and 7936 MiB free; lab-1 has 4 vcpus and 8192 MiB free"},
	{"over capacity on a host", "POST", "/v1/vms", `{"name":"big","host":"lab-1","vcpus":1,"memory_mib":9000}`, "", 409, "lab-1 has 4 vcpus and 8192 MiB free"},
	{"unknown host", "POST", "/v1/vms", `{"name":"x","host":"lab-9","vcpus":1,"memory_mib":64}`, "", 404, `host "lab-9": not found in site lab`},
	{"wrong pool", "POST", "/v1/vms", `{"name":"x","host":"lab-1","pool":"batch","vcpus":1,"memory_mib":64}`, "", 409, `host lab-1 is in pool "render", not "batch"`},
	{"name taken", "POST", "/v1/vms", `{"name":"keep","vcpus":1,"memory_mib":64}`, "", 409, "create vm keep: already exists"},
	{"resize beyond max", "POST", "/v1/vms/keep/resize", `{"vcpus":3}`, "", 422, "beyond the vm's maximum (max_vcpus 2"},
	{"migrate to unknown host", "POST", "/v1/vms/keep/migrate", `{"host":"mars-1"}`, "", 404, `host "mars-1": not found in site lab`},
	{"migrate without host", "POST", "/v1/vms/keep/migrate", `{}`, "", 400, "host: is required"},
	{"migrate to itself", "POST", "/v1/vms/keep/migrate", `{"host":"lab-0"}`, "", 400, "the vm is on lab-0 already"},
	{"migrate unknown vm", "POST", "/v1/vms/ghost/migrate", `{"host":"lab-1"}`, "", 404, "migrate vm ghost: not found"},
	{"unknown field", "POST", "/v1/vms", `{"name":"x","vcpus":1,"memory_mib":64,"gpus":1}`, "", 400, `unknown field "gpus"`},
	{"wrong type", "POST", "/v1/vms", `{"name":"x","vcpus":"two","memory_mib":64}`, "", 400, "vcpus: must be a int, not a JSON string"},
	{"not json", "POST", "/v1/vms", `{"name":`, "", 400, "invalid request"},
	{"empty body", "POST", "/v1/vms", ``, "", 400, "the body is empty"},
	{"reconfigure unknown host", "POST", "/v1/hosts/lab-7/reconfigure", `{"pool":"batch"}`, "", 404, `reconfigure host "lab-7": not found`},
	{"reconfigure without pool", "POST", "/v1/hosts/lab-1/reconfigure", `{}`, "", 400, "pool: is required"},
	{"reconfigure to a pool that is no name", "POST", "/v1/hosts/lab-1/reconfigure", `{"pool":"19A"}`, "", 400, `pool: must be a pool name (a-z, 0-9, -) of at most 256 characters, not "19A"`},
	{"reconfigure to a long pool", "POST", "/v1/hosts/lab-1/reconfigure", `{"pool":"` + strings.Repeat("p", 257) + `"}`, "", 400, "pool: must be a pool name"},
	{"reconfigure a held host", "POST", "/v1/hosts/lab-0/reconfigure", `{"pool":"batch"}`, "", 409, `jobs not released: keep (job "j")`},
	{"reconfigure with a stale pool", "POST", "/v1/hosts/lab-1/reconfigure", `{"pool":"batch","expect_pool":"web"}`, "", 409, `the host is in pool "render", not "web"`},
	{"probe without target", "POST", "/v1/probe", `{}`, "", 400, "target: must be an agent's address"},
	{"probe too big", "POST", "/v1/probe", `{"target":"http://127.0.0.1:1","bytes":99999999999}`, "", 400, "bytes: must be within"},
	{"probe bad timeout", "POST", "/v1/probe", `{"target":"http://127.0.0.1:1","timeout":"soon"}`, "", 400, `timeout: must be a duration`},
	{"unknown route", "GET", "/v1/nothing", "", "", 404, "no route GET /v1/nothing"},
	{"reconfigure with a control character", "POST", "/v1/hosts/lab-1/reconfigure", `{"pool":"a\u0007b"}`, "", 400, "pool: must be a pool name"},
	{"reconfigure with a 10,001-byte pool", "POST", "/v1/hosts/lab-1/reconfigure", `{"pool":"` + strings.Repeat("p", 10001) + `"}`, "", 400, "pool: must be a pool name"},
	{"reconfigure releasing too many", "POST", "/v1/hosts/lab-1/reconfigure", `{"pool":"batch","released":[` + strings.Repeat(`"j",`, 100000) + `"j"]}`, "", 400, "released: at most 1024 jobs, not 100001"},
	{"reconfigure releasing an empty job", "POST", "/v1/hosts/lab-1/reconfigure", `{"pool":"batch","released":["j",""]}`, "", 400, "released[1]: must not be empty"},
}

// badRequest is a request the agent must refuse: with the test's token
// when token is "", none when it is "-", else token; the answer must have
// the status and an error message containing msg.
type badRequest struct {
	name, method, path, body, token string
	status                          int
	msg                             string
}

// Bad requests get a 4xx with a clear message and change nothing.
func TestAgentBadRequests(t *testing.T) { checkBadRequests(t, agentBadRequests) }

// checkBadRequests sends each request to an agent that has one VM and
// checks the answers, and that they changed nothing.
func checkBadRequests(t *testing.T, cases []badRequest) {
	ctx := context.Background()
	h := startAgent(t, "", "")
	if _, err := h.client.Create(ctx, keepSpec); err != nil {
		t.Fatal(err)
	}
	before := view(t, h.client)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequest(tc.method, h.srv.URL+tc.path, strings.NewReader(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			switch tc.token {
			case "":
				req.Header.Set("Authorization", "Bearer "+testToken)
			case "-":
			default:
				req.Header.Set("Authorization", "Bearer "+tc.token)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var e hp.APIError
			if err := json.NewDecoder(resp.Body).Decode(&e); err != nil {
				t.Fatalf("%s %s: answer %d: %v", tc.method, tc.path, resp.StatusCode, err)
			}
			if resp.StatusCode != tc.status || !strings.Contains(e.Error, tc.msg) {
				t.Errorf("%s %s: %d %q, want %d and a message containing %q", tc.method, tc.path, resp.StatusCode, e.Error, tc.status, tc.msg)
			}
		})
	}
	if diff := cmp.Diff(before, view(t, h.client)); diff != "" {
		t.Errorf("bad requests changed the inventory (-before +after):\n%s", diff)
	}
}

// BenchmarkAgentCreateDestroy is one VM created, started and destroyed
// through the agent's HTTP API on a test-driver host.
func BenchmarkAgentCreateDestroy(b *testing.B) {
	c := startAgent(b, "", "").client
	ctx := context.Background()
	var create, destroy time.Duration
	for b.Loop() {
		t0 := time.Now()
		if _, err := c.Create(ctx, hp.VMSpec{Name: "bench", Host: "lab-0", VCPUs: 2, MemoryMiB: 1024}); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if err := c.Destroy(ctx, "bench"); err != nil {
			b.Fatal(err)
		}
		create += t1.Sub(t0)
		destroy += time.Since(t1)
	}
	b.ReportMetric(float64(create.Microseconds())/float64(b.N), "create-µs/op")
	b.ReportMetric(float64(destroy.Microseconds())/float64(b.N), "destroy-µs/op")
}
