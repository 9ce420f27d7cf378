package graph

import (
	"fmt"
	"slices"
)

// unionFind is a disjoint-set forest with union by size and path halving:
// near-constant amortized time per operation.
type unionFind struct {
	parent, size []int
	sets         int
}

func newUnionFind(n int) *unionFind {
	u := &unionFind{parent: make([]int, n), size: make([]int, n), sets: n}
	for i := range u.parent {
		u.parent[i], u.size[i] = i, 1
	}
	return u
}

func (u *unionFind) find(x int) int {
	for u.parent[x] != x {
		u.parent[x] = u.parent[u.parent[x]]
		x = u.parent[x]
	}
	return x
}

// union joins the sets of a and b; it reports false when they were one set.
func (u *unionFind) union(a, b int) bool {
	ra, rb := u.find(a), u.find(b)
	if ra == rb {
		return false
	}
	if u.size[ra] < u.size[rb] {
		ra, rb = rb, ra
	}
	u.parent[rb] = ra
	u.size[ra] += u.size[rb]
	u.sets--
	return true
}

// Zones partitions the clusters into k zones with Kruskal's algorithm
// stopped early: edges are taken in order of cost (1/bandwidth), then U,
// then V, and an edge joining two different zones merges them, until k
// zones remain. The zones are the k maximally well-connected trees of the
// paper (004, §3.1); with k = 1 the merges are the minimum spanning tree.
//
// k larger than the number of clusters gives one zone per cluster. Each
// zone lists its clusters in grid order; zones are ordered by their first
// cluster. O(E log E) for the sort (done once in New) plus O(E α(n)).
func (g *Graph) Zones(k int) ([][]int, error) {
	if k < 1 {
		return nil, fmt.Errorf("zones: k must be >= 1, got %d", k)
	}
	n := g.Len()
	uf := newUnionFind(n)
	for _, e := range g.edges {
		if uf.sets <= k {
			break
		}
		uf.union(e.U, e.V)
	}
	byRoot := map[int]int{}
	var zones [][]int
	for c := range n { // grid order: zones come out ordered by first cluster
		r := uf.find(c)
		z, ok := byRoot[r]
		if !ok {
			z = len(zones)
			byRoot[r] = z
			zones = append(zones, nil)
		}
		zones[z] = append(zones[z], c)
	}
	return zones, nil
}

// ZoneNames returns zones as cluster names.
func (g *Graph) ZoneNames(zones [][]int) [][]string {
	out := make([][]string, len(zones))
	for i, z := range zones {
		out[i] = make([]string, len(z))
		for j, c := range z {
			out[i][j] = g.grid.Clusters[c].Name
		}
	}
	return out
}

// SpanningTree returns the edges of the minimum-cost spanning tree found by
// Kruskal's algorithm (the merges of Zones(1)), in the order they were taken.
func (g *Graph) SpanningTree() []Edge {
	uf := newUnionFind(g.Len())
	var tree []Edge
	for _, e := range g.edges {
		if uf.union(e.U, e.V) {
			tree = append(tree, e)
		}
	}
	return slices.Clip(tree)
}
