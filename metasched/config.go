package metasched

import (
	"cmp"
	"fmt"
	"math"
	"net"
	"net/netip"
	"net/url"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	hp "github.com/metasched/metasched/hypervisorproxy"

	"github.com/metasched/metasched/internal/httpsrv"
	"github.com/metasched/metasched/internal/tlsx"
	"github.com/metasched/metasched/internal/yamlx"
	"github.com/metasched/metasched/metasched/api"
	"github.com/metasched/metasched/metasched/executor"
	"github.com/metasched/metasched/metasched/policy"
	"github.com/metasched/metasched/selection"
)

// Config is the daemon's configuration file (`metasched serve --config`,
// docs/reference/configuration.md):
//
//	listen: 10.0.0.1:8080
//	tls: {cert_file: daemon.pem, key_file: daemon-key.pem, ca_file: ca.pem}   # or insecure_http: true (loopback only)
//	data_dir: ./metasched-data
//	grid: grid.yaml
//	job_types:                      # each job type is a pool
//	  - {name: render, vm: {vcpus: 2, memory_mib: 2048}, holding_cost: 2}
//	agents:                         # omitted: in-process agents on the test driver
//	  - {site: spain, address: https://10.0.0.2:9101}   # http://127.0.0.1:PORT with token_file: without tls
//	policy: {name: heuristic, K: 5} # or optimal {table: FILE | solve: true}, static, best-static, none
//	executor: {name: emulated, time_scale: 0.001}   # or {name: guest, poll: 500ms}, or host-command (see ExecutorConfig)
//
// and also switch_delay (the in-process agents' pool reconfiguration time,
// default 0s) and on_agent_loss (what happens to the jobs of an unreachable
// agent: requeue, the default, or fail) after agent_loss_grace (how long a
// host may be unreachable first: default 30s, at most 24h; a restarted
// agent finds its VMs running and the jobs on them go on), and min_pool_hosts (the fewest hosts
// the policy may leave a pool, default 2: a master-worker job needs a
// master's host and a worker's), hold_after (how long a queued job that
// cannot run waits before it holds the hosts of its best plan on its empty
// pool, so that younger jobs backfill only around it: default 1m, at most
// 24h), and max_unproven_connections and max_unproven_per_address (the caps
// on the API's connections that no request has authenticated yet, in all
// and per client address; default 1024 and 64: see package httpsrv), and
// idempotency_retention (how long the Idempotency-Key of a submission is
// kept, default and least 24h), and retention (how long the history is
// kept: finished switches and finished jobs' run directories; see
// RetentionConfig), and walltime ({default: D, max: M}: the longest an
// attempt of a job runs when its job file gives no walltime, and the
// longest a job file may ask; none by default), calibration (when and
// how the sites' figures are measured in VMs; see CalibrationConfig), and
// vm_headroom ({vcpus: N, memory_mib: M}: what every VM the daemon creates
// may grow by live, its maxima above its size; default none). Relative
// paths are relative to the file's directory.
type Config struct {
	Listen string
	// TLS are the daemon's certificate, key and CA file (package tlsx):
	// the API is served over HTTPS, and the daemon presents the
	// certificate to the agents, whose certificates it checks against
	// the CA. nil: plain HTTP, on a loopback address only.
	TLS     *tlsx.Files
	DataDir string
	// Store is where the daemon keeps its state: nil, a bbolt file in
	// DataDir (one daemon); else an etcd cluster (StoreEtcd).
	Store *StoreEtcd
	// Advertise is the URL at which the other daemons (and clients) reach
	// this one's API, with the store in etcd: the leader's is what a
	// standby forwards requests to. Empty: the scheme and listen
	// (AdvertiseURL).
	Advertise   string
	Grid        string
	JobTypes    []api.JobType
	Agents      []AgentConfig // empty: in-process agents
	Policy      PolicyConfig
	Executor    ExecutorConfig
	SwitchDelay time.Duration
	OnAgentLoss string
	// AgentLossGrace is how long a host may be unreachable before the
	// jobs on it are stopped as on_agent_loss says.
	AgentLossGrace time.Duration
	MinPoolHosts   int
	HoldAfter      time.Duration
	// Unproven caps the HTTP connections no request has authenticated yet
	// (zero fields: httpsrv's defaults).
	Unproven httpsrv.Limits
	// IdempotencyRetention is how long the store keeps a submission's
	// idempotency key; 0 means DefaultIdempotencyRetention.
	IdempotencyRetention time.Duration
	// Retention is how long the history is kept; its zero value means
	// DefaultRetention.
	Retention RetentionConfig
	// Walltime bounds the jobs' run times.
	Walltime WalltimeConfig
	// Calibration says when and how the sites' figures are measured.
	Calibration CalibrationConfig
	// VMHeadroom is added to the size of every VM the daemon creates to
	// make its maxima (VMSpec.MaxVCPUs, MaxMemoryMiB), so that the VM can
	// be grown live (POST /v1/jobs/{id}/vms/{vm}/resize). Capacity is
	// counted at the VMs' current sizes.
	VMHeadroom VMHeadroom
}

// VMHeadroom is how much a VM may grow live beyond the size it is created
// with (serve configuration vm_headroom).
type VMHeadroom struct {
	VCPUs     int `json:"vcpus"`
	MemoryMiB int `json:"memory_mib"`
}

// CalibrationConfig is how the daemon measures the sites' figures in VMs
// (docs/internals/daemon.md, "Calibration"; its fields in
// docs/reference/configuration.md, "calibration"):
//
//	calibration:
//	  max_age: 1h          # a figure older than this is measured again
//	  bench_seconds: 10    # how long the task farm's kernel runs (taskfarm bench --seconds)
//	  probe_bytes: 8388608 # what a LAN or link measurement streams (taskfarm probe --bytes)
//	  auto: true           # false: only on demand (metasched calibrate, POST /v1/calibrate)
//	  taskfarm: /usr/local/lib/metasched/taskfarm  # copied onto Slurm nodes (default: beside this program)
//
// A zero field means its default (DefaultCalibration).
type CalibrationConfig struct {
	MaxAge       time.Duration
	BenchSeconds int
	ProbeBytes   int64
	// OnDemand (auto: false) measures only what an operator asks for.
	OnDemand bool
	// TaskFarm is the static task farm binary the calibration copies
	// onto the nodes of a Slurm site, whose own system has none ("": the
	// file taskfarm beside the daemon's program, when it is there).
	TaskFarm string
}

// DefaultCalibration is the calibration's configuration by default.
var DefaultCalibration = CalibrationConfig{MaxAge: time.Hour, BenchSeconds: 10, ProbeBytes: 8 << 20}

// withDefaults is c with its zero fields at their defaults.
func (c CalibrationConfig) withDefaults() CalibrationConfig {
	d := DefaultCalibration
	c.MaxAge = cmp.Or(c.MaxAge, d.MaxAge)
	c.BenchSeconds = cmp.Or(c.BenchSeconds, d.BenchSeconds)
	c.ProbeBytes = cmp.Or(c.ProbeBytes, d.ProbeBytes)
	return c
}

// Bounds of the calibration's configuration.
const (
	MinCalibrationMaxAge = time.Minute
	MaxBenchSeconds      = 600
	MinProbeBytes        = 64 << 10
	MaxProbeBytes        = 1 << 30
)

// WalltimeConfig bounds how long an attempt of a job may run: Default when
// its job file gives no walltime (0: no bound), and the most a job file may
// ask (0: no most).
type WalltimeConfig struct {
	Default time.Duration `json:"default,omitempty"`
	Max     time.Duration `json:"max,omitempty"`
}

// MinWalltime is the least walltime of the configuration.
const MinWalltime = time.Second

// RetentionConfig is how long the daemon keeps its history:
//
//	retention:
//	  switches: {max_age: 720h, max_count: 10000}   # the finished switches kept
//	  job_dirs: 24h        # a finished job's run directory, DATA_DIR/jobs/ID, after its end
//
// A finished switch is dropped once it is older than MaxAge or beyond the
// MaxCount newest (0: no limit of that kind; one of them must be set);
// switches in flight and stranded hosts not cleared are always kept. A
// run directory is removed JobDirs after its job ended (0: at the next
// housekeeping), or as soon as its job is not in the store. The
// housekeeping runs at the start and every minute.
type RetentionConfig struct {
	SwitchMaxAge   time.Duration
	SwitchMaxCount int
	JobDirs        time.Duration
}

// DefaultRetention keeps finished switches 30 days, at most 10,000 of
// them, and finished jobs' run directories 24 hours.
var DefaultRetention = RetentionConfig{SwitchMaxAge: 30 * 24 * time.Hour, SwitchMaxCount: 10000, JobDirs: 24 * time.Hour}

// MinSwitchMaxAge is the shortest max_age of the switches: a switch just
// ended is kept at least this long whatever the retention says, so that
// its final notification is carried out before its record can go.
const MinSwitchMaxAge = time.Minute

// AgentConfig is a remote site agent: at an https:// address, reached
// over mutual TLS with the daemon's certificate (no token); at an
// http:// address on the loopback interface, with the bearer token of
// TokenFile (a test on one machine).
type AgentConfig struct {
	Site      string `json:"site"`
	Address   string `json:"address"`
	TokenFile string `json:"token_file,omitempty"`
}

// PolicyConfig is the switching policy.
type PolicyConfig struct {
	Name  string `json:"name"` // heuristic, optimal, static, best-static, none
	K     int    `json:"K,omitempty"`
	Table string `json:"table,omitempty"` // optimal: a solved table
	Solve bool   `json:"solve,omitempty"` // optimal: solve at start
}

// ExecutorConfig says how jobs run: emulated (nothing runs), guest (the
// job's command runs inside its VMs), or host-command:
//
//	executor: {name: host-command, run_as: metasched-jobs, allow_users: false}
//
// WARNING: host-command runs every job's command on the daemon's own
// machine, outside the VMs: whoever may submit a job runs a program there.
// It runs as run_as, a user of that machine (a name or a numeric uid):
// required when the daemon runs as root, and never root itself; a daemon
// that runs as another user cannot switch users, and runs the commands as
// itself (run_as absent or that user). The daemon checks run_as when it
// starts (ParseConfig checks only its syntax) and logs a warning that the
// jobs run on its machine and as whom. Only the operator may submit jobs
// to it, unless allow_users: true lets the grid's user role too.
type ExecutorConfig struct {
	Name      string  `json:"name"` // emulated, host-command or guest
	TimeScale float64 `json:"time_scale,omitempty"`
	// RunAs is the user of the daemon's machine the jobs' commands run as
	// (host-command only): a user name, or a numeric uid. With Accounts,
	// the account of the owners it does not name, all together (absent:
	// their jobs are refused).
	RunAs string `json:"run_as,omitempty"`
	// Accounts maps owners of jobs (a token's name, or cert:NAME for a
	// client certificate's) to users of the daemon's machine, each its
	// own (host-command only): a job runs as its owner's account, in a
	// run directory only that account and the daemon can read.
	Accounts map[string]string `json:"accounts,omitempty"`
	// AllowUsers lets the grid's user role submit jobs to a daemon whose
	// executor is host-command (host-command only; false by default: the
	// operator only).
	AllowUsers bool `json:"allow_users,omitempty"`
	// Env names the variables of the daemon's environment that the jobs'
	// commands get besides PATH, LANG, HOME, USER, LOGNAME and the
	// METASCHED_* variables (host-command only): nothing else of the
	// daemon's environment reaches a job.
	Env []string `json:"env,omitempty"`
	// MaxOutputBytes bounds the output kept of a command's attempt;
	// OutputBytesPerSecond the rate its output is read at (host-command
	// and guest; 0: executor.DefaultMaxOutput and DefaultOutputRate).
	MaxOutputBytes       int64 `json:"max_output_bytes,omitempty"`
	OutputBytesPerSecond int64 `json:"output_bytes_per_second,omitempty"`
	// Poll is how often the guest executor reads its VMs' output and exit
	// (guest only; 0: executor.DefaultGuestPoll).
	Poll time.Duration `json:"poll,omitempty"`
}

// Defaults of a configuration.
const (
	DefaultListen    = "127.0.0.1:8080"
	DefaultDataDir   = "metasched-data"
	DefaultK         = 5
	DefaultTimeScale = 0.001
	DefaultHolding   = 1.0
	DefaultMinHosts  = 2
	// DefaultHoldAfter is hold_after's default and MaxHoldAfter its
	// largest value.
	DefaultHoldAfter = time.Minute
	MaxHoldAfter     = 24 * time.Hour
	// DefaultAgentLossGrace is agent_loss_grace's default and
	// MaxAgentLossGrace its largest value.
	DefaultAgentLossGrace = 30 * time.Second
	MaxAgentLossGrace     = 24 * time.Hour
	// MinOutputBytes and MaxOutputBytes bound the executor's
	// max_output_bytes and output_bytes_per_second.
	MinOutputBytes = 1 << 10
	MaxOutputBytes = 1 << 30
	// MinGuestPoll and MaxGuestPoll bound the guest executor's poll.
	MinGuestPoll = 10 * time.Millisecond
	MaxGuestPoll = time.Minute
	// DefaultIdempotencyRetention is the default and the least retention
	// of idempotency keys: a client may retry a submission for a day.
	DefaultIdempotencyRetention = 24 * time.Hour
)

// HostCommand is the name of the executor that runs the jobs' commands on
// the daemon's own machine (executor.CommandName).
const HostCommand = executor.CommandName

// Executors and what to do on an agent's loss (the policies are
// policy.Names).
var (
	Executors   = []string{"emulated", HostCommand, "guest"}
	AgentLosses = []string{"requeue", "fail"}
)

var (
	configFields      = append([]string{"listen", "data_dir", "grid", "job_types", "agents", "policy", "executor", "switch_delay", "on_agent_loss", "agent_loss_grace", "min_pool_hosts", "hold_after", "idempotency_retention", "retention", "walltime", "calibration", "vm_headroom", "store", "advertise"}, slices.Concat(httpsrv.LimitFields, tlsx.Fields)...)
	calibrationFields = []string{"max_age", "bench_seconds", "probe_bytes", "auto", "taskfarm"}
	retentionFields   = []string{"switches", "job_dirs"}
	switchesFields    = []string{"max_age", "max_count"}
	jobTypeFields     = []string{"name", "vm", "holding_cost", "image"}
	vmFields          = []string{"vcpus", "memory_mib"}
	agentFields       = []string{"site", "address", "token_file"}
	storeFields       = []string{"etcd"}
	etcdFields        = []string{"endpoints", "prefix", "tls", "lease_ttl"}
	policyFields      = []string{"name", "K", "table", "solve"}
	executorFields    = []string{"name", "time_scale", "max_output_bytes", "output_bytes_per_second", "poll", "run_as", "accounts", "allow_users", "env"}
)

// ParseConfig decodes a configuration file strictly: every problem is
// reported as "FILE: FIELD.PATH: problem", one per line.
func ParseConfig(file string, data []byte) (*Config, error) {
	d, root, err := yamlx.Parse(file, data)
	if err != nil {
		return nil, err
	}
	top, ok := root.Map(configFields...)
	if !ok {
		return nil, d.Err()
	}
	dir := filepath.Dir(file)
	abs := func(p string) string {
		if p == "" || filepath.IsAbs(p) {
			return p
		}
		return filepath.Join(dir, p)
	}
	c := &Config{
		Listen: DefaultListen, DataDir: abs(DefaultDataDir), OnAgentLoss: "requeue", AgentLossGrace: DefaultAgentLossGrace, MinPoolHosts: DefaultMinHosts, HoldAfter: DefaultHoldAfter,
		Policy:   PolicyConfig{Name: "heuristic", K: DefaultK},
		Executor: ExecutorConfig{Name: "emulated", TimeScale: DefaultTimeScale},
	}
	c.Retention = DefaultRetention
	c.Calibration = DefaultCalibration
	if l, ok := top.Str("listen", false); ok {
		if _, port, err := net.SplitHostPort(l); err != nil || port == "" {
			top.Errorf("listen", "must be HOST:PORT, not %q", l)
		} else {
			c.Listen = l
		}
	}
	c.TLS = tlsx.Parse(top, dir, c.Listen)
	if p, ok := top.Str("data_dir", false); ok {
		if p == "" {
			top.Errorf("data_dir", "must not be empty")
		}
		c.DataDir = abs(p)
	}
	if v, ok := top.Get("store", false); ok {
		if m, ok := v.Map(storeFields...); ok {
			if e, ok := m.Get("etcd", true); ok {
				if em, ok := e.Map(etcdFields...); ok {
					c.Store = parseStoreEtcd(em, dir)
				}
			}
		}
	}
	if a, ok := top.Str("advertise", false); ok {
		u, err := url.Parse(a)
		switch {
		case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.User != nil:
			top.Errorf("advertise", "must be the daemon's URL like https://10.0.0.1:8080, not %q", a)
		case u.Scheme == "https" && c.TLS == nil:
			top.Errorf("advertise", "an https URL needs the daemon's tls")
		case u.Scheme == "http" && c.TLS != nil:
			top.Errorf("advertise", "the daemon serves https (tls): the URL is https://, not %q", a)
		default:
			c.Advertise = strings.TrimRight(a, "/")
		}
	}
	if p, ok := top.Str("grid", true); ok {
		if p == "" {
			top.Errorf("grid", "must not be empty")
		}
		c.Grid = abs(p)
	}
	if vs, ok := top.Seq("job_types", true); ok {
		if len(vs) == 0 {
			top.Errorf("job_types", "must list at least one job type")
		}
		for _, v := range vs {
			m, ok := v.Map(jobTypeFields...)
			if !ok {
				continue
			}
			jt := api.JobType{HoldingCost: DefaultHolding}
			if jt.Name, ok = m.Str("name", true); ok {
				switch {
				case !yamlx.IsName(jt.Name):
					m.Errorf("name", "must be a name (a-z, 0-9, -), not %q", jt.Name)
				case slices.ContainsFunc(c.JobTypes, func(o api.JobType) bool { return o.Name == jt.Name }):
					m.Errorf("name", "job type %q is listed twice", jt.Name)
				}
			}
			if vm, ok := m.Get("vm", true); ok {
				if vmm, ok := vm.Map(vmFields...); ok {
					// A job of the type without a vm of its own gets this
					// one: it keeps the limits of a job's vm.
					for _, f := range []struct {
						key string
						max int
						dst *int
					}{{"vcpus", selection.MaxVCPUs, &jt.VCPUs}, {"memory_mib", selection.MaxMemoryMiB, &jt.MemoryMiB}} {
						n, ok := vmm.Int(f.key, true)
						switch {
						case !ok:
						case n < 1:
							vmm.Errorf(f.key, "must be >= 1, not %d", n)
						case n > f.max:
							vmm.Errorf(f.key, "must be at most %d (the limit of a job's vm), not %d", f.max, n)
						}
						*f.dst = n
					}
				}
			}
			if img, ok := m.Str("image", false); ok {
				if msg := hp.CheckImageName(img); msg != "" {
					m.Errorf("image", "%s", msg)
				}
				jt.Image = img
			}
			if h, ok := m.Float("holding_cost", false); ok {
				if h <= 0 {
					m.Errorf("holding_cost", "must be > 0, not %g", h)
				}
				jt.HoldingCost = h
			}
			c.JobTypes = append(c.JobTypes, jt)
		}
	}
	if vs, ok := top.Seq("agents", false); ok {
		for _, v := range vs {
			m, ok := v.Map(agentFields...)
			if !ok {
				continue
			}
			var a AgentConfig
			if a.Site, ok = m.Str("site", true); ok {
				switch {
				case !yamlx.IsName(a.Site):
					m.Errorf("site", "must be a cluster name (a-z, 0-9, -), not %q", a.Site)
				case slices.ContainsFunc(c.Agents, func(o AgentConfig) bool { return o.Site == a.Site }):
					m.Errorf("site", "site %q has two agents", a.Site)
				}
			}
			var u *url.URL
			if a.Address, ok = m.Str("address", true); ok {
				var err error
				u, err = url.Parse(a.Address)
				if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Path != "" && u.Path != "/" || u.RawQuery != "" || u.User != nil {
					m.Errorf("address", "must be an agent's URL like https://10.0.0.2:9101, not %q", a.Address)
					u = nil
				}
				a.Address = strings.TrimRight(a.Address, "/")
			}
			switch {
			case u == nil:
			case u.Scheme == "https" && c.TLS == nil && !d.Failed("tls"):
				m.Errorf("address", "an https agent needs the daemon's tls (its certificate proves the daemon to the agent)")
			case u.Scheme == "https" && m.Has("token_file"):
				m.Errorf("token_file", "must not be given for an https agent: the daemon proves itself by its certificate")
			case u.Scheme == "http" && !tlsx.Loopback(u.Host):
				m.Errorf("address", "plain HTTP goes to a loopback address only (127.0.0.1, ::1, localhost), not %q: use https and tls", a.Address)
			case u.Scheme == "http":
				if p, ok := m.Str("token_file", true); ok {
					if p == "" {
						m.Errorf("token_file", "must not be empty")
					}
					a.TokenFile = abs(p)
				}
			}
			c.Agents = append(c.Agents, a)
		}
	}
	if v, ok := top.Get("policy", false); ok {
		if m, ok := v.Map(policyFields...); ok {
			parsePolicy(m, &c.Policy, abs)
		}
	}
	if v, ok := top.Get("executor", false); ok {
		if m, ok := v.Map(executorFields...); ok {
			if n, ok := m.Get("name", true); ok {
				if s, ok := n.Keyword(Executors...); ok {
					c.Executor.Name = s
				} else if _, old := n.Keyword("command"); old {
					n.Errorf(`"command" is now %q: it runs jobs' commands on the daemon's own machine (give run_as: USER, an unprivileged user of that machine, which the commands run as; a daemon that runs as root needs it)`, HostCommand)
					c.Executor.Name = HostCommand // its other fields are checked as host-command's
				} else {
					n.Errorf("must be one of %s", strings.Join(Executors, ", "))
				}
			}
			if x, ok := m.Float("time_scale", false); ok {
				switch {
				case c.Executor.Name != "emulated":
					m.Errorf("time_scale", "applies to the emulated executor only")
				case x <= 0 || x > 1e6:
					m.Errorf("time_scale", "must be > 0 and <= 1e6, not %g", x)
				default:
					c.Executor.TimeScale = x
				}
			}
			for _, f := range []struct {
				key string
				v   *int64
			}{{"max_output_bytes", &c.Executor.MaxOutputBytes}, {"output_bytes_per_second", &c.Executor.OutputBytesPerSecond}} {
				n, ok := m.Int(f.key, false)
				switch {
				case !ok:
				case c.Executor.Name != HostCommand && c.Executor.Name != "guest":
					m.Errorf(f.key, "applies to the host-command and guest executors only")
				case n < MinOutputBytes || n > MaxOutputBytes:
					m.Errorf(f.key, "must be at least %d and at most %d, not %d", MinOutputBytes, MaxOutputBytes, n)
				default:
					*f.v = int64(n)
				}
			}
			if v, ok := m.Get("poll", false); ok {
				if c.Executor.Name != "guest" {
					m.Errorf("poll", "applies to the guest executor only")
				} else if x, ok := durationField(v, MinGuestPoll, MaxGuestPoll); ok {
					c.Executor.Poll = x
				}
			}
			if v, ok := m.Get("run_as", false); ok {
				if c.Executor.Name != HostCommand {
					m.Errorf("run_as", "applies to the host-command executor only")
				} else if u, ok := runAsField(v); ok {
					c.Executor.RunAs = u
				}
			}
			if v, ok := m.Get("accounts", false); ok {
				if c.Executor.Name != HostCommand {
					m.Errorf("accounts", "applies to the host-command executor only")
				} else {
					c.Executor.Accounts = accountsField(v)
				}
			}
			if b, ok := m.Bool("allow_users", false); ok {
				if c.Executor.Name != HostCommand {
					m.Errorf("allow_users", "applies to the host-command executor only")
				} else {
					c.Executor.AllowUsers = b
				}
			}
			if vs, ok := m.Seq("env", false); ok {
				if c.Executor.Name != HostCommand {
					m.Errorf("env", "applies to the host-command executor only")
				} else {
					c.Executor.Env = envField(m, vs)
				}
			}
			if c.Executor.Name != "emulated" {
				c.Executor.TimeScale = 0
			}
		}
	}
	if v, ok := top.Get("switch_delay", false); ok {
		if x, ok := durationField(v, 0, 0); ok {
			c.SwitchDelay = x
		}
	}
	if v, ok := top.Get("hold_after", false); ok {
		if x, ok := durationField(v, 0, MaxHoldAfter); ok {
			c.HoldAfter = x
		}
	}
	if v, ok := top.Get("walltime", false); ok {
		if m, ok := v.Map("default", "max"); ok {
			most := time.Duration(selection.MaxRuntimeSeconds * float64(time.Second))
			if v, ok := m.Get("max", false); ok {
				if x, ok := durationField(v, MinWalltime, most); ok {
					c.Walltime.Max = x
				}
			}
			if v, ok := m.Get("default", false); ok {
				if x, ok := durationField(v, MinWalltime, most); ok {
					if c.Walltime.Max > 0 && x > c.Walltime.Max {
						m.Errorf("default", "must be at most max (%s), not %s", c.Walltime.Max, x)
					} else {
						c.Walltime.Default = x
					}
				}
			}
		}
	}
	if v, ok := top.Get("retention", false); ok {
		if m, ok := v.Map(retentionFields...); ok {
			parseRetention(m, &c.Retention)
		}
	}
	if v, ok := top.Get("vm_headroom", false); ok {
		if m, ok := v.Map(vmFields...); ok {
			c.VMHeadroom = parseHeadroom(m)
		}
	}
	if v, ok := top.Get("agent_loss_grace", false); ok {
		if x, ok := durationField(v, 0, MaxAgentLossGrace); ok {
			c.AgentLossGrace = x
		}
	}
	if v, ok := top.Get("on_agent_loss", false); ok {
		if s, ok := v.Keyword(AgentLosses...); ok {
			c.OnAgentLoss = s
		} else {
			v.Errorf("must be one of %s", strings.Join(AgentLosses, ", "))
		}
	}
	if n, ok := top.Int("min_pool_hosts", false); ok {
		if n < 0 {
			top.Errorf("min_pool_hosts", "must be >= 0, not %d", n)
		}
		c.MinPoolHosts = n
	}
	if v, ok := top.Get("idempotency_retention", false); ok {
		if x, ok := durationField(v, DefaultIdempotencyRetention, 0); ok {
			c.IdempotencyRetention = x
		}
	}
	if v, ok := top.Get("calibration", false); ok {
		if m, ok := v.Map(calibrationFields...); ok {
			parseCalibration(m, &c.Calibration, dir)
		}
	}
	c.Unproven = httpsrv.ParseLimits(top)
	if err := d.Err(); err != nil {
		return nil, err
	}
	return c, nil
}

// envNameRE is a variable name executor.env takes: a letter or '_', then
// letters, digits and '_'.
var envNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,127}$`)

// MaxEnvNames bounds executor.env.
const MaxEnvNames = 64

// envField reads executor.env: names of variables, each once, none of
// those a job gets anyway.
func envField(m *yamlx.Map, vs []yamlx.Value) []string {
	if len(vs) > MaxEnvNames {
		m.Errorf("env", "lists %d names, more than %d", len(vs), MaxEnvNames)
		return nil
	}
	var out []string
	for i, v := range vs {
		name, ok := v.Str()
		if !ok {
			continue
		}
		field := fmt.Sprintf("env[%d]", i)
		switch {
		case !envNameRE.MatchString(name):
			m.Errorf(field, "must be a variable name (a letter or '_', then letters, digits and '_', at most 128), not %q", name)
		case strings.HasPrefix(name, "METASCHED_") || slices.Contains(executor.CommandEnvNames, name):
			m.Errorf(field, "%s is set for every job by the daemon: name only what it does not set", name)
		case slices.Contains(out, name):
			m.Errorf(field, "%s is listed twice", name)
		default:
			out = append(out, name)
		}
	}
	return out
}

// MaxAccounts bounds executor.accounts.
const MaxAccounts = 10000

// ownerRE is an owner of jobs: a token's name, or cert: and a client
// certificate's.
var ownerRE = regexp.MustCompile(`^(cert:)?[a-z0-9][a-z0-9._-]{0,62}$`)

// accountsField reads executor.accounts: owners, each with a user of the
// daemon's machine (as run_as takes it). Whether the machine has those
// users, and that each owner's is its own, is checked when the daemon
// starts.
func accountsField(v yamlx.Value) map[string]string {
	owners, ok := v.Keys()
	if !ok {
		return nil
	}
	if len(owners) > MaxAccounts {
		v.Errorf("maps %d owners, more than %d", len(owners), MaxAccounts)
		return nil
	}
	m, ok := v.Map(owners...)
	if !ok {
		return nil
	}
	out := make(map[string]string, len(owners))
	for _, owner := range owners {
		if !ownerRE.MatchString(owner) {
			m.Errorf(owner, "is not an owner of jobs: a token's name (1 to 63 of a-z, 0-9, '.', '_' and '-', starting with a letter or digit), or cert: and a client certificate's")
			continue
		}
		u, ok := m.Get(owner, true)
		if !ok {
			continue
		}
		if user, ok := runAsField(u); ok {
			out[owner] = user
		}
	}
	return out
}

// MaxUserName is the longest user name run_as takes.
const MaxUserName = 256

// runAsField reads executor.run_as: a user name (letters, digits, '.',
// '_', '-', not first, and a '$' last) or a numeric uid (a string of
// digits, or a number). Whether the machine has that user, and that it is
// not root, is checked when the daemon starts.
func runAsField(v yamlx.Value) (string, bool) {
	if v.IsNumber() {
		n, ok := v.Int()
		switch {
		case !ok:
			return "", false
		case n < 0 || int64(n) > math.MaxUint32-1:
			v.Errorf("must be a user name or a uid from 0 to %d, not %d", uint32(math.MaxUint32-1), n)
			return "", false
		}
		return strconv.Itoa(n), true
	}
	s, ok := v.Str()
	if !ok {
		return "", false
	}
	if isDigits(s) {
		if n, err := strconv.ParseUint(s, 10, 32); err != nil || n == math.MaxUint32 {
			v.Errorf("must be a user name or a uid from 0 to %d, not %q", uint32(math.MaxUint32-1), s)
			return "", false
		}
		return s, true
	}
	if !isUserName(s) {
		v.Errorf("must be a user name of the daemon's machine (letters, digits, '.', '_', '-', at most %d characters) or a numeric uid, not %q", MaxUserName, s)
		return "", false
	}
	return s, true
}

func isDigits(s string) bool { return s != "" && strings.Trim(s, "0123456789") == "" }

// isUserName reports whether s reads as a user name: letters, digits,
// '.', '_' and '-', not starting with '-', with a '$' allowed last (a
// machine account), and not all digits (a uid).
func isUserName(s string) bool {
	if s == "" || len(s) > MaxUserName || s[0] == '-' || isDigits(s) {
		return false
	}
	body := strings.TrimSuffix(s, "$")
	if body == "" {
		return false
	}
	for _, r := range body {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-'
		if !ok {
			return false
		}
	}
	return true
}

// parseHeadroom reads vm_headroom: vCPUs and memory at least 0 and at
// most a job's VM's limits, and memory in whole 2 MiB (a QEMU VM grows
// by DIMMs, which QEMU sizes in 2 MiB units).
func parseHeadroom(m *yamlx.Map) VMHeadroom {
	var h VMHeadroom
	if n, ok := m.Int("vcpus", false); ok {
		switch {
		case n < 0:
			m.Errorf("vcpus", "must be >= 0, not %d", n)
		case n > selection.MaxVCPUs:
			m.Errorf("vcpus", "must be at most %d (the limit of a job's vm), not %d", selection.MaxVCPUs, n)
		default:
			h.VCPUs = n
		}
	}
	if n, ok := m.Int("memory_mib", false); ok {
		switch {
		case n < 0:
			m.Errorf("memory_mib", "must be >= 0, not %d", n)
		case n > selection.MaxMemoryMiB:
			m.Errorf("memory_mib", "must be at most %d (the limit of a job's vm), not %d", selection.MaxMemoryMiB, n)
		case n%2 != 0:
			m.Errorf("memory_mib", "must be a multiple of 2 MiB (a QEMU VM grows by DIMMs, sized in 2 MiB units), not %d", n)
		default:
			h.MemoryMiB = n
		}
	}
	return h
}

func parseRetention(m *yamlx.Map, r *RetentionConfig) {
	if v, ok := m.Get("switches", false); ok {
		if sm, ok := v.Map(switchesFields...); ok {
			age, count := r.SwitchMaxAge, r.SwitchMaxCount
			if a, ok := sm.Get("max_age", false); ok {
				if x, ok := durationField(a, 0, 0); ok {
					if x != 0 && x < MinSwitchMaxAge {
						a.Errorf("must be 0 (no age limit) or at least %s, not %s: a switch just ended is kept until its end is carried out", MinSwitchMaxAge, x)
					}
					age = x
				}
			}
			if n, ok := sm.Int("max_count", false); ok {
				if n < 0 {
					sm.Errorf("max_count", "must be >= 0 (0: no count limit), not %d", n)
				}
				count = n
			}
			if age == 0 && count == 0 {
				v.Errorf("max_age and max_count are both 0: every finished switch would be kept forever; set one of them")
			}
			r.SwitchMaxAge, r.SwitchMaxCount = age, count
		}
	}
	if v, ok := m.Get("job_dirs", false); ok {
		if x, ok := durationField(v, 0, 0); ok {
			r.JobDirs = x
		}
	}
}

func parseCalibration(m *yamlx.Map, c *CalibrationConfig, dir string) {
	if v, ok := m.Get("max_age", false); ok {
		if x, ok := durationField(v, MinCalibrationMaxAge, 0); ok {
			c.MaxAge = x
		}
	}
	if n, ok := m.Int("bench_seconds", false); ok {
		if n < 1 || n > MaxBenchSeconds {
			m.Errorf("bench_seconds", "must be at least 1 and at most %d, not %d", MaxBenchSeconds, n)
		} else {
			c.BenchSeconds = n
		}
	}
	if n, ok := m.Int("probe_bytes", false); ok {
		if n < MinProbeBytes || n > MaxProbeBytes {
			m.Errorf("probe_bytes", "must be at least %d and at most %d, not %d", MinProbeBytes, MaxProbeBytes, n)
		} else {
			c.ProbeBytes = int64(n)
		}
	}
	if b, ok := m.Bool("auto", false); ok {
		c.OnDemand = !b
	}
	c.TaskFarm = m.File("taskfarm", false, dir)
}

func parsePolicy(m *yamlx.Map, p *PolicyConfig, abs func(string) string) {
	n, ok := m.Get("name", true)
	if !ok {
		return
	}
	name, ok := n.Keyword(policy.Names...)
	if !ok {
		n.Errorf("must be one of %s", strings.Join(policy.Names, ", "))
		return
	}
	*p = PolicyConfig{Name: name}
	if k, ok := m.Int("K", false); ok {
		switch {
		case name != "heuristic":
			m.Errorf("K", "applies to the heuristic policy only")
		case k < 1:
			m.Errorf("K", "must be >= 1, not %d", k)
		default:
			p.K = k
		}
	} else if name == "heuristic" {
		p.K = DefaultK
	}
	table, hasTable := m.Str("table", false)
	solve, hasSolve := m.Bool("solve", false)
	switch {
	case name != "optimal" && (hasTable || hasSolve):
		key := "table"
		if hasSolve {
			key = "solve"
		}
		m.Errorf(key, "applies to the optimal policy only")
	case name == "optimal" && hasTable && hasSolve && solve:
		m.Errorf("solve", "give either table or solve: true, not both")
	case name == "optimal" && hasTable:
		if table == "" {
			m.Errorf("table", "must not be empty")
		}
		p.Table = abs(table)
	case name == "optimal" && solve:
		p.Solve = true
	case name == "optimal":
		m.Errorf("name", "optimal needs table: FILE (a solved policy) or solve: true")
	}
}

// Pool returns the job type of that name.
func (c *Config) Pool(name string) (api.JobType, bool) {
	i := slices.IndexFunc(c.JobTypes, func(j api.JobType) bool { return j.Name == name })
	if i < 0 {
		return api.JobType{}, false
	}
	return c.JobTypes[i], true
}

func (p PolicyConfig) String() string {
	switch {
	case p.Name == "heuristic":
		return fmt.Sprintf("heuristic K=%d", p.K)
	case p.Name == "optimal" && p.Table != "":
		return "optimal (table " + filepath.Base(p.Table) + ")"
	case p.Name == "optimal":
		return "optimal (solved at start)"
	}
	return p.Name
}

// durationField reads a duration like 2s or 1m, at least least (which is
// not negative) and at most most (0: no limit).
func durationField(v yamlx.Value, least, most time.Duration) (time.Duration, bool) {
	s, ok := v.Str()
	if !ok {
		return 0, false
	}
	x, err := time.ParseDuration(s)
	switch {
	case err != nil:
		v.Errorf("not a duration like 2s or 1m: %q", s)
	case x < 0:
		v.Errorf("must be >= 0, not %s", s)
	case x < least:
		v.Errorf("must be at least %s, not %s", least, x)
	case most > 0 && x > most:
		v.Errorf("must be at most %s, not %s", most, x)
	default:
		return x, true
	}
	return 0, false
}

// StoreEtcd is the serve configuration's store: {etcd: {...}}: the
// daemon's state in an etcd cluster, which several daemons share.
type StoreEtcd struct {
	// Endpoints are the members' client URLs.
	Endpoints []string
	// Prefix is the root of the grid's keys (default /metasched/).
	Prefix string
	// TLS are the certificate and key the daemon presents to etcd and the
	// CA that signed etcd's certificates (etcd's own CA, not the grid's);
	// nil: plain HTTP, to loopback endpoints only.
	TLS *tlsx.Files
	// LeaseTTL is the leader's lease, whole seconds (0: DefaultLeaseTTL):
	// how long after a leader died another daemon may lead, and how long
	// an outage of etcd a leader rides out (seven tenths of it).
	LeaseTTL time.Duration
}

// DefaultEtcdPrefix is the root of the store's keys in etcd.
const DefaultEtcdPrefix = "/metasched/"

// ParseStoreEtcd reads a store's etcd settings on their own ({endpoints,
// prefix, tls}, YAML or JSON) with the serve configuration's rules; file
// names the input in errors, and relative paths are relative to its
// directory.
func ParseStoreEtcd(file string, data []byte) (*StoreEtcd, error) {
	d, root, err := yamlx.Parse(file, data)
	if err != nil {
		return nil, err
	}
	m, ok := root.Map(etcdFields...)
	if !ok {
		return nil, d.Err()
	}
	out := parseStoreEtcd(m, filepath.Dir(file))
	if err := d.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

func parseStoreEtcd(m *yamlx.Map, dir string) *StoreEtcd {
	out := &StoreEtcd{Prefix: DefaultEtcdPrefix}
	if v, ok := m.Get("tls", false); ok {
		if t, ok := v.Map("cert_file", "key_file", "ca_file"); ok {
			out.TLS = &tlsx.Files{Cert: t.File("cert_file", true, dir), Key: t.File("key_file", true, dir), CA: t.File("ca_file", true, dir)}
		}
	}
	if vs, ok := m.Seq("endpoints", true); ok {
		if len(vs) == 0 {
			m.Errorf("endpoints", "must list at least one etcd member's client URL")
		}
		for i, v := range vs {
			e, ok := v.Str()
			if !ok {
				continue
			}
			u, err := url.Parse(e)
			switch {
			case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.User != nil:
				m.Errorf(fmt.Sprintf("endpoints[%d]", i), "must be an etcd member's client URL like https://10.0.0.5:2379, not %q", e)
			case u.Scheme == "http" && !tlsx.Loopback(u.Host):
				m.Errorf(fmt.Sprintf("endpoints[%d]", i), "plain HTTP goes to a loopback address only, not %q: use https and tls", e)
			case u.Scheme == "https" && out.TLS == nil && !m.Has("tls"):
				m.Errorf("tls", "is required for the https endpoint %q: {cert_file, key_file, ca_file} of etcd's CA", e)
			case slices.Contains(out.Endpoints, strings.TrimRight(e, "/")):
				m.Errorf(fmt.Sprintf("endpoints[%d]", i), "%q is listed twice", e)
			default:
				out.Endpoints = append(out.Endpoints, strings.TrimRight(e, "/"))
			}
		}
	}
	if v, ok := m.Get("lease_ttl", false); ok {
		if x, ok := durationField(v, 2*time.Second, 10*time.Minute); ok {
			if x%time.Second != 0 {
				v.Errorf("must be whole seconds (an etcd lease's TTL is), not %s", x)
			} else {
				out.LeaseTTL = x
			}
		}
	}
	if p, ok := m.Str("prefix", false); ok {
		switch {
		case !strings.HasPrefix(p, "/") || len(p) < 2:
			m.Errorf("prefix", "must be a key prefix like /metasched/, not %q", p)
		case strings.ContainsFunc(p, func(r rune) bool { return r < 0x20 || r == 0x7f }):
			m.Errorf("prefix", "must not hold control characters")
		default:
			if !strings.HasSuffix(p, "/") {
				p += "/"
			}
			out.Prefix = p
		}
	}
	return out
}

// AdvertiseURL is the URL the other daemons reach this one at: Advertise,
// else the scheme (https with tls) and the listen address, which must then
// name an address (not 0.0.0.0 or [::]).
func (c *Config) AdvertiseURL() (string, error) {
	if c.Advertise != "" {
		return c.Advertise, nil
	}
	host, port, err := net.SplitHostPort(c.Listen)
	if ip, perr := netip.ParseAddr(host); err != nil || host == "" || (perr == nil && ip.IsUnspecified()) {
		return "", fmt.Errorf("advertise: required when listen (%q) names no address: the URL the other daemons reach this one at", c.Listen)
	}
	scheme := "http"
	if c.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + net.JoinHostPort(host, port), nil
}
