package selection

import (
	"context"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// randomPlan draws a problem of 2 to 8 clusters and a job of tasks(rng)
// tasks, and a plan on it: a candidate master and a random set.
func randomPlan(rng *rand.Rand, tasks int) (*Planner, int, []int, bool) {
	p := randomProblem(rng, 2+rng.IntN(7))
	p.Job.Tasks = tasks
	p.Job.VM.VCPUs = 1 + rng.IntN(2)
	if rng.IntN(4) == 0 {
		p.Job.TaskBytes = 0
	}
	pl, err := NewPlanner(p)
	if err != nil || len(pl.cand) == 0 {
		return nil, 0, nil, false
	}
	m := pl.cand[rng.IntN(len(pl.cand))]
	var others []int
	for _, c := range pl.cand {
		if c != m && rng.IntN(2) == 0 {
			others = append(others, c)
		}
	}
	return pl, m, others, true
}

// completions simulates each part's fastest schedule
// (docs/research/selection.md, "Whole tasks"): the link delivers input j
// at j·u, the slot free first takes it, so task j ends at
// C_j = max(j·u, C_{j−m}) + σ, for j ≤ T. It returns every part's
// completions, in order.
func completions(pl *Planner, ps []part, T int) [][]float64 {
	var out [][]float64
	for _, p := range ps {
		if p.n == 0 {
			continue
		}
		sigma, u, m := pl.sigma[p.c], 1/pl.linkRate(p), p.n*pl.slots()
		c := make([]float64, T+1) // c[0] unused
		for j := 1; j <= T; j++ {
			start := float64(j) * u
			if j > m {
				start = max(start, c[j-m])
			}
			c[j] = start + sigma
		}
		out = append(out, c[1:])
	}
	return out
}

// simulated returns the first completion at which the parts' simulated
// schedules have finished T tasks.
func simulated(cs [][]float64, T int) float64 {
	var all []float64
	for _, c := range cs {
		all = append(all, c...)
	}
	slices.Sort(all)
	for _, t := range all {
		done := 0
		for _, c := range cs {
			k, _ := slices.BinarySearch(c, t*(1+1e-12))
			done += k
		}
		if done >= T {
			return t
		}
	}
	return math.Inf(1)
}

// TestCountAgainstSimulation: one part's D(t) in O(1) against its
// simulated schedule, at and just before every completion, the link or the
// slots the bottleneck, 1 to 40 slots.
func TestCountAgainstSimulation(t *testing.T) {
	for i := range 3000 {
		rng := rand.New(rand.NewPCG(29, uint64(i)))
		st := stepper{sigma: 0.1 + 100*rng.Float64(), m: float64(1 + rng.IntN(40))}
		st.inv = 1 / st.sigma
		st.L = math.Inf(1)
		if rng.IntN(5) > 0 {
			st.L = st.m / st.sigma * math.Exp(3*rng.NormFloat64())
		}
		st.u = 1 / st.L
		const T = 200
		c := completions(&Planner{sigma: []float64{st.sigma}, job: Job{TaskBytes: 1, VM: VM{VCPUs: 1}}},
			[]part{{n: int(st.m), b: st.L}}, T)[0]
		if math.IsInf(st.L, 1) {
			c = completions(&Planner{sigma: []float64{st.sigma}, job: Job{VM: VM{VCPUs: 1}}}, []part{{n: int(st.m)}}, T)[0]
		}
		for j, cj := range c {
			if j+1 < T && c[j+1] <= cj*(1+1e-9) {
				continue // ties: the count at cj is past j+1
			}
			d, prev, next := st.count(cj)
			if int(min(d, T)) != j+1 { // the simulation stops at T
				t.Fatalf("part %d %+v: D(%.17g) = %g, simulated %d", i, st, cj, d, j+1)
			}
			if math.Abs(prev-cj) > 1e-9*cj {
				t.Fatalf("part %d %+v: the completion at or before %.17g is %.17g", i, st, cj, prev)
			}
			if j+1 < T && math.Abs(next-c[j+1]) > 1e-9*cj {
				t.Fatalf("part %d %+v: the completion after %.17g is %.17g, simulated %.17g", i, st, cj, next, c[j+1])
			}
			if d, _, _ := st.count(cj * (1 - 1e-9)); int(d) > j {
				t.Fatalf("part %d %+v: D just before %.17g = %g, simulated %d", i, st, cj, d, j)
			}
		}
	}
}

// TestFinishProperties checks t* and the sizing by whole tasks on random
// plans, jobs of 1 to 60 tasks, 1 or 2 vCPUs, with and without data:
//   - t* is the time the parts' simulated fastest schedules finish T tasks;
//   - T/R ≤ t* ≤ T/R + max_c δ_c (σ_c + u_c, or σ_c + m_c·u_c when the
//     slots are the bottleneck);
//   - the sized machines finish T tasks by t*, every sized machine gets a
//     task (so machines ≤ T, and worker processes ≤ T with one vCPU), and
//     the clusters' tasks add up to T;
//   - with the bandwidths held fixed, taking any one sized machine away
//     makes t* later.
func TestFinishProperties(t *testing.T) {
	tried := 0
	for i := range 4000 {
		rng := rand.New(rand.NewPCG(17, uint64(i)))
		T := 1 + rng.IntN(60)
		pl, m, others, ok := randomPlan(rng, T)
		if !ok {
			continue
		}
		ps := pl.parts(m, others)
		R, step := pl.fluidRate(ps), maxDelta(pl.steppers(ps))
		ts := pl.finish(ps)
		if !(R > 0) {
			if !math.IsInf(ts, 1) {
				t.Fatalf("plan %d: no machine, t* = %g, want +Inf", i, ts)
			}
			continue
		}
		tried++
		lo, hi := float64(T)/R, float64(T)/R+step
		if ts < lo*(1-1e-12) || ts > hi*(1+1e-12) {
			t.Fatalf("plan %d: t* = %g outside [T/R, T/R + max δ] = [%g, %g]", i, ts, lo, hi)
		}
		if want := simulated(completions(pl, ps, T), T); math.Abs(ts-want) > 1e-11*want {
			t.Fatalf("plan %d: t* = %.17g, the simulated schedules finish %d tasks at %.17g", i, ts, T, want)
		}
		z := pl.sizeWhole(ps, ts)
		n, tasks := slices.Clone(z.n), slices.Clone(z.tasks)
		sized := slices.Clone(ps)
		sum, machines := 0, 0
		for k := range sized {
			if n[k] > sized[k].n || n[k] < 0 {
				t.Fatalf("plan %d: part %d sized to %d of %d machines", i, k, n[k], sized[k].n)
			}
			if tasks[k] < n[k] {
				t.Fatalf("plan %d: part %d: %d machines for %d tasks", i, k, n[k], tasks[k])
			}
			sized[k].n = n[k]
			sum += tasks[k]
			machines += n[k]
		}
		if sum != T || machines > T || pl.slots() == 1 && machines*pl.slots() > T {
			t.Fatalf("plan %d: %d tasks on %d machines of %d slots, want %d tasks and no more processes", i, sum, machines, pl.slots(), T)
		}
		if got := pl.finish(sized); math.Abs(got-ts) > 1e-12*ts {
			t.Fatalf("plan %d: the sized machines finish at %g, t* = %g", i, got, ts)
		}
		for k := range sized {
			if sized[k].n == 0 {
				continue
			}
			sized[k].n--
			if got := pl.finish(sized); !(got > ts*(1+1e-12)) {
				t.Fatalf("plan %d: one machine less in part %d still finishes at %g, t* = %g", i, k, got, ts)
			}
			sized[k].n++
		}
	}
	if tried < 1000 {
		t.Fatalf("only %d of the random plans had a machine", tried)
	}
}

// TestFinishEdges: a job without data (Comm = 0: no link bound), a plan of
// the master's cluster alone, and a master with no worker.
func TestFinishEdges(t *testing.T) {
	ctx := context.Background()
	// Comm = 0 on the paper's grid, one task: one spain slot, σ = 2·2e11/2e9
	// = 200 s, and one worker.
	pl := paperPlanner(t, func(j *Job) { j.TaskBytes, j.Tasks = 0, 1 })
	p, err := pl.Exhaustive(ctx, Options{Master: -1})
	if err != nil {
		t.Fatal(err)
	}
	if p.Runtime != 200 || p.Machines != 2 || p.Master != "spain" || len(p.Clusters) != 1 || p.Clusters[0].Tasks != 1 {
		t.Errorf("Comm = 0, 1 task: %s, %d machines, %g s, want spain, 2 machines, 200 s", p.Master, p.Machines, p.Runtime)
	}
	// The master's cluster alone, 5 tasks on latam-b (4 workers of 2 slots,
	// 400 s a task, an input every 4 s on the LAN): slots 1–5 one task
	// each, the 5th's input in at 20 s, done at 420 s, on 3 machines (2
	// slots each: 2+2+1).
	pl = paperPlanner(t, func(j *Job) { j.Tasks = 5 })
	a := pl.Alone(1)
	if math.Abs(a.Runtime-420) > 1e-9 || a.Machines != 4 || a.Clusters[0].Machines != 3 || a.Clusters[0].Allowed != 4 ||
		a.Clusters[0].Tasks != 5 || a.Clusters[0].Limit != LimitTasks {
		t.Errorf("latam-b alone, 5 tasks: %+v, want 420 s on 3 of 4 workers", a)
	}
	// A master whose cluster has no other free machine and no worker
	// cluster: no plan.
	pl, err = NewPlanner(Problem{Graph: pl.Graph(), Job: ptr(pl.Job()), Free: []int{1, 0, 0}})
	if err != nil {
		t.Fatal(err)
	}
	if p := pl.Alone(0); p.Feasible {
		t.Errorf("a master with no worker: feasible %+v", p)
	}
}

func ptr[T any](v T) *T { return &v }

// TestExhaustiveAgainstBruteForce: on small grids, the exhaustive plan's
// run time and machines are those of a brute force over every plan (m, S)
// and, within it, every count of machines n'_c ≤ n_c per cluster, with the
// plan's bandwidths held fixed: the earliest t*, then the fewest machines.
func TestExhaustiveAgainstBruteForce(t *testing.T) {
	ctx := context.Background()
	checked := 0
	for i := range 300 {
		rng := rand.New(rand.NewPCG(23, uint64(i)))
		p := randomProblem(rng, 2+rng.IntN(3))
		p.Job.Tasks = 1 + rng.IntN(24)
		p.Job.VM.VCPUs = 1 + rng.IntN(2)
		// At most 4 free machines a cluster, so that the counts can be
		// enumerated.
		p.Free = make([]int, p.Graph.Len())
		for c := range p.Free {
			p.Free[c] = min(p.Graph.Cluster(c).Machines, 1+rng.IntN(4))
		}
		pl, err := NewPlanner(p)
		if err != nil {
			t.Fatal(err)
		}
		got, err := pl.Exhaustive(ctx, Options{Master: -1})
		if err != nil {
			t.Fatal(err)
		}
		bestT, bestM := math.Inf(1), 0
		for _, m := range pl.cand {
			var rest []int
			for _, c := range pl.cand {
				if c != m {
					rest = append(rest, c)
				}
			}
			for mask := 0; mask < 1<<len(rest); mask++ {
				var others []int
				for k, c := range rest {
					if mask&(1<<k) != 0 {
						others = append(others, c)
					}
				}
				ps := pl.parts(m, others)
				counts := make([]int, len(ps))
				for {
					q := slices.Clone(ps)
					machines := 1
					for k := range q {
						q[k].n = counts[k]
						q[k].rate = 0
						if q[k].n > 0 {
							q[k].rate = pl.sizedRate(ps[k], q[k].n)
						}
						machines += counts[k]
					}
					if ts := pl.finish(q); cmpTime(ts, bestT) > 0 || cmpTime(ts, bestT) == 0 && machines < bestM {
						bestT, bestM = ts, machines
					}
					k := 0
					for k < len(counts) && counts[k] == ps[k].n {
						counts[k] = 0
						k++
					}
					if k == len(counts) {
						break
					}
					counts[k]++
				}
			}
		}
		if math.IsInf(bestT, 1) {
			if got.Feasible {
				t.Fatalf("problem %d: exhaustive plan %+v, the brute force finds none", i, got)
			}
			continue
		}
		checked++
		if !got.Feasible || math.Abs(got.Runtime-bestT) > 1e-12*bestT || got.Machines != bestM {
			t.Fatalf("problem %d: exhaustive %g s on %d machines, brute force %g s on %d", i, got.Runtime, got.Machines, bestT, bestM)
		}
	}
	if checked < 100 {
		t.Fatalf("only %d feasible problems", checked)
	}
}
