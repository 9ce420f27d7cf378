package policy

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/metasched/metasched/switching"
)

// MinRate is the floor, per second, of the service rates µ_i and of the
// switch rate ζ in the models built here: switching.Model needs them > 0,
// and a pool that has not completed a job yet, or a grid that has not
// switched a host yet, may report 0. Arrival rates of 0 are kept: the model
// allows them.
const MinRate = 1e-9

// ErrBadInputs is returned (wrapped, with the problems) for inputs that no
// live system produces: negative counts, rates that are not finite numbers
// >= 0, a transit matrix of the wrong shape.
var ErrBadInputs = errors.New("bad policy inputs")

// PoolInput is one pool as the cluster manager sees it.
type PoolInput struct {
	Name        string  // the job type, [a-z0-9-]+
	Jobs        int     // j_i: jobs of the type queued or running
	Servers     int     // k_i: hosts in the pool, not counting those in transit
	Arrival     float64 // λ_i: jobs arriving per second
	Service     float64 // µ_i: completions per busy host-second
	HoldingCost float64 // c_i: cost per job per second in the system
	// Waiting is how many of Jobs wait for hosts (queued, not placed yet),
	// Idle how many of Servers run no job: Guard.NeedWaiting and
	// Config.MoveIdle read them; the policies do not.
	Waiting int
	Idle    int
}

// Inputs are what one decision rests on: the pools in a fixed order (a
// decision's From and To index them), the hosts in transit and the
// estimated switch rate.
type Inputs struct {
	Pools []PoolInput
	// Transit[a][b] is m_ab, hosts being switched from pool a to pool b; nil
	// when none are.
	Transit [][]int
	// SwitchRate is ζ: switches completed per second per host in transit
	// (1 / mean switch duration), the same for every pair of pools.
	SwitchRate float64
	// Locked, when set, marks the pools that may not give a host now (the
	// daemon keeps a minimum of hosts in every pool). The heuristic then
	// chooses among the other sources, as if ζ from a locked pool were 0;
	// the static and table policies do not know of locks, and their
	// decision to switch from a locked pool is for the caller to refuse.
	// Locks do not enter the model a table is solved for.
	Locked []bool
	// Held, when set, is an M×M matrix of the switches a→b that may not
	// start now, with why (Held[a][b] != ""): Guard.Held computes it. The
	// heuristic chooses among the other switches; a static or table
	// policy's decision of a held switch becomes no switch, with why.
	// Held switches do not enter the model a table is solved for.
	Held [][]string
}

// servers returns N = Σ k_i + Σ m_ab.
// Servers is N, the hosts the policy may move: in place and in transit.
func (in Inputs) Servers() int {
	n := 0
	for _, p := range in.Pools {
		n += p.Servers
	}
	for _, row := range in.Transit {
		for _, x := range row {
			n += x
		}
	}
	return n
}

// check reports every problem of the inputs, or nil.
func (in Inputs) check() error {
	var bad []string
	rate := func(at string, x float64) {
		if math.IsNaN(x) || math.IsInf(x, 0) || x < 0 {
			bad = append(bad, fmt.Sprintf("%s: must be a finite number >= 0, got %v", at, x))
		}
	}
	for i, p := range in.Pools {
		at := func(f string) string { return fmt.Sprintf("pools[%d].%s", i, f) }
		if p.Jobs < 0 {
			bad = append(bad, fmt.Sprintf("%s: must be >= 0, got %d", at("jobs"), p.Jobs))
		}
		if p.Waiting < 0 || p.Waiting > max(p.Jobs, 0) {
			bad = append(bad, fmt.Sprintf("%s: must be >= 0 and <= jobs (%d), got %d", at("waiting"), p.Jobs, p.Waiting))
		}
		if p.Idle < 0 || p.Idle > max(p.Servers, 0) {
			bad = append(bad, fmt.Sprintf("%s: must be >= 0 and <= servers (%d), got %d", at("idle"), p.Servers, p.Idle))
		}
		if p.Servers < 0 {
			bad = append(bad, fmt.Sprintf("%s: must be >= 0, got %d", at("servers"), p.Servers))
		}
		rate(at("arrival"), p.Arrival)
		rate(at("service"), p.Service)
		rate(at("holding_cost"), p.HoldingCost)
	}
	rate("switch_rate", in.SwitchRate)
	if in.Locked != nil && len(in.Locked) != len(in.Pools) {
		bad = append(bad, fmt.Sprintf("locked: must have one entry per pool (%d), got %d", len(in.Pools), len(in.Locked)))
	}
	if in.Held != nil {
		np := len(in.Pools)
		if len(in.Held) != np {
			bad = append(bad, fmt.Sprintf("held: must be a %d×%d matrix, got %d rows", np, np, len(in.Held)))
		}
		for a, row := range in.Held {
			if len(row) != np {
				bad = append(bad, fmt.Sprintf("held[%d]: must be a row of %d reasons, got %d", a, np, len(row)))
			}
		}
	}
	if in.Transit != nil {
		np := len(in.Pools)
		if len(in.Transit) != np {
			bad = append(bad, fmt.Sprintf("transit: must be a %d×%d matrix, got %d rows", np, np, len(in.Transit)))
		}
		for a, row := range in.Transit {
			if len(row) != np {
				bad = append(bad, fmt.Sprintf("transit[%d]: must be a row of %d numbers, got %d", a, np, len(row)))
				continue
			}
			for b, x := range row {
				switch {
				case x < 0:
					bad = append(bad, fmt.Sprintf("transit[%d][%d]: must be >= 0, got %d", a, b, x))
				case a == b && x != 0:
					bad = append(bad, fmt.Sprintf("transit[%d][%d]: diagonal must be 0", a, b))
				}
			}
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("%w: %s", ErrBadInputs, strings.Join(bad, "; "))
	}
	return nil
}

// Model builds the switching model and state of the inputs, the way the
// Engine does for every decision: N = Σ k_i + Σ m_ab servers, the pools with
// λ_i, µ_i (floored at MinRate) and c_i, ζ (floored at MinRate) between
// every pair of pools, no switch costs, queues truncated at queueLimit, the
// blocking price c_i·J/µ_i (BlockingAuto) and Λ "auto". The discount (0.95)
// only serves the model's validation: the Engine solves the average
// criterion. Queue lengths are not clamped: the heuristic and the static
// policies use them as they are, and a table clamps them to J−1 itself.
//
// The inputs must have at least 2 pools and 1 server, valid pool names and
// queueLimit >= 2; otherwise the error says what is wrong.
func Model(in Inputs, queueLimit int) (*switching.Model, switching.State, error) {
	if err := in.check(); err != nil {
		return nil, switching.State{}, err
	}
	np := len(in.Pools)
	m := &switching.Model{
		Servers:            in.Servers(),
		QueueLimit:         queueLimit,
		Discount:           0.95,
		UniformizationMode: switching.UniformizationAuto,
		SwitchRates:        switching.PairMatrix(np, max(in.SwitchRate, MinRate)),
		SwitchCosts:        switching.PairMatrix(np, 0),
		BlockingAuto:       true,
	}
	st := switching.State{Jobs: make([]int, np), Servers: make([]int, np), Transit: make([][]int, np)}
	for i, p := range in.Pools {
		m.Pools = append(m.Pools, switching.Pool{
			Name:        p.Name,
			ArrivalRate: p.Arrival,
			ServiceRate: max(p.Service, MinRate),
			HoldingCost: p.HoldingCost,
		})
		st.Jobs[i], st.Servers[i] = p.Jobs, p.Servers
		st.Transit[i] = make([]int, np)
		if in.Transit != nil {
			copy(st.Transit[i], in.Transit[i])
		}
	}
	if err := m.Validate(); err != nil {
		return nil, switching.State{}, fmt.Errorf("%w: %w", ErrBadInputs, err)
	}
	return m, st, nil
}

// samePools says why a table's model does not fit the live one (other pools
// or another number of servers), or "".
func samePools(table, live *switching.Model) string {
	tn, ln := poolNames(table), poolNames(live)
	if !slices.Equal(tn, ln) {
		return fmt.Sprintf("the table is for pools (%s), the live pools are (%s)", strings.Join(tn, ", "), strings.Join(ln, ", "))
	}
	if table.Servers != live.Servers {
		return fmt.Sprintf("the table is for N=%d hosts, the pools have %d", table.Servers, live.Servers)
	}
	return ""
}

func poolNames(m *switching.Model) []string {
	names := make([]string, len(m.Pools))
	for i, p := range m.Pools {
		names[i] = p.Name
	}
	return names
}

// drift compares the rates of live with those of base, a model for the same
// pools: λ_i, µ_i, c_i and ζ_ab of every pair base can switch (none with
// instant switches). It describes the largest relative change |x − x₀| /
// max(x₀, MinRate) if that is over limit, and returns "" otherwise.
func drift(base, live *switching.Model, limit float64) string {
	worst, what := 0.0, ""
	see := func(name string, old, now float64, unit string) {
		rel := math.Abs(now-old) / max(math.Abs(old), MinRate)
		if rel > worst {
			worst = rel
			what = fmt.Sprintf("%s moved %+.0f%% (%.4g%s → %.4g%s)", name, 100*(now-old)/max(math.Abs(old), MinRate), old, unit, now, unit)
		}
	}
	for i, p := range base.Pools {
		q := live.Pools[i]
		see("the arrival rate of "+p.Name, p.ArrivalRate, q.ArrivalRate, "/s")
		see("the service rate of "+p.Name, p.ServiceRate, q.ServiceRate, "/host-s")
		see("the holding cost of "+p.Name, p.HoldingCost, q.HoldingCost, "")
	}
	if !base.InstantSwitches {
		for _, pr := range switching.Pairs(base.NumPools()) {
			if base.CanSwitch(pr.From, pr.To) {
				see("the switch rate", base.SwitchRates[pr.From][pr.To], live.SwitchRates[pr.From][pr.To], "/s")
			}
		}
	}
	if worst > limit {
		return what
	}
	return ""
}

// resolveModel is the model a table is re-solved on: the table's own model
// (its queue limit, switch costs, blocking prices and the pairs it can
// switch) with the live rates and number of servers, when the table is for
// the live pools; the live model otherwise.
func resolveModel(table, live *switching.Model) *switching.Model {
	if table == nil || !slices.Equal(poolNames(table), poolNames(live)) {
		return live
	}
	m := *table
	m.Servers = live.Servers
	m.Pools = append([]switching.Pool(nil), live.Pools...)
	m.SwitchRates = make([][]float64, len(table.SwitchRates))
	for a, row := range table.SwitchRates {
		m.SwitchRates[a] = make([]float64, len(row))
		for b, z := range row {
			if z > 0 {
				m.SwitchRates[a][b] = live.SwitchRates[a][b]
			}
		}
	}
	m.SwitchCosts = cloneMatrix(table.SwitchCosts)
	m.BlockingCosts = append([]float64(nil), table.BlockingCosts...)
	return &m
}

func cloneMatrix(x [][]float64) [][]float64 {
	out := make([][]float64, len(x))
	for i, row := range x {
		out[i] = append([]float64(nil), row...)
	}
	return out
}

// ratesOf describes the rates of a model.
func ratesOf(m *switching.Model) Rates {
	r := Rates{Servers: m.Servers, Pools: poolNames(m)}
	for _, p := range m.Pools {
		r.Arrival = append(r.Arrival, p.ArrivalRate)
		r.Service = append(r.Service, p.ServiceRate)
		r.HoldingCost = append(r.HoldingCost, p.HoldingCost)
	}
	for _, row := range m.SwitchRates {
		for _, z := range row {
			r.SwitchRate = max(r.SwitchRate, z)
		}
	}
	return r
}

// unlocked returns m, or a copy in which no switch can start from a locked
// pool (ζ_ab = 0 for every b) nor along a held pair (ζ_ab = 0).
func unlocked(m *switching.Model, locked []bool, held [][]string) *switching.Model {
	if !slices.Contains(locked, true) && !anyHeld(held) {
		return m
	}
	c := *m
	c.SwitchRates = make([][]float64, len(m.SwitchRates))
	for a, row := range m.SwitchRates {
		c.SwitchRates[a] = slices.Clone(row)
		for b := range row {
			if (a < len(locked) && locked[a]) || heldWhy(held, a, b) != "" {
				c.SwitchRates[a][b] = 0
			}
		}
	}
	return &c
}

// anyHeld reports whether a switch is held.
func anyHeld(held [][]string) bool {
	for _, row := range held {
		for _, why := range row {
			if why != "" {
				return true
			}
		}
	}
	return false
}

// heldWhy is why the switch a→b is held, or "".
func heldWhy(held [][]string, a, b int) string {
	if a < len(held) && b < len(held[a]) {
		return held[a][b]
	}
	return ""
}
