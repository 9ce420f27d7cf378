package policy

import (
	"testing"

	"github.com/rs/zerolog"

	"github.com/metasched/metasched/switching"
)

func TestTableSlice(t *testing.T) {
	tab := solved(t, small.inputs([2]int{0, 0}, [2]int{2, 1}, [2]int{}), smallJ)
	e := newEngine(t, Config{Name: Optimal, Table: tableFile(t, tab), TableSource: "small.table"}, zerolog.Nop())
	h := newEngine(t, Config{Name: Heuristic}, zerolog.Nop())
	if s := h.TableSlice([]string{"a", "b"}, []int{2, 1}, []int{0, 0}); s != nil {
		t.Errorf("a heuristic engine has a table view: %+v", s)
	}
	// The live allocation (1,2) and queues (4,1), pools given in another order.
	s := e.TableSlice([]string{"b", "a"}, []int{2, 1}, []int{1, 4})
	if s == nil {
		t.Fatal("no view of the table")
	}
	if s.Spec != "k=1,2 m=0 rows=j1 cols=j2 size=6" || s.LiveRow != 4 || s.LiveCol != 1 || len(s.Actions) != smallJ {
		t.Fatalf("view %s, live (%d,%d), %d rows", s.Spec, s.LiveRow, s.LiveCol, len(s.Actions))
	}
	switches := 0
	for r, row := range s.Actions {
		for c, got := range row {
			a := tab.Decide(switching.State{Jobs: []int{r, c}, Servers: []int{1, 2}, Transit: [][]int{{0, 0}, {0, 0}}})
			want := ""
			if a != switching.NoAction {
				p := a.Pair(2)
				want = s.Pools[p.From] + "→" + s.Pools[p.To]
				switches++
			}
			if got != want {
				t.Errorf("j=(%d,%d): %q, want %q", r, c, got, want)
			}
		}
	}
	if switches == 0 {
		t.Error("the view shows no switch at all")
	}
	// Servers in transit (sum below N): the table's default allocation.
	if s := e.TableSlice([]string{"a", "b"}, []int{1, 1}, []int{0, 0}); s == nil || s.Spec != "k=2,1 m=0 rows=j1 cols=j2 size=6" {
		t.Errorf("view with a host in transit: %+v", s)
	}
	// Queues beyond the view: no live cell.
	if s := e.TableSlice([]string{"a", "b"}, []int{2, 1}, []int{9, 0}); s == nil || s.LiveRow != -1 {
		t.Errorf("view with a long queue: %+v", s)
	}
}
