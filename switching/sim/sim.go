// Package sim is an exact event-driven simulator of the M-pool switching
// system of Fisher et al. and Palmer–Mitrani, the way the papers judge every
// switching policy.
//
// Jobs of type i arrive in a Poisson stream of rate λ_i and join queue i; each
// busy server of pool i completes a job at rate µ_i; a switch a→b takes an
// exponential time of rate ζ_ab (none with instant switches). The queues are
// not truncated: this is the real system, not the truncated model the
// optimal policy was solved on. A server switched away from a busy pool
// preempts a job, which resumes later (with exponential service, this is
// exact without tracking jobs: pool i serves at rate µ_i·min(j_i, k_i)).
//
// The policy decides at time 0 and after every arrival, departure, switch
// completion and demand-phase change, starting at most one switch each time.
// The run starts empty, at the static allocation of the first phase unless
// Config.Start says otherwise. Demand
// phases (Phases) set the phase's pool to a high arrival rate and the others
// to a low one; phases cycle from pool 1 and last an exponential time.
//
// The simulation runs Warmup·Completions completions, discarded, then
// Completions measured ones. The mean holding cost Σ c_i j_i is averaged over
// the measured time, with a 95% confidence interval from Batches batches of
// equal numbers of completions (batch means, Student t with Batches−1 degrees
// of freedom). Random numbers come from a PCG generator seeded by
// Config.Seed: the same seed gives the same numbers.
//
// The package does no I/O and keeps no clock (Config.Now is an input).
//
// The design is described in docs/research/simulation.md of the
// repository, "The simulator".
package sim

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/metasched/metasched/switching"
)

// Batches is the number of batches of the confidence interval.
const Batches = 20

// tQuantile is the 0.975 quantile of Student's t with Batches−1 = 19
// degrees of freedom.
const tQuantile = 2.093024054408263

// checkEvery is how many events pass between checks of the context and
// progress reports.
const checkEvery = 1 << 16

// ErrCanceled is returned (wrapped, with the context's error) when a run
// stops because its context ended.
var ErrCanceled = errors.New("simulation canceled")

// Config is one simulation run.
type Config struct {
	Model *switching.Model
	// Policies holds the policy of each demand phase (phase p uses
	// Policies[p]); without phases, one policy.
	Policies []switching.Policy
	// Phases, when set, overrides the arrival rates with demand phases.
	Phases *Phases
	// Completions is the number of measured job completions (at least
	// Batches).
	Completions int64
	// Warmup is the fraction of Completions simulated first and discarded.
	Warmup float64
	Seed   uint64
	// Start is the servers in place at each pool at time 0 (Σ = N); nil
	// starts at the static allocation of the first phase.
	Start []int
	// QueueLimits, when set, holds each pool's truncation J_i of the
	// policy tables: the run reports the fraction of measured time some
	// queue sat at or beyond J_i−1 (the truncated chain's boundary) and
	// beyond it (j_i ≥ J_i: states the table does not hold, which it
	// answers as at J_i−1).
	QueueLimits []int
	// PhaseQueueLimits, when set, holds QueueLimits per demand phase (one
	// per policy), for tables of different truncations: each phase's time
	// is measured against its own table's J_i. It replaces QueueLimits.
	PhaseQueueLimits [][]int
	// Now, when set, times the event loop (Result.Seconds).
	Now func() time.Time
	// Progress, when set, is called every 65,536 events from the running
	// goroutine.
	Progress func(Progress)
}

// Progress reports a run's advance.
type Progress struct {
	Completions int64 // completions so far, warm-up included
	Target      int64 // warm-up plus measured completions
	Events      int64
}

// Result is what a run measured.
type Result struct {
	// MeanCost is the time-average of Σ c_i j_i over the measured window.
	MeanCost float64
	// CI95 is the 95% batch-means confidence interval of MeanCost.
	CI95 [2]float64
	// BatchMeans are the time-averages of Σ c_i j_i of each batch.
	BatchMeans [Batches]float64

	Completions       int64   // measured
	WarmupCompletions int64   // simulated first and discarded
	Events            int64   // arrivals, departures, switch completions and phase changes, warm-up included
	Switches          int64   // switches started in the measured window
	PhaseChanges      int64   // in the measured window
	Time              float64 // length of the measured window, model time units

	MeanJobs    []float64 // time-average queue length of each pool (jobs in service included)
	MeanServers []float64 // time-average servers in place at each pool
	// TransitFraction is the time-average fraction of the servers in
	// transit between pools: how much of their time servers spend switching.
	TransitFraction float64
	// SwitchCostRate is the lump switching cost Σ c_ab per unit of measured
	// time (not part of MeanCost).
	SwitchCostRate float64
	// BoundaryFraction is the fraction of measured time some queue sat at
	// or beyond its J_i−1, and BeyondFraction beyond it (j_i ≥ J_i, where a
	// table answers as at J_i−1); NaN without Config.QueueLimits.
	BoundaryFraction float64
	BeyondFraction   float64

	Seconds float64 // time spent in the event loop (needs Config.Now)
}

// Phases are demand phases: in phase p (0-based, cycling through the pools
// from the first), pool p's arrival rate is High and every other pool's is
// Low. Phase lengths are exponential with mean Mean.
type Phases struct {
	High, Low float64
	Mean      float64
}

// Validate checks the phases, naming the bad field.
func (p *Phases) Validate() error {
	var errs []error
	for _, f := range []struct {
		name string
		v    float64
		pos  bool
	}{{"high", p.High, false}, {"low", p.Low, false}, {"mean", p.Mean, true}} {
		switch {
		case math.IsNaN(f.v) || math.IsInf(f.v, 0):
			errs = append(errs, fmt.Errorf("phases: %s: must be a finite number, got %g", f.name, f.v))
		case f.pos && f.v <= 0:
			errs = append(errs, fmt.Errorf("phases: %s: must be > 0, got %g", f.name, f.v))
		case f.v < 0:
			errs = append(errs, fmt.Errorf("phases: %s: must be >= 0, got %g", f.name, f.v))
		}
	}
	return errors.Join(errs...)
}

// PhaseModels returns the model of each phase: copies of m with the arrival
// rates of that phase, one per pool. Without phases it returns m alone.
func PhaseModels(m *switching.Model, ph *Phases) []*switching.Model {
	if ph == nil {
		return []*switching.Model{m}
	}
	out := make([]*switching.Model, m.NumPools())
	for p := range out {
		c := *m
		c.Pools = append([]switching.Pool(nil), m.Pools...)
		for i := range c.Pools {
			c.Pools[i].ArrivalRate = ph.Low
			if i == p {
				c.Pools[i].ArrivalRate = ph.High
			}
		}
		out[p] = &c
	}
	return out
}

func (c *Config) check() error {
	m := c.Model
	switch {
	case m == nil:
		return errors.New("simulate: no model")
	case c.Completions < Batches:
		return fmt.Errorf("simulate: completions: must be at least %d (one per batch), got %d", Batches, c.Completions)
	case !(c.Warmup >= 0) || math.IsInf(c.Warmup, 1):
		return fmt.Errorf("simulate: warmup: must be a finite fraction >= 0, got %g", c.Warmup)
	case c.PhaseQueueLimits != nil && len(c.PhaseQueueLimits) != len(c.Policies):
		return fmt.Errorf("simulate: phase queue limits: must be one per phase's policy (%d), got %d", len(c.Policies), len(c.PhaseQueueLimits))
	}
	if err := checkLimits("queue limits", c.QueueLimits, len(m.Pools)); err != nil {
		return err
	}
	for p, js := range c.PhaseQueueLimits {
		if err := checkLimits(fmt.Sprintf("phase queue limits[%d]", p), js, len(m.Pools)); err != nil {
			return err
		}
	}
	if err := m.Validate(); err != nil {
		return fmt.Errorf("simulate: %w", err)
	}
	if c.Start != nil {
		sum := 0
		for i, k := range c.Start {
			if k < 0 {
				return fmt.Errorf("simulate: start[%d]: must be >= 0, got %d", i, k)
			}
			sum += k
		}
		if len(c.Start) != m.NumPools() || sum != m.Servers {
			return fmt.Errorf("simulate: start: must give the servers of each of the %d pools, %d in all; got %v", m.NumPools(), m.Servers, c.Start)
		}
	}
	want := 1
	if c.Phases != nil {
		if err := c.Phases.Validate(); err != nil {
			return fmt.Errorf("simulate: %w", err)
		}
		want = m.NumPools()
	}
	if len(c.Policies) != want {
		return fmt.Errorf("simulate: %d policies given for %d phases", len(c.Policies), want)
	}
	for i, p := range c.Policies {
		if p == nil {
			return fmt.Errorf("simulate: policy of phase %d is nil", i+1)
		}
	}
	return nil
}

// system is the simulated state and its rates.
type system struct {
	np      int
	instant bool
	mu, c   []float64
	// rate holds the rate of every event, in the order events are picked:
	// arrivals λ_i (the current phase's), departures µ_i·min(j_i, k_i),
	// completions ζ_ab·m_ab of each moving pair, then the phase change.
	// lambda, dep and comp are its sections. total is their sum, kept up to
	// date by differences and recomputed exactly every checkEvery events.
	rate   []float64
	lambda []float64
	dep    []float64
	comp   []float64
	total  float64

	jobs, servers []int
	transit       [][]int

	pairs    []switching.Pair // every action's pair, action d → pairs[d−1]
	canSw    [][]bool
	swCost   [][]float64
	moving   []movePair // pairs that can be in transit
	movingOf [][]int    // index into moving, or −1
	inFlight int        // Σ m_ab

	// Time integrals over the measured window, kept as offsets: the
	// integral of a quantity q up to now is q·now − off, and a change of q
	// by d at time t adds d·t to off.
	now          float64
	jobOff       []float64
	srvOff       []float64
	flightOff    float64
	edge, beyond *over // time with some j_i ≥ J_i−1, and with some j_i ≥ J_i (nil without limits)
}

// checkLimits checks one set of queue limits (nil: none), named by field.
func checkLimits(field string, js []int, pools int) error {
	if js != nil && len(js) != pools {
		return fmt.Errorf("simulate: %s: must be one per pool (%d), got %d", field, pools, len(js))
	}
	for i, j := range js {
		if j < 1 {
			return fmt.Errorf("simulate: %s[%d]: must be >= 1, got %d", field, i, j)
		}
	}
	return nil
}

// over measures the time some queue sits at or above its level.
type over struct {
	level    []int
	count    int // pools with j_i ≥ level_i
	area, at float64
}

func newOver(levels []int, jobs []int) *over {
	o := &over{}
	o.relevel(levels, jobs, 0)
	return o
}

// relevel sets new levels at time now (a demand phase whose table has
// other truncations).
func (o *over) relevel(levels []int, jobs []int, now float64) {
	if o == nil {
		return
	}
	o.flush(now)
	o.level, o.count = levels, 0
	for i, l := range levels {
		if jobs[i] >= l {
			o.count++
		}
	}
}

// set records queue i's change from old to j at time now.
func (o *over) set(i, old, j int, now float64) {
	if o == nil || (old >= o.level[i]) == (j >= o.level[i]) {
		return
	}
	o.flush(now)
	if j >= o.level[i] {
		o.count++
	} else {
		o.count--
	}
}

func (o *over) flush(now float64) {
	if o == nil {
		return
	}
	if o.count > 0 {
		o.area += now - o.at
	}
	o.at = now
}

func (o *over) reset(now float64) {
	if o != nil {
		o.area, o.at = 0, now
	}
}

func (o *over) fraction(window float64) float64 { return o.area / window }

type movePair struct {
	from, to int
	zeta     float64
}

func newSystem(m *switching.Model, queueLimits []int) *system {
	np := m.NumPools()
	s := &system{
		np: np, instant: m.InstantSwitches,
		mu: make([]float64, np), c: make([]float64, np),
		jobs: make([]int, np), servers: make([]int, np), transit: make([][]int, np),
		pairs: switching.Pairs(np), canSw: make([][]bool, np), swCost: m.SwitchCosts,
		movingOf: make([][]int, np),
		jobOff:   make([]float64, np), srvOff: make([]float64, np),
	}
	if queueLimits != nil {
		s.edge, s.beyond = newOver(edges(queueLimits), s.jobs), newOver(slices.Clone(queueLimits), s.jobs)
	}
	for i, p := range m.Pools {
		s.mu[i], s.c[i] = p.ServiceRate, p.HoldingCost
		s.transit[i] = make([]int, np)
		s.canSw[i] = make([]bool, np)
		s.movingOf[i] = make([]int, np)
		for b := range np {
			s.canSw[i][b] = m.CanSwitch(i, b)
			s.movingOf[i][b] = -1
		}
	}
	if !m.InstantSwitches {
		for _, p := range s.pairs {
			if m.CanSwitch(p.From, p.To) {
				s.movingOf[p.From][p.To] = len(s.moving)
				s.moving = append(s.moving, movePair{p.From, p.To, m.SwitchRates[p.From][p.To]})
			}
		}
	}
	s.rate = make([]float64, 2*np+len(s.moving)+1)
	s.lambda = s.rate[:np]
	s.dep = s.rate[np : 2*np]
	s.comp = s.rate[2*np : 2*np+len(s.moving)]
	return s
}

// edges are the boundary levels J_i−1 of truncations J_i.
func edges(limits []int) []int {
	e := make([]int, len(limits))
	for i, j := range limits {
		e[i] = j - 1
	}
	return e
}

// setRates sets the arrival rates and the phase-change rate.
func (s *system) setRates(lambda []float64, phaseRate float64) {
	copy(s.lambda, lambda)
	s.rate[len(s.rate)-1] = phaseRate
	s.resum()
}

// resum recomputes the total rate exactly.
func (s *system) resum() {
	s.total = 0
	for _, r := range s.rate {
		s.total += r
	}
}

func (s *system) setDep(i int, r float64) {
	s.total += r - s.dep[i]
	s.dep[i] = r
}

// setJobs changes queue i, flushing its integrals.
func (s *system) setJobs(i, j int) {
	old := s.jobs[i]
	s.jobOff[i] += float64(j-old) * s.now
	s.jobs[i] = j
	s.setDep(i, s.mu[i]*float64(min(j, s.servers[i])))
	s.edge.set(i, old, j, s.now)
	s.beyond.set(i, old, j, s.now)
}

// setServers changes pool i's servers in place.
func (s *system) setServers(i, k int) {
	s.srvOff[i] += float64(k-s.servers[i]) * s.now
	s.servers[i] = k
	s.setDep(i, s.mu[i]*float64(min(s.jobs[i], k)))
}

// addTransit changes the servers in transit on moving pair p by d.
func (s *system) addTransit(p, d int) {
	s.flightOff += float64(d) * s.now
	s.inFlight += d
	mp := &s.moving[p]
	s.transit[mp.from][mp.to] += d
	r := mp.zeta * float64(s.transit[mp.from][mp.to])
	s.total += r - s.comp[p]
	s.comp[p] = r
}

// resetAreas starts the measured window at the current time.
func (s *system) resetAreas() {
	for i := range s.np {
		s.jobOff[i] = float64(s.jobs[i]) * s.now
		s.srvOff[i] = float64(s.servers[i]) * s.now
	}
	s.flightOff = float64(s.inFlight) * s.now
	s.edge.reset(s.now)
	s.beyond.reset(s.now)
}

// jobArea returns ∫ j_i over the window up to now.
func (s *system) jobArea(i int) float64 { return float64(s.jobs[i])*s.now - s.jobOff[i] }

// holdingArea returns Σ c_i ∫ j_i over the window up to now.
func (s *system) holdingArea() float64 {
	a := 0.0
	for i := range s.np {
		a += s.c[i] * s.jobArea(i)
	}
	return a
}

// Event kinds.
const (
	evArrival = iota
	evDeparture
	evCompletion
	evPhase
)

// pick returns the event that u ∈ [0, total rate) falls in: its kind and
// the pool or moving pair. Rounding can put u just past the last event; the
// last event with a positive rate is taken then.
func (s *system) pick(u float64) (kind, idx int) {
	e := 0
	for ; e < len(s.rate); e++ {
		if u < s.rate[e] {
			break
		}
		u -= s.rate[e]
	}
	if e == len(s.rate) {
		for e--; s.rate[e] <= 0; e-- {
		}
	}
	switch np := s.np; {
	case e < np:
		return evArrival, e
	case e < 2*np:
		return evDeparture, e - np
	case e < 2*np+len(s.comp):
		return evCompletion, e - 2*np
	}
	return evPhase, 0
}

// apply carries out action d, returning its lump cost.
func (s *system) apply(d switching.Action) (float64, error) {
	if d < 0 || int(d) > len(s.pairs) {
		return 0, fmt.Errorf("action %d out of range for %d pools", d, s.np)
	}
	p := s.pairs[d-1]
	if !s.canSw[p.From][p.To] {
		return 0, fmt.Errorf("action %d switches pool %d to pool %d, which cannot switch", d, p.From+1, p.To+1)
	}
	if s.servers[p.From] <= 0 {
		return 0, fmt.Errorf("action %d switches a server away from pool %d, which has none in place", d, p.From+1)
	}
	s.setServers(p.From, s.servers[p.From]-1)
	if s.instant {
		s.setServers(p.To, s.servers[p.To]+1)
	} else {
		s.addTransit(s.movingOf[p.From][p.To], 1)
	}
	return s.swCost[p.From][p.To], nil
}

func (s *system) policyError(err error) error {
	return fmt.Errorf("simulate: policy at jobs %v, servers %v, transit %v: %w", s.jobs, s.servers, s.transit, err)
}

// Run simulates cfg. It returns an error wrapping ErrCanceled when ctx ends
// first, and an error naming the state when a policy chooses an action that
// is not available.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	m := cfg.Model
	models := PhaseModels(m, cfg.Phases)
	limits := cfg.QueueLimits
	if cfg.PhaseQueueLimits != nil {
		limits = cfg.PhaseQueueLimits[0]
	}
	s := newSystem(m, limits)
	rates := make([][]float64, len(models))
	for p, pm := range models {
		rates[p] = make([]float64, s.np)
		for i, pool := range pm.Pools {
			rates[p][i] = pool.ArrivalRate
		}
	}
	phase := 0
	phaseRate := 0.0
	if cfg.Phases != nil {
		phaseRate = 1 / cfg.Phases.Mean
	}
	s.setRates(rates[0], phaseRate)
	start := cfg.Start
	if start == nil {
		start = switching.StaticAllocation(models[0])
	}
	for i, k := range start {
		s.setServers(i, k)
	}

	warm := int64(math.Round(cfg.Warmup * float64(cfg.Completions)))
	target := warm + cfg.Completions
	res := &Result{WarmupCompletions: warm, BoundaryFraction: math.NaN(), BeyondFraction: math.NaN()}
	var began time.Time
	if cfg.Now != nil {
		began = cfg.Now()
	}

	rng := rand.New(rand.NewPCG(cfg.Seed, 0x853c49e6748fea9b))
	state := switching.State{Jobs: s.jobs, Servers: s.servers, Transit: s.transit}
	pol := cfg.Policies[0]
	measuring := warm == 0
	var done, measured int64 // completions in all, and in the window
	var batch int
	batchEnd := cfg.Completions / Batches
	var windowStart, batchStart, batchCost, switchCost float64
	var events int64

	if d := pol.Decide(state); d != switching.NoAction {
		if _, err := s.apply(d); err != nil {
			return nil, s.policyError(err)
		}
	}
	for done < target {
		total := s.total
		if !(total > 0) {
			return nil, errors.New("simulate: nothing can happen: no arrivals, no jobs and no servers in transit")
		}
		s.now += rng.ExpFloat64() / total
		events++
		if events%checkEvery == 0 {
			s.resum()
			if err := ctx.Err(); err != nil {
				return nil, fmt.Errorf("%w after %d of %d completions: %w", ErrCanceled, done, target, err)
			}
			if cfg.Progress != nil {
				cfg.Progress(Progress{Completions: done, Target: target, Events: events})
			}
		}

		switch kind, i := s.pick(rng.Float64() * total); kind {
		case evArrival:
			s.setJobs(i, s.jobs[i]+1)
		case evDeparture:
			s.setJobs(i, s.jobs[i]-1)
			done++
			switch {
			case measuring:
				measured++
				if measured == batchEnd {
					c := s.holdingArea()
					res.BatchMeans[batch] = (c - batchCost) / (s.now - batchStart)
					batch++
					batchCost, batchStart = c, s.now
					batchEnd = cfg.Completions * int64(batch+1) / Batches
				}
			case done == warm:
				measuring = true
				s.resetAreas()
				windowStart, batchStart = s.now, s.now
			}
		case evCompletion:
			mp := s.moving[i]
			s.addTransit(i, -1)
			s.setServers(mp.to, s.servers[mp.to]+1)
		case evPhase:
			phase = (phase + 1) % len(rates)
			s.setRates(rates[phase], phaseRate)
			pol = cfg.Policies[phase]
			if cfg.PhaseQueueLimits != nil {
				js := cfg.PhaseQueueLimits[phase]
				s.edge.relevel(edges(js), s.jobs, s.now)
				s.beyond.relevel(slices.Clone(js), s.jobs, s.now)
			}
			if measuring {
				res.PhaseChanges++
			}
		}
		if d := pol.Decide(state); d != switching.NoAction {
			c, err := s.apply(d)
			if err != nil {
				return nil, s.policyError(err)
			}
			if measuring {
				res.Switches++
				switchCost += c
			}
		}
	}
	if cfg.Now != nil {
		res.Seconds = cfg.Now().Sub(began).Seconds()
	}
	s.edge.flush(s.now)
	s.beyond.flush(s.now)
	res.Events = events
	res.Completions = measured
	res.Time = s.now - windowStart
	res.MeanCost = s.holdingArea() / res.Time
	res.MeanJobs = make([]float64, s.np)
	res.MeanServers = make([]float64, s.np)
	for i := range s.np {
		res.MeanJobs[i] = s.jobArea(i) / res.Time
		res.MeanServers[i] = (float64(s.servers[i])*s.now - s.srvOff[i]) / res.Time
	}
	res.TransitFraction = (float64(s.inFlight)*s.now - s.flightOff) / res.Time / float64(m.Servers)
	res.SwitchCostRate = switchCost / res.Time
	if s.edge != nil {
		res.BoundaryFraction, res.BeyondFraction = s.edge.fraction(res.Time), s.beyond.fraction(res.Time)
	}
	mean, sd := 0.0, 0.0
	for _, b := range res.BatchMeans {
		mean += b
	}
	mean /= Batches
	for _, b := range res.BatchMeans {
		sd += (b - mean) * (b - mean)
	}
	half := tQuantile * math.Sqrt(sd/(Batches-1)/Batches)
	res.CI95 = [2]float64{res.MeanCost - half, res.MeanCost + half}
	return res, nil
}
