// Package graph holds a grid of clusters as a graph: it loads and validates
// grid files, builds the cluster graph on github.com/yourbasic/graph,
// partitions it into well-connected zones with Kruskal's algorithm, and
// gives the widest-path (bottleneck) bandwidth between clusters.
//
// # Grid files
//
// ParseGrid reads a grid file (docs/reference/grid-file.md): clusters of
// identical machines, each with its LAN and WAN uplink bandwidth, and the WAN
// links between clusters. Decoding is strict and reports every problem with
// its field path: unknown fields, wrong types, non-positive numbers, duplicate
// cluster names, links to unknown clusters or repeated, and a grid whose links
// leave it in separate pieces. Grid.Validate applies the same rules to a grid
// built in code.
//
// # The cluster graph
//
// New turns a valid grid into a Graph. Vertex i is cluster i of the file;
// each link is an undirected edge with cost Cost(mbps) = round(1e12/mbps),
// 1/bandwidth scaled to an int64 as yourbasic/graph wants it, so that
// better-provisioned links are cheaper. Graph.Iterator exposes it to
// yourbasic's algorithms with sorted adjacency lists.
//
// # Zones
//
// Graph.Zones(k) is Kruskal's algorithm stopped when k components remain
// (the paper's geographical zones, 004 §3.1): the links are sorted by
// (cost, U, V), so ties break by cluster index and the partition is
// deterministic, and each link that joins two components merges them with
// a union-find (union by size, path halving). yourbasic/graph has only
// Prim's algorithm, which cannot stop at k components. O(E log E).
//
//	g, _ := graph.New(grid)
//	zones, _ := g.Zones(3) // [][]int, each zone in grid order
//
// # Widest paths
//
// The bandwidth GramVM can count on between a worker cluster c and the
// master cluster m is that of the widest path B(c, m): over all paths, the
// largest smallest-link bandwidth. It equals the smallest link on the path
// between c and m in a maximum-bandwidth spanning tree, which New builds
// once (Kruskal on decreasing bandwidth, ties by U then V) and roots at
// cluster 0. Graph.WidestFrom(m) walks the tree from m in O(n),
// Graph.Widest gives the whole O(n²) matrix, and Graph.WidestPath(c, m)
// names the links of the path itself, the ones traffic between c and m
// crosses, in O(length of the path).
//
// The package is a pure core: no I/O, no clock, deterministic.
//
// The design is described in docs/research/selection.md of the
// repository, "The cluster graph", "Kruskal zones" and "Widest paths".
package graph
