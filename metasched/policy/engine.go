package policy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/metasched/metasched/switching"
)

// Policy names of Config.Name: the policy names of package switching.
const (
	Heuristic  = switching.PolicyHeuristic
	Optimal    = switching.PolicyOptimal
	Static     = switching.PolicyStatic
	BestStatic = switching.PolicyBestStatic
	None       = switching.PolicyNone
)

// Names lists the policies Config.Name accepts: every name of
// switching.PolicyNames but cµ, the default (heuristic) first.
var Names = append([]string{Heuristic}, slices.DeleteFunc(slices.Clone(switching.PolicyNames), func(n string) bool {
	return n == Heuristic || n == switching.PolicyCMu
})...)

// Defaults of a Config.
const (
	DefaultK          = 5 // the heuristic's K, and that of the heuristic standing in for a table
	DefaultMaxStates  = 2_000_000
	DefaultQueueLimit = 10
	DefaultDrift      = 0.5
)

// ErrClosed is returned by Decide after Close.
var ErrClosed = errors.New("policy engine closed")

// Config chooses and tunes the policy.
type Config struct {
	Name string // one of Names
	K    int    // heuristic: the constant K; 0: DefaultK
	// Table is a policy table written by switching.WriteTable (optimal);
	// TableSource names it in the view and in notes (the file's name).
	Table       []byte
	TableSource string
	// Solve: optimal, solve the table here, in the background, from the
	// rates of the first decision.
	Solve bool
	// MaxStates limits the state space of a table read or solved; 0:
	// DefaultMaxStates.
	MaxStates int
	// QueueLimit is J of the models built here; 0: DefaultQueueLimit.
	QueueLimit int
	// Drift: a table is re-solved, and a static target recomputed, when an
	// estimated rate moved by more than this fraction from the rates it was
	// computed for; 0: DefaultDrift.
	Drift float64
	// MoveIdle (the heuristic only): when it does not switch, a host that runs no job
	// (PoolInput.Idle), of a pool none of whose jobs waits for hosts, is
	// switched to the pool whose waiting jobs cost most (c_i times
	// PoolInput.Waiting), unless that switch is held or its pool locked
	// (see Guard).
	MoveIdle bool
	// Now is the clock of the view's times; nil: time.Now.
	Now func() time.Time
	// OnSolved, when set, is called from the background goroutine when a
	// solve ends, with its wall-clock duration in seconds and its error
	// (nil when it succeeded); not when Close or the context stopped it.
	// It is called before Idle's channel closes and must not call the
	// engine.
	OnSolved func(seconds float64, err error)
}

// String describes the configured policy the way the daemon's
// configuration does.
func (c Config) String() string {
	switch {
	case c.Name == Heuristic:
		return fmt.Sprintf("heuristic K=%d", c.K)
	case c.Name == Optimal && c.Solve:
		return "optimal (solved at start)"
	case c.Name == Optimal:
		return "optimal (table " + c.TableSource + ")"
	}
	return c.Name
}

// withDefaults validates c and fills in its defaults.
func (c Config) withDefaults() (Config, error) {
	var bad []string
	known := false
	for _, n := range Names {
		known = known || c.Name == n
	}
	if !known {
		bad = append(bad, fmt.Sprintf("name: %q is not one of %s", c.Name, strings.Join(Names, ", ")))
	}
	switch {
	case c.K < 0:
		bad = append(bad, fmt.Sprintf("K: must be >= 1, got %d", c.K))
	case c.K > 0 && c.Name != Heuristic:
		bad = append(bad, "K: applies to the heuristic policy only")
	case c.K == 0 && c.Name == Heuristic:
		c.K = DefaultK
	}
	hasTable := len(c.Table) > 0
	switch {
	case c.Name != Optimal && (hasTable || c.Solve):
		bad = append(bad, "table, solve: apply to the optimal policy only")
	case c.Name == Optimal && hasTable && c.Solve:
		bad = append(bad, "table, solve: give either a table or solve, not both")
	case c.Name == Optimal && !hasTable && !c.Solve:
		bad = append(bad, "optimal needs a table or solve")
	}
	if hasTable && c.TableSource == "" {
		c.TableSource = "table"
	}
	switch {
	case c.MaxStates < 0:
		bad = append(bad, fmt.Sprintf("max states: must be >= 0, got %d", c.MaxStates))
	case c.MaxStates == 0:
		c.MaxStates = DefaultMaxStates
	}
	switch {
	case c.QueueLimit == 0:
		c.QueueLimit = DefaultQueueLimit
	case c.QueueLimit < 2:
		bad = append(bad, fmt.Sprintf("queue limit: must be >= 2, got %d", c.QueueLimit))
	}
	switch {
	case c.Drift == 0:
		c.Drift = DefaultDrift
	case !(c.Drift > 0) || math.IsInf(c.Drift, 1):
		bad = append(bad, fmt.Sprintf("drift: must be a finite number > 0, got %v", c.Drift))
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if len(bad) > 0 {
		return c, fmt.Errorf("policy: %s", strings.Join(bad, "; "))
	}
	return c, nil
}

// Decision is what the policy decided in one state.
type Decision struct {
	// From and To index the pools of the inputs; they are 0 unless Switch.
	From, To int
	// Switch: start switching one host from pool From to pool To.
	Switch bool
	// Policy is the policy that decided ("heuristic K=5", "static",
	// "optimal (solved)", …): the heuristic stands in for an optimal table
	// that is being solved or does not fit.
	Policy string
	// Why explains the decision for logs and the dashboard.
	Why string
}

// Rates are the rates a table was solved (or is being solved) for.
type Rates struct {
	Servers     int       // N
	Pools       []string  // pool names in order
	Arrival     []float64 // λ_i per second
	Service     []float64 // µ_i per busy host-second
	HoldingCost []float64 // c_i
	SwitchRate  float64   // ζ per second (the largest of the table's pairs)
}

// TableInfo describes the optimal table the engine holds.
type TableInfo struct {
	// Source is Config.TableSource for a table read from a file, "solved"
	// for one solved here.
	Source string
	States int
	Rates  Rates
	// SolvedAt, Sweeps, Seconds, Converged and Residual describe a solve
	// here; they are zero for a table read from a file, which does not
	// record them.
	SolvedAt  time.Time
	Sweeps    int
	Seconds   float64
	Converged bool
	Residual  float64
}

// SolveInfo describes the solve running in the background.
type SolveInfo struct {
	Reason   string // why a table is solved: none yet, rates drifted, other pools
	States   int
	Rates    Rates
	Started  time.Time
	Sweep    int     // sweeps done
	Residual float64 // span of V_n − V_{n−1} after the last sweep
}

// View is the state of the engine for the API and the dashboard. Its
// slices are shared: do not modify them.
type View struct {
	Configured string // Config.String()
	InForce    string // the policy of the last decision
	Note       string // why InForce is not what was configured, or a warning
	Table      *TableInfo
	Solving    *SolveInfo // nil when no solve runs
	// Decisions counts the decisions taken, Switches those that switched.
	Decisions, Switches int
	Last                Decision // the last decision
	LastSwitch          Decision // the last decision that switched
	LastSwitchAt        time.Time
}

// table is an optimal table held by the engine.
type table struct {
	t    *switching.Table
	info TableInfo
}

// name is the policy string of the table in force.
func (t *table) name() string {
	if t.info.Source == "solved" {
		return "optimal (solved)"
	}
	return "optimal (table " + t.info.Source + ")"
}

// choice is the policy that decides one state.
type choice struct {
	name string // Decision.Policy
	p    switching.Policy
	note string // View.Note
	why  string // what Decision.Why adds about the policy
	// free is the heuristic without the holds (Inputs.Held), to say what
	// it would have done; nil for the other policies and without holds.
	free switching.Policy
}

// Engine is the switching policy of the daemon's cluster manager. Decide
// is cheap (O(M²) for the heuristic and the static policies, one lookup
// for a table) and serialized; View may be called from any goroutine.
// The heavy work, solving a table, runs in one background goroutine at a
// time, stopped by Close.
type Engine struct {
	cfg        Config
	configured string
	log        zerolog.Logger
	ctx        context.Context
	cancel     context.CancelFunc
	wg         sync.WaitGroup

	decideMu sync.Mutex // serializes Decide; guards the static policy and locked
	locked   []bool     // the pools of the current decision that may not give a host
	held     [][]string // the switches of the current decision that may not start (Inputs.Held)
	static   *switching.Static
	// staticBase is the model the static target was computed for.
	staticBase *switching.Model
	staticName string
	staticNote string

	mu           sync.Mutex // guards what follows
	closed       bool
	inForce      string
	note         string
	table        *table
	solving      *SolveInfo
	idle         chan struct{} // closed when no solve runs
	noSolve      string        // why no more solves are tried
	decisions    int
	switches     int
	last         Decision
	lastSwitch   Decision
	lastSwitchAt time.Time

	// hold, when set (by tests, before the first decision), keeps a
	// background solve from starting until it is closed.
	hold chan struct{}
}

// New validates cfg and returns the engine, with the table of an optimal
// policy read (and checked against MaxStates). Background solves stop when
// ctx ends or at Close.
func New(ctx context.Context, cfg Config, log zerolog.Logger) (*Engine, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	e := &Engine{cfg: cfg, configured: cfg.String(), idle: make(chan struct{})}
	close(e.idle)
	e.log = log.With().Str("policy", e.configured).Logger()
	e.inForce = e.configured
	switch cfg.Name {
	case Optimal:
		e.inForce = heuristicName(DefaultK)
		if cfg.Solve {
			e.note = "the optimal table is solved at the first decision, when the rates are known"
			break
		}
		t, err := switching.ReadTable(bytes.NewReader(cfg.Table), cfg.MaxStates)
		if err != nil {
			return nil, fmt.Errorf("policy table %s: %w", cfg.TableSource, err)
		}
		e.table = &table{t: t, info: TableInfo{Source: cfg.TableSource, States: t.Space.States, Rates: ratesOf(t.Model)}}
		e.inForce = e.table.name()
		e.log.Info().Str("table", cfg.TableSource).Int("states", t.Space.States).
			Strs("pools", poolNames(t.Model)).Int("servers", t.Model.Servers).Msg("policy table loaded")
	case BestStatic, Static:
		e.staticName = cfg.Name
	}
	e.ctx, e.cancel = context.WithCancel(ctx)
	return e, nil
}

func heuristicName(k int) string { return fmt.Sprintf("heuristic K=%d", k) }

// Decide returns the policy's decision for the inputs. It errors on inputs
// no live system produces (ErrBadInputs) and after Close (ErrClosed). With
// fewer than 2 pools or no hosts there is nothing to switch.
func (e *Engine) Decide(in Inputs) (Decision, error) {
	e.decideMu.Lock()
	defer e.decideMu.Unlock()
	e.mu.Lock()
	closed, inForce := e.closed, e.inForce
	e.mu.Unlock()
	if closed {
		return Decision{}, ErrClosed
	}
	if err := in.check(); err != nil {
		return Decision{}, err
	}
	if len(in.Pools) < 2 || in.Servers() == 0 {
		d := Decision{Policy: inForce, Why: "nothing to switch: fewer than 2 pools or no hosts"}
		e.record(d, nil)
		return d, nil
	}
	m, st, err := Model(in, e.cfg.QueueLimit)
	if err != nil {
		return Decision{}, err
	}
	e.locked, e.held = in.Locked, in.Held
	c, err := e.choose(m)
	if err != nil {
		return Decision{}, err
	}
	d := Decision{Policy: c.name}
	var what, held string
	a := c.p.Decide(st)
	// A held switch is not started: a static or table policy's decision
	// of one is no switch; the heuristic chose among the others, and says
	// what it would have done without the holds.
	wouldBe := a
	if a == switching.NoAction && c.free != nil {
		wouldBe = c.free.Decide(st)
	}
	if wouldBe != switching.NoAction {
		pr := wouldBe.Pair(len(in.Pools))
		if why := heldWhy(in.Held, pr.From, pr.To); why != "" {
			held = fmt.Sprintf("; a host from %s to %s is held: %s", in.Pools[pr.From].Name, in.Pools[pr.To].Name, why)
			if a == wouldBe {
				a = switching.NoAction
			}
		}
	}
	if a != switching.NoAction {
		pr := a.Pair(len(in.Pools))
		d.From, d.To, d.Switch = pr.From, pr.To, true
		what = fmt.Sprintf("switch a host from %s to %s", in.Pools[pr.From].Name, in.Pools[pr.To].Name)
	} else {
		what = "no switch"
	}
	d.Why = what + c.why + " in " + describe(in) + held
	if !d.Switch && e.cfg.MoveIdle && e.cfg.Name == Heuristic {
		if from, to, ok := idleMove(in); ok {
			p, q := in.Pools[from], in.Pools[to]
			d.From, d.To, d.Switch = from, to, true
			d.Why = fmt.Sprintf("switch an idle host from %s to %s: %d of the %d hosts of %s run no job and none of its jobs waits, %d jobs of %s wait for hosts (the policy alone: %s)",
				p.Name, q.Name, p.Idle, p.Servers, p.Name, q.Waiting, q.Name, d.Why)
		}
	}
	e.record(d, &c.note)
	return d, nil
}

// idleMove chooses a switch of an idle host (Config.MoveIdle): to the pool
// of the largest c_i·Waiting, from the pool with the most idle hosts among
// those with no job waiting, neither locked nor held; the first in order
// on ties.
func idleMove(in Inputs) (from, to int, ok bool) {
	from, to = -1, -1
	for b, q := range in.Pools {
		if q.Waiting > 0 && (to < 0 || q.HoldingCost*float64(q.Waiting) > in.Pools[to].HoldingCost*float64(in.Pools[to].Waiting)) {
			to = b
		}
	}
	if to < 0 {
		return 0, 0, false
	}
	for a, p := range in.Pools {
		if a == to || p.Waiting > 0 || p.Idle < 1 || (a < len(in.Locked) && in.Locked[a]) || heldWhy(in.Held, a, to) != "" {
			continue
		}
		if from < 0 || p.Idle > in.Pools[from].Idle {
			from = a
		}
	}
	return from, to, from >= 0
}

// describe prints the state of the inputs.
func describe(in Inputs) string {
	var j, k []string
	for _, p := range in.Pools {
		j = append(j, fmt.Sprint(p.Jobs))
		k = append(k, fmt.Sprint(p.Servers))
	}
	moving := 0
	for _, row := range in.Transit {
		for _, x := range row {
			moving += x
		}
	}
	return fmt.Sprintf("j=(%s) k=(%s), %d in transit", strings.Join(j, ","), strings.Join(k, ","), moving)
}

// record counts a decision; note, when not nil, replaces the view's note.
func (e *Engine) record(d Decision, note *string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.decisions++
	e.last = d
	e.inForce = d.Policy
	if note != nil {
		e.note = *note
	}
	if d.Switch {
		e.switches++
		e.lastSwitch = d
		e.lastSwitchAt = e.cfg.Now()
	}
}

// choose returns the policy for the live model m.
func (e *Engine) choose(m *switching.Model) (choice, error) {
	switch e.cfg.Name {
	case None:
		return choice{name: None, p: switching.Never{}, why: " (the policy never switches)"}, nil
	case Heuristic:
		return e.heuristic(m, e.cfg.K, "")
	case Static, BestStatic:
		return e.staticPolicy(m), nil
	}
	return e.optimal(m)
}

func (e *Engine) heuristic(m *switching.Model, k int, note string) (choice, error) {
	h, err := switching.NewHeuristic(unlocked(m, e.locked, e.held), float64(k))
	if err != nil {
		return choice{}, fmt.Errorf("heuristic: %w", err)
	}
	// The live system's µ (per busy host-second) is fast against ζ, where
	// the papers' unclipped terms would take hosts from busy pools with
	// nothing waiting (switching.Heuristic.Clipped).
	c := choice{name: heuristicName(k), p: h.Clipped(), note: note}
	if anyHeld(e.held) {
		f, err := switching.NewHeuristic(unlocked(m, e.locked, nil), float64(k))
		if err != nil {
			return choice{}, fmt.Errorf("heuristic: %w", err)
		}
		c.free = f.Clipped()
	}
	return c, nil
}

// staticPolicy returns the static or best-static policy, its target
// recomputed when the pools, N or the rates (by more than Drift) changed.
func (e *Engine) staticPolicy(m *switching.Model) choice {
	if e.static == nil || samePools(e.staticBase, m) != "" || drift(e.staticBase, m, e.cfg.Drift) != "" {
		e.staticName, e.staticNote = e.cfg.Name, ""
		if e.cfg.Name == BestStatic {
			p, err := switching.NewBestStatic(m)
			if err == nil {
				e.static = p
			} else {
				e.static, e.staticName = switching.NewStatic(m), Static
				e.staticNote = fmt.Sprintf("best-static: %v; the static allocation instead", err)
				e.log.Warn().Err(err).Msg("no stable allocation: the static allocation instead")
			}
		} else {
			e.static = switching.NewStatic(m)
		}
		e.staticBase = m
		e.log.Info().Ints("target", e.static.Target()).Str("by", e.staticName).Msg("static target computed")
	}
	return choice{name: e.staticName, p: e.static, note: e.staticNote, why: " (target " + ints(e.static.Target()) + ")"}
}

func ints(x []int) string {
	s := make([]string, len(x))
	for i, v := range x {
		s[i] = fmt.Sprint(v)
	}
	return "(" + strings.Join(s, ",") + ")"
}

// optimal returns the table when it fits the live model and its rates, and
// otherwise the heuristic, starting a background solve when none runs and
// solving has not been given up.
func (e *Engine) optimal(m *switching.Model) (choice, error) {
	e.mu.Lock()
	tbl, solving, noSolve := e.table, e.solving != nil, e.noSolve
	e.mu.Unlock()
	reason := "no optimal table yet"
	var base *switching.Model
	if tbl != nil {
		base = tbl.t.Model
		reason = samePools(base, m)
		if reason == "" {
			if r := drift(base, m, e.cfg.Drift); r != "" {
				reason = "the rates drifted from those of the table: " + r
			}
		}
	}
	if reason == "" {
		c := choice{name: tbl.name(), p: tbl.t, why: " (table lookup)"}
		if tbl.info.Source == "solved" && !tbl.info.Converged {
			c.note = fmt.Sprintf("the table's solve did not converge (span %.3g after %d sweeps)", tbl.info.Residual, tbl.info.Sweeps)
		}
		return c, nil
	}
	if !solving && noSolve == "" {
		noSolve = e.startSolve(resolveModel(base, m), reason)
		solving = noSolve == ""
	}
	fallback := heuristicName(DefaultK)
	note := reason + "; " + fallback + " decides meanwhile"
	switch {
	case solving:
		note = reason + "; solving in the background, " + fallback + " decides meanwhile"
	case noSolve != "":
		note = reason + "; " + noSolve + "; " + fallback + " decides, no solve is tried again"
	}
	return e.heuristic(m, DefaultK, note)
}

// startSolve starts solving m in the background, unless its state space is
// over the limit or the engine is closed: then it returns why, and no
// solve is tried again.
func (e *Engine) startSolve(m *switching.Model, reason string) string {
	configs, states, ok := switching.CountStates(m)
	perState := switching.StateBytes(m, switching.DefaultMethod(switching.Average, 0))
	var refuse string
	switch {
	case m.NumPools() > switching.MaxPools:
		refuse = fmt.Sprintf("refused to solve: %d pools, a policy table holds at most %d", m.NumPools(), switching.MaxPools)
	case m.Servers > switching.MaxServers:
		refuse = fmt.Sprintf("refused to solve: %d hosts, a policy table holds at most %d", m.Servers, switching.MaxServers)
	case !ok:
		refuse = fmt.Sprintf("refused to solve: more than 2^64 states, over the limit of %d states", e.cfg.MaxStates)
	case states > uint64(e.cfg.MaxStates):
		refuse = fmt.Sprintf("refused to solve: %d states (%d configurations × %d queue states) need %s at %d bytes per state, over the limit of %d states (%s)",
			states, configs, states/configs, switching.FormatBytes(states*perState), perState,
			e.cfg.MaxStates, switching.FormatBytes(uint64(e.cfg.MaxStates)*perState))
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return "the engine is closed"
	}
	if refuse != "" {
		e.noSolve = refuse
		e.log.Warn().Uint64("states", states).Int("limit", e.cfg.MaxStates).
			Str("memory", switching.FormatBytes(states*perState)).
			Msg("optimal policy " + refuse + "; " + heuristicName(DefaultK) + " decides")
		return refuse
	}
	info := &SolveInfo{Reason: reason, States: int(states), Rates: ratesOf(m), Started: e.cfg.Now()}
	e.solving = info
	e.idle = make(chan struct{})
	e.wg.Add(1)
	e.log.Info().Str("reason", reason).Uint64("states", states).
		Str("memory", switching.FormatBytes(states*switching.BytesPerState)).Msg("solving the optimal policy in the background")
	go e.solve(m, info, e.idle)
	return ""
}

// solve runs in the background: it solves m and puts the table in force.
func (e *Engine) solve(m *switching.Model, info *SolveInfo, idle chan struct{}) {
	defer e.wg.Done()
	if e.hold != nil {
		select {
		case <-e.hold:
		case <-e.ctx.Done():
		}
	}
	var sol *switching.Solution
	start := time.Now()
	err := e.ctx.Err()
	if err == nil {
		sol, err = switching.Solve(e.ctx, m, switching.SolveOptions{
			Criterion: switching.Average,
			MaxStates: e.cfg.MaxStates,
			Now:       e.cfg.Now,
			Progress: func(p switching.Progress) {
				e.mu.Lock()
				info.Sweep, info.Residual = p.Sweep, p.Residual
				e.mu.Unlock()
			},
		})
	}
	stopped := err != nil && (errors.Is(err, switching.ErrCanceled) || e.ctx.Err() != nil)
	if !stopped && e.cfg.OnSolved != nil {
		e.cfg.OnSolved(time.Since(start).Seconds(), err)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	defer close(idle)
	e.solving = nil
	switch {
	case stopped:
		e.log.Info().Err(err).Msg("optimal policy solve stopped")
		return
	case err != nil:
		e.noSolve = fmt.Sprintf("the solve failed: %v", err)
		e.log.Error().Err(err).Msg("optimal policy solve failed; " + heuristicName(DefaultK) + " decides")
		return
	}
	e.table = &table{t: sol.Table, info: TableInfo{
		Source: "solved", States: sol.Table.Space.States, Rates: info.Rates, SolvedAt: e.cfg.Now(),
		Sweeps: sol.Sweeps, Seconds: sol.Seconds, Converged: sol.Converged, Residual: sol.Residual,
	}}
	ev := e.log.Info()
	if !sol.Converged {
		ev = e.log.Warn()
	}
	ev.Int("states", sol.Table.Space.States).Int("sweeps", sol.Sweeps).Float64("seconds", sol.Seconds).
		Bool("converged", sol.Converged).Float64("average_cost", sol.AverageCost).Msg("optimal policy solved")
}

// Idle returns a channel that is closed when no background solve runs: at
// once when none does, else when the current one ends (its table in force,
// or its end noted). Tests and callers that wait for a table use it.
func (e *Engine) Idle() <-chan struct{} {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.idle
}

// View returns the state of the engine.
func (e *Engine) View() View {
	e.mu.Lock()
	defer e.mu.Unlock()
	v := View{
		Configured: e.configured, InForce: e.inForce, Note: e.note,
		Decisions: e.decisions, Switches: e.switches,
		Last: e.last, LastSwitch: e.lastSwitch, LastSwitchAt: e.lastSwitchAt,
	}
	if e.table != nil {
		info := e.table.info
		v.Table = &info
	}
	if e.solving != nil {
		s := *e.solving
		v.Solving = &s
	}
	return v
}

// Close stops a background solve and waits for it to end. Decide fails
// with ErrClosed afterwards. Close may be called more than once.
func (e *Engine) Close() {
	e.mu.Lock()
	e.closed = true
	e.mu.Unlock()
	e.cancel()
	e.wg.Wait()
}
