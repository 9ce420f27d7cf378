package graph

import (
	"cmp"
	"fmt"
	"math"
	"slices"

	yb "github.com/yourbasic/graph"
)

// costScale turns a bandwidth into an edge cost: cost = costScale / Mbit/s,
// rounded. Over [MinMbps, MaxMbps] the costs lie in [1e3, 1e15], so a path
// of up to a few thousand edges still sums within an int64, and a larger
// bandwidth never gets a larger cost.
const costScale = 1e12

// Cost returns the edge cost of a link of mbps Mbit/s: 1/bandwidth scaled
// to an int64. It panics outside [MinMbps, MaxMbps] (validated grids never
// are).
func Cost(mbps float64) int64 {
	if !(mbps >= MinMbps && mbps <= MaxMbps) {
		panic(fmt.Sprintf("graph: bandwidth %g Mbit/s out of [%g, %g]", mbps, float64(MinMbps), float64(MaxMbps)))
	}
	return int64(math.Round(costScale / mbps))
}

// Edge is a link of the cluster graph between clusters U < V.
type Edge struct {
	U, V int
	Mbps float64
	Cost int64
}

// Graph is the cluster graph of a valid grid: vertex i is cluster i of the
// grid, an edge is a link with cost Cost(mbps). It is immutable and safe
// for concurrent use.
type Graph struct {
	grid  *Grid
	g     *yb.Immutable // costs
	edges []Edge        // sorted by (cost, u, v): Kruskal's order
	// tree is the maximum-bandwidth spanning tree, its edge "costs" being
	// indexes into edges (yourbasic costs are int64; the bandwidth is not).
	tree *yb.Immutable
}

// New validates grid and builds its cluster graph, its edges in Kruskal's
// order and its maximum-bandwidth spanning tree. The grid must not be
// changed afterwards. O(E log E).
func New(grid *Grid) (*Graph, error) {
	if err := grid.Validate(); err != nil {
		return nil, fmt.Errorf("invalid grid: %w", err)
	}
	n := len(grid.Clusters)
	m := yb.New(n)
	edges := make([]Edge, len(grid.Links))
	for i, l := range grid.Links {
		a, _ := grid.Index(l.Between[0])
		b, _ := grid.Index(l.Between[1])
		e := Edge{U: min(a, b), V: max(a, b), Mbps: l.Mbps, Cost: Cost(l.Mbps)}
		edges[i] = e
		m.AddBothCost(e.U, e.V, e.Cost)
	}
	slices.SortFunc(edges, func(a, b Edge) int {
		return cmp.Or(cmp.Compare(a.Cost, b.Cost), cmp.Compare(a.U, b.U), cmp.Compare(a.V, b.V))
	})
	gr := &Graph{grid: grid, g: yb.Sort(m), edges: edges}
	gr.tree = gr.maxBandwidthTree()
	return gr, nil
}

// Grid returns the grid the graph was built from.
func (g *Graph) Grid() *Grid { return g.grid }

// Len returns the number of clusters.
func (g *Graph) Len() int { return len(g.grid.Clusters) }

// Cluster returns cluster i.
func (g *Graph) Cluster(i int) Cluster { return g.grid.Clusters[i] }

// Iterator returns the cluster graph as a yourbasic/graph Iterator, with
// sorted adjacency lists (so Visit order is deterministic) and edge costs
// Cost(mbps): the graph for yourbasic's algorithms (shortest paths, MST).
func (g *Graph) Iterator() yb.Iterator { return g.g }

// Edges returns the links in Kruskal's order: by cost, then U, then V.
func (g *Graph) Edges() []Edge { return slices.Clone(g.edges) }

// maxBandwidthTree is Kruskal's algorithm on the links by decreasing
// bandwidth (the exact bandwidths, not the rounded costs; ties by U, V).
// A valid grid is connected, so the result spans every cluster.
func (g *Graph) maxBandwidthTree() *yb.Immutable {
	order := make([]int, len(g.edges))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		ea, eb := g.edges[a], g.edges[b]
		return cmp.Or(cmp.Compare(eb.Mbps, ea.Mbps), cmp.Compare(ea.U, eb.U), cmp.Compare(ea.V, eb.V))
	})
	uf := newUnionFind(g.Len())
	t := yb.New(g.Len())
	for _, i := range order {
		e := g.edges[i]
		if uf.union(e.U, e.V) {
			t.AddBothCost(e.U, e.V, int64(i))
		}
	}
	return yb.Sort(t)
}

// WidestFrom returns, for every cluster c, the bandwidth B(c, m) in Mbit/s
// of the widest path between c and m: the largest bottleneck bandwidth over
// all paths, which is the smallest link bandwidth on their path in the
// maximum-bandwidth spanning tree. B(m, m) is +Inf. O(n).
func (g *Graph) WidestFrom(m int) []float64 {
	b := make([]float64, g.Len())
	b[m] = math.Inf(1)
	yb.BFS(g.tree, m, func(v, w int, c int64) {
		b[w] = min(b[v], g.edges[c].Mbps)
	})
	return b
}

// Widest returns B(c, m) for every pair: the matrix of WidestFrom rows.
// O(n²) time and memory.
func (g *Graph) Widest() [][]float64 {
	b := make([][]float64, g.Len())
	for m := range b {
		b[m] = g.WidestFrom(m)
	}
	return b
}
