package graph_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/metasched/metasched/graph"
)

func TestWidestPathRing(t *testing.T) {
	g := mustNew(t, ringGrid())
	// Clusters a 0, d 1, b 2, e 3, c 4, f 5; links 0 c–d 10, 1 f–a 1,
	// 2 b–a 1000, 3 e–d 500, 4 b–c 100, 5 f–e 50, 6 b–e 20. The tree is
	// b–a, e–d, b–c, f–e, b–e; c–d and f–a close cycles.
	for _, tt := range []struct {
		c, m int
		want []int
	}{
		{4, 1, []int{4, 6, 3}}, // c–b, b–e, e–d: 20, not the direct 10
		{1, 4, []int{3, 6, 4}},
		{0, 5, []int{2, 6, 5}}, // a–b, b–e, e–f: 20, not the direct 1
		{0, 2, []int{2}},
		{3, 3, nil},
	} {
		if diff := cmp.Diff(tt.want, g.WidestPath(tt.c, tt.m)); diff != "" {
			t.Errorf("WidestPath(%d, %d) (-want +got):\n%s", tt.c, tt.m, diff)
		}
	}
}

// TestWidestPathTies: among links of one bandwidth the tree takes them by
// U, then V (cluster indexes), whatever the order of the grid's links.
func TestWidestPathTies(t *testing.T) {
	g := mustNew(t, testGrid([]string{"x", "y", "z"}, link("z", "y", 10), link("y", "x", 10), link("x", "z", 10)))
	// Kruskal takes x–y (0, 1) and x–z (0, 2); y–z (1, 2) closes a cycle.
	if diff := cmp.Diff([]int{1, 2}, g.WidestPath(1, 2)); diff != "" {
		t.Errorf("WidestPath(y, z) (-want +got):\n%s", diff)
	}
}

// maxBandwidthLinks returns the links of grid's maximum-bandwidth spanning
// tree: Kruskal by decreasing bandwidth, ties by U then V, with a naive
// union of component labels.
func maxBandwidthLinks(grid *graph.Grid) map[int]bool {
	type ends struct{ u, v int }
	e := make([]ends, len(grid.Links))
	order := make([]int, len(grid.Links))
	for i, l := range grid.Links {
		a, _ := grid.Index(l.Between[0])
		b, _ := grid.Index(l.Between[1])
		e[i], order[i] = ends{min(a, b), max(a, b)}, i
	}
	slices.SortFunc(order, func(i, j int) int {
		switch bi, bj := grid.Links[i].Mbps, grid.Links[j].Mbps; {
		case bi > bj:
			return -1
		case bi < bj:
			return 1
		}
		if e[i].u != e[j].u {
			return e[i].u - e[j].u
		}
		return e[i].v - e[j].v
	})
	comp := make([]int, len(grid.Clusters))
	for i := range comp {
		comp[i] = i
	}
	tree := map[int]bool{}
	for _, i := range order {
		cu, cv := comp[e[i].u], comp[e[i].v]
		if cu == cv {
			continue
		}
		tree[i] = true
		for k := range comp {
			if comp[k] == cv {
				comp[k] = cu
			}
		}
	}
	return tree
}

// TestWidestPathMatchesWidestFrom: on random grids every WidestPath is a
// simple walk from c to m over links of the maximum-bandwidth spanning
// tree (by the documented tie rule), its narrowest link is WidestFrom's
// B(c, m), and the path from m is the same, reversed.
func TestWidestPathMatchesWidestFrom(t *testing.T) {
	for seed := range uint64(200) {
		r := rand.New(rand.NewPCG(seed, 0x9a7e))
		n := 2 + r.IntN(29)
		grid := randomGrid(r, n, r.IntN(2*n+1))
		g := mustNew(t, grid)
		tree := maxBandwidthLinks(grid)
		for m := range n {
			b := g.WidestFrom(m)
			for c := range n {
				p := g.WidestPath(c, m)
				at, narrowest := c, math.Inf(1)
				seen := map[int]bool{}
				for _, l := range p {
					x, _ := grid.Index(grid.Links[l].Between[0])
					y, _ := grid.Index(grid.Links[l].Between[1])
					switch {
					case !tree[l] || seen[l]:
						t.Fatalf("seed %d: WidestPath(%d, %d) = %v: link %d is not in the tree or is there twice", seed, c, m, p, l)
					case at == x:
						at = y
					case at == y:
						at = x
					default:
						t.Fatalf("seed %d: WidestPath(%d, %d) = %v: link %d does not touch cluster %d", seed, c, m, p, l, at)
					}
					seen[l] = true
					narrowest = min(narrowest, grid.Links[l].Mbps)
				}
				if at != m {
					t.Fatalf("seed %d: WidestPath(%d, %d) = %v ends at %d", seed, c, m, p, at)
				}
				if narrowest != b[c] {
					t.Fatalf("seed %d: WidestPath(%d, %d) = %v: narrowest link %g Mbit/s, WidestFrom %g", seed, c, m, p, narrowest, b[c])
				}
				back := g.WidestPath(m, c)
				slices.Reverse(back)
				if !slices.Equal(p, back) {
					t.Fatalf("seed %d: WidestPath(%d, %d) = %v, reversed WidestPath(%d, %d) = %v", seed, c, m, p, m, c, back)
				}
			}
		}
	}
}

func ExampleGraph_WidestPath() {
	grid, g := exampleGraph()
	tokyo, _ := grid.Index("tokyo")
	madrid, _ := grid.Index("madrid")
	for _, l := range g.WidestPath(tokyo, madrid) {
		fmt.Printf("%v %g Mbit/s\n", grid.Links[l].Between, grid.Links[l].Mbps)
	}
	// Output:
	// [santiago tokyo] 34 Mbit/s
	// [sao-paulo santiago] 622 Mbit/s
	// [lisbon sao-paulo] 100 Mbit/s
	// [madrid lisbon] 1000 Mbit/s
}
