package graph

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"sync"

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
	links []int         // edges[i] is the link grid.Links[links[i]]
	// tree is the maximum-bandwidth spanning tree, its edge "costs" being
	// indexes into edges (yourbasic costs are int64; the bandwidth is not).
	tree *yb.Immutable
	// up is that tree rooted at cluster 0, for its paths.
	up rootedTree
	// rows are the WidestFrom rows computed so far.
	rowsMu sync.Mutex
	rows   [][]float64
}

// New validates grid and builds its cluster graph, its edges in Kruskal's
// order and its maximum-bandwidth spanning tree (rooted, for its paths). The grid must not be
// changed afterwards. O(E log E).
func New(grid *Grid) (*Graph, error) {
	if err := grid.Validate(); err != nil {
		return nil, fmt.Errorf("invalid grid: %w", err)
	}
	n := len(grid.Clusters)
	m := yb.New(n)
	byLink := make([]Edge, len(grid.Links))
	links := make([]int, len(grid.Links))
	for i, l := range grid.Links {
		a, _ := grid.Index(l.Between[0])
		b, _ := grid.Index(l.Between[1])
		e := Edge{U: min(a, b), V: max(a, b), Mbps: l.Mbps, Cost: Cost(l.Mbps)}
		byLink[i], links[i] = e, i
		m.AddBothCost(e.U, e.V, e.Cost)
	}
	slices.SortFunc(links, func(i, j int) int {
		a, b := byLink[i], byLink[j]
		return cmp.Or(cmp.Compare(a.Cost, b.Cost), cmp.Compare(a.U, b.U), cmp.Compare(a.V, b.V))
	})
	edges := make([]Edge, len(links))
	for k, i := range links {
		edges[k] = byLink[i]
	}
	gr := &Graph{grid: grid, g: yb.Sort(m), edges: edges, links: links}
	gr.tree = gr.maxBandwidthTree()
	gr.up = gr.rootTree()
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
