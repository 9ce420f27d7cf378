package metasched

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/rs/zerolog"

	"github.com/metasched/metasched/gramvm"
	"github.com/metasched/metasched/graph"
	"github.com/metasched/metasched/internal/httpsrv"
	"github.com/metasched/metasched/internal/tlsx"
	"github.com/metasched/metasched/metasched/api"
	"github.com/metasched/metasched/metasched/calibration"
	"github.com/metasched/metasched/metasched/capacity"
	"github.com/metasched/metasched/metasched/coordinator"
	"github.com/metasched/metasched/metasched/credentials"
	"github.com/metasched/metasched/metasched/executor"
	"github.com/metasched/metasched/metasched/lifecycle"
	"github.com/metasched/metasched/metasched/policy"
	"github.com/metasched/metasched/metasched/store"
	"github.com/metasched/metasched/metasched/tuning"
)

// FaultPoint names a step of the switching protocol where a test can make
// the daemon fail (Options.Fault).
type FaultPoint string

// The fault injection points, one per request of the coordinator.
const (
	FaultRelease       FaultPoint = "release"        // PrepareRelease at the source pool
	FaultReconfigure   FaultPoint = "reconfigure"    // the agent's reconfiguration for the destination
	FaultAdd           FaultPoint = "add"            // PrepareAdd at the destination pool
	FaultCommitRelease FaultPoint = "commit-release" // CommitRelease
	FaultCommitAdd     FaultPoint = "commit-add"     // CommitAdd
	FaultRevert        FaultPoint = "revert"         // the agent's reconfiguration back to the source
)

// FaultPoints lists every fault injection point in protocol order.
var FaultPoints = []FaultPoint{FaultRelease, FaultReconfigure, FaultAdd, FaultCommitRelease, FaultCommitAdd, FaultRevert}

// ErrInjected is the error of an injected fault.
var ErrInjected = errors.New("injected fault")

// Options are the daemon's dependencies and knobs beyond the configuration
// file. The zero value is usable but for Connect, which the in-process
// agents need.
type Options struct {
	Logger zerolog.Logger
	// Connect opens libvirt hosts for the in-process agents.
	Connect Connector
	// AgentLogger, when set, is the in-process agents' logger (they log
	// every VM operation); nil means Logger.
	AgentLogger *zerolog.Logger
	// Version is reported by /healthz.
	Version string
	// Store tunes the database (tests may set NoSync).
	Store store.Options
	// LeaseTTL is the leader's lease in seconds, with the store in etcd
	// (0: DefaultLeaseTTL).
	LeaseTTL int
	// Standby, with the store in etcd, hears the handler of the daemon's
	// API while it waits for the leadership (it forwards every request to
	// the leader), and the TLS configuration to serve it with (nil: plain
	// HTTP), before New returns: the caller serves it meanwhile.
	Standby func(h http.Handler, tc *tls.Config)
	// Tick is the cluster manager's period; 0 means 500 ms.
	Tick time.Duration
	// Guard is what keeps the cluster manager from switching hosts no
	// queue needs and from undoing its recent switches (policy.Guard);
	// nil means DefaultGuard. Tests of the bare policies pass
	// &policy.Guard{}.
	Guard *policy.Guard
	// StepTimeout bounds each step of a switch (the reconfiguration gets
	// the switch delay on top); 0 means 30 s.
	StepTimeout time.Duration
	// Fault, when set, is asked before each step of a switch; an error
	// makes the step fail (a returned error that is ErrHang makes the
	// step never answer, so that its timer fires).
	Fault func(p FaultPoint, sw, host string) error
	// Executor replaces the configured executor (tests).
	Executor executor.Executor
	// ProbeEvery is the period of the agents' bandwidth probes between
	// remote sites; 0 means 60 s.
	ProbeEvery time.Duration
	// MaxMigrationsPerHost and MaxMigrationsPerLink cap bandwidth tuning's
	// concurrent live migrations; 0 means 1 and 2.
	MaxMigrationsPerHost, MaxMigrationsPerLink int
	// CommitFault, when set, is asked before each commit of a change of a
	// job's lifecycle; an error makes the commit fail as a failing store
	// would (tests).
	CommitFault func(job string, from, to lifecycle.State) error
	// WrapAgent, when set, wraps each site's agent (tests: an agent whose
	// inventory lags, or that fails).
	WrapAgent func(site string, a SiteAgent) SiteAgent
	// Clock is the daemon's time: its loops' tickers, the switches'
	// timers, the times it records. nil means the real clock; tests pass a
	// fake one and step it.
	Clock clockwork.Clock
	// HTTP overrides the timeouts of the API's server (Run); zero fields
	// keep httpsrv's defaults (tests shorten them).
	HTTP httpsrv.Timeouts
}

// ErrHang, returned by Options.Fault, makes a step never answer.
var ErrHang = errors.New("injected hang")

// jobBook is the jobs and the dispatcher's state, under mu: the live jobs,
// their index by queue, placement and pool, why each pool's queue waits,
// the dispatcher's last round, neverRuns' answers, and the daemon's run
// (its context for the jobs' runs, and whether it is stopping). A section
// under mu that also reads the hosts holds the hosts' view after it
// (Daemon.lockR, Daemon.lockW); the leaves may be taken under both.
type jobBook struct {
	mu        sync.Mutex
	live      map[string]*liveJob
	index     jobIndex          // the live jobs by queue, placement and pool
	noRoom    map[string]noRoom // pool → why its queued jobs after one were not planned (no free host)
	lastRound uint64            // the dispatcher's last round (roundKeyLocked)
	never     neverRunsCache    // the answers of neverRuns
	runCtx    context.Context   // the jobs' runs' context (Run)
	closing   bool              // the daemon stops: no job starts
}

// Daemon is the metasched daemon: the jobs API, the store, the job
// lifecycle, the cluster manager and the switch coordinator. New builds
// it; Run serves until its context ends; Close releases it.
type Daemon struct {
	cfg *Config
	opt Options
	log zerolog.Logger
	st  *store.Store
	// leader is the daemon's leadership, with the store in etcd (nil:
	// the store is a file of its own).
	leader  *leadership
	grid    *graph.Grid
	planner *gramvm.Service
	sites   []*siteAgent
	exec    executor.Executor
	token   string
	pol     *policy.Engine
	metrics *metrics
	started time.Time
	types   []api.JobType
	clock   clockwork.Clock
	// jobCommit writes a job's change to the store (Store.Commit; tests make
	// it fail).
	jobCommit func(ctx context.Context, id string, c store.Change) (store.Job, error)
	// instance changes at every start (the dashboard sees restarts);
	// hist holds the dashboard's chart samples.
	instance string
	hist     history

	refreshMu sync.Mutex // one refresh of the inventories at a time

	// The subsystems, each with its state and its lock
	// (docs/internals/daemon.md, "Subsystems" and "Locks"); the Daemon's
	// methods wire them together.
	//
	// jobs is the jobs and the dispatcher's state (jobBook), under the
	// lock a section that also reads the hosts takes first (lockR, lockW).
	jobs jobBook
	// hv is the hosts' view (hostBook, a read-write lock taken alone or
	// after jobs.mu).
	hv hostBook
	// rates are the pools' rate estimates (rateBook, a leaf).
	rates *rateBook
	// sw is the switch driver's state: the coordinator, the timers, the
	// switches' numbers, ends and rate (switchBook, a leaf).
	sw *switchBook

	vmsCreated, vmsDestroyed atomic.Int64

	// tls is the daemon's certificate (nil: plain HTTP).
	tls *tlsx.Source
	// creds are the API's credentials: the tokens and the sessions
	// logged out (metasched/credentials, a subsystem with its own lock).
	creds *credentials.Book
	// cal is the calibration: its figures and its measurement under way
	// (metasched/calibration, a subsystem with its own lock, taken after
	// mu when both are held).
	cal *calibration.Book
	// taskFarm is the task farm the calibration copies onto Slurm nodes
	// (nil: none, and noTaskFarm says why).
	taskFarm   []byte
	noTaskFarm string
	// ledger is the capacity beside the inventories: promised to VMs on
	// their way, VMs being created or destroyed, destroyed lately, missed
	// (metasched/capacity, a subsystem with its own lock, a leaf).
	ledger *capacity.Ledger
	// tuner is the bandwidth tuning's records, the decisions being
	// carried out and the migrations in flight (metasched/tuning, a
	// subsystem with its own lock, a leaf).
	tuner *tuning.Book

	wake     chan struct{}
	events   chan coordinator.Event
	wg       sync.WaitGroup
	stopOnce sync.Once
}

// NewWithGrid opens the daemon's store and agents on the grid (the one
// cfg.Grid names, read by the caller) and restores its state: hosts and
// their pools, every job not finished, every switch in flight. Call Run to
// start it.
func NewWithGrid(ctx context.Context, cfg *Config, grid *graph.Grid, opt Options) (_ *Daemon, err error) {
	if opt.Guard == nil {
		g := DefaultGuard
		opt.Guard = &g
	}
	if opt.Tick == 0 {
		opt.Tick = 500 * time.Millisecond
	}
	if opt.StepTimeout == 0 {
		opt.StepTimeout = 30 * time.Second
	}
	if opt.ProbeEvery == 0 {
		opt.ProbeEvery = 60 * time.Second
	}
	if opt.MaxMigrationsPerHost == 0 {
		opt.MaxMigrationsPerHost = 1
	}
	if opt.MaxMigrationsPerLink == 0 {
		opt.MaxMigrationsPerLink = 2
	}
	if opt.Clock == nil {
		opt.Clock = clockwork.NewRealClock()
	}
	d := &Daemon{cfg: cfg, opt: opt, log: opt.Logger, grid: grid, types: cfg.JobTypes, clock: opt.Clock, started: opt.Clock.Now(), instance: newInstance(),
		hv: hostBook{hosts: map[string]*gridHost{}}, ledger: capacity.NewLedger(),
		jobs: jobBook{live: map[string]*liveJob{}, index: newJobIndex(), noRoom: map[string]noRoom{}},
		sw:   newSwitchBook(cfg.SwitchDelay),
		wake: make(chan struct{}, 1), events: make(chan coordinator.Event, 256)}
	if d.planner, err = gramvm.New(grid, 0); err != nil {
		return nil, err
	}
	d.cal = d.newCalibration()
	if d.taskFarm, d.noTaskFarm, err = loadTaskFarm(cfg.Calibration.TaskFarm); err != nil {
		return nil, err
	}
	d.tuner = tuning.NewBook()
	if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
		return nil, fmt.Errorf("data_dir: %w", err)
	}
	// The jobs' run directories: the jobs' accounts cross it to their
	// own, and none may list the others'.
	runs := filepath.Join(cfg.DataDir, "jobs")
	if err := os.Mkdir(runs, 0o711); err != nil && !errors.Is(err, fs.ErrExist) {
		return nil, fmt.Errorf("data_dir: %w", err)
	}
	if err := os.Chmod(runs, 0o711); err != nil {
		return nil, fmt.Errorf("data_dir: %w", err)
	}
	if opt.Store.Now == nil {
		opt.Store.Now = opt.Clock.Now
	}
	if opt.Store.KeyRetention == 0 {
		opt.Store.KeyRetention = cfg.IdempotencyRetention
	}
	if opt.Store.OnCorrupt == nil {
		opt.Store.OnCorrupt = func(id string, err error) {
			d.log.Error().Err(err).Str("job", id).Msg("a job's record in the store cannot be read: left out of listings; restore the store from a backup")
		}
	}
	// The daemon's certificate first: a standby forwards with it.
	if cfg.TLS != nil {
		if d.tls, err = tlsx.NewSource(*cfg.TLS, tlsx.KindDaemon, d.log, d.clock.Now); err != nil {
			return nil, err
		}
	}
	if err = d.openStore(ctx, opt.Store); err != nil {
		return nil, err
	}
	d.jobCommit = d.st.Commit
	if f := opt.CommitFault; f != nil {
		d.jobCommit = func(ctx context.Context, id string, c store.Change) (store.Job, error) {
			if err := f(id, c.From, c.To); err != nil {
				return store.Job{}, err
			}
			return d.st.Commit(ctx, id, c)
		}
	}
	defer func() {
		if err != nil {
			d.Close()
		}
	}()
	if d.token, err = d.st.Token(ctx); err != nil {
		return nil, err
	}
	d.creds = credentials.New(d.st, d.token, d.now, d.log)
	if err := d.creds.Load(ctx); err != nil {
		return nil, err
	}
	alog := d.log
	if opt.AgentLogger != nil {
		alog = *opt.AgentLogger
	}
	var epoch int64
	if d.leader != nil {
		epoch = d.leader.rev
	}
	if d.sites, err = openSites(ctx, cfg, grid, opt.Connect, d.token, d.tls, epoch, alog); err != nil {
		return nil, err
	}
	if opt.WrapAgent != nil {
		for _, sa := range d.sites {
			sa.agent = opt.WrapAgent(sa.name, sa.agent)
		}
	}
	d.exec = opt.Executor
	if d.exec == nil {
		switch cfg.Executor.Name {
		case HostCommand:
			// It checks run_as, and warns that the jobs run on this machine.
			c, err := executor.NewCommand(d.log, executor.CommandOptions{MaxOutput: cfg.Executor.MaxOutputBytes,
				OutputRate: cfg.Executor.OutputBytesPerSecond, RunAs: cfg.Executor.RunAs, Accounts: cfg.Executor.Accounts, Env: cfg.Executor.Env})
			if err != nil {
				return nil, fmt.Errorf("executor.%w", err)
			}
			d.exec = c
		case "guest":
			if d.exec, err = d.newGuestExecutor(opt.WrapAgent != nil); err != nil {
				return nil, err
			}
		default:
			d.exec = executor.NewEmulatedClock(d.log, d.clock)
		}
	}
	d.metrics = newMetrics(d)
	pc := policy.Config{Name: cfg.Policy.Name, K: cfg.Policy.K, Solve: cfg.Policy.Solve, OnSolved: d.metrics.solved, Now: d.clock.Now,
		MoveIdle: opt.Guard.MoveIdle && cfg.Policy.Name == policy.Heuristic}
	if cfg.Policy.Table != "" {
		pc.TableSource = filepath.Base(cfg.Policy.Table)
		if pc.Table, err = os.ReadFile(cfg.Policy.Table); err != nil {
			return nil, fmt.Errorf("policy: table: %w", err)
		}
	}
	if d.pol, err = policy.New(ctx, pc, d.log.With().Str("component", "policy").Logger()); err != nil {
		return nil, fmt.Errorf("policy: %w", err)
	}
	pools := make([]string, len(cfg.JobTypes))
	for i, jt := range cfg.JobTypes {
		pools[i] = jt.Name
	}
	d.rates = newRateBook(pools, d.started)
	if err := d.restoreHosts(ctx); err != nil {
		return nil, err
	}
	if err := d.restoreCalibration(ctx); err != nil {
		return nil, err
	}
	if err := d.restoreJobs(ctx); err != nil {
		return nil, err
	}
	d.dropExpiredKeys(ctx)
	if err := d.restoreSwitches(ctx); err != nil {
		return nil, err
	}
	return d, nil
}

// Token is the API's bearer token.
func (d *Daemon) Token() string { return d.token }

// Store is the daemon's store (tests read it).
func (d *Daemon) Store() *store.Store { return d.st }

// Run starts the daemon's loops and serves h (the HTTP API, package
// httpapi) on ln (over TLS with the configuration's certificate, when
// it gives one) until ctx ends, then stops serving, stops the loops and
// waits for them. The server is an httpsrv server: its timeouts
// (Options.HTTP overrides them) and the configuration's caps on
// connections no request has authenticated yet (docs/reference/http.md,
// "Slow clients"). Jobs keep their state in the store; a later New resumes
// them.
func (d *Daemon) Run(ctx context.Context, ln net.Listener, h http.Handler) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// The jobs' runs end when the daemon stops, with the cause
	// ErrDetached: a command runs on under its supervisor, and the next
	// start picks it up.
	runCtx, detach := context.WithCancelCause(context.WithoutCancel(ctx))
	defer detach(executor.ErrDetached)
	d.jobs.mu.Lock()
	d.jobs.runCtx = runCtx
	d.jobs.mu.Unlock()
	hc := httpsrv.Config{Timeouts: d.opt.HTTP, Limits: d.cfg.Unproven, Logger: d.log,
		BaseContext: func(net.Listener) context.Context { return ctx }}
	if d.tls != nil {
		// Clients prove themselves by a token, or by a client
		// certificate of the grid's CA.
		hc.TLS = d.tls.ServerConfig(tls.VerifyClientCertIfGiven)
	}
	srv := httpsrv.New(h, hc)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	d.loop(ctx, d.dispatchLoop)
	d.loop(ctx, d.managerLoop)
	d.loop(ctx, d.switchLoop)
	d.loop(ctx, d.probeLoop)
	d.loop(ctx, d.sampleLoop)
	d.resumeSwitches(ctx)
	d.loop(ctx, d.housekeepingLoop) // after the switches' final notifications
	d.resumeJobs(ctx)
	if d.anySiteCalibrates() {
		d.loop(ctx, d.calibrationLoop)
	}
	d.hv.mu.RLock()
	nhosts := len(d.hv.order)
	d.hv.mu.RUnlock()
	d.log.Info().Str("listen", ln.Addr().String()).Int("sites", len(d.sites)).Int("hosts", nhosts).
		Str("policy", d.cfg.Policy.String()).Str("executor", d.exec.Name()).Msg("metasched daemon serving")
	var err error
	var lost <-chan struct{}
	if d.leader != nil {
		lost = d.leader.lost()
	}
	select {
	case <-ctx.Done():
	case err = <-errc:
	case <-lost:
		// Another daemon may lead soon: stop acting at once (the store
		// refuses this one's writes anyway once its lease expired).
		d.jobs.mu.Lock()
		d.jobs.closing = true
		d.jobs.mu.Unlock()
		detach(executor.ErrDetached)
		cancel()
		d.log.Error().Str("why", d.leader.reason()).Msg("lost the leadership: stopped acting on the grid")
		err = ErrLostLeadership
	}
	d.jobs.mu.Lock()
	d.jobs.closing = true
	d.jobs.mu.Unlock()
	sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer scancel()
	_ = srv.Shutdown(sctx)
	detach(executor.ErrDetached)
	cancel()
	d.wg.Wait()
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

func (d *Daemon) loop(ctx context.Context, f func(context.Context)) {
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		f(ctx)
	}()
}

// goJob runs f on the daemon's wait group (job runs, switch steps).
// A panic in f is logged with its stack and ends f alone: the daemon goes
// on (a job's attempt fails; see goAttempt).
func (d *Daemon) goJob(f func()) {
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		defer func() {
			if r := recover(); r != nil {
				d.log.Error().Str("panic", fmt.Sprint(r)).Str("stack", string(debug.Stack())).Msg("internal error: a goroutine of the daemon panicked")
			}
		}()
		f()
	}()
}

// Close releases the agents, the policy and the store. Call it after Run
// returned (or instead of Run).
func (d *Daemon) Close() error {
	var errs []error
	d.stopOnce.Do(func() {
		if d.pol != nil {
			d.pol.Close()
		}
		for _, s := range d.sites {
			if s.closer != nil {
				errs = append(errs, s.closer())
			}
		}
		if d.st != nil {
			errs = append(errs, d.st.Close())
		}
		if d.leader != nil {
			errs = append(errs, d.leader.close())
		}
	})
	return errors.Join(errs...)
}

// kick wakes the dispatcher.
func (d *Daemon) kick() {
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

func (d *Daemon) now() time.Time { return d.clock.Now() }

// dispatchEvery is the dispatcher's period when nothing wakes it.
const dispatchEvery = 250 * time.Millisecond

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // only our own types, which always marshal
	}
	return b
}

// newGuestExecutor builds the guest executor on the sites' agents, each of
// which must have the guest API and, unless wrapped (tests), be a remote
// agent: the daemon's in-process agents are on libvirt's test driver,
// which boots no guest.
func (d *Daemon) newGuestExecutor(wrapped bool) (*executor.Guest, error) {
	for _, s := range d.sites {
		if _, ok := s.agent.(executor.GuestAgent); !ok {
			return nil, fmt.Errorf("executor: guest: the agent of site %s has no guest API: it cannot run a command inside its VMs", s.name)
		}
		if s.closer != nil && !wrapped {
			return nil, fmt.Errorf("executor: guest: site %s has no agent in agents, and its in-process agent is on libvirt's test driver, which boots no guest: "+
				"list the agent of every site (metasched agent on QEMU hosts with an image and a network)", s.name)
		}
	}
	return executor.NewGuest(d.log, executor.GuestOptions{
		Agents: func(site string) (executor.GuestAgent, error) {
			s := d.site(site)
			if s == nil {
				return nil, fmt.Errorf("no agent for site %s", site)
			}
			ga, ok := s.agent.(executor.GuestAgent)
			if !ok {
				return nil, fmt.Errorf("the agent of site %s has no guest API", site)
			}
			return ga, nil
		},
		Poll: d.cfg.Executor.Poll, MaxOutput: d.cfg.Executor.MaxOutputBytes, OutputRate: d.cfg.Executor.OutputBytesPerSecond,
		Clock: d.clock,
	})
}

func (d *Daemon) site(name string) *siteAgent {
	for _, s := range d.sites {
		if s.name == name {
			return s
		}
	}
	return nil
}

func (d *Daemon) jobType(name string) (api.JobType, int, bool) {
	for i, jt := range d.types {
		if jt.Name == name {
			return jt, i, true
		}
	}
	return api.JobType{}, -1, false
}

// vmCounts returns the VMs the daemon created and destroyed since it
// started.
func (d *Daemon) vmCounts() (created, destroyed int64) {
	return d.vmsCreated.Load(), d.vmsDestroyed.Load()
}

// vmsInHand is how many VMs the jobs' lifecycles are creating or
// destroying now: a job's state changes before its VMs are destroyed.
func (d *Daemon) vmsInHand() int { return d.ledger.Handled() }
