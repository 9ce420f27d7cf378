package graph_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	yb "github.com/yourbasic/graph"

	"github.com/metasched/metasched/graph"
)

var inf = math.Inf(1)

// testCluster returns a valid cluster called name.
func testCluster(name string) graph.Cluster {
	return graph.Cluster{Name: name, Machines: 1, Cores: 1, MemoryMiB: 1024, Perf: 1e9,
		LANMbps: 1000, UplinkMbps: 100, Hypervisor: graph.HypervisorTest}
}

// testGrid returns the grid of the clusters called names, in that order,
// and the links.
func testGrid(names []string, links ...graph.Link) *graph.Grid {
	g := &graph.Grid{Links: links}
	for _, n := range names {
		g.Clusters = append(g.Clusters, testCluster(n))
	}
	return g
}

func link(a, b string, mbps float64) graph.Link {
	return graph.Link{Between: [2]string{a, b}, Mbps: mbps}
}

func mustNew(tb testing.TB, grid *graph.Grid) *graph.Graph {
	tb.Helper()
	g, err := graph.New(grid)
	if err != nil {
		tb.Fatalf("New: %v", err)
	}
	return g
}

// ringGrid is a ring of six clusters with a chord b–e, listed in the grid
// in the order a, d, b, e, c, f so that zones interleave:
//
//	index:  0  1  2  3  4  5
//	name:   a  d  b  e  c  f
//
//	a ─1000─ b ─100─ c ─10─ d ─500─ e ─50─ f ─1─ a,   b ─20─ e
//
// Taken by decreasing bandwidth, the links merge {a,b} (1000), {d,e} (500),
// {a,b,c} (100), {d,e,f} (50) and then the two halves (20); c–d (10) and
// f–a (1) close cycles. So the maximum-bandwidth spanning tree is
// a–b, b–c, b–e, d–e, e–f, and the widest path between the halves is 20.
func ringGrid() *graph.Grid {
	return testGrid([]string{"a", "d", "b", "e", "c", "f"},
		link("c", "d", 10),
		link("f", "a", 1),
		link("b", "a", 1000),
		link("e", "d", 500),
		link("b", "c", 100),
		link("f", "e", 50),
		link("b", "e", 20),
	)
}

func TestCost(t *testing.T) {
	for _, tt := range []struct {
		mbps float64
		want int64
	}{
		{graph.MinMbps, 1e15},
		{0.3, 3333333333333}, // 3333333333333.33…
		{1, 1e12},
		{2.5, 4e11},
		{3, 333333333333},     // 333333333333.33…
		{7, 142857142857},     // 142857142857.14…
		{6, 166666666667},     // 166666666666.67…, rounded up
		{1e12 / 1234.6, 1235}, // rounded, not truncated
		{1e12 / 1234.4, 1234},
		{1000, 1e9},
		{1e6, 1e6},
		{graph.MaxMbps, 1000},
	} {
		if got := graph.Cost(tt.mbps); got != tt.want {
			t.Errorf("Cost(%g) = %d, want %d", tt.mbps, got, tt.want)
		}
	}
}

func TestCostMonotone(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	lo, hi := math.Log(graph.MinMbps), math.Log(graph.MaxMbps)
	xs := []float64{graph.MinMbps, graph.MaxMbps, 1, 10, 100, 1e3, 1e6}
	for range 20000 {
		xs = append(xs, math.Exp(lo+(hi-lo)*r.Float64()))
	}
	for x := 1.0; x <= 5000; x++ {
		xs = append(xs, x)
	}
	// Each value's neighbouring floats, where rounding decides.
	for _, x := range slices.Clone(xs) {
		for _, y := range []float64{math.Nextafter(x, 0), math.Nextafter(x, inf)} {
			if y >= graph.MinMbps && y <= graph.MaxMbps {
				xs = append(xs, y)
			}
		}
	}
	slices.Sort(xs)
	prev := int64(math.MaxInt64)
	for i, x := range xs {
		c := graph.Cost(x)
		if c > prev {
			t.Fatalf("Cost(%v) = %d > Cost(%v) = %d: a larger bandwidth has a larger cost", x, c, xs[i-1], prev)
		}
		if c < 1000 || c > 1e15 {
			t.Fatalf("Cost(%v) = %d, out of [1e3, 1e15]", x, c)
		}
		prev = c
	}
}

func TestCostPanics(t *testing.T) {
	for _, mbps := range []float64{
		0, -1, math.Nextafter(graph.MinMbps, 0), 9.99e-4,
		math.Nextafter(graph.MaxMbps, inf), 2e9,
		math.NaN(), inf, math.Inf(-1),
	} {
		func() {
			defer func() {
				r := recover()
				if r == nil {
					t.Errorf("Cost(%g) did not panic", mbps)
					return
				}
				if msg := fmt.Sprint(r); !strings.Contains(msg, "out of [0.001, 1e+09]") {
					t.Errorf("Cost(%g) panicked with %q, want a message about the range", mbps, msg)
				}
			}()
			graph.Cost(mbps)
		}()
	}
}

func TestGraphAccessors(t *testing.T) {
	grid := ringGrid()
	g := mustNew(t, grid)
	if g.Grid() != grid {
		t.Errorf("Grid() is not the grid given to New")
	}
	if g.Len() != 6 || g.Iterator().Order() != 6 {
		t.Errorf("Len() = %d, Iterator().Order() = %d, want 6", g.Len(), g.Iterator().Order())
	}
	if c := g.Cluster(3); c.Name != "e" {
		t.Errorf("Cluster(3) = %q, want e", c.Name)
	}
}

func TestEdges(t *testing.T) {
	g := mustNew(t, ringGrid())
	// By cost (decreasing bandwidth), with U < V in grid indexes.
	want := []graph.Edge{
		{U: 0, V: 2, Mbps: 1000, Cost: 1e9}, // a–b
		{U: 1, V: 3, Mbps: 500, Cost: 2e9},  // d–e
		{U: 2, V: 4, Mbps: 100, Cost: 1e10}, // b–c
		{U: 3, V: 5, Mbps: 50, Cost: 2e10},  // e–f
		{U: 2, V: 3, Mbps: 20, Cost: 5e10},  // b–e
		{U: 1, V: 4, Mbps: 10, Cost: 1e11},  // d–c
		{U: 0, V: 5, Mbps: 1, Cost: 1e12},   // a–f
	}
	got := g.Edges()
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Edges (-want +got):\n%s", diff)
	}
	got[0].U, got[1] = 99, graph.Edge{}
	if diff := cmp.Diff(want, g.Edges()); diff != "" {
		t.Errorf("Edges changed by changing a returned slice (-want +got):\n%s", diff)
	}
}

func TestZones(t *testing.T) {
	g := mustNew(t, ringGrid())
	// Index: 0 a, 1 d, 2 b, 3 e, 4 c, 5 f.
	tests := []struct {
		k     int
		want  [][]int
		names [][]string
	}{
		{1, [][]int{{0, 1, 2, 3, 4, 5}}, [][]string{{"a", "d", "b", "e", "c", "f"}}},
		{2, [][]int{{0, 2, 4}, {1, 3, 5}}, [][]string{{"a", "b", "c"}, {"d", "e", "f"}}},
		{3, [][]int{{0, 2, 4}, {1, 3}, {5}}, [][]string{{"a", "b", "c"}, {"d", "e"}, {"f"}}},
		{4, [][]int{{0, 2}, {1, 3}, {4}, {5}}, [][]string{{"a", "b"}, {"d", "e"}, {"c"}, {"f"}}},
		{5, [][]int{{0, 2}, {1}, {3}, {4}, {5}}, [][]string{{"a", "b"}, {"d"}, {"e"}, {"c"}, {"f"}}},
		{6, [][]int{{0}, {1}, {2}, {3}, {4}, {5}}, [][]string{{"a"}, {"d"}, {"b"}, {"e"}, {"c"}, {"f"}}},
		{7, [][]int{{0}, {1}, {2}, {3}, {4}, {5}}, nil},
		{1000, [][]int{{0}, {1}, {2}, {3}, {4}, {5}}, nil},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint("k=", tt.k), func(t *testing.T) {
			got, err := g.Zones(tt.k)
			if err != nil {
				t.Fatalf("Zones: %v", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Zones (-want +got):\n%s", diff)
			}
			if tt.names != nil {
				if diff := cmp.Diff(tt.names, g.ZoneNames(got)); diff != "" {
					t.Errorf("ZoneNames (-want +got):\n%s", diff)
				}
			}
		})
	}
}

func TestZonesBadK(t *testing.T) {
	g := mustNew(t, ringGrid())
	for _, k := range []int{0, -1, math.MinInt} {
		zones, err := g.Zones(k)
		if err == nil || zones != nil {
			t.Errorf("Zones(%d) = %v, %v, want an error", k, zones, err)
			continue
		}
		if want := fmt.Sprintf("zones: k must be >= 1, got %d", k); err.Error() != want {
			t.Errorf("Zones(%d): %v, want %s", k, err, want)
		}
	}
}

func TestOneCluster(t *testing.T) {
	g := mustNew(t, testGrid([]string{"solo"}))
	for _, k := range []int{1, 2} {
		if zones, err := g.Zones(k); err != nil || !cmp.Equal(zones, [][]int{{0}}) {
			t.Errorf("Zones(%d) = %v, %v, want [[0]]", k, zones, err)
		}
	}
	if tree := g.SpanningTree(); len(tree) != 0 {
		t.Errorf("SpanningTree = %v, want none", tree)
	}
	if diff := cmp.Diff([][]float64{{inf}}, g.Widest()); diff != "" {
		t.Errorf("Widest (-want +got):\n%s", diff)
	}
}

// TestZonesTieBreak: four clusters and four links of equal bandwidth, so
// equal cost. Kruskal's order is then (U, V): a–b (0,1), a–d (0,3), b–c
// (1,2), c–d (2,3), whatever the order and orientation of the links in the
// grid. a–b before a–d is decided by V, a–d before b–c by U.
func TestZonesTieBreak(t *testing.T) {
	links := []graph.Link{link("d", "c", 100), link("b", "c", 100), link("d", "a", 100), link("b", "a", 100)}
	want := map[int][][]int{
		1: {{0, 1, 2, 3}},
		2: {{0, 1, 3}, {2}},
		3: {{0, 1}, {2}, {3}},
		4: {{0}, {1}, {2}, {3}},
	}
	wantTree := []graph.Edge{
		{U: 0, V: 1, Mbps: 100, Cost: 1e10},
		{U: 0, V: 3, Mbps: 100, Cost: 1e10},
		{U: 1, V: 2, Mbps: 100, Cost: 1e10},
	}
	for p := range permutations(len(links)) {
		for flip := range 1 << len(links) {
			ls := make([]graph.Link, len(links))
			for i, j := range p {
				ls[i] = links[j]
				if flip>>i&1 == 1 {
					ls[i].Between[0], ls[i].Between[1] = ls[i].Between[1], ls[i].Between[0]
				}
			}
			g := mustNew(t, testGrid([]string{"a", "b", "c", "d"}, ls...))
			for k, w := range want {
				got, err := g.Zones(k)
				if err != nil {
					t.Fatalf("Zones(%d): %v", k, err)
				}
				if diff := cmp.Diff(w, got); diff != "" {
					t.Fatalf("links %v: Zones(%d) (-want +got):\n%s", ls, k, diff)
				}
			}
			if diff := cmp.Diff(wantTree, g.SpanningTree()); diff != "" {
				t.Fatalf("links %v: SpanningTree (-want +got):\n%s", ls, diff)
			}
		}
	}
}

// TestZonesTieOnCostNotBandwidth: 999999999.6 and 1e9 Mbit/s have the same
// cost 1000, so Zones takes a–b (0,1) before c–d (2,3) by index, although
// c–d has the larger bandwidth; the widest paths use the exact bandwidths.
func TestZonesTieOnCostNotBandwidth(t *testing.T) {
	g := mustNew(t, testGrid([]string{"a", "b", "c", "d"},
		link("c", "d", 1e9), link("b", "c", 1), link("a", "b", 999999999.6)))
	if c1, c2 := graph.Cost(1e9), graph.Cost(999999999.6); c1 != 1000 || c2 != 1000 {
		t.Fatalf("Cost(1e9) = %d, Cost(999999999.6) = %d, want 1000 both", c1, c2)
	}
	got, err := g.Zones(3)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([][]int{{0, 1}, {2}, {3}}, got); diff != "" {
		t.Errorf("Zones(3) (-want +got):\n%s", diff)
	}
	want := [][]float64{
		{inf, 999999999.6, 1, 1},
		{999999999.6, inf, 1, 1},
		{1, 1, inf, 1e9},
		{1, 1, 1e9, inf},
	}
	if diff := cmp.Diff(want, g.Widest()); diff != "" {
		t.Errorf("Widest (-want +got):\n%s", diff)
	}
}

// permutations yields every permutation of 0..n-1 (Heap's algorithm); the
// slice is reused.
func permutations(n int) func(yield func([]int) bool) {
	return func(yield func([]int) bool) {
		p := make([]int, n)
		for i := range p {
			p[i] = i
		}
		c := make([]int, n)
		if !yield(p) {
			return
		}
		for i := 0; i < n; {
			if c[i] < i {
				if i%2 == 0 {
					p[0], p[i] = p[i], p[0]
				} else {
					p[c[i]], p[i] = p[i], p[c[i]]
				}
				if !yield(p) {
					return
				}
				c[i]++
				i = 0
			} else {
				c[i] = 0
				i++
			}
		}
	}
}

// randomGrid returns a connected grid of n clusters c0…c(n-1): a random
// spanning tree plus extra more links (as many as fit), in random order and
// orientation. Bandwidths are log-uniform in [1, 10000]; about one in four
// is an exact copy of an earlier one.
func randomGrid(r *rand.Rand, n, extra int) *graph.Grid {
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("c%d", i)
	}
	grid := testGrid(names)
	type pair struct{ a, b int }
	seen := map[pair]bool{}
	var used []float64
	add := func(a, b int) {
		p := pair{min(a, b), max(a, b)}
		if a == b || seen[p] {
			return
		}
		seen[p] = true
		mbps := math.Pow(10, 4*r.Float64())
		if len(used) > 0 && r.IntN(4) == 0 {
			mbps = used[r.IntN(len(used))]
		}
		used = append(used, mbps)
		if r.IntN(2) == 0 {
			a, b = b, a
		}
		grid.Links = append(grid.Links, link(names[a], names[b], mbps))
	}
	perm := r.Perm(n)
	for i := 1; i < n; i++ {
		add(perm[i], perm[r.IntN(i)])
	}
	want := min(n-1+extra, n*(n-1)/2)
	for len(grid.Links) < want {
		add(r.IntN(n), r.IntN(n))
	}
	r.Shuffle(len(grid.Links), func(i, j int) { grid.Links[i], grid.Links[j] = grid.Links[j], grid.Links[i] })
	return grid
}

// linkCosts returns Cost(mbps) of every link of grid by its (smaller,
// larger) cluster indexes.
func linkCosts(grid *graph.Grid) map[[2]int]int64 {
	costs := map[[2]int]int64{}
	for _, l := range grid.Links {
		a, _ := grid.Index(l.Between[0])
		b, _ := grid.Index(l.Between[1])
		costs[[2]int{min(a, b), max(a, b)}] = graph.Cost(l.Mbps)
	}
	return costs
}

func TestSpanningTreeMatchesPrim(t *testing.T) {
	for seed := range uint64(300) {
		r := rand.New(rand.NewPCG(seed, 0x5eed))
		n := 2 + r.IntN(39)
		grid := randomGrid(r, n, r.IntN(3*n))
		g := mustNew(t, grid)
		costs := linkCosts(grid)

		tree := g.SpanningTree()
		if len(tree) != n-1 {
			t.Fatalf("seed %d: SpanningTree has %d edges, want n-1 = %d", seed, len(tree), n-1)
		}
		var got int64
		span := yb.New(n)
		for i, e := range tree {
			if c, ok := costs[[2]int{e.U, e.V}]; !ok || c != e.Cost || e.U >= e.V {
				t.Fatalf("seed %d: tree edge %+v is not a link of the grid (cost %d, %v)", seed, e, c, ok)
			}
			if i > 0 && e.Cost < tree[i-1].Cost {
				t.Fatalf("seed %d: tree edges not in Kruskal's order: %+v after %+v", seed, e, tree[i-1])
			}
			got += e.Cost
			span.AddBoth(e.U, e.V)
		}
		if !yb.Connected(span) {
			t.Fatalf("seed %d: SpanningTree %v does not span the grid", seed, tree)
		}

		// Prim's algorithm of yourbasic/graph on the same costs.
		parent := yb.MST(g.Iterator())
		var want int64
		roots := 0
		for v, p := range parent {
			if p < 0 {
				roots++
				continue
			}
			want += costs[[2]int{min(v, p), max(v, p)}]
		}
		if roots != 1 {
			t.Fatalf("seed %d: Prim's forest has %d trees, want 1", seed, roots)
		}
		if got != want {
			t.Errorf("seed %d (n = %d, %d links): SpanningTree cost %d, yourbasic MST cost %d", seed, n, len(grid.Links), got, want)
		}

		// Zones(k) is the components of the first n-k tree edges.
		for k := 1; k <= n; k++ {
			forest := yb.New(n)
			for _, e := range tree[:n-k] {
				forest.AddBoth(e.U, e.V)
			}
			want := yb.Components(forest)
			for _, z := range want {
				slices.Sort(z)
			}
			slices.SortFunc(want, func(a, b []int) int { return a[0] - b[0] })
			zones, err := g.Zones(k)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, zones); diff != "" {
				t.Fatalf("seed %d: Zones(%d) (-want +got):\n%s", seed, k, diff)
			}
		}
	}
}

// bruteWidest returns the widest-path bandwidth between every pair of
// clusters of grid by a Floyd–Warshall max-min closure of its links.
func bruteWidest(grid *graph.Grid) [][]float64 {
	n := len(grid.Clusters)
	w := make([][]float64, n)
	for i := range w {
		w[i] = make([]float64, n)
		w[i][i] = inf
	}
	for _, l := range grid.Links {
		a, _ := grid.Index(l.Between[0])
		b, _ := grid.Index(l.Between[1])
		w[a][b] = max(w[a][b], l.Mbps)
		w[b][a] = w[a][b]
	}
	for k := range n {
		for i := range n {
			for j := range n {
				w[i][j] = max(w[i][j], min(w[i][k], w[k][j]))
			}
		}
	}
	return w
}

func TestWidestMatchesBruteForce(t *testing.T) {
	for seed := range uint64(300) {
		r := rand.New(rand.NewPCG(seed, 0x31de))
		n := 2 + r.IntN(29)
		grid := randomGrid(r, n, r.IntN(2*n+1))
		g := mustNew(t, grid)
		want := bruteWidest(grid)
		got := g.Widest()
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("seed %d (n = %d, links %v): Widest (-want +got):\n%s", seed, n, grid.Links, diff)
		}
		for m := range n {
			if diff := cmp.Diff(want[m], g.WidestFrom(m)); diff != "" {
				t.Fatalf("seed %d: WidestFrom(%d) (-want +got):\n%s", seed, m, diff)
			}
			if !math.IsInf(got[m][m], 1) {
				t.Errorf("seed %d: Widest[%d][%d] = %g, want +Inf", seed, m, m, got[m][m])
			}
			for c := range n {
				if got[m][c] != got[c][m] {
					t.Errorf("seed %d: Widest not symmetric: [%d][%d] = %g, [%d][%d] = %g", seed, m, c, got[m][c], c, m, got[c][m])
				}
			}
		}
	}
}

func TestWidestRing(t *testing.T) {
	g := mustNew(t, ringGrid())
	// Rows and columns in grid order a, d, b, e, c, f. Between the halves
	// {a,b,c} and {d,e,f} the widest path is b–e (20), not the direct
	// links c–d (10) and f–a (1).
	want := [][]float64{
		/* a */ {inf, 20, 1000, 20, 100, 20},
		/* d */ {20, inf, 20, 500, 20, 50},
		/* b */ {1000, 20, inf, 20, 100, 20},
		/* e */ {20, 500, 20, inf, 20, 50},
		/* c */ {100, 20, 100, 20, inf, 20},
		/* f */ {20, 50, 20, 50, 20, inf},
	}
	if diff := cmp.Diff(want, g.Widest()); diff != "" {
		t.Errorf("Widest (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(want[4], g.WidestFrom(4)); diff != "" {
		t.Errorf("WidestFrom(c) (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(want, bruteWidest(ringGrid())); diff != "" {
		t.Errorf("bruteWidest disagrees with the hand computation (-want +got):\n%s", diff)
	}
}

func TestIterator(t *testing.T) {
	type nb struct {
		W int
		C int64
	}
	visit := func(it yb.Iterator) [][]nb {
		adj := make([][]nb, it.Order())
		for v := range adj {
			it.Visit(v, func(w int, c int64) bool {
				adj[v] = append(adj[v], nb{w, c})
				return false
			})
		}
		return adj
	}

	// Ring: index 0 a, 1 d, 2 b, 3 e, 4 c, 5 f; Cost(m) = 1e12/m.
	want := [][]nb{
		/* a */ {{2, 1e9}, {5, 1e12}}, // b 1000, f 1
		/* d */ {{3, 2e9}, {4, 1e11}}, // e 500, c 10
		/* b */ {{0, 1e9}, {3, 5e10}, {4, 1e10}}, // a 1000, e 20, c 100
		/* e */ {{1, 2e9}, {2, 5e10}, {5, 2e10}}, // d 500, b 20, f 50
		/* c */ {{1, 1e11}, {2, 1e10}}, // d 10, b 100
		/* f */ {{0, 1e12}, {3, 2e10}}, // a 1, e 50
	}
	if diff := cmp.Diff(want, visit(mustNew(t, ringGrid()).Iterator())); diff != "" {
		t.Errorf("ring adjacency (-want +got):\n%s", diff)
	}

	// Random grids: ascending neighbours, both directions of every link,
	// cost Cost(mbps).
	for seed := range uint64(50) {
		r := rand.New(rand.NewPCG(seed, 0x17e4))
		n := 2 + r.IntN(40)
		grid := randomGrid(r, n, r.IntN(3*n))
		costs := linkCosts(grid)
		adj := visit(mustNew(t, grid).Iterator())
		total := 0
		for v, ns := range adj {
			if !slices.IsSortedFunc(ns, func(a, b nb) int { return a.W - b.W }) {
				t.Fatalf("seed %d: neighbours of %d not in ascending order: %v", seed, v, ns)
			}
			for i, x := range ns {
				if i > 0 && x.W == ns[i-1].W {
					t.Fatalf("seed %d: neighbour %d of %d twice", seed, x.W, v)
				}
				if c, ok := costs[[2]int{min(v, x.W), max(v, x.W)}]; !ok || c != x.C {
					t.Fatalf("seed %d: edge %d–%d cost %d, want link cost %d (link: %v)", seed, v, x.W, x.C, c, ok)
				}
			}
			total += len(ns)
		}
		if total != 2*len(grid.Links) {
			t.Errorf("seed %d: %d directed edges, want 2×%d links", seed, total, len(grid.Links))
		}
	}
}

// TestConcurrentUse: the graph is safe for concurrent use (run with -race).
func TestConcurrentUse(t *testing.T) {
	g := mustNew(t, randomGrid(rand.New(rand.NewPCG(7, 7)), 60, 120))
	want := g.Widest()
	wantZones, err := g.Zones(5)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error)
	for w := range 4 {
		go func() {
			for m := w; m < g.Len(); m += 4 {
				if !slices.Equal(want[m], g.WidestFrom(m)) {
					done <- fmt.Errorf("WidestFrom(%d) differs", m)
					return
				}
				z, err := g.Zones(5)
				if err != nil {
					done <- fmt.Errorf("Zones(5): %w", err)
					return
				}
				if !cmp.Equal(wantZones, z) {
					done <- fmt.Errorf("Zones(5) differs")
					return
				}
			}
			done <- nil
		}()
	}
	for range 4 {
		if err := <-done; err != nil {
			t.Error(err)
		}
	}
}

// benchGraph is a random grid of 1000 clusters and 3000 links.
func benchGraph(b *testing.B) *graph.Graph {
	grid := randomGrid(rand.New(rand.NewPCG(1000, 1)), 1000, 2001)
	if len(grid.Links) != 3000 {
		b.Fatalf("%d links, want 3000", len(grid.Links))
	}
	return mustNew(b, grid)
}

func BenchmarkWidestFrom1000(b *testing.B) {
	g := benchGraph(b)
	m := 0
	for b.Loop() {
		g.WidestFrom(m)
		m = (m + 1) % g.Len()
	}
}

func BenchmarkZones1000(b *testing.B) {
	g := benchGraph(b)
	for b.Loop() {
		if _, err := g.Zones(10); err != nil {
			b.Fatal(err)
		}
	}
}
