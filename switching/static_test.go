package switching

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// staticFig3 is Fisher et al.'s Figure 3 setting at N = 6: λ_1 = λ_2/1000,
// µ_1 = µ_2/1000, c = (2,1,1), ζ = µ_2/10, equal loads with total 4N/5 = 4.8,
// so ρ_i = 1.6 (λ_2 = λ_3 = 1.6, µ_2 = µ_3 = 1).
func staticFig3() *Model {
	return policyModel(6, []float64{1.6 / 1000, 1.6, 1.6}, []float64{1.0 / 1000, 1, 1}, []float64{2, 1, 1}, 0.1)
}

// staticFig4 is Fisher et al.'s Figure 4 setting: N = 4, µ = 1, ζ = 0.1,
// c = (2,1,1), equal arrival rates (here a total load of 3.2).
func staticFig4() *Model {
	l := 3.2 / 3
	return policyModel(4, []float64{l, l, l}, []float64{1, 1, 1}, []float64{2, 1, 1}, 0.1)
}

func TestStaticAllocation(t *testing.T) {
	ones := []float64{1, 1, 1}
	tests := []struct {
		name  string
		model *Model
		want  []int
	}{
		{
			// Palmer–Mitrani, N = 5, c = (1,2), λ = 0.5, µ = 1: ρc = (0.5, 1),
			// quota = 5·(1/3, 2/3) = (1.67, 3.33) → (2, 3), sum 5.
			// Their k_1 = ⌊1.67 + 0.5⌋ = 2, k_2 = N − k_1 = 3.
			name:  "PM two pools",
			model: policyModel(5, []float64{0.5, 0.5}, []float64{1, 1}, []float64{1, 2}, 0.1),
			want:  []int{2, 3},
		},
		{
			// Palmer–Mitrani Figure 2, phase 1 at N = 4: load 3N/4 = 3 in the
			// ratio 1:100, λ = (3/101, 300/101), µ = 1, c = (1,2):
			// ρc = (3, 600)/101, quota = 4·(3, 600)/603 = (0.02, 3.98) → (0, 4);
			// raise pool 1 → (1, 4), sum 5; take from pool 2 (the only k > 1)
			// → (1, 3). Their rule: replace 0 by 1 and N by N − 1: (1, 3).
			name:  "PM zero replaced by one, pool 1",
			model: policyModel(4, []float64{3.0 / 101, 300.0 / 101}, []float64{1, 1}, []float64{1, 2}, 0.1),
			want:  []int{1, 3},
		},
		{
			// Phase 2: λ = (300/101, 3/101): quota = 4·(300, 6)/306
			// = (3.92, 0.08) → (4, 0) → (4, 1) → take from pool 1 → (3, 1),
			// as their rule gives.
			name:  "PM zero replaced by one, pool 2",
			model: policyModel(4, []float64{300.0 / 101, 3.0 / 101}, []float64{1, 1}, []float64{1, 2}, 0.1),
			want:  []int{3, 1},
		},
		{
			// N = 3, c = (1,2), λ = (1, 0.5), µ = 1: ρc = (1, 1), quota =
			// (1.5, 1.5) → (2, 2), sum 4; k − quota = (0.5, 0.5) ties, pool 1
			// gives one up → (1, 2). (Palmer–Mitrani's k_1 = ⌊1.5 + 0.5⌋ = 2,
			// k_2 = 1 differs here: the tie rule of
			// docs/research/switching.md, "Static", is followed.)
			name:  "PM exact halves follow the tie rule",
			model: policyModel(3, []float64{1, 0.5}, []float64{1, 1}, []float64{1, 2}, 0.1),
			want:  []int{1, 2},
		},
		{
			// Fisher Figure 3, N = 6: ρ = (1.6, 1.6, 1.6), ρc = (3.2, 1.6, 1.6),
			// Σ = 6.4, quota = 6·(0.5, 0.25, 0.25) = (3, 1.5, 1.5);
			// ⌊3.5⌋ = 3, ⌊2.0⌋ = 2, ⌊2.0⌋ = 2 → (3, 2, 2), sum 7 > 6;
			// k − quota = (0, 0.5, 0.5): pools 2 and 3 tie, pool 2 gives one up
			// → (3, 1, 2).
			name:  "Fisher Fig. 3 N=6",
			model: staticFig3(),
			want:  []int{3, 1, 2},
		},
		{
			// Figure 3 with the pools permuted and λ = 0.7: pools 1 and 2 have
			// λ = 0.7, µ = 1, c = 1; pool 3 has λ = 0.7/1000, µ = 1/1000, c = 2.
			// In real arithmetic quota = 6·(1, 1, 2)/4 = (1.5, 1.5, 3) → (2, 2, 3),
			// sum 7; k − quota = (0.5, 0.5, 0): pool 1 gives one up → (1, 2, 3).
			// In floating point the quotas are (1.4999999999999998,
			// 1.4999999999999998, 2.9999999999999996); rounding them without
			// the tolerance would give (1, 1, 3), then pool 1 would get the
			// missing server: (2, 1, 3).
			name: "quota a hair below a half rounds up",
			model: policyModel(6, []float64{0.7, 0.7, 0.7 / 1000}, []float64{1, 1, 1.0 / 1000},
				[]float64{1, 1, 2}, 0.1),
			want: []int{1, 2, 3},
		},
		{
			// Fisher Figure 4, N = 4, equal λ, c = (2,1,1): ρc = (2, 1, 1)·λ,
			// quota = 4·(0.5, 0.25, 0.25) = (2, 1, 1) → (2, 1, 1), sum 4
			// (at every load, since the λ cancel).
			name:  "Fisher Fig. 4",
			model: staticFig4(),
			want:  []int{2, 1, 1},
		},
		{
			// N = 4, ρc = (18, 1, 1): quota = 4·(0.9, 0.05, 0.05) = (3.6, 0.2, 0.2)
			// → (4, 0, 0); raise the zeros → (4, 1, 1), sum 6; only pool 1
			// has k > 1, it gives up two → (2, 1, 1).
			name:  "zeros raised then rebalanced",
			model: policyModel(4, []float64{18, 1, 1}, ones, ones, 0.1),
			want:  []int{2, 1, 1},
		},
		{
			// N = 5, ρc = (8, 1, 1): quota = (4, 0.5, 0.5) → ⌊4.5⌋ = 4, ⌊1⌋ = 1,
			// 1 → (4, 1, 1), sum 6; k − quota = (0, 0.5, 0.5) but only pool 1
			// has k > 1 → (3, 1, 1).
			name:  "too many, only pools above one give",
			model: policyModel(5, []float64{8, 1, 1}, ones, ones, 0.1),
			want:  []int{3, 1, 1},
		},
		{
			// N = 5, equal: quota = 5/3 = 1.67 each → (2, 2, 2), sum 6;
			// k − quota = 0.33 each, pool 1 gives one up → (1, 2, 2).
			name:  "too many, tie to the lowest index",
			model: policyModel(5, ones, ones, ones, 0.1),
			want:  []int{1, 2, 2},
		},
		{
			// N = 4, equal: quota = 4/3 = 1.33 each → (1, 1, 1), sum 3;
			// quota − k = 0.33 each, pool 1 gets one → (2, 1, 1).
			name:  "too few, tie to the lowest index",
			model: policyModel(4, ones, ones, ones, 0.1),
			want:  []int{2, 1, 1},
		},
		{
			// N = 10, ρc = (43, 34, 23): quota = (4.3, 3.4, 2.3) → (4, 3, 2),
			// sum 9; quota − k = (0.3, 0.4, 0.3): pool 2 gets one → (4, 4, 2).
			name:  "too few, largest shortfall",
			model: policyModel(10, []float64{43, 34, 23}, ones, ones, 0.1),
			want:  []int{4, 4, 2},
		},
		{
			// N = 2 < M = 3, equal: quota = 0.67 each → (1, 1, 1), sum 3; no
			// raise to 1 since N < M, and pools with k > 0 may give: the
			// tie goes to pool 1 → (0, 1, 1).
			name:  "fewer servers than pools",
			model: policyModel(2, ones, ones, ones, 0.1),
			want:  []int{0, 1, 1},
		},
		{
			// Σρc = 0: 5 servers over 3 pools as evenly as possible, the
			// extra ones to the lowest indices → (2, 2, 1).
			name:  "no load splits evenly",
			model: policyModel(5, []float64{0, 0, 0}, ones, ones, 0.1),
			want:  []int{2, 2, 1},
		},
		{
			// Σρc = 0 with N < M: (1, 1, 0).
			name:  "no load, fewer servers than pools",
			model: policyModel(2, []float64{0, 0, 0}, ones, ones, 0.1),
			want:  []int{1, 1, 0},
		},
		{
			// Zero holding costs count as no load too: (1, 1, 1, 1) + one
			// extra to pool 1 → (2, 1, 1, 1).
			name:  "zero costs split evenly",
			model: policyModel(5, []float64{1, 1, 1, 1}, []float64{1, 1, 1, 1}, []float64{0, 0, 0, 0}, 0.1),
			want:  []int{2, 1, 1, 1},
		},
		{
			name:  "no servers",
			model: policyModel(0, ones, ones, ones, 0.1),
			want:  []int{0, 0, 0},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := StaticAllocation(tt.model)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("StaticAllocation (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.want, NewStatic(tt.model).Target()); diff != "" {
				t.Errorf("NewStatic target (-want +got):\n%s", diff)
			}
		})
	}
}

func TestStaticDecide(t *testing.T) {
	fig4NoZeta01 := staticFig4()
	fig4NoZeta01.SwitchRates[0][1] = 0
	fig3NoZeta10 := staticFig3()
	fig3NoZeta10.SwitchRates[1][0] = 0

	tests := []struct {
		name  string
		model *Model
		state State
		want  Action
	}{
		{
			// Figure 4, target (2,1,1): already there.
			name: "at the target", model: staticFig4(),
			state: policyState([]int{5, 0, 3}, []int{2, 1, 1}), want: NoAction,
		},
		{
			// e = (4,0,0): pool 1 has surplus 2, pools 2 and 3 deficits 1
			// each; the tie goes to pool 2: switch 1→2, action 1.
			name: "largest surplus to first deficit", model: staticFig4(),
			state: policyState([]int{0, 0, 0}, []int{4, 0, 0}), want: 1,
		},
		{
			// k = (3,0,0) with one server 1→2 in transit: e = (3,1,0), the
			// only deficit is pool 3: switch 1→3, action 3.
			name: "servers in transit count at their destination", model: staticFig4(),
			state: policyState([]int{0, 0, 0}, []int{3, 0, 0}, [3]int{0, 1, 1}), want: 3,
		},
		{
			// k = (2,0,0), one server in transit to each of pools 2 and 3:
			// e = (2,1,1) is the target: nothing.
			name: "target reached in transit", model: staticFig4(),
			state: policyState([]int{0, 0, 0}, []int{2, 0, 0}, [3]int{0, 1, 1}, [3]int{0, 2, 1}), want: NoAction,
		},
		{
			// k = (1,0,1), two servers 1→2 in transit: e = (1,2,1), pool 2 has
			// the surplus but no server in place: wait.
			name: "surplus still in transit is no source", model: staticFig4(),
			state: policyState([]int{0, 0, 0}, []int{1, 0, 1}, [3]int{0, 1, 2}), want: NoAction,
		},
		{
			// e = (0,3,1): surplus at pool 2 (2), deficit at pool 1 (2):
			// switch 2→1, action 2.
			name: "toward pool 1", model: staticFig4(),
			state: policyState([]int{0, 0, 0}, []int{0, 3, 1}), want: 2,
		},
		{
			// e = (4,0,0) with ζ_12 = 0: pool 1 cannot reach pool 2, so the
			// next deficit, pool 3: action 3.
			name: "next target when the pair cannot switch", model: fig4NoZeta01,
			state: policyState([]int{0, 0, 0}, []int{4, 0, 0}), want: 3,
		},
		{
			// Figure 3, target (3,1,2): k = (1,2,3), surpluses 1 at pools 2
			// and 3, deficit 2 at pool 1; the tie goes to pool 2: switch 2→1,
			// action 2.
			name: "surplus tie to the lowest index", model: staticFig3(),
			state: policyState([]int{0, 0, 0}, []int{1, 2, 3}), want: 2,
		},
		{
			// Same with ζ_21 = 0: pool 2 cannot reach pool 1, so pool 3
			// gives: switch 3→1, action 4.
			name: "next source when the pair cannot switch", model: fig3NoZeta10,
			state: policyState([]int{0, 0, 0}, []int{1, 2, 3}), want: 4,
		},
		{
			// k = (0,2,4): surpluses 1 (pool 2) and 2 (pool 3): pool 3 gives,
			// switch 3→1, action 4.
			name: "largest surplus", model: staticFig3(),
			state: policyState([]int{0, 0, 0}, []int{0, 2, 4}), want: 4,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := NewStatic(tt.model).Decide(tt.state); got != tt.want {
				t.Errorf("Decide(%+v) = %d, want %d", tt.state, got, tt.want)
			}
		})
	}
}

// TestStaticWalk starts switches as the policy says, one per decision, with
// every switch still in transit, and checks the sequence of actions.
func TestStaticWalk(t *testing.T) {
	tests := []struct {
		name    string
		model   *Model
		servers []int
		want    []Action
	}{
		{
			// Figure 4, target (2,1,1), from (4,0,0):
			// e = (4,0,0): 1→2 (action 1); e = (3,1,0): 1→3 (action 3);
			// e = (2,1,1): done.
			name: "Fig. 4", model: staticFig4(), servers: []int{4, 0, 0},
			want: []Action{1, 3},
		},
		{
			// Figure 3, target (3,1,2), from (0,0,6):
			// e = (0,0,6): deficits (3,1,0), 3→1 (action 4);
			// e = (1,0,5): deficits (2,1,0), 3→1;
			// e = (2,0,4): deficits (1,1,0) tie, 3→1;
			// e = (3,0,3): 3→2 (action 6); e = (3,1,2): done.
			name: "Fig. 3", model: staticFig3(), servers: []int{0, 0, 6},
			want: []Action{4, 4, 4, 6},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := NewStatic(tt.model)
			np := tt.model.NumPools()
			s := policyState(make([]int, np), append([]int(nil), tt.servers...))
			var got []Action
			for range 10 {
				d := p.Decide(s)
				if d == NoAction {
					break
				}
				got = append(got, d)
				pr := d.Pair(np)
				s.Servers[pr.From]--
				s.Transit[pr.From][pr.To]++
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("actions (-want +got):\n%s", diff)
			}
			// Once the switches complete, the servers are at the target.
			for a := range s.Transit {
				for b, x := range s.Transit[a] {
					s.Servers[b] += x
					s.Transit[a][b] = 0
				}
			}
			if diff := cmp.Diff(p.Target(), s.Servers); diff != "" {
				t.Errorf("final servers (-want +got):\n%s", diff)
			}
			if d := p.Decide(s); d != NoAction {
				t.Errorf("at the target: Decide = %d, want 0", d)
			}
		})
	}
}

func TestStaticDecideDoesNotAllocate(t *testing.T) {
	p := NewStatic(staticFig3())
	s := policyState([]int{0, 0, 0}, []int{0, 2, 3}, [3]int{2, 0, 1})
	if n := testing.AllocsPerRun(100, func() { p.Decide(s) }); n != 0 {
		t.Errorf("Decide allocates %v times per call", n)
	}
}
