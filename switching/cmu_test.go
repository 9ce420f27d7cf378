package switching

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// cmuModel has N = 4, c = (2,1,1), µ = (1,1,3), so cµ = (2,1,3): pool 3
// first, then pool 1, then pool 2. λ = 0.5 and ζ = 0.1 play no part.
func cmuModel() *Model {
	return policyModel(4, []float64{0.5, 0.5, 0.5}, []float64{1, 1, 3}, []float64{2, 1, 1}, 0.1)
}

func TestCMuOrder(t *testing.T) {
	tests := []struct {
		name  string
		model *Model
		want  []int
	}{
		{"cmu model", cmuModel(), []int{2, 0, 1}},
		{
			// All equal: by index.
			"equal", policyModel(3, []float64{1, 1, 1}, []float64{1, 1, 1}, []float64{1, 1, 1}, 0.1),
			[]int{0, 1, 2},
		},
		{
			// cµ = (3·0.1, 1·0.3, 2) = (0.30000000000000004, 0.3, 2): the first
			// two are equal within the tolerance, so by index after pool 3.
			"rounding noise", policyModel(3, []float64{1, 1, 1}, []float64{0.1, 0.3, 1}, []float64{3, 1, 2}, 0.1),
			[]int{2, 0, 1},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, NewCMu(tt.model).order); diff != "" {
				t.Errorf("order (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCMuDecide(t *testing.T) {
	noInto3 := cmuModel()
	noInto3.SwitchRates[0][2] = 0
	noInto3.SwitchRates[1][2] = 0

	equal := policyModel(2, []float64{0.5, 0.5}, []float64{1, 1}, []float64{1, 1}, 0.1)
	// cµ = (3·0.1, 1·0.3) = (0.30000000000000004, 0.3): equal priorities.
	noisy := policyModel(2, []float64{0.5, 0.5}, []float64{0.1, 0.3}, []float64{3, 1}, 0.1)
	same := policyModel(3, []float64{1, 1, 1}, []float64{1, 1, 1}, []float64{1, 1, 1}, 0.1)

	tests := []struct {
		name  string
		model *Model
		state State
		want  Action
	}{
		{
			// No queue longer than its servers: nothing.
			name: "no target", model: cmuModel(),
			state: policyState([]int{0, 0, 0}, []int{2, 1, 1}), want: NoAction,
		},
		{
			// Pool 3 (cµ 3): j = 3 > k = 1. Idle servers: pool 1 has 2, pool 2
			// has 1: take from pool 1, switch 1→3 = action 3.
			name: "most idle source", model: cmuModel(),
			state: policyState([]int{0, 0, 3}, []int{2, 1, 1}), want: 3,
		},
		{
			// j = (1,0,3): pools 1 and 2 have one idle server each: the tie
			// goes to pool 1, action 3.
			name: "idle tie to the lowest index", model: cmuModel(),
			state: policyState([]int{1, 0, 3}, []int{2, 1, 1}), want: 3,
		},
		{
			// j = (2,0,3): pool 1 busy, pool 2 has one idle: switch 2→3 = action 5.
			name: "the only idle source", model: cmuModel(),
			state: policyState([]int{2, 0, 3}, []int{2, 1, 1}), want: 5,
		},
		{
			// j = (2,1,3): nobody idle; preempt the lowest cµ below 3, pool 2
			// (cµ 1, not pool 1 with cµ 2): action 5.
			name: "preempt the lowest priority", model: cmuModel(),
			state: policyState([]int{2, 1, 3}, []int{2, 1, 1}), want: 5,
		},
		{
			// j = (2,3,3), k = (2,0,1), one server 1→2 in transit: pool 2 has no
			// server in place, so the preempted pool is pool 1 (cµ 2 < 3): 1→3,
			// action 3.
			name: "empty pool is no source", model: cmuModel(),
			state: policyState([]int{2, 3, 3}, []int{2, 0, 1}, [3]int{0, 1, 1}), want: 3,
		},
		{
			// k = (2,1,0) and one server 1→3 in transit: j_3 = 2 > 0 + 1, so
			// pool 3 still needs one; pool 1 has 2 idle: action 3.
			name: "transit counted, still short", model: cmuModel(),
			state: policyState([]int{0, 0, 2}, []int{2, 1, 0}, [3]int{0, 2, 1}), want: 3,
		},
		{
			// j_3 = 1 = 0 + 1 heading there: pool 3 is served; the others have
			// empty queues: nothing.
			name: "transit counted, enough", model: cmuModel(),
			state: policyState([]int{0, 0, 1}, []int{2, 1, 0}, [3]int{0, 2, 1}), want: NoAction,
		},
		{
			// j = (3,2,0): pool 3 is fine; pool 1 (cµ 2) has 3 > 2; idle:
			// pool 2 none (2 jobs, 1 server), pool 3 one: switch 3→1 = action 4.
			name: "second priority target", model: cmuModel(),
			state: policyState([]int{3, 2, 0}, []int{2, 1, 1}), want: 4,
		},
		{
			// j = (3,2,1): pool 1 is the target; nobody idle; below cµ 2 only
			// pool 2 (cµ 1): switch 2→1 = action 2.
			name: "preempt for the second priority", model: cmuModel(),
			state: policyState([]int{3, 2, 1}, []int{2, 1, 1}), want: 2,
		},
		{
			// j = (2,2,1): only pool 2 (cµ 1, the lowest) is short; nobody is
			// idle and nobody has a lower cµ: nothing.
			name: "lowest priority preempts nobody", model: cmuModel(),
			state: policyState([]int{2, 2, 1}, []int{2, 1, 1}), want: NoAction,
		},
		{
			// j = (3,0,5), k = (1,1,2): pool 3 is short but nobody can switch
			// into it (ζ_13 = ζ_23 = 0); next target pool 1 (3 > 1), pool 2 has
			// an idle server: switch 2→1 = action 2.
			name: "next target when the best has no source", model: noInto3,
			state: policyState([]int{3, 0, 5}, []int{1, 1, 2}), want: 2,
		},
		{
			// The same state when pool 3 can be reached: pool 2's idle server
			// goes to pool 3: action 5.
			name: "same state, best target reachable", model: cmuModel(),
			state: policyState([]int{3, 0, 5}, []int{1, 1, 2}), want: 5,
		},
		{
			// Equal cµ, both busy, pool 2 short: no preemption among equals.
			name: "equal priorities do not preempt", model: equal,
			state: policyState([]int{1, 3}, []int{1, 1}), want: NoAction,
		},
		{
			// cµ = (0.30000000000000004, 0.3): pool 1 short and pool 2 busy;
			// strictly, 0.3 < 0.30000000000000004, but within the tolerance
			// they are equal: nothing.
			name: "rounding noise is no priority", model: noisy,
			state: policyState([]int{3, 1}, []int{1, 1}), want: NoAction,
		},
		{
			// All equal, pools 1 and 2 short: pool 1 is the target (lowest
			// index); pool 3 has 2 idle: switch 3→1 = action 4.
			name: "target tie to the lowest index", model: same,
			state: policyState([]int{3, 3, 0}, []int{1, 1, 2}), want: 4,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := NewCMu(tt.model).Decide(tt.state); got != tt.want {
				t.Errorf("Decide(%+v) = %d, want %d", tt.state, got, tt.want)
			}
		})
	}
}

func TestCMuDecideDoesNotAllocate(t *testing.T) {
	p := NewCMu(cmuModel())
	s := policyState([]int{2, 1, 3}, []int{2, 1, 1})
	if n := testing.AllocsPerRun(100, func() { p.Decide(s) }); n != 0 {
		t.Errorf("Decide allocates %v times per call", n)
	}
}
