package selection

import (
	"context"
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestScratchPlansAsWithout: planners that share a Scratch, one after
// another, on grids that change now and then, give the plans that planners
// of their own give, evaluations included.
func TestScratchPlansAsWithout(t *testing.T) {
	rng := rand.New(rand.NewPCG(41, 0))
	probs := []Problem{randomProblem(rng, 9), randomProblem(rng, 14), randomProblem(rng, 30)}
	sc := &Scratch{}
	for i := range 150 {
		p := probs[rng.IntN(len(probs))]
		p.Job = randomJob(rng)
		if rng.IntN(2) == 0 {
			p.Free = make([]int, p.Graph.Len())
			for c := range p.Free {
				p.Free[c] = rng.IntN(p.Graph.Cluster(c).Machines + 1)
			}
		}
		plan := func(sc *Scratch) Plan {
			p.Scratch = sc
			pl, err := NewPlanner(p)
			if err != nil {
				t.Fatal(err)
			}
			got, err := pl.HillClimb(context.Background(), Options{Master: -1})
			if err != nil {
				t.Fatal(err)
			}
			return got
		}
		want, got := plan(nil), plan(sc)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("plan %d (%d clusters): with a shared scratch (-alone +shared):\n%s", i, p.Graph.Len(), diff)
		}
	}
}
