package metasched

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/rs/zerolog"

	"github.com/metasched/metasched/graph"
	hp "github.com/metasched/metasched/hypervisorproxy"
	"github.com/metasched/metasched/hypervisorproxy/client"
	"github.com/metasched/metasched/hypervisorproxy/domxml"
	"github.com/metasched/metasched/internal/httpx"
	"github.com/metasched/metasched/internal/tlsx"
	"github.com/metasched/metasched/metasched/executor"
)

// SiteAgent is what the daemon needs of a site's hypervisor proxy: an
// in-process *hypervisorproxy.Agent or a remote one through its HTTP API.
type SiteAgent interface {
	Inventory(ctx context.Context) (hp.Inventory, error)
	CreateVM(ctx context.Context, spec hp.VMSpec) (hp.VM, error)
	DestroyVM(ctx context.Context, name string) error
	ResizeVM(ctx context.Context, name string, r hp.Resize) (hp.VM, error)
	MigrateVM(ctx context.Context, name string, r hp.MigrateRequest) (hp.Migration, error)
	ReconfigureHost(ctx context.Context, host string, r hp.Reconfigure) (hp.Reconfigured, error)
	Probe(ctx context.Context, r hp.ProbeRequest) (hp.Probe, error)
}

var (
	_ SiteAgent = (*hp.Agent)(nil)
	_ SiteAgent = remoteAgent{}
	// Both kinds of agent have the guest API the guest executor uses.
	_ executor.GuestAgent = (*hp.Agent)(nil)
	_ executor.GuestAgent = remoteAgent{}
)

// remoteAgent is a site agent reached over HTTP.
type remoteAgent struct {
	c *client.Client
}

func (r remoteAgent) Inventory(ctx context.Context) (hp.Inventory, error) { return r.c.Inventory(ctx) }
func (r remoteAgent) CreateVM(ctx context.Context, s hp.VMSpec) (hp.VM, error) {
	return r.c.Create(ctx, s)
}
func (r remoteAgent) DestroyVM(ctx context.Context, name string) error { return r.c.Destroy(ctx, name) }
func (r remoteAgent) ResizeVM(ctx context.Context, name string, rs hp.Resize) (hp.VM, error) {
	return r.c.Resize(ctx, name, rs)
}
func (r remoteAgent) MigrateVM(ctx context.Context, name string, m hp.MigrateRequest) (hp.Migration, error) {
	return r.c.Migrate(ctx, name, m.Host)
}
func (r remoteAgent) ReconfigureHost(ctx context.Context, host string, rc hp.Reconfigure) (hp.Reconfigured, error) {
	return r.c.Reconfigure(ctx, host, rc)
}
func (r remoteAgent) Probe(ctx context.Context, p hp.ProbeRequest) (hp.Probe, error) {
	return r.c.Probe(ctx, p)
}
func (r remoteAgent) GuestExec(ctx context.Context, vm string, e hp.GuestExec) (hp.GuestProcess, error) {
	return r.c.GuestExec(ctx, vm, e)
}
func (r remoteAgent) GuestExecStatus(ctx context.Context, vm string, pid int) (hp.GuestExecStatus, error) {
	return r.c.GuestExecStatus(ctx, vm, pid)
}
func (r remoteAgent) GuestWriteFile(ctx context.Context, vm, path string, data []byte, mode os.FileMode) error {
	return r.c.GuestWriteFile(ctx, vm, path, data, mode)
}
func (r remoteAgent) GuestReadFile(ctx context.Context, vm, path string, offset int64, max int) (hp.GuestFileChunk, error) {
	return r.c.GuestReadFile(ctx, vm, path, offset, max)
}

// siteAgent is one cluster of the grid and the agent that manages it.
type siteAgent struct {
	name    string
	agent   SiteAgent
	address string       // remote agents over TLS: their URL, for probes
	closer  func() error // in-process agents
	// canShrink says the site's hypervisors can unplug vCPUs of running
	// VMs: every host of its last inventory says so (vcpu_unplug: the
	// test driver can, QEMU cannot). Guarded by the daemon's lock.
	canShrink bool
}

// Connector opens a libvirt host for the in-process agents. The daemon's
// command passes the libvirt driver's (package hypervisorproxy/virt); tests
// may pass the same.
type Connector = hp.Connector

// openSites makes one agent per grid cluster: the configured remote agents,
// and for the clusters without one (all of them when the configuration
// lists no agents) an in-process agent on the libvirt test driver whose
// hosts are split round-robin among the job types.
//
// A remote agent at an https address is called over mutual TLS with the
// daemon's certificate (creds); one at an http address (on the loopback
// interface) with the token of its token_file.
//
// epoch, when not 0, is the leading daemon's epoch, which every request to
// a remote agent carries (hypervisorproxy.LeaderEpochHeader).
func openSites(ctx context.Context, cfg *Config, grid *graph.Grid, connect Connector, token string, creds *tlsx.Source, epoch int64, log zerolog.Logger) ([]*siteAgent, error) {
	var sites []*siteAgent
	closeAll := func() {
		for _, s := range sites {
			if s.closer != nil {
				_ = s.closer()
			}
		}
	}
	remote := map[string]AgentConfig{}
	for _, a := range cfg.Agents {
		if _, ok := grid.Index(a.Site); !ok {
			return nil, fmt.Errorf("agents: site %q is not a cluster of the grid %s", a.Site, cfg.Grid)
		}
		remote[a.Site] = a
	}
	pools := make([]string, len(cfg.JobTypes))
	for i, jt := range cfg.JobTypes {
		pools[i] = jt.Name
	}
	next := 0 // round-robin over the pools across the whole grid
	for _, c := range grid.Clusters {
		if a, ok := remote[c.Name]; ok {
			if a.TokenFile == "" {
				if creds == nil {
					closeAll()
					return nil, fmt.Errorf("agents: site %s: the https agent needs the daemon's tls", a.Site)
				}
				cl, err := client.NewTLS(a.Address, creds, a.Site)
				if err != nil {
					closeAll()
					return nil, fmt.Errorf("agents: site %s: %w", a.Site, err)
				}
				sites = append(sites, &siteAgent{name: c.Name, agent: remoteAgent{c: cl.WithLeaderEpoch(epoch)}, address: a.Address})
				continue
			}
			t, err := httpx.ReadTokenFile(a.TokenFile)
			if err != nil {
				closeAll()
				return nil, fmt.Errorf("agents: site %s: token_file: %w", a.Site, err)
			}
			sites = append(sites, &siteAgent{name: c.Name, agent: remoteAgent{c: client.New(a.Address, t).WithLeaderEpoch(epoch)}})
			continue
		}
		if len(cfg.Agents) > 0 {
			closeAll()
			return nil, fmt.Errorf("agents: cluster %s of the grid has no agent (list every cluster, or none for in-process agents)", c.Name)
		}
		if connect == nil {
			closeAll()
			return nil, fmt.Errorf("agents: site %s: no libvirt connector for in-process agents", c.Name)
		}
		dir := filepath.Join(cfg.DataDir, "agents", c.Name)
		hostDir := filepath.Join(dir, "hosts")
		if err := os.MkdirAll(hostDir, 0o755); err != nil {
			closeAll()
			return nil, fmt.Errorf("agents: site %s: %w", c.Name, err)
		}
		hosts, cl, err := hp.GenerateHosts(grid, c.Name, "", func(name string) string {
			p, _ := filepath.Abs(filepath.Join(hostDir, name+".xml"))
			return p
		})
		if err != nil {
			closeAll()
			return nil, fmt.Errorf("agents: %w", err)
		}
		for i := range hosts {
			hosts[i].Pool = pools[next%len(pools)]
			next++
			if p, ok := strings.CutPrefix(hosts[i].URI, "test://"); ok {
				if err := writeTestHost(p, cl); err != nil {
					closeAll()
					return nil, fmt.Errorf("agents: site %s: host %s: %w", c.Name, hosts[i].Name, err)
				}
			}
		}
		st := &hp.Site{Site: c.Name, SwitchDelay: cfg.SwitchDelay, DataDir: dir, Hosts: hosts,
			MigrationPorts: [2]int{49152, 49215}, MigrationProgressTimeout: hp.DefaultProgressTimeout}
		a, err := hp.New(ctx, hp.Config{Site: st, Token: token, Grid: grid, Connect: connect,
			Logger: log.With().Str("site", c.Name).Logger()})
		if err != nil {
			closeAll()
			return nil, fmt.Errorf("agents: site %s: %w", c.Name, err)
		}
		sites = append(sites, &siteAgent{name: c.Name, agent: a, closer: a.Close})
	}
	return sites, nil
}

// writeTestHost writes a test-driver host file with the cluster's cores and
// memory.
func writeTestHost(path string, c *graph.Cluster) error {
	x, err := domxml.Node{CPUs: c.Cores, MemoryMiB: c.MemoryMiB}.XML()
	if err != nil {
		return err
	}
	return os.WriteFile(path, []byte(x), 0o644)
}
