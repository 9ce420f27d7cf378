package gramvm_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/metasched/metasched/gramvm"
	"github.com/metasched/metasched/selection"
)

// TestPreparedPlansAsPlanLoaded: a prepared grid plans every job as
// PlanLoaded and PlanAvailable do with the same running jobs, whether its
// answer is searched or reused (the same shape on the same free host
// counts, other hosts), for seeded jobs of a few shapes on random free
// hosts of the paper's grid and of a grid that running jobs load.
func TestPreparedPlansAsPlanLoaded(t *testing.T) {
	ctx := context.Background()
	sc := newScenario(t, "heavy", 8e5, 1200, 600)
	paper, err := gramvm.New(paperGrid(t), 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name    string
		s       *gramvm.Service
		running []gramvm.RunningJob
		hosts   map[string]int
		vcpus   int
	}{
		{"paper grid", paper, nil, map[string]int{"latam-a": 3, "latam-b": 5, "spain": 8}, 1},
		{"loaded grid", sc.s, sc.running, map[string]int{"home": 4, "far": 8}, 4},
	} {
		t.Run(c.name, func(t *testing.T) {
			p, err := c.s.Prepare(c.running)
			if err != nil {
				t.Fatal(err)
			}
			rng := rand.New(rand.NewPCG(1, 2))
			searched := map[string]bool{}
			for i := range 200 {
				job := &selection.Job{Name: fmt.Sprintf("j%d", i), Type: "render", Tasks: 1 + rng.IntN(3)*50, TaskOps: 1e9,
					TaskBytes: []float64{0, 5e4}[rng.IntN(2)], Efficiency: 0.8, VM: selection.VM{VCPUs: c.vcpus, MemoryMiB: 1024}}
				free := map[string][]string{}
				avail := map[string][]gramvm.HostFree{}
				for site, n := range c.hosts {
					for h := range n {
						name := fmt.Sprintf("%s-%d", site, h)
						switch rng.IntN(4) {
						case 0: // busy, free in 30 s
							avail[site] = append(avail[site], gramvm.HostFree{Host: name, In: 30})
						case 1: // busy
						default:
							free[site] = append(free[site], name)
							avail[site] = append(avail[site], gramvm.HostFree{Host: name})
						}
					}
				}
				opt := selection.Options{Master: -1}
				want, _, err := c.s.PlanLoaded(ctx, job, free, c.running, opt)
				if err != nil {
					t.Fatal(err)
				}
				got, err := p.Plan(ctx, job, free, opt)
				if err != nil {
					t.Fatal(err)
				}
				ignore := cmpopts.IgnoreFields(selection.Plan{}, "Evaluations")
				if diff := cmp.Diff(want, got, ignore, cmpopts.EquateEmpty()); diff != "" {
					t.Fatalf("job %d: Prepared.Plan differs from PlanLoaded (-want +got):\n%s", i, diff)
				}
				searched[fmt.Sprint(job.Tasks, job.TaskBytes, len(free["latam-a"]), len(free["latam-b"]), len(free["spain"]), len(free["home"]), len(free["far"]))] = true
				job.Placement = []selection.Placement{selection.PlaceMET, selection.PlaceMCT, selection.PlaceOLB}[rng.IntN(3)]
				wantA, _, err := c.s.PlanAvailable(ctx, job, avail, c.running, opt)
				if err != nil {
					t.Fatal(err)
				}
				gotA, err := p.PlanAvailable(ctx, job, avail, opt)
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(wantA, gotA, cmpopts.EquateEmpty()); diff != "" {
					t.Fatalf("job %d, placement %s: Prepared.PlanAvailable differs from PlanAvailable (-want +got):\n%s", i, job.Placement, diff)
				}
			}
			if p.Reused == 0 || p.Reused != 200-len(searched) {
				t.Errorf("%d plans reused, want %d (200 jobs, %d shapes and counts)", p.Reused, 200-len(searched), len(searched))
			}
		})
	}
}
