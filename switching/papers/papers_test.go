package papers

import (
	"context"
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/metasched/metasched/switching"
)

func solveView(t *testing.T, ref Reference) [][]int {
	t.Helper()
	m := ref.Model()
	sol, err := switching.Solve(context.Background(), m, switching.SolveOptions{Criterion: switching.Discounted, Tolerance: 1e-9})
	if err != nil {
		t.Fatal(err)
	}
	if !sol.Converged {
		t.Fatalf("%s: not converged", ref.Name)
	}
	v, err := switching.ParseView(m, ref.View)
	if err != nil {
		t.Fatal(err)
	}
	var out [][]int
	for _, row := range v.Slice(sol.Table) {
		r := make([]int, len(row))
		for i, a := range row {
			r[i] = int(a)
		}
		out = append(out, r)
	}
	return out
}

// Palmer and Mitrani's Table 2 is reproduced exactly: N = 2, λ = 0.047,
// µ = ξ = η = 0.113, c = (1, 2), discounted with α = 0.95, Λ = 1, J = 30,
// no price on blocked arrivals, view k = (1, 1).
func TestPalmerTable2Exactly(t *testing.T) {
	ref := References()[1]
	if ref.Name != "palmer-table2" {
		t.Fatal("reference order changed")
	}
	if diff := cmp.Diff(ref.Table, solveView(t, ref)); diff != "" {
		t.Errorf("Table 2 (-printed +solved):\n%s", diff)
	}
}

// The other two tables differ from the converged policy; the differences
// are stated in docs/research/solving.md ("The papers' tables") and pinned
// here so that a change is noticed.
func TestOtherTablesDiffer(t *testing.T) {
	for _, tc := range []struct {
		name      string
		different int
	}{{"palmer-table1", 7}, {"fisher-table1", 89}} {
		for _, ref := range References() {
			if ref.Name != tc.name {
				continue
			}
			c, err := Compare(ref, solveView(t, ref))
			if err != nil {
				t.Fatal(err)
			}
			if c.Different != tc.different {
				t.Errorf("%s: %d cells differ, docs/research/solving.md says %d", ref.Name, c.Different, tc.different)
			}
		}
	}
}

// The bundled example files are the same models.
func TestExampleFilesMatch(t *testing.T) {
	for _, ref := range References() {
		path := "../../examples/" + ref.Name + ".yaml"
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		got, err := switching.ParseModel(path, data)
		if err != nil {
			t.Fatal(err)
		}
		want := ref.Model()
		// The file states the papers' model; instant-switch files give no
		// rates, which means every pair may switch.
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s differs from %s() (-code +file):\n%s", path, ref.Name, diff)
		}
	}
}

func TestCompareShape(t *testing.T) {
	ref := References()[0]
	if _, err := Compare(ref, [][]int{{0}}); err == nil {
		t.Error("a slice of the wrong shape compared")
	}
	c, err := Compare(ref, ref.Table)
	if err != nil || c.Different != 0 || c.Agreement() != 1 {
		t.Errorf("identical tables: %+v, %v", c, err)
	}
}

// Palmer and Mitrani's Table 1 is the finite-horizon policy with 20 steps
// to go.
func TestPalmerTable1IsAFiniteHorizon(t *testing.T) {
	ref := References()[0]
	m := ref.Model()
	for _, n := range []int{19, ref.Horizon} {
		sol, err := switching.Solve(context.Background(), m, switching.SolveOptions{Criterion: switching.Discounted, Horizon: n})
		if err != nil {
			t.Fatal(err)
		}
		v, err := switching.ParseView(m, ref.View)
		if err != nil {
			t.Fatal(err)
		}
		got := make([][]int, v.Size)
		for r, row := range v.Slice(sol.Table) {
			for _, a := range row {
				got[r] = append(got[r], int(a))
			}
		}
		if diff := cmp.Diff(ref.Table, got); diff != "" {
			t.Errorf("horizon %d (-printed +solved):\n%s", n, diff)
		}
	}
}
