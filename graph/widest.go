package graph

import (
	"cmp"
	"math"
	"slices"

	yb "github.com/yourbasic/graph"
)

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

// rootedTree is the maximum-bandwidth spanning tree rooted at cluster 0:
// each cluster's parent (-1 for the root), the edge to it (an index into
// Graph.edges) and its depth.
type rootedTree struct {
	parent, edge, depth []int
}

// rootTree roots the maximum-bandwidth spanning tree at cluster 0. O(n).
func (g *Graph) rootTree() rootedTree {
	n := g.Len()
	r := rootedTree{parent: make([]int, n), edge: make([]int, n), depth: make([]int, n)}
	r.parent[0], r.edge[0] = -1, -1
	yb.BFS(g.tree, 0, func(v, w int, c int64) {
		r.parent[w], r.edge[w], r.depth[w] = v, int(c), r.depth[v]+1
	})
	return r
}

// WidestFrom returns, for every cluster c, the bandwidth B(c, m) in Mbit/s
// of the widest path between c and m: the largest bottleneck bandwidth over
// all paths, which is the smallest link bandwidth on their path in the
// maximum-bandwidth spanning tree. B(m, m) is +Inf. O(n): the row is
// computed once per graph (the graph does not change) and copied out, so
// that the many plans of one graph share it. Safe for concurrent use.
func (g *Graph) WidestFrom(m int) []float64 {
	g.rowsMu.Lock()
	defer g.rowsMu.Unlock()
	if g.rows == nil {
		g.rows = make([][]float64, g.Len())
	}
	if g.rows[m] == nil {
		b := make([]float64, g.Len())
		b[m] = math.Inf(1)
		yb.BFS(g.tree, m, func(v, w int, c int64) {
			b[w] = min(b[v], g.edges[c].Mbps)
		})
		g.rows[m] = b
	}
	return slices.Clone(g.rows[m])
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

// WidestPath returns the widest path between clusters c and m, the one
// whose narrowest link has WidestFrom(m)[c] Mbit/s: the links of their path
// in the maximum-bandwidth spanning tree (Kruskal on the links by
// decreasing bandwidth, ties by U then V), as indexes into Grid().Links, in
// order from c to m. It is empty when c is m. O(length of the path).
func (g *Graph) WidestPath(c, m int) []int {
	r := &g.up
	var fromC, fromM []int
	for r.depth[c] > r.depth[m] {
		fromC, c = append(fromC, g.links[r.edge[c]]), r.parent[c]
	}
	for r.depth[m] > r.depth[c] {
		fromM, m = append(fromM, g.links[r.edge[m]]), r.parent[m]
	}
	for c != m {
		fromC, c = append(fromC, g.links[r.edge[c]]), r.parent[c]
		fromM, m = append(fromM, g.links[r.edge[m]]), r.parent[m]
	}
	slices.Reverse(fromM)
	return append(fromC, fromM...)
}
