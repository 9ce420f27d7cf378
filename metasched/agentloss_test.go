package metasched_test

import (
	"context"
	"io"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/metasched/metasched/graph"
	hp "github.com/metasched/metasched/hypervisorproxy"
	"github.com/metasched/metasched/hypervisorproxy/virt"
	"github.com/metasched/metasched/internal/tlsx"
	"github.com/metasched/metasched/internal/tlsx/tlsxtest"
	"github.com/metasched/metasched/metasched"
	"github.com/metasched/metasched/metasched/api"
	"github.com/metasched/metasched/metasched/demo"
	"github.com/metasched/metasched/metasched/jobfile"
)

// remoteAgent is a site agent served over HTTP, as `metasched agent` runs
// it, which a test can stop and start again on the same address.
type remoteAgent struct {
	t      *testing.T
	site   hp.Site
	grid   *graph.Grid
	token  string       // plain HTTP with this token, or
	creds  *tlsx.Source // TLS with this certificate
	addr   string
	cancel func()
	done   chan error
	agent  *hp.Agent
}

func (r *remoteAgent) start() {
	r.t.Helper()
	ln, err := net.Listen("tcp", r.addr)
	if err != nil {
		r.t.Fatal(err)
	}
	r.addr = ln.Addr().String()
	log := zerolog.New(io.Discard) // concurrent writes: a bytes.Buffer raced
	site := r.site
	a, err := hp.New(context.Background(), hp.Config{Site: &site, Token: r.token, TLS: r.creds, Grid: r.grid, Connect: virt.Connector(log), Logger: log})
	if err != nil {
		r.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r.agent, r.cancel, r.done = a, cancel, make(chan error, 1)
	go func() { r.done <- a.Serve(ctx, ln) }()
}

func (r *remoteAgent) stop() {
	if r.cancel == nil {
		return
	}
	r.cancel()
	<-r.done
	_ = r.agent.Close() // closes the hypervisor connections: nothing the test checks is lost
	r.cancel = nil
}

// TestAgentLoss runs the daemon with three remote agents. When the agent of
// the site that holds the render pool stops answering, its hosts leave the
// plans and the pools, and the render jobs running there go back to the
// queue (on_agent_loss: requeue) or fail (fail); when it answers again the
// requeued jobs run to the end and no VM is left anywhere. With a grace
// (agent_loss_grace) longer than the agent's absence the jobs are neither
// requeued nor failed: they go on and are done after their one attempt.
func TestAgentLoss(t *testing.T) {
	for _, mode := range []string{"requeue", "fail", "grace"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			_, grid, err := demo.Config(dir, "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			pools := map[string]string{"latam-a": "etl", "latam-b": "sim", "spain": "render"}
			agents := map[string]*remoteAgent{}
			var acfg []metasched.AgentConfig
			// The agents and the daemon prove themselves to each other by
			// their certificates (agents of plain HTTP could not probe).
			pki := tlsxtest.New(t)
			daemonFiles := pki.Issue(t, "daemon", tlsx.Request{Identity: tlsx.Daemon(), Hosts: []string{"127.0.0.1"}})
			for _, c := range grid.Clusters {
				r := &remoteAgent{t: t, grid: grid, creds: pki.Source(t, tlsx.Agent(c.Name), "127.0.0.1"), addr: "127.0.0.1:0",
					site: hp.Site{Site: c.Name, Pool: pools[c.Name], DataDir: filepath.Join(dir, "agent-"+c.Name),
						MigrationPorts: [2]int{49152, 49215}, MigrationProgressTimeout: hp.DefaultProgressTimeout}}
				r.start()
				t.Cleanup(r.stop)
				agents[c.Name] = r
				acfg = append(acfg, metasched.AgentConfig{Site: c.Name, Address: "https://" + r.addr})
			}
			td := startDaemonNet(t, grid, metasched.Options{}, func(c *metasched.Config) {
				c.Agents, c.TLS = acfg, &daemonFiles
				c.Policy = metasched.PolicyConfig{Name: "none"}
				c.Executor.TimeScale = 0.02
				c.OnAgentLoss, c.AgentLossGrace = mode, 0
				if mode == "grace" {
					c.OnAgentLoss, c.AgentLossGrace = "requeue", time.Hour
				}
			})
			d, ctx := td.d, context.Background()
			// The agents' probes measure every link between them, and
			// plans say they use the measured bandwidths.
			waitFor(t, "every link measured", 20*time.Second, func() bool {
				for _, l := range d.Links() {
					if l.Samples == 0 {
						return false
					}
				}
				return true
			})
			pr, err := d.DryRun(ctx, jobfile.Decode([]byte("name: probe\ntype: render\ntasks: 40\ntask_ops: 1.0e11\ntask_bytes: 1.0e5\n")))
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(pr.Explanation, "measured") || len(pr.Placement.Measured) != len(grid.Links) {
				t.Errorf("plan explanation %q, measured %v: want the measured links", pr.Explanation, pr.Placement.Measured)
			}
			var ids []string
			for _, name := range []string{"r1", "r2"} {
				j, err := d.Submit(ctx, jobfile.Decode([]byte("name: "+name+"\ntype: render\ntasks: 40\ntask_ops: 1.0e11\ntask_bytes: 1.0e5\n")))
				if err != nil {
					t.Fatal(err)
				}
				ids = append(ids, j.ID)
			}
			waitFor(t, "the render jobs running", 20*time.Second, func() bool {
				for _, id := range ids {
					j, err := d.Job(ctx, id)
					if err != nil {
						t.Fatal(err)
					}
					if j.State != api.Running {
						return false
					}
				}
				return true
			})
			agents["spain"].stop()
			if mode == "grace" {
				waitFor(t, "the spain hosts unreachable", 20*time.Second, func() bool {
					for _, h := range d.Hosts() {
						if h.Site == "spain" && h.State != api.HostUnreachable {
							return false
						}
					}
					return true
				})
				for _, id := range ids {
					j, err := d.Job(ctx, id)
					if err != nil {
						t.Fatal(err)
					}
					if j.State != api.Running && j.State != api.Done {
						t.Errorf("job %s is %s (%s) within the grace, want it running", id, j.State, j.Reason)
					}
				}
				agents["spain"].start()
				waitFor(t, "every job done", 60*time.Second, func() bool {
					for _, id := range ids {
						j, err := d.Job(ctx, id)
						if err != nil {
							t.Fatal(err)
						}
						if j.State != api.Done {
							return false
						}
					}
					return true
				})
				for _, id := range ids {
					j, err := d.Job(ctx, id)
					if err != nil {
						t.Fatal(err)
					}
					if j.Attempts != 1 {
						t.Errorf("job %s ran %d times, want once", id, j.Attempts)
					}
				}
				waitFor(t, "no VM left", 20*time.Second, func() bool { return len(d.VMs()) == 0 })
				return
			}
			want := api.Queued
			if mode == "fail" {
				want = api.Failed
			}
			waitFor(t, "the jobs "+string(want), 20*time.Second, func() bool {
				for _, id := range ids {
					j, err := d.Job(ctx, id)
					if err != nil {
						t.Fatal(err)
					}
					if j.State != want || !strings.Contains(j.Reason, "unreachable") && !strings.Contains(j.Reason, "waiting") {
						return false
					}
				}
				return true
			})
			for _, h := range d.Hosts() {
				if h.Site == "spain" && h.State != api.HostUnreachable {
					t.Errorf("host %s is %s, want unreachable", h.Name, h.State)
				}
			}
			for _, p := range d.Pools() {
				if p.Name == "render" && len(p.Hosts) != 0 {
					t.Errorf("render pool still has hosts %v", p.Hosts)
				}
			}
			// The agent answers again: its hosts come back, requeued jobs
			// run, and the VMs of the interrupted attempts are destroyed.
			agents["spain"].start()
			waitFor(t, "the spain hosts back", 20*time.Second, func() bool {
				for _, p := range d.Pools() {
					if p.Name == "render" {
						return len(p.Hosts) == 8
					}
				}
				return false
			})
			final := api.Done
			if mode == "fail" {
				final = api.Failed
			}
			waitFor(t, "every job "+string(final), 60*time.Second, func() bool {
				for _, id := range ids {
					j, err := d.Job(ctx, id)
					if err != nil {
						t.Fatal(err)
					}
					if j.State != final {
						return false
					}
				}
				return true
			})
			waitFor(t, "no VM left", 20*time.Second, func() bool { return len(d.VMs()) == 0 })
		})
	}
}
