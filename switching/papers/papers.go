package papers

import (
	"fmt"
	"math"

	"github.com/metasched/metasched/switching"
)

// Reference is a table printed in a paper and the model it was computed for.
type Reference struct {
	Name   string // short name, e.g. "palmer-table2"
	Source string // where it is printed
	Title  string // its caption, shortened
	// Model builds the model as the paper states it (rates as printed, Λ = 1,
	// no price on blocked arrivals).
	Model func() *switching.Model
	View  string  // the slice the table shows, in switching.ParseView syntax
	Table [][]int // the printed actions, rows by columns
	Note  string  // what a converged solve gives beside it
	// Horizon > 0: the finite-horizon policy with this many steps to go
	// reproduces the printed table (the printed table was not converged).
	Horizon int
}

func twoPools(lambda, mu float64) []switching.Pool {
	return []switching.Pool{
		{Name: "type1", ArrivalRate: lambda, ServiceRate: mu, HoldingCost: 1},
		{Name: "type2", ArrivalRate: lambda, ServiceRate: mu, HoldingCost: 2},
	}
}

func papersModel(n, j int, pools []switching.Pool, zeta, cost float64, instant bool) *switching.Model {
	m := len(pools)
	return &switching.Model{
		Servers: n, QueueLimit: j, Discount: 0.95,
		UniformizationMode: switching.UniformizationFixed, Uniformization: 1,
		Pools: pools, SwitchRates: switching.PairMatrix(m, zeta), SwitchCosts: switching.PairMatrix(m, cost),
		InstantSwitches: instant, BlockingCosts: make([]float64, m),
	}
}

// PalmerTable1 is Palmer and Mitrani's Table 1.
func PalmerTable1() *switching.Model {
	return papersModel(2, 30, twoPools(0.086, 0.207), 1, 10, true)
}

// PalmerTable2 is Palmer and Mitrani's Table 2.
func PalmerTable2() *switching.Model {
	return papersModel(2, 30, twoPools(0.047, 0.113), 0.113, 0, false)
}

// FisherTable1 is Fisher et al.'s Table I.
func FisherTable1() *switching.Model {
	pools := []switching.Pool{
		{Name: "type1", ArrivalRate: 0.111, ServiceRate: 0.111, HoldingCost: 2},
		{Name: "type2", ArrivalRate: 0.111, ServiceRate: 0.111, HoldingCost: 1},
		{Name: "type3", ArrivalRate: 0.111, ServiceRate: 0.111, HoldingCost: 1},
	}
	return papersModel(3, 15, pools, 0.0909, 0, false)
}

// row repeats the printed row pattern: the first cells, then the last one
// to fill n cells.
func row(n int, cells ...int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = cells[min(i, len(cells)-1)]
	}
	return out
}

// References returns the printed tables.
func References() []Reference {
	return []Reference{
		{
			Name: "palmer-table1", Source: "Palmer and Mitrani, Table 1",
			Title: "zero switching times, N = 2, k1 = 1, λ = 0.086, µ = 0.207, c = (1, 2), c12 = c21 = 10",
			Model: PalmerTable1, View: "k=1,1 m=0 rows=j1 cols=j2 size=11",
			Table: [][]int{
				row(11, 0, 0, 0, 1),
				row(11, 0, 0, 0, 0, 0, 1),
				row(11, 0, 0, 0, 0, 0, 1),
				row(11, 0, 0, 0, 0, 0, 1),
				row(11, 0, 0, 0, 0, 0, 1),
				row(11, 0, 0, 0, 0, 0, 1),
				row(11, 0, 0, 0, 0, 0, 1),
				row(11, 2, 0, 0, 0, 0, 1),
				row(11, 2, 0, 0, 0, 0, 1),
				row(11, 2, 0, 0, 0, 0, 1),
				row(11, 2, 0, 0, 0, 0, 1),
			},
			Note:    "the printed table is the finite-horizon policy with 20 steps to go (19 gives it too), not the converged infinite-horizon policy; the converged policy is taken as the truth",
			Horizon: 20,
		},
		{
			Name: "palmer-table2", Source: "Palmer and Mitrani, Table 2",
			Title: "non-zero switching times, N = 2, λ = 0.047, µ = 0.113, ξ = η = 0.113, c = (1, 2)",
			Model: PalmerTable2, View: "k=1,1 m=0 rows=j1 cols=j2 size=11",
			Table: [][]int{
				row(11, 0, 0, 1),
				row(11, 0, 0, 0, 0, 0, 0, 1),
				row(11, 0, 0, 0, 0, 0, 0, 0, 1),
				row(11, 0, 0, 0, 0, 0, 0, 0, 1),
				row(11, 0, 0, 0, 0, 0, 0, 0, 1),
				row(11, 2, 0, 0, 0, 0, 0, 0, 1),
				row(11, 2, 0, 0, 0, 0, 0, 0, 1),
				row(11, 2, 0, 0, 0, 0, 0, 0, 1),
				row(11, 2, 0, 0, 0, 0, 0, 0, 1),
				row(11, 2, 0, 0, 0, 0, 0, 0, 1),
				row(11, 2, 0, 0, 0, 0, 0, 0, 1),
			},
			Note: "reproduced exactly by the infinite-horizon discounted model",
		},
		{
			Name: "fisher-table1", Source: "Fisher et al., Table I",
			Title: "N = 3, M = 3, j1 = 0, λ = µ = 0.111, c = (2, 1, 1), ζ = 0.0909",
			Model: FisherTable1, View: "k=1,1,1 m=0 j1=0 rows=j2 cols=j3 size=10",
			Table: [][]int{
				row(10, 0, 0, 5),
				row(10, 0, 0, 0, 3),
				row(10, 1, 0, 0, 3),
				row(10, 1, 1, 1, 1, 3),
				row(10, 1, 1, 1, 1, 3),
				row(10, 1, 1, 1, 1, 3),
				row(10, 1, 1, 1, 1, 3),
				row(10, 1, 1, 1, 1, 3),
				row(10, 1, 1, 1, 1, 3),
				row(10, 1, 1, 1, 1, 3),
			},
			Note: "far from the optimal policy of the model as the text states it under the printed parameters; the model is not tuned to match it",
		},
	}
}

// Comparison sets a solved slice beside a printed table.
type Comparison struct {
	Reference Reference
	Solved    [][]int
	Differ    [][]bool
	Cells     int // cells compared
	Different int // cells where the solved action is not the printed one
}

// Compare compares a solved slice (same shape as the printed table) with it.
func Compare(ref Reference, solved [][]int) (Comparison, error) {
	c := Comparison{Reference: ref, Solved: solved}
	if len(solved) != len(ref.Table) {
		return c, fmt.Errorf("%s: solved slice has %d rows, the printed table %d", ref.Name, len(solved), len(ref.Table))
	}
	for r := range ref.Table {
		if len(solved[r]) != len(ref.Table[r]) {
			return c, fmt.Errorf("%s: row %d has %d cells, the printed table %d", ref.Name, r, len(solved[r]), len(ref.Table[r]))
		}
		d := make([]bool, len(solved[r]))
		for col, a := range ref.Table[r] {
			c.Cells++
			if solved[r][col] != a {
				d[col] = true
				c.Different++
			}
		}
		c.Differ = append(c.Differ, d)
	}
	return c, nil
}

// Agreement is the fraction of cells where solve and paper agree.
func (c Comparison) Agreement() float64 {
	if c.Cells == 0 {
		return math.NaN()
	}
	return 1 - float64(c.Different)/float64(c.Cells)
}
