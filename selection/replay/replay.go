package replay

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/metasched/metasched/graph"
	"github.com/metasched/metasched/selection"
)

// Arrival kinds.
const (
	Uniform     = "uniform"
	Exponential = "exponential"
)

// ErrInfeasible is wrapped by the error of a request that no plan of its
// algorithm can run, even with every machine of the grid free.
var ErrInfeasible = errors.New("no plan can run the request, even with every machine free")

// relTie is the relative difference under which two completions tie.
const relTie = 1e-12

// streamArrivals is the PCG stream of the arrival gaps.
const streamArrivals = 0x5e1ec7

// Config is one simulation: a stream of identical requests on a grid.
type Config struct {
	Graph *graph.Graph
	// Job is the template of every request: the job with Tasks =
	// Processes.
	Job *selection.Job
	// Requests is the number of requests, >= 1.
	Requests int
	// Processes is the number of tasks of each request, >= 1.
	Processes int
	// Arrivals is Uniform or Exponential (see the package doc).
	Arrivals string
	// Rate is the mean arrival rate in requests per second, > 0.
	Rate float64
	Seed uint64
	// Algorithms are simulated separately on the same arrival times, in
	// this order; each at most once.
	Algorithms []selection.Algorithm
	// Restarts is the number of hill-climbing restarts; 0 means
	// selection.DefaultRestarts.
	Restarts int
	// Progress, when set, is called after each request is placed.
	Progress func(Progress)
}

// Progress reports a simulation's advance.
type Progress struct {
	Algorithm selection.Algorithm
	// Request is the number of the request just placed (1-based).
	Request int
	// Step counts the requests placed over every algorithm so far, out of
	// Steps = Requests × len(Algorithms).
	Step, Steps int
}

// Request is what happened to one request under one algorithm. Times are
// in seconds from the first arrival.
type Request struct {
	// Index is the request's number, from 1, in arrival order.
	Index   int     `json:"index"`
	Arrival float64 `json:"arrival_s"`
	Start   float64 `json:"start_s"`
	// Wait = Start − Arrival.
	Wait float64 `json:"wait_s"`
	// Run is the plan's predicted run time.
	Run float64 `json:"run_s"`
	// Total = Wait + Run.
	Total float64 `json:"total_s"`
	// End = Start + Run.
	End    float64 `json:"end_s"`
	Master string  `json:"master"`
	// Machines counts the machines of the plan: workers and the master.
	Machines int `json:"machines"`
	// Clusters names the plan's clusters, the master's first, joined by "+".
	Clusters string `json:"clusters"`
}

// Summary sums up one algorithm's requests.
type Summary struct {
	MeanWait  float64 `json:"mean_wait_s"`
	MeanRun   float64 `json:"mean_run_s"`
	MeanTotal float64 `json:"mean_total_s"`
	// Makespan is the last request's end.
	Makespan float64 `json:"makespan_s"`
	// ImprovementVsMCT is 1 − MeanTotal/MeanTotal(mct), when mct was
	// simulated: 0.7 means 70% less time than mct, negative means more.
	ImprovementVsMCT *float64 `json:"improvement_vs_mct,omitempty"`
}

// Series is one algorithm's simulation.
type Series struct {
	Algorithm selection.Algorithm `json:"algorithm"`
	Requests  []Request           `json:"requests"`
	Summary   Summary             `json:"summary"`
}

// Result is a simulation's outcome: the arrival times shared by every
// algorithm, and one Series per algorithm in Config order.
type Result struct {
	Arrivals []float64 `json:"arrivals_s"`
	Series   []Series  `json:"algorithms"`
}

// Validate checks a Config, naming the field at fault.
func (c *Config) Validate() error {
	switch {
	case c.Graph == nil:
		return errors.New("graph: required")
	case c.Job == nil:
		return errors.New("job: required")
	case c.Requests < 1:
		return fmt.Errorf("requests: must be >= 1, got %d", c.Requests)
	case c.Processes < 1:
		return fmt.Errorf("processes: must be >= 1 (tasks per request), got %d", c.Processes)
	case c.Arrivals != Uniform && c.Arrivals != Exponential:
		return fmt.Errorf("arrivals: must be %s or %s, got %q", Uniform, Exponential, c.Arrivals)
	case !(c.Rate > 0) || math.IsInf(c.Rate, 1):
		return fmt.Errorf("rate: must be a number > 0 (requests per second), got %g", c.Rate)
	case len(c.Algorithms) == 0:
		return errors.New("algorithms: none given")
	case c.Restarts < 0:
		return fmt.Errorf("restarts: must be >= 1, or 0 for %d, got %d", selection.DefaultRestarts, c.Restarts)
	}
	for i, a := range c.Algorithms {
		if !slices.Contains(selection.Algorithms, a) {
			names := make([]string, len(selection.Algorithms))
			for i, x := range selection.Algorithms {
				names[i] = string(x)
			}
			return fmt.Errorf("algorithms: unknown algorithm %q: want one of %s", a, strings.Join(names, ", "))
		}
		if slices.Contains(c.Algorithms[:i], a) {
			return fmt.Errorf("algorithms: %s given twice", a)
		}
	}
	job := *c.Job
	job.Tasks = c.Processes
	if err := job.Validate(); err != nil {
		return fmt.Errorf("job: %w", err)
	}
	return nil
}

// ArrivalTimes returns the arrival times of c's requests: 0, then the sums
// of the gaps drawn from c.Seed. c must be valid.
func ArrivalTimes(c Config) []float64 {
	rng := rand.New(rand.NewPCG(c.Seed, streamArrivals))
	at := make([]float64, c.Requests)
	for i := 1; i < c.Requests; i++ {
		var gap float64
		if c.Arrivals == Exponential {
			gap = rng.ExpFloat64() / c.Rate
		} else {
			gap = rng.Float64() * 2 / c.Rate
		}
		at[i] = at[i-1] + gap
	}
	return at
}

// Run simulates every algorithm of c on the same arrivals. It returns an
// error for an invalid Config, a request no plan can run (ErrInfeasible), a
// planner's refusal (an exhaustive search over too many clusters) or ctx's
// cancellation.
func Run(ctx context.Context, c Config) (*Result, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return run(ctx, c, ArrivalTimes(c))
}

// run simulates a valid c on the given arrival times.
func run(ctx context.Context, c Config, arrivals []float64) (*Result, error) {
	job := *c.Job
	job.Tasks = c.Processes
	res := &Result{Arrivals: arrivals}
	steps := len(arrivals) * len(c.Algorithms)
	for ai, alg := range c.Algorithms {
		s := newSim(c.Graph, &job, c.Restarts)
		ser := Series{Algorithm: alg, Requests: make([]Request, 0, len(arrivals))}
		prev := 0.0
		for r, arrival := range res.Arrivals {
			if err := ctx.Err(); err != nil {
				return nil, fmt.Errorf("%s: request %d: %w", alg, r+1, err)
			}
			t0 := max(arrival, prev)
			ch, err := s.choose(ctx, alg, t0)
			if err != nil {
				return nil, fmt.Errorf("%s: request %d: %w", alg, r+1, err)
			}
			if err := s.take(ch.t, ch.plan); err != nil {
				return nil, fmt.Errorf("%s: request %d: %w", alg, r+1, err)
			}
			prev = ch.t
			names := make([]string, len(ch.plan.Clusters))
			for i, cp := range ch.plan.Clusters {
				names[i] = cp.Name
			}
			ser.Requests = append(ser.Requests, Request{
				Index: r + 1, Arrival: arrival, Start: ch.t, Wait: ch.t - arrival, Run: ch.plan.Runtime,
				Total: ch.t - arrival + ch.plan.Runtime, End: ch.t + ch.plan.Runtime,
				Master: ch.plan.Master, Machines: ch.plan.Machines, Clusters: strings.Join(names, "+"),
			})
			if c.Progress != nil {
				c.Progress(Progress{Algorithm: alg, Request: r + 1, Step: ai*len(arrivals) + r + 1, Steps: steps})
			}
		}
		ser.Summary = summarize(ser.Requests)
		res.Series = append(res.Series, ser)
	}
	if i := slices.IndexFunc(res.Series, func(s Series) bool { return s.Algorithm == selection.MCT }); i >= 0 {
		ref := res.Series[i].Summary.MeanTotal
		for k := range res.Series {
			imp := 1 - res.Series[k].Summary.MeanTotal/ref
			res.Series[k].Summary.ImprovementVsMCT = &imp
		}
	}
	return res, nil
}

func summarize(rs []Request) Summary {
	var s Summary
	for _, r := range rs {
		s.MeanWait += r.Wait
		s.MeanRun += r.Run
		s.MeanTotal += r.Total
		s.Makespan = max(s.Makespan, r.End)
	}
	n := float64(len(rs))
	s.MeanWait /= n
	s.MeanRun /= n
	s.MeanTotal /= n
	return s
}

// sim is the grid's state under one algorithm.
type sim struct {
	g        *graph.Graph
	job      *selection.Job
	restarts int
	// ready[c][k] is when machine k of cluster c is next free.
	ready [][]float64
}

func newSim(g *graph.Graph, job *selection.Job, restarts int) *sim {
	s := &sim{g: g, job: job, restarts: restarts, ready: make([][]float64, g.Len())}
	for c := range s.ready {
		s.ready[c] = make([]float64, g.Cluster(c).Machines)
	}
	return s
}

// candidates returns t0 and every ready time after it, ascending.
func (s *sim) candidates(t0 float64) []float64 {
	ts := []float64{t0}
	for _, rs := range s.ready {
		for _, r := range rs {
			if r > t0 {
				ts = append(ts, r)
			}
		}
	}
	slices.Sort(ts)
	return slices.Compact(ts)
}

// free returns the number of free machines of each cluster at t.
func (s *sim) free(t float64) []int {
	f := make([]int, len(s.ready))
	for c, rs := range s.ready {
		for _, r := range rs {
			if r <= t {
				f[c]++
			}
		}
	}
	return f
}

// planner returns the planner of the job on the machines free at t (all
// of them when t is +Inf).
func (s *sim) planner(t float64) (*selection.Planner, error) {
	var free []int
	if !math.IsInf(t, 1) {
		free = s.free(t)
	}
	return selection.NewPlanner(selection.Problem{Graph: s.g, Job: s.job, Free: free})
}

// choice is a request's placement.
type choice struct {
	t     float64
	plan  selection.Plan
	found bool
}

func (ch *choice) completion() float64 { return ch.t + ch.plan.Runtime }

// offer keeps (t, p) if it completes strictly sooner (beyond relTie).
func (ch *choice) offer(t float64, p selection.Plan) {
	if !p.Feasible {
		return
	}
	if c := t + p.Runtime; !ch.found || c < ch.completion()-relTie*ch.completion() {
		*ch = choice{t: t, plan: p, found: true}
	}
}

// choose places a request that may start at t0 or later.
func (s *sim) choose(ctx context.Context, alg selection.Algorithm, t0 float64) (choice, error) {
	switch alg {
	case selection.HillClimb, selection.Exhaustive:
		return s.chooseSearch(ctx, alg, t0)
	case selection.MCT:
		return s.chooseAlone(alg, t0, -1)
	case selection.MET:
		pl, err := s.planner(math.Inf(1))
		if err != nil {
			return choice{}, err
		}
		p, err := pl.Baseline(selection.MET, nil)
		if err != nil {
			return choice{}, err
		}
		if !p.Feasible {
			return choice{}, fmt.Errorf("%w: %s", ErrInfeasible, p.Reason)
		}
		return s.chooseAlone(alg, t0, p.MasterIndex)
	case selection.OLB:
		return s.chooseOLB(t0)
	}
	return choice{}, fmt.Errorf("unknown algorithm %q", alg)
}

// scan calls try with the planner of each candidate start time from t0,
// until a start time cannot beat the best completion found.
func (s *sim) scan(t0 float64, best *choice, try func(t float64, pl *selection.Planner) error) error {
	for _, t := range s.candidates(t0) {
		if best.found && t >= best.completion() {
			return nil
		}
		pl, err := s.planner(t)
		if err != nil {
			return err
		}
		if err := try(t, pl); err != nil {
			return err
		}
	}
	return nil
}

// chooseSearch scans the candidates with a multi-cluster search.
func (s *sim) chooseSearch(ctx context.Context, alg selection.Algorithm, t0 float64) (choice, error) {
	var best choice
	reason := ""
	err := s.scan(t0, &best, func(t float64, pl *selection.Planner) error {
		var (
			p   selection.Plan
			err error
		)
		if alg == selection.Exhaustive {
			p, err = pl.Exhaustive(ctx, selection.Options{Master: -1})
		} else {
			p, err = pl.HillClimb(ctx, selection.Options{Master: -1, Restarts: s.restarts})
		}
		reason = p.Reason
		best.offer(t, p)
		return err
	})
	if err != nil {
		return choice{}, err
	}
	if !best.found {
		return choice{}, fmt.Errorf("%w: %s", ErrInfeasible, reason)
	}
	return best, nil
}

// chooseAlone scans the candidates for the single-cluster plan of minimum
// completion, on cluster only (or on every cluster when only < 0).
func (s *sim) chooseAlone(alg selection.Algorithm, t0 float64, only int) (choice, error) {
	var best choice
	err := s.scan(t0, &best, func(t float64, pl *selection.Planner) error {
		for c := range s.g.Len() {
			if only < 0 || c == only {
				best.offer(t, pl.Alone(c))
			}
		}
		return nil
	})
	if err != nil {
		return choice{}, err
	}
	if !best.found {
		return choice{}, s.infeasible(alg, only)
	}
	best.plan.Algorithm = alg
	return best, nil
}

// chooseOLB starts the request on the first cluster able to run it alone.
func (s *sim) chooseOLB(t0 float64) (choice, error) {
	for _, t := range s.candidates(t0) {
		pl, err := s.planner(t)
		if err != nil {
			return choice{}, err
		}
		for c := range s.g.Len() {
			if p := pl.Alone(c); p.Feasible {
				p.Algorithm = selection.OLB
				return choice{t: t, plan: p, found: true}, nil
			}
		}
	}
	return choice{}, s.infeasible(selection.OLB, -1)
}

// infeasible explains why no single-cluster plan ran: the reason of the
// idle grid's plan on cluster only, or of the baseline over every cluster.
func (s *sim) infeasible(alg selection.Algorithm, only int) error {
	pl, err := s.planner(math.Inf(1))
	if err != nil {
		return err
	}
	var p selection.Plan
	if only >= 0 {
		p = pl.Alone(only)
	} else if p, err = pl.Baseline(alg, nil); err != nil {
		return err
	}
	return fmt.Errorf("%w: %s", ErrInfeasible, p.Reason)
}

// take gives plan p, started at t, its machines.
func (s *sim) take(t float64, p selection.Plan) error {
	end := t + p.Runtime
	for _, cp := range p.Clusters {
		n := cp.Machines
		if cp.Master {
			n++
		}
		rs := s.ready[cp.Index]
		for k := range rs {
			if n == 0 {
				break
			}
			if rs[k] <= t {
				rs[k] = end
				n--
			}
		}
		if n > 0 {
			return fmt.Errorf("internal error: the plan uses %d more machines of %s than are free at %g s", n, cp.Name, t)
		}
	}
	return nil
}
