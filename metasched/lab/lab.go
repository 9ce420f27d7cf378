// Package lab runs a grid of QEMU hosts on one machine, for experiments,
// demos and end-to-end tests: one network namespace holding a Linux bridge
// per site and a bridge "wan" that joins them, each site's bridge joined
// to the wan through a veth pair shaped (tbf, both directions) to the
// site's uplink, so that traffic between two sites crosses the uplinks of
// both, as the planning model says; a root libvirtd per host, each in its
// own mount namespace inside that network namespace; one site agent per
// site and the daemon, both the real metasched binary (`agent`, `serve`)
// with the guest executor. Everything it starts is stopped by PID.
//
// It needs root, libvirtd, QEMU and iproute2 (package libvirtdtest's and
// netlab's Check say what is missing), and a built guest image.
package lab

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"maps"
	"math"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/metasched/metasched/graph"
	hpclient "github.com/metasched/metasched/hypervisorproxy/client"
	"github.com/metasched/metasched/hypervisorproxy/libvirtdtest"
	"github.com/metasched/metasched/hypervisorproxy/netlab"
	"github.com/metasched/metasched/hypervisorproxy/slurm/slurmtest"
	"github.com/metasched/metasched/internal/etcdtest"
	"github.com/metasched/metasched/internal/httpx"
	"github.com/metasched/metasched/internal/tlsx"
	"github.com/metasched/metasched/metasched/client"
	"github.com/rs/zerolog"
)

// WAN is the name of the bridge that joins the sites' bridges.
const WAN = "wan"

// Site is one site of a lab: its hosts and what the grid file says of its
// machines (which calibration replaces with measured figures).
type Site struct {
	Name string
	// Hosts is the number of hosts, named NAME-1 … NAME-N, each a root
	// libvirtd.
	Hosts int
	// UplinkMbit shapes the site's link to the wan; 0 leaves it unshaped.
	UplinkMbit float64
	// CPUQuota is the site file's cpu_quota: the share of one core each
	// vCPU of the site's VMs may use (0: none).
	CPUQuota float64
	// Perf (operations per second of one machine) and LANMbps are the grid
	// file's figures; Cores and MemoryMiB are the size of one machine.
	Perf      float64
	LANMbps   float64
	Cores     int
	MemoryMiB int
	// Sized gives each host's VMs only Cores and MemoryMiB of the machine
	// (the site file's cpus and memory_mib), as a machine of the grid
	// file would; else every host offers the whole machine (they all run
	// on it), and the VMs of several jobs may share a host.
	Sized bool
	// Slurm makes the site a cluster that runs Slurm (package
	// slurmtest): its hosts are Slurm nodes of Cores CPUs and MemoryMiB
	// (NAME-1 … NAME-N), each slurmd and slurmctld in a network namespace
	// of its own on the site's bridge (at 10.77.(i+1).200 and on), a
	// partition per pool of the same name, every node in the first. The
	// jobs' commands run on the nodes, on this machine's system.
	Slurm bool
}

// Spec describes a lab.
type Spec struct {
	Sites []Site
	// Pools are the job types; every host starts in the first.
	Pools []Pool
	// Images are the images the sites' VMs may boot: name → directory of
	// a built image.
	Images map[string]string
	// Serve is added to the daemon's configuration (YAML lines, e.g.
	// "calibration: {max_age: 1h}\n").
	Serve string
	// ExecutorPoll is the guest executor's poll (0: 250 ms, which the
	// tests' short jobs want). Each poll costs every VM of a job a few
	// guest-agent commands (its command's status, its output): at 250 ms
	// they take a fifth of a VM held to an eighth of a core.
	ExecutorPoll time.Duration
	// HostImageDirs gives every host an image_dir of its own (under the
	// lab's directory): the images are put onto each host through its
	// libvirt, and a disk VM's overlay is on its host only, so that its
	// live migration copies its disk (no shared storage).
	HostImageDirs bool
	// BootTimeout is the site files' boot_timeout (0: 3 minutes).
	BootTimeout time.Duration
	// MaxConcurrentBoots is the site files' max_concurrent_boots (0: no
	// bound): every host of the lab runs on this machine's cores.
	MaxConcurrentBoots int
	// Grid is the daemon's grid file, for a lab whose model says other
	// than its network (e.g. a site that plans as slow but is not
	// shaped); every site must be one of its clusters. Empty: GridFile.
	Grid string
}

// Pool is a job type of the lab: its VMs' size and the image they boot.
type Pool struct {
	Name      string
	VCPUs     int
	MemoryMiB int
	Image     string
}

// Options are how a lab runs.
type Options struct {
	// Binary is the metasched executable the agents and the daemon run as.
	Binary string
	// Dir holds the lab's files: configurations, logs, the agents' and the
	// daemon's data. It must exist.
	Dir string
	// Logf reports progress; nil: nothing.
	Logf func(format string, args ...any)
}

// Lab is a running lab.
type Lab struct {
	spec Spec
	opt  Options
	grid *netlab.Grid
	// ca issues the lab's certificates (in Dir: ca.pem, daemon.pem,
	// agent-SITE.pem, client-lab.pem and their keys); lab is the lab's
	// own operator client certificate, with which it calls the agents.
	ca  *tlsx.CA
	lab *tlsx.Source

	Libvirt map[string]*libvirtdtest.Daemon // by host
	Slurm   map[string]*slurmtest.Cluster   // by site, for its Slurm sites
	Agents  map[string]*Agent               // by site
	Daemon  *Proc
	// Client talks to the daemon.
	Client *client.Client
	// ServeConfig is the daemon's configuration file; DataDir its data.
	ServeConfig, DataDir string

	// etcd is the store's etcd, when the lab started one (the scale
	// experiment's), stopped by Close after the processes.
	etcd *etcdtest.Cluster

	mu     sync.Mutex
	procs  []*Proc
	closed bool
}

// Agent is one site's agent.
type Agent struct {
	Site, Config, URL string
	Client            *hpclient.Client
	Proc              *Proc
}

// check reports every problem of the spec, naming its field.
func (s Spec) check() error {
	var errs []error
	bad := func(f, format string, a ...any) {
		errs = append(errs, fmt.Errorf("lab: %s: %s", f, fmt.Sprintf(format, a...)))
	}
	if len(s.Sites) == 0 {
		bad("sites", "none")
	}
	seen := map[string]bool{WAN: true}
	for i, st := range s.Sites {
		f := fmt.Sprintf("sites[%d]", i)
		switch {
		case seen[st.Name]:
			bad(f+".name", "%q is used twice (or is the wan's)", st.Name)
		case len(st.Name) == 0 || len(st.Name) > netlab.MaxSiteName:
			bad(f+".name", "%q must be 1 to %d characters", st.Name, netlab.MaxSiteName)
		}
		seen[st.Name] = true
		if st.Cores < 1 || st.MemoryMiB < 64 || !(st.Perf > 0) || !(st.LANMbps > 0) {
			bad(f, "cores %d, memory_mib %d, perf %g and lan_mbps %g must be positive (memory at least 64)", st.Cores, st.MemoryMiB, st.Perf, st.LANMbps)
		}
		if st.Hosts < 1 || st.Hosts > 9 {
			bad(f+".hosts", "%d is not within 1 and 9", st.Hosts)
		}
		if st.UplinkMbit < 0 || math.IsNaN(st.UplinkMbit) {
			bad(f+".uplink_mbit", "%g is negative", st.UplinkMbit)
		}
		if !(st.CPUQuota >= 0 && st.CPUQuota <= 1) {
			bad(f+".cpu_quota", "%g is not within 0 and 1", st.CPUQuota)
		}
	}
	if len(s.Pools) == 0 {
		bad("pools", "none")
	}
	for i, p := range s.Pools {
		f := fmt.Sprintf("pools[%d]", i)
		if p.Name == "" || slices.ContainsFunc(s.Pools[:i], func(o Pool) bool { return o.Name == p.Name }) {
			bad(f+".name", "%q is empty or used twice", p.Name)
		}
		if p.VCPUs < 1 || p.MemoryMiB < 64 {
			bad(f+".vm", "%d vCPUs and %d MiB: need at least 1 and 64", p.VCPUs, p.MemoryMiB)
		}
		if _, ok := s.Images[p.Image]; !ok {
			bad(f+".image", "%q is not one of the images", p.Image)
		}
	}
	if s.Grid != "" {
		g, err := graph.ParseGrid("grid", []byte(s.Grid))
		if err != nil {
			bad("grid", "%v", err)
		} else {
			for i, st := range s.Sites {
				if _, ok := g.Index(st.Name); !ok {
					bad("grid", "sites[%d] %q is none of its clusters", i, st.Name)
				}
			}
		}
	}
	return errors.Join(errs...)
}

// gridFile is the daemon's grid file: Grid, or else GridFile.
func (s Spec) gridFile() string {
	if s.Grid != "" {
		return s.Grid
	}
	return s.GridFile()
}

// Check reports why a lab cannot run on this machine (slurmtest's Check
// too for a lab with a Slurm site).
func Check() error {
	return errors.Join(libvirtdtest.Check(), netlab.Check())
}

// Start builds the network, starts the libvirtds, the agents and the
// daemon, and returns once the daemon answers. On failure it stops what it
// started. ctx bounds the start only.
func Start(ctx context.Context, spec Spec, opt Options) (*Lab, error) {
	if err := spec.check(); err != nil {
		return nil, err
	}
	if err := Check(); err != nil {
		return nil, err
	}
	if slices.ContainsFunc(spec.Sites, func(s Site) bool { return s.Slurm }) {
		if err := slurmtest.Check(); err != nil {
			return nil, err
		}
	}
	if opt.Logf == nil {
		opt.Logf = func(string, ...any) {}
	}
	l := &Lab{spec: spec, opt: opt, Libvirt: map[string]*libvirtdtest.Daemon{}, Slurm: map[string]*slurmtest.Cluster{},
		Agents: map[string]*Agent{}}
	if err := l.start(ctx); err != nil {
		return nil, errors.Join(err, l.Close())
	}
	return l, nil
}

func (l *Lab) start(ctx context.Context) error {
	spec := l.spec
	sites := []string{WAN}
	var links []netlab.Link
	for _, s := range spec.Sites {
		sites = append(sites, s.Name)
		links = append(links, netlab.Link{A: s.Name, B: WAN, Options: netlab.Options{RateMbit: s.UplinkMbit}})
	}
	g, err := netlab.NewGrid(ctx, netlab.GridOptions{Sites: sites, Links: links})
	if err != nil {
		return err
	}
	l.grid = g
	l.opt.Logf("network: namespace %s, bridges %s", g.Namespace(), strings.Join(sites, ", "))

	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	for i, s := range spec.Sites {
		if s.Slurm {
			wg.Go(func() {
				c, err := l.startSlurm(ctx, i, s)
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					errs = append(errs, fmt.Errorf("site %s: %w", s.Name, err))
					return
				}
				l.Slurm[s.Name] = c
			})
			continue
		}
		for i := 1; i <= s.Hosts; i++ {
			h := fmt.Sprintf("%s-%d", s.Name, i)
			wg.Go(func() {
				c, cancel := context.WithTimeout(ctx, libvirtdtest.StartTimeout)
				defer cancel()
				d, err := libvirtdtest.Start(c, libvirtdtest.Options{Root: true, NetNS: g.Namespace()})
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					errs = append(errs, fmt.Errorf("host %s: %w", h, err))
					return
				}
				l.Libvirt[h] = d
			})
		}
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	l.opt.Logf("libvirtd: %d hosts", len(l.Libvirt))
	names := make([]string, len(spec.Sites))
	for i, s := range spec.Sites {
		names[i] = s.Name
	}
	if err := l.certificates(names); err != nil {
		return err
	}
	for i, s := range spec.Sites {
		a, err := l.writeSite(i, s)
		if err != nil {
			return err
		}
		l.Agents[s.Name] = a
		if err := l.StartAgent(ctx, a); err != nil {
			return err
		}
	}
	l.opt.Logf("agents: %d sites", len(l.Agents))
	if err := l.writeServe(); err != nil {
		return err
	}
	return l.StartDaemon(ctx)
}

// write writes a file of the lab's directory.
func (l *Lab) write(name, data string) error {
	return os.WriteFile(filepath.Join(l.opt.Dir, name), []byte(data), 0o600)
}

// hosts are the names of a site's hosts.
func (s Site) hosts() []string {
	out := make([]string, s.Hosts)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%d", s.Name, i+1)
	}
	return out
}

// hostLine is the site file's line of one of the site's hosts.
func (s Site) hostLine(name, uri, pool string) string {
	share := ""
	if s.Sized {
		share = fmt.Sprintf(", cpus: %d, memory_mib: %d", s.Cores, s.MemoryMiB)
	}
	return fmt.Sprintf("  - {name: %s, uri: %q, pool: %s, migration_address: 127.0.0.1%s}\n", name, uri, pool, share)
}

// certificates makes the lab's CA and the certificates of the daemon,
// of the agent of every site of sites (all on 127.0.0.1) and of the lab's
// operator client, as an operator would with metasched tls.
func (l *Lab) certificates(sites []string) error {
	now := time.Now()
	ca, err := tlsx.NewCA("lab", now, 30*24*time.Hour)
	if err != nil {
		return err
	}
	if err := l.writePEM("ca", ca); err != nil {
		return err
	}
	if l.ca, err = tlsx.LoadCA(filepath.Join(l.opt.Dir, "ca.pem"), filepath.Join(l.opt.Dir, "ca-key.pem")); err != nil {
		return err
	}
	ids := map[string]tlsx.Identity{"daemon": tlsx.Daemon(), "client-lab": tlsx.Client("lab", tlsx.RoleOperator)}
	for _, s := range sites {
		ids["agent-"+s] = tlsx.Agent(s)
	}
	for name, id := range ids {
		r := tlsx.Request{Identity: id, Now: now, ValidFor: 30 * 24 * time.Hour}
		if id.Kind != tlsx.KindClient {
			r.Hosts = []string{"127.0.0.1", "localhost"}
		}
		p, err := l.ca.Issue(r)
		if err != nil {
			return err
		}
		if err := l.writePEM(name, p); err != nil {
			return err
		}
	}
	l.lab, err = tlsx.NewSource(l.files("client-lab"), tlsx.KindClient, zerolog.Nop(), nil)
	return err
}

// writePEM writes NAME.pem and NAME-key.pem.
func (l *Lab) writePEM(name string, p tlsx.PEM) error {
	return errors.Join(l.write(name+".pem", string(p.Cert)), l.write(name+"-key.pem", string(p.Key)))
}

// files are the certificate files of NAME.
func (l *Lab) files(name string) tlsx.Files {
	return tlsx.Files{Cert: filepath.Join(l.opt.Dir, name+".pem"), Key: filepath.Join(l.opt.Dir, name+"-key.pem"),
		CA: filepath.Join(l.opt.Dir, "ca.pem")}
}

// writeSite writes site i's file.
func (l *Lab) writeSite(i int, s Site) (*Agent, error) {
	if s.Slurm {
		return l.writeSlurmSite(s)
	}
	var hosts strings.Builder
	for _, h := range s.hosts() {
		line := s.hostLine(h, l.Libvirt[h].URI(), l.spec.Pools[0].Name)
		if l.spec.HostImageDirs {
			line = strings.TrimSuffix(line, "}\n") + fmt.Sprintf(", image_dir: %q}\n", filepath.Join(l.opt.Dir, "images-"+h))
		}
		hosts.WriteString(line)
	}
	boot := l.spec.BootTimeout
	if boot <= 0 {
		boot = 3 * time.Minute
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	lo, err := libvirtdtest.FindFreePortRange(8)
	if err != nil {
		return nil, err
	}
	quota := ""
	if s.CPUQuota > 0 {
		quota = fmt.Sprintf("cpu_quota: %g\n", s.CPUQuota)
	}
	if l.spec.MaxConcurrentBoots > 0 {
		quota += fmt.Sprintf("max_concurrent_boots: %d\n", l.spec.MaxConcurrentBoots)
	}
	first, last := siteAddresses(i)
	name := "site-" + s.Name + ".yaml"
	err = l.write(name, fmt.Sprintf(`site: %s
listen: 127.0.0.1:%d
%s
data_dir: agent-%s
boot_timeout: %s
migration_ports: %d-%d
images: {%s}
network: {bridge: %s, subnet: 10.77.0.0/16, addresses: %s-%s}
%shosts:
%s`, s.Name, port, agentTLS(s.Name), s.Name, boot, lo, lo+7, l.spec.images(), l.grid.Bridge(s.Name), first, last, quota, hosts.String()))
	if err != nil {
		return nil, err
	}
	return l.agentAt(s.Name, name, port)
}

// agentTLS is the site file's tls line of site's agent: the certificate
// that certificates made for it.
func agentTLS(site string) string {
	return fmt.Sprintf("tls: {cert_file: agent-%s.pem, key_file: agent-%s-key.pem, ca_file: ca.pem}", site, site)
}

// agentAt is site's agent, its site file config (in the lab's directory),
// served over TLS at 127.0.0.1:port, with the lab's client of it.
func (l *Lab) agentAt(site, config string, port int) (*Agent, error) {
	url := fmt.Sprintf("https://127.0.0.1:%d", port)
	c, err := hpclient.NewTLS(url, l.lab, site)
	if err != nil {
		return nil, err
	}
	return &Agent{Site: site, Config: filepath.Join(l.opt.Dir, config), URL: url, Client: c}, nil
}

// GridFile is the grid file of a spec: one cluster per site, and a link
// between every two sites at the lesser of their uplinks (their traffic
// crosses both).
func (s Spec) GridFile() string {
	var b strings.Builder
	b.WriteString("clusters:\n")
	for _, st := range s.Sites {
		fmt.Fprintf(&b, "  - {name: %s, machines: %d, cores: %d, memory_mib: %d, perf: %g, lan_mbps: %g, uplink_mbps: %g}\n",
			st.Name, st.Hosts, st.Cores, st.MemoryMiB, st.Perf, st.LANMbps, uplink(st))
	}
	b.WriteString("links:\n")
	for i, x := range s.Sites {
		for _, y := range s.Sites[i+1:] {
			fmt.Fprintf(&b, "  - {between: [%s, %s], mbps: %g, latency_ms: 1}\n", x.Name, y.Name, min(uplink(x), uplink(y)))
		}
	}
	return b.String()
}

// images is the site file's images: {NAME: DIR, ...} in name order.
func (s Spec) images() string {
	names := slices.Sorted(maps.Keys(s.Images))
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = fmt.Sprintf("%s: %q", n, s.Images[n])
	}
	return strings.Join(parts, ", ")
}

// uplink is a site's uplink for the grid file: an unshaped one is as fast
// as its LAN.
func uplink(s Site) float64 {
	if s.UplinkMbit > 0 {
		return s.UplinkMbit
	}
	return s.LANMbps
}

// writeServe writes the daemon's grid and configuration.
func (l *Lab) writeServe() error {
	if _, err := graph.ParseGrid("grid.yaml", []byte(l.spec.gridFile())); err != nil {
		return fmt.Errorf("lab: the grid file it wrote: %w", err)
	}
	if err := l.write("grid.yaml", l.spec.gridFile()); err != nil {
		return err
	}
	port, err := freePort()
	if err != nil {
		return err
	}
	var agents strings.Builder
	for _, s := range l.spec.Sites {
		fmt.Fprintf(&agents, "  - {site: %s, address: %s}\n", s.Name, l.Agents[s.Name].URL)
	}
	l.ServeConfig = filepath.Join(l.opt.Dir, "serve.yaml")
	l.DataDir = filepath.Join(l.opt.Dir, "daemon")
	var pools strings.Builder
	for _, p := range l.spec.Pools {
		fmt.Fprintf(&pools, "  - {name: %s, vm: {vcpus: %d, memory_mib: %d}, image: %s}\n", p.Name, p.VCPUs, p.MemoryMiB, p.Image)
	}
	return l.write("serve.yaml", fmt.Sprintf(`listen: 127.0.0.1:%d
tls: {cert_file: daemon.pem, key_file: daemon-key.pem, ca_file: ca.pem}
data_dir: daemon
grid: grid.yaml
job_types:
%smin_pool_hosts: 0
agents:
%spolicy: {name: none}
executor: {name: guest, poll: %s}
%s`, port, pools.String(), agents.String(), cmp.Or(l.spec.ExecutorPoll, 250*time.Millisecond), l.spec.Serve))
}

// StartAgent runs a site's agent and waits until it answers.
func (l *Lab) StartAgent(ctx context.Context, a *Agent) error {
	return l.startAgents(ctx, "agent-"+a.Site, []*Agent{a}, "info")
}

// startAgents runs the agents of several sites in one process (an agent
// with a --config for each), logging at level, and waits until each
// answers.
func (l *Lab) startAgents(ctx context.Context, name string, as []*Agent, level string) error {
	args := []string{"agent", "--log-format", "json", "--log-level", level}
	for _, a := range as {
		args = append(args, "--config", a.Config)
	}
	p, err := l.run(name, args...)
	if err != nil {
		return err
	}
	for _, a := range as {
		a.Proc = p
		if err := l.until(ctx, "agent "+a.Site+" answers", p, func(ctx context.Context) error {
			_, err := a.Client.Healthz(ctx)
			return err
		}); err != nil {
			return err
		}
	}
	return nil
}

// StartDaemon runs the daemon and waits until it answers.
func (l *Lab) StartDaemon(ctx context.Context) error {
	p, err := l.run("daemon", "serve", "--config", l.ServeConfig, "--log-format", "json")
	if err != nil {
		return err
	}
	l.Daemon = p
	base, err := p.waitAddress(ctx)
	if err != nil {
		return err
	}
	tok, err := httpx.ReadTokenFile(filepath.Join(l.DataDir, "token"))
	if err != nil {
		return fmt.Errorf("lab: the daemon's token: %w", err)
	}
	pool, err := tlsx.CAPool(filepath.Join(l.opt.Dir, "ca.pem"))
	if err != nil {
		return err
	}
	hc := &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{DisableKeepAlives: true,
		TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	l.Client = client.New(base, tok).WithHTTPClient(hc)
	return nil
}

// until polls f until it succeeds, p exits, or ctx ends.
func (l *Lab) until(ctx context.Context, what string, p *Proc, f func(context.Context) error) error {
	for {
		c, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := f(c)
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-p.Done():
			return fmt.Errorf("lab: %s: %s exited (%v); its log ends:\n%s", what, p.Name, p.State(), p.Tail())
		case <-ctx.Done():
			return fmt.Errorf("lab: %s: %w (last: %v)", what, ctx.Err(), err)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// siteAddresses are the first and last address of the range the agent of
// the i-th site gives its VMs: 10.77.(i+1).10 to .99.
func siteAddresses(i int) (first, last netip.Addr) {
	return netip.AddrFrom4([4]byte{10, 77, byte(i + 1), 10}), netip.AddrFrom4([4]byte{10, 77, byte(i + 1), 99})
}

// Addresses are the first and last address of the range a site's VMs
// take their addresses from; ok is false for a site not in the lab.
func (l *Lab) Addresses(site string) (first, last netip.Addr, ok bool) {
	i := slices.IndexFunc(l.spec.Sites, func(s Site) bool { return s.Name == site })
	if i < 0 {
		return netip.Addr{}, netip.Addr{}, false
	}
	first, last = siteAddresses(i)
	return first, last, true
}

// Dir is the lab's working directory (Options.Dir).
func (l *Lab) Dir() string { return l.opt.Dir }

// Hosts are the names of every host, site by site.
func (l *Lab) Hosts() []string {
	var out []string
	for _, s := range l.spec.Sites {
		out = append(out, s.hosts()...)
	}
	return out
}

// Logs are the paths of every log of the lab's processes, oldest first.
func (l *Lab) Logs() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]string, len(l.procs))
	for i, p := range l.procs {
		out[i] = p.Log
	}
	return out
}

// Close stops the daemon, the agents (SIGTERM, then SIGKILL after 30 s),
// etcd and the libvirtds with their guests, by PID, and deletes the
// network.
func (l *Lab) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	procs := slices.Clone(l.procs)
	l.mu.Unlock()
	var errs []error
	slices.Reverse(procs) // the daemon before the agents
	for _, p := range procs {
		if err := p.Stop(30 * time.Second); err != nil {
			errs = append(errs, err)
		}
	}
	if l.etcd != nil {
		l.etcd.Stop()
	}
	for _, c := range l.Slurm {
		c.Stop()
	}
	for h, d := range l.Libvirt {
		if err := d.Stop(); err != nil {
			errs = append(errs, fmt.Errorf("host %s: %w", h, err))
		}
	}
	if l.grid != nil {
		if err := l.grid.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// freePort is a TCP port of 127.0.0.1 free when asked.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("lab: free port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}
