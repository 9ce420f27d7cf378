package hypervisorproxy

import (
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/metasched/metasched/hypervisorproxy/domxml"
	"github.com/metasched/metasched/internal/httpsrv"
	"github.com/metasched/metasched/internal/tlsx"
	"github.com/metasched/metasched/internal/yamlx"
)

// Site is a site file (docs/reference/site-file.md): the site this agent
// serves and its hosts.
//
//	site: spain                       # the grid cluster this agent serves
//	listen: 10.0.0.2:9101
//	tls: {cert_file: agent-spain.pem, key_file: agent-spain-key.pem, ca_file: ca.pem}
//	switch_delay: 0s                  # time a pool reconfiguration takes
//	hosts:                            # default: generated from the grid's cluster entry
//	  - {name: spain-0, uri: "qemu+unix:///session?socket=/path/libvirt-sock", pool: render}
//	migration_ports: 49152-49215      # tcp ports for incoming live migrations
//	migration_tls: true               # live migrations encrypted by libvirt's native TLS
//	images: {debian: images/debian}   # the images VMs may boot on QEMU hosts, by name
//	boot_timeout: 60s                 # wait for a booting VM's guest agent
//	network: {bridge: msbr0, subnet: 10.77.0.0/16, addresses: 10.77.1.10-10.77.1.250}
//	cpu_quota: 0.25                   # each vCPU of a QEMU VM gets at most a quarter of a core
//
// or, for a test on one machine, plain HTTP on a loopback address
// (insecure_http: true, with token_file: the bearer token the daemon must
// present); and also: grid (the grid file whose cluster entry generates the hosts when
// hosts is omitted), pool (the pool of generated hosts), data_dir (where the
// agent keeps its record of VMs and the host files of generated test hosts;
// default: a temporary directory, and the record is then lost with the
// agent), migration_progress_timeout (abort a live migration that moves no
// data for that long; default 60s), migration_tls (live migrations between
// QEMU hosts go over TLS, libvirt's VIR_MIGRATE_TLS: every host's
// qemu.conf then names its certificates in migrate_tls_x509_cert_dir, see
// MigrationTLS; default false), max_unproven_connections and
// max_unproven_per_address (the caps on the API's connections that no
// request has authenticated yet, in all and per client address; default
// 1024 and 64: see package httpsrv) and, per host, migration_address (the
// address other hosts reach it at for live migrations; default: the host of
// its URI, or 127.0.0.1) and cpus and memory_mib (the share of the host the
// agent's VMs may take; default: all of it). Relative paths are relative to
// the site file's directory.
type Site struct {
	Site   string
	Listen string
	// TLS are the agent's certificate, key and CA file (package tlsx):
	// the API is served over HTTPS to the daemon's (and operators')
	// client certificates. nil: plain HTTP on a loopback address, with
	// TokenFile's bearer token.
	TLS                      *tlsx.Files
	TokenFile                string
	SwitchDelay              time.Duration
	Grid                     string
	Pool                     string
	DataDir                  string
	Hosts                    []SiteHost
	MigrationPorts           [2]int
	MigrationProgressTimeout time.Duration
	// MigrationTLS encrypts live migrations between QEMU hosts with
	// libvirt's native TLS (VIR_MIGRATE_TLS): the destination's QEMU
	// serves the migration with the server certificate of its host's
	// migrate_tls_x509_cert_dir, the source's connects with the client
	// one, and each checks the other against that directory's
	// ca-cert.pem (tlsx's MigrationFiles makes the five files). The
	// destination's certificate must name the host's migration address.
	MigrationTLS bool
	// The caps on unproven connections of the API (httpsrv.Limits).
	MaxUnproven, MaxUnprovenPerAddress int
	// Images maps an image's name (the one the daemon's job types give)
	// to its directory (made by `metasched image build`): the images VMs
	// may boot on QEMU hosts; the agent loads and verifies each when it
	// starts.
	Images map[string]string
	// BootTimeout bounds the wait for a booting VM's guest agent.
	BootTimeout time.Duration
	// MaxConcurrentBoots bounds the VMs of the site that boot an image at
	// once (0: no bound), as nova-compute's max_concurrent_builds does a
	// host's: a boot storm on hosts that share CPUs (or storage) makes
	// every boot slower than the same boots in turn.
	MaxConcurrentBoots int
	// Network is the network the site's VMs join (see Network); nil:
	// VMs have no network interface.
	Network *Network
	// CPUQuota is the fraction of one host core each vCPU of a VM the
	// agent creates on a QEMU host may use (libvirt's <cputune>; it needs
	// the cpu cgroup controller on the host's libvirtd); 0: no limit.
	// Test-driver hosts ignore it.
	CPUQuota float64
	// Slurm, when set, says the site's hosts are the nodes of a Slurm
	// cluster (their URIs slurm:NODE): see SlurmSite.
	Slurm *SlurmSite
}

// SlurmSite is the slurm block of a site file: a cluster that runs Slurm,
// whose nodes are the site's hosts (each listed with uri slurm:NODE) and
// whose partitions are its pools. A node's pool is the pool of the
// partition it is in; a pool switch moves it between partitions. The
// agent speaks to Slurm with its client commands as root (or an operator
// account that may update nodes and partitions): sinfo and squeue read,
// scontrol changes, salloc allocates, srun runs, scancel releases.
type SlurmSite struct {
	// Conf is the cluster's slurm.conf (the commands' SLURM_CONF): it
	// names the controller and, with auth/munge, the munge socket.
	// "": the commands' default.
	Conf string
	// Bin is the directory of the client commands ("": /usr/bin).
	Bin string
	// Partitions maps each pool to its partition.
	Partitions map[string]string
	// SwitchTimeout bounds the wait, in a pool switch, for the jobs of
	// Slurm's own users on the node to end (they are never cancelled):
	// a node still busy then stays where it is and the switch is
	// cancelled. Default 1m; keep it under the daemon's step timeout plus
	// the site's switch_delay.
	SwitchTimeout time.Duration
}

// DefaultSlurmSwitchTimeout is a Slurm site's default switch_timeout.
const DefaultSlurmSwitchTimeout = time.Minute

// SlurmScheme is the URI scheme of a Slurm site's hosts: slurm:NODE.
const SlurmScheme = "slurm"

// SiteHost is one host of a site file.
type SiteHost struct {
	Name             string `json:"name"`
	URI              string `json:"uri"`
	Pool             string `json:"pool,omitempty"`
	MigrationAddress string `json:"migration_address,omitempty"`
	// ImageDir is a directory of the host where the agent puts the images
	// its VMs boot (through libvirt's storage API: the host may be
	// remote); "": the VMs boot the images where the agent reads them.
	ImageDir string `json:"image_dir,omitempty"`
	// CPUs and MemoryMiB are the share of the host the agent's VMs may
	// take, when it is less than all of it (0: all of it, as libvirt
	// reports it): a machine shared with other work, or, in a lab, one
	// machine cut into several hosts. A share larger than the host makes
	// the host unreachable with an error that says so.
	CPUs      int `json:"cpus,omitempty"`
	MemoryMiB int `json:"memory_mib,omitempty"`
}

// Defaults of a site file.
const (
	DefaultListen          = "127.0.0.1:9101"
	DefaultProgressTimeout = 60 * time.Second
	DefaultBootTimeout     = 60 * time.Second
	// MaxConcurrentBootsLimit is the largest max_concurrent_boots.
	MaxConcurrentBootsLimit = 1000
)

// The largest share of a host a site file may give (cpus, memory_mib):
// bounds that no machine reaches, so that a typo is caught.
const (
	maxHostCPUs      = 1 << 16
	maxHostMemoryMiB = 1 << 30
)

// DefaultMigrationPorts are libvirt's own default range.
var DefaultMigrationPorts = [2]int{49152, 49215}

var (
	siteFields = []string{"site", "listen", "token_file", "switch_delay", "grid", "pool", "data_dir",
		"hosts", "migration_ports", "migration_progress_timeout", "migration_tls", "max_unproven_connections", "max_unproven_per_address",
		"images", "boot_timeout", "max_concurrent_boots", "network", "cpu_quota", "tls", "insecure_http", "slurm"}
	slurmFields    = []string{"conf", "bin", "partitions", "switch_timeout"}
	siteHostFields = []string{"name", "uri", "pool", "migration_address", "image_dir", "cpus", "memory_mib"}
)

// ParseSite decodes a site file strictly: unknown fields, wrong types and
// bad values are errors, every one reported as "FILE: FIELD.PATH: problem".
// Relative paths are resolved against the file's directory.
func ParseSite(file string, data []byte) (*Site, error) {
	d, root, err := yamlx.Parse(file, data)
	if err != nil {
		return nil, err
	}
	top, ok := root.Map(siteFields...)
	if !ok {
		return nil, d.Err()
	}
	s := &Site{Listen: DefaultListen, MigrationPorts: DefaultMigrationPorts, MigrationProgressTimeout: DefaultProgressTimeout,
		BootTimeout: DefaultBootTimeout}
	dir := filepath.Dir(file)
	path := func(key string, required bool) string { return top.File(key, required, dir) }
	duration := func(key string, into *time.Duration) {
		v, ok := top.Get(key, false)
		if !ok {
			return
		}
		str, ok := v.Str()
		if !ok {
			return
		}
		x, err := time.ParseDuration(str)
		switch {
		case err != nil:
			v.Errorf("not a duration like 30s or 2m: %q", str)
		case x < 0:
			v.Errorf("must be >= 0")
		default:
			*into = x
		}
	}
	if s.Site, ok = top.Str("site", true); ok && !yamlx.IsName(s.Site) {
		top.Errorf("site", "must be a cluster name (a-z, 0-9, -), not %q", s.Site)
	}
	if l, ok := top.Str("listen", false); ok {
		if _, port, err := net.SplitHostPort(l); err != nil || port == "" {
			top.Errorf("listen", "must be HOST:PORT, not %q", l)
		} else {
			s.Listen = l
		}
	}
	s.TLS = tlsx.Parse(top, dir, s.Listen)
	switch {
	case s.TLS != nil && top.Has("token_file"):
		top.Errorf("token_file", "must not be given with tls: the daemon proves itself by its certificate")
	case s.TLS == nil && top.Has("insecure_http"):
		s.TokenFile = path("token_file", true)
	}
	duration("switch_delay", &s.SwitchDelay)
	duration("migration_progress_timeout", &s.MigrationProgressTimeout)
	if s.MigrationProgressTimeout == 0 {
		top.Errorf("migration_progress_timeout", "must be > 0")
	}
	s.MigrationTLS, _ = top.Bool("migration_tls", false)
	duration("boot_timeout", &s.BootTimeout)
	if s.BootTimeout == 0 {
		top.Errorf("boot_timeout", "must be > 0")
	}
	if n, ok := top.Int("max_concurrent_boots", false); ok {
		if n < 0 || n > MaxConcurrentBootsLimit {
			top.Errorf("max_concurrent_boots", "must be 0 (no bound) to %d, not %d", MaxConcurrentBootsLimit, n)
		}
		s.MaxConcurrentBoots = n
	}
	if v, ok := top.Get("images", false); ok {
		if names, ok := v.Keys(); ok {
			m, _ := v.Map(names...)
			s.Images = map[string]string{}
			for _, name := range names {
				if msg := CheckImageName(name); msg != "" {
					m.Errorf(name, "must be keyed by an image name (a-z, 0-9, -), not %q", name)
					continue
				}
				p, ok := m.Str(name, false)
				if !ok {
					continue
				}
				if p == "" {
					m.Errorf(name, "must be the directory of an image, not empty")
					continue
				}
				if !filepath.IsAbs(p) {
					p = filepath.Join(dir, p)
				}
				s.Images[name] = p
			}
		}
	}
	if v, ok := top.Get("network", false); ok {
		s.Network = parseNetwork(v)
	}
	if q, ok := top.Float("cpu_quota", false); ok {
		if msg := domxml.CheckCPUQuota(q); msg != "" {
			top.Errorf("cpu_quota", "%s", msg)
		} else {
			s.CPUQuota = q
		}
	}
	if v, ok := top.Get("slurm", false); ok {
		s.Slurm = parseSlurm(v, dir)
	}
	caps := httpsrv.ParseLimits(top)
	s.MaxUnproven, s.MaxUnprovenPerAddress = caps.MaxUnproven, caps.MaxUnprovenPerAddress
	if top.Has("grid") {
		s.Grid = path("grid", false)
	}
	if top.Has("data_dir") {
		s.DataDir = path("data_dir", false)
	}
	if p, ok := top.Str("pool", false); ok {
		if !yamlx.IsName(p) {
			top.Errorf("pool", "must be a pool name (a-z, 0-9, -), not %q", p)
		}
		s.Pool = p
	}
	if v, ok := top.Get("migration_ports", false); ok {
		if str, ok := v.Str(); ok {
			if r, err := parsePorts(str); err != nil {
				v.Errorf("%v", err)
			} else {
				s.MigrationPorts = r
			}
		}
	}
	if vs, ok := top.Seq("hosts", false); ok {
		if len(vs) == 0 {
			top.Errorf("hosts", "must list at least one host (or be left out)")
		}
		seen := map[string]bool{}
		for _, v := range vs {
			m, ok := v.Map(siteHostFields...)
			if !ok {
				continue
			}
			var h SiteHost
			if h.Name, ok = m.Str("name", true); ok {
				if !yamlx.IsName(h.Name) {
					m.Errorf("name", "must be a host name (a-z, 0-9, -), not %q", h.Name)
				} else if seen[h.Name] {
					m.Errorf("name", "host %q is listed twice", h.Name)
				}
				seen[h.Name] = true
			}
			if h.URI, ok = m.Str("uri", true); ok {
				if err := checkURI(h.URI); err != nil {
					m.Errorf("uri", "%v", err)
				}
			}
			if p, ok := m.Str("pool", false); ok {
				if !yamlx.IsName(p) {
					m.Errorf("pool", "must be a pool name (a-z, 0-9, -), not %q", p)
				}
				h.Pool = p
			}
			if a, ok := m.Str("migration_address", false); ok {
				if net.ParseIP(a) == nil && !yamlx.IsName(strings.ReplaceAll(a, ".", "-")) {
					m.Errorf("migration_address", "must be an IP address or a host name, not %q", a)
				}
				h.MigrationAddress = a
			}
			if d, ok := m.Str("image_dir", false); ok {
				if !filepath.IsAbs(d) || filepath.Clean(d) != d || strings.ContainsRune(d, 0) {
					m.Errorf("image_dir", "must be a clean absolute path of the host, not %q", d)
				}
				h.ImageDir = d
			}
			if n, ok := m.Int("cpus", false); ok {
				if n < 1 || n > maxHostCPUs {
					m.Errorf("cpus", "must be within 1 and %d, not %d", maxHostCPUs, n)
				}
				h.CPUs = n
			}
			if n, ok := m.Int("memory_mib", false); ok {
				if n < 1 || n > maxHostMemoryMiB {
					m.Errorf("memory_mib", "must be within 1 and %d, not %d", maxHostMemoryMiB, n)
				}
				h.MemoryMiB = n
			}
			if h.Pool == "" {
				h.Pool = s.Pool
			}
			s.Hosts = append(s.Hosts, h)
		}
	} else if !top.Has("hosts") && !top.Has("grid") {
		top.Errorf("hosts", "is required when there is no grid to generate the hosts from")
	}
	checkSlurmHosts(top, s)
	if err := d.Err(); err != nil {
		return nil, err
	}
	return s, nil
}

// parsePorts parses "FROM-TO" (or one port).
func parsePorts(s string) ([2]int, error) {
	lo, hi, found := strings.Cut(s, "-")
	if !found {
		hi = lo
	}
	a, err1 := strconv.Atoi(strings.TrimSpace(lo))
	b, err2 := strconv.Atoi(strings.TrimSpace(hi))
	if err1 != nil || err2 != nil {
		return [2]int{}, fmt.Errorf("must be a port range FROM-TO like 49152-49215, not %q", s)
	}
	if a < 1 || b > 65535 || a > b {
		return [2]int{}, fmt.Errorf("must be a range of ports within 1-65535 with FROM <= TO, not %q", s)
	}
	return [2]int{a, b}, nil
}

// checkURI accepts libvirt URIs such as test:///default,
// test:///path/host.xml, qemu:///system, qemu+unix:///session?socket=PATH
// and qemu+ssh://host/system.
func checkURI(s string) error {
	u, err := url.Parse(s)
	if err != nil || u.Scheme == "" {
		return fmt.Errorf("must be a libvirt URI like test:///default or qemu+unix:///session?socket=PATH, not %q", s)
	}
	driver, _, _ := strings.Cut(u.Scheme, "+")
	switch driver {
	case "test", "qemu":
		return nil
	case SimScheme:
		_, err := ParseSimURI(s)
		return err
	case SlurmScheme:
		_, err := SlurmNode(s)
		return err
	}
	return fmt.Errorf("driver %q of %q is not supported (test, qemu, slurm for a node of a Slurm site, or sim for a simulated host)", driver, s)
}

// migrationAddress is where other hosts reach h for a live migration.
func (h SiteHost) migrationAddress() string {
	if h.MigrationAddress != "" {
		return h.MigrationAddress
	}
	if u, err := url.Parse(h.URI); err == nil && u.Hostname() != "" {
		return u.Hostname()
	}
	return "127.0.0.1"
}
