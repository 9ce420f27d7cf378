package switching

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// viewModel is the model of the view tests: 5 servers, 3 pools, J = 8.
func viewModel() *Model {
	m := policyModel(5, []float64{1, 1, 1}, []float64{1, 1, 1}, []float64{1, 1, 1}, 0.1)
	m.QueueLimit = 8
	return m
}

// viewCases are view specs of viewModel and their views (TestViews), and
// seeds of FuzzParseView.
var viewCases = []struct {
	spec string
	want View
}{
	// Default: 5 servers over 3 pools, extra servers to the lowest pools;
	// size min(11, J) = 8.
	{"", View{K: []int{2, 2, 1}, Rows: 0, Cols: 1, Fixed: map[int]int{2: 0}, Size: 8}},
	{"k=1,1,3 m=0 j1=4 rows=j2 cols=j3 size=5", View{K: []int{1, 1, 3}, Rows: 1, Cols: 2, Fixed: map[int]int{0: 4}, Size: 5}},
	// Rows moved onto the default columns: the columns move out of the way.
	{"rows=j2", View{K: []int{2, 2, 1}, Rows: 1, Cols: 0, Fixed: map[int]int{2: 0}, Size: 8}},
	{"cols=j1", View{K: []int{2, 2, 1}, Rows: 1, Cols: 0, Fixed: map[int]int{2: 0}, Size: 8}},
}

// viewErrorCases are view specs of viewModel ParseView refuses, and its
// errors (TestViews), and seeds of FuzzParseView.
var viewErrorCases = []struct{ spec, want string }{
	{"j3=2 rows=j3", "j3: is on the rows, it cannot be fixed too"},
	// Numbers that overflow their sum to N.
	{"k=9223372036854775807,9223372036854775807,7", `k: "9223372036854775807" is not a number of servers from 0 to N = 5`},
}

func TestViews(t *testing.T) {
	m3 := viewModel()
	for _, tc := range viewCases {
		got, err := ParseView(m3, tc.spec)
		if err != nil {
			t.Fatalf("%q: %v", tc.spec, err)
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("%q (-want +got):\n%s", tc.spec, diff)
		}
		again, err := ParseView(m3, got.String())
		if err != nil || !cmp.Equal(got, again) {
			t.Errorf("%q: String %q does not parse back: %v", tc.spec, got.String(), err)
		}
	}
	for _, tc := range viewErrorCases {
		if _, err := ParseView(m3, tc.spec); err == nil || err.Error() != tc.want {
			t.Errorf("%q: err = %v, want %q", tc.spec, err, tc.want)
		}
	}
}

// A view reads the policy at the states it shows: the heuristic's slice is
// its decision state by state.
func TestViewSlice(t *testing.T) {
	m := heuristicPM()
	h, err := NewHeuristic(m, 1)
	if err != nil {
		t.Fatal(err)
	}
	v := DefaultView(m)
	v.Size = 4
	got := v.Slice(h)
	for r := range 4 {
		for c := range 4 {
			want := h.Decide(policyState([]int{r, c}, []int{1, 1}))
			if got[r][c] != want {
				t.Errorf("j = (%d, %d): slice %d, Decide %d", r, c, got[r][c], want)
			}
		}
	}
}

// policyFunc is a Policy of a function, for the view tests.
type policyFunc func(State) Action

func (f policyFunc) Decide(s State) Action { return f(s) }

// fig4Rates is Fisher et al.'s Figure 4 model scaled to n servers as the
// bundled fisher-fig4-n5.yaml is (M = 3, µ = 1, ζ = 0.1, c = (2,1,1),
// equal λ, total load 0.8·n), with queues truncated at j.
func fig4Rates(n, j int) *Model {
	l := 0.8 * float64(n) / 3
	m := policyModel(n, []float64{l, l, l}, []float64{1, 1, 1}, []float64{2, 1, 1}, 0.1)
	m.QueueLimit = j
	m.BlockingAuto = true
	return m
}

// The default view of a policy shows where it acts. Fisher et al.'s
// Figure 4 rates at N = 4 (J = 11 to keep the test short): the even
// split's slice (k = (2,1,1), j3 = 0) is all "do nothing", the chosen one
// shows where the policy switches.
func TestChooseViewFig4(t *testing.T) {
	if testing.Short() {
		t.Skip("a solve of 0.7 M states")
	}
	m := fig4Rates(4, 11)
	sol, err := Solve(context.Background(), m, SolveOptions{})
	if err != nil {
		t.Fatal(err)
	}
	def := DefaultView(m)
	if n := switchingCells(def.Slice(sol.Table)); n != 0 {
		t.Fatalf("the even split's slice has %d switching cells: the test no longer shows the default view's flaw", n)
	}
	v, c := ChooseView(m, sol.Table)
	slice := v.Slice(sol.Table)
	t.Logf("chosen %s, %+v: %v", v, c, slice)
	// 3 configurations with every pool served (2,1,1), (1,2,1), (1,1,2);
	// 3 pairs of queues on the axes; the third queue at 0 or 5.
	if c.Candidates != 18 || c.Unserved || c.Switching != switchingCells(slice) || c.Switching == 0 || c.Switching == v.Size*v.Size {
		t.Errorf("choice %+v for view %s: want a slice with cells that switch and cells that do not", c, v)
	}
	kinds := map[Action]bool{}
	for _, row := range slice {
		for _, a := range row {
			kinds[a] = true
		}
	}
	if len(kinds) < 2 {
		t.Errorf("chosen view %s shows actions %v, want doing nothing and switching", v, kinds)
	}
	again, c2 := ChooseView(m, sol.Table)
	if !cmp.Equal(v, again) || c != c2 {
		t.Errorf("ChooseView is not deterministic: %s then %s", v, again)
	}
	if _, err := ParseView(m, v.String()); err != nil {
		t.Errorf("chosen view %q does not parse: %v", v, err)
	}
}

func switchingCells(s [][]Action) int {
	n := 0
	for _, row := range s {
		for _, a := range row {
			if a != 0 {
				n++
			}
		}
	}
	return n
}

// ChooseView's rules on made-up policies: the longest switching curve
// wins, ties go to the first candidate (the even split first), a policy
// that never acts gets the default view, and one that acts only where a
// pool has no server is looked for there too.
func TestChooseViewRules(t *testing.T) {
	m := viewModel() // N = 5, M = 3, J = 8
	never := policyFunc(func(State) Action { return 0 })
	v, c := ChooseView(m, never)
	if !cmp.Equal(v, DefaultView(m)) || c.Changes != 0 || c.Switching != 0 || c.Unserved {
		t.Errorf("a policy that never switches: view %s, %+v; want the default view", v, c)
	}
	if c.Candidates != len(viewCandidates(m, DefaultView(m), true))+len(viewCandidates(m, DefaultView(m), false)) {
		t.Errorf("%d candidates, want those with every pool served and then all", c.Candidates)
	}
	// Switches 1→2 when j2 > j1 + 2, only with k = (3,1,1), j3 = 0.
	diag := policyFunc(func(s State) Action {
		if cmp.Equal(s.Servers, []int{3, 1, 1}) && s.Jobs[2] == 0 && s.Jobs[1] > s.Jobs[0]+2 {
			return 1
		}
		return 0
	})
	v, c = ChooseView(m, diag)
	if want := "k=3,1,1 m=0 j3=0 rows=j1 cols=j2 size=8"; v.String() != want || c.Switching != 15 || c.Unserved {
		t.Errorf("chosen %s, %+v; want %s with 15 switching cells", v, c, want)
	}
	// Acts only when pool 3 has no server.
	empty := policyFunc(func(s State) Action {
		if s.Servers[2] == 0 && s.Jobs[2] > 3 {
			return 3
		}
		return 0
	})
	v, c = ChooseView(m, empty)
	if v.K[2] != 0 || !c.Unserved || c.Switching == 0 {
		t.Errorf("chosen %s, %+v; want a slice with pool 3 unserved", v, c)
	}
	// Two pools, one server each when N = 2: a single candidate.
	two := policyModel(2, []float64{1, 1}, []float64{1, 1}, []float64{1, 1}, 0.1)
	two.QueueLimit = 5
	if _, c := ChooseView(two, diag); c.Candidates != 1+len(viewCandidates(two, DefaultView(two), false)) {
		t.Errorf("two pools: %d candidates", c.Candidates)
	}
}
