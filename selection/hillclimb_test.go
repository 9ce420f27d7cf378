package selection

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// quality runs a search against the exhaustive optimum on count random
// problems of 3 to 12 clusters, each job of tasks(rng) tasks, and returns
// the share that reached the optimum's run time t* and the worst ratio of
// the optimum's t* to the search's.
func quality(t *testing.T, count int, seed uint64, tasks func(*rand.Rand) int, search func(*Planner) Plan) (hit float64, worst float64, worstSeed int) {
	t.Helper()
	ctx := context.Background()
	hits, feasible := 0, 0
	worst = 1
	for i := range count {
		rng := rand.New(rand.NewPCG(seed, uint64(i)))
		p := randomProblem(rng, 3+rng.IntN(10))
		p.Job.Tasks = tasks(rng)
		pl, err := NewPlanner(p)
		if err != nil {
			t.Fatal(err)
		}
		opt, err := pl.Exhaustive(ctx, Options{Master: -1})
		if err != nil {
			t.Fatal(err)
		}
		got := search(pl)
		if got.Feasible && !opt.Feasible {
			t.Fatalf("problem %d: feasible, but not by exhaustive search", i)
		}
		if !opt.Feasible {
			continue
		}
		feasible++
		if !got.Feasible {
			worst, worstSeed = 0, i
			continue
		}
		if got.Runtime < opt.Runtime*(1-1e-9) {
			t.Fatalf("problem %d: search run time %g before the exhaustive optimum's %g", i, got.Runtime, opt.Runtime)
		}
		if got.Runtime <= opt.Runtime*(1+1e-9) {
			hits++
		}
		if got.Runtime > opt.Runtime*(1+1e-9) && testing.Verbose() && debugMisses {
			t.Logf("problem %d: got %s, optimum %s", i, brief(got), brief(opt))
		}
		if r := opt.Runtime / got.Runtime; r < worst {
			worst, worstSeed = r, i
		}
	}
	return float64(hits) / float64(feasible), worst, worstSeed
}

// jobSizes are the task counts the searches are tested on: small jobs,
// whose t* is a few task times with wide plateaus, and large ones, near
// the fluid limit T/R.
var jobSizes = []struct {
	name  string
	tasks func(*rand.Rand) int
}{
	{"1-50 tasks", func(rng *rand.Rand) int { return 1 + rng.IntN(50) }},
	{"300 tasks", func(*rand.Rand) int { return 300 }},
	{"100000 tasks", func(*rand.Rand) int { return 100000 }},
}

func TestHillClimbAgainstExhaustive(t *testing.T) {
	count := 3000
	if testing.Short() {
		count = 300
	}
	for _, js := range jobSizes {
		hit, worst, at := quality(t, count, 1, js.tasks, func(pl *Planner) Plan {
			p, err := pl.HillClimb(context.Background(), Options{Master: -1, Restarts: 3})
			if err != nil {
				t.Fatal(err)
			}
			return p
		})
		t.Logf("hill climbing, 3 restarts, jobs of %s: optimum on %.2f%% of %d random grids, worst %.3f of it (problem %d)", js.name, 100*hit, count, worst, at)
		if hit < 0.99 {
			t.Errorf("jobs of %s: hill climbing reached the optimum on %.2f%% of random grids, want >= 99%%", js.name, 100*hit)
		}
		if worst < 0.9 {
			t.Errorf("jobs of %s: hill climbing fell to %.3f of the optimum (problem %d), want >= 0.9", js.name, worst, at)
		}
	}
}

// TestLiteralHillClimbGetsStuck shows that the random grids are hard: plain
// steepest ascent with add, drop and change-master moves, from each zone's
// strongest cluster, misses the optimum on several percent of them.
func TestLiteralHillClimbGetsStuck(t *testing.T) {
	count := 3000
	if testing.Short() {
		count = 300
	}
	hit, worst, _ := quality(t, count, 1, jobSizes[1].tasks, func(pl *Planner) Plan {
		return literalHillClimb(t, pl)
	})
	t.Logf("literal hill climbing: optimum on %.2f%% of %d random grids, worst %.3f of it", 100*hit, count, worst)
	if hit > 0.985 {
		t.Errorf("the literal algorithm reached the optimum on %.2f%%: the random grids are too easy to test the search", 100*hit)
	}
}

// literalHillClimb is the paper's algorithm read literally.
func literalHillClimb(t *testing.T, pl *Planner) Plan {
	zones, err := pl.g.Zones(DefaultRestarts)
	if err != nil {
		t.Fatal(err)
	}
	var best *candidate
	for _, z := range zones {
		head := pl.zoneHead(z)
		if head < 0 {
			continue
		}
		h := newClimb(pl, head, nil, false)
		for h.step(func(s *search) {
			h.addDrop(s)
			for _, c := range slices.Clone(h.mem) {
				s.offer(move{master: c, skip: -1, add: -1}, math.Inf(1))
			}
		}) {
		}
		if c := pl.trim(h.cur()); best == nil || pl.better(c, best) {
			best = c
		}
	}
	if best == nil {
		return pl.infeasible(HillClimb, "")
	}
	return pl.plan(HillClimb, best)
}

const debugMisses = false

func brief(p Plan) string {
	s := fmt.Sprintf("%.4g s (master %s:", p.Runtime, p.Master)
	for _, c := range p.Clusters {
		s += fmt.Sprintf(" %s=%d/%d@%.3g,%s", c.Name, c.Machines, c.Free, c.BandwidthMbps, c.Limit)
	}
	return s + ")"
}
