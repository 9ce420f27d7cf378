package switching

import (
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
	h, _ := NewHeuristic(m, 1)
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
