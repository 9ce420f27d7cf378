package graph_test

import (
	"fmt"

	"github.com/metasched/metasched/graph"
)

// exampleGrid is five clusters on three continents. The widest path from
// madrid to tokyo goes round by South America (34 Mbit/s) rather than over
// the direct 10 Mbit/s link.
const exampleGrid = `clusters:
  - {name: madrid,    machines: 8, cores: 4, memory_mib: 16384, perf: 4e9, lan_mbps: 1000, uplink_mbps: 1000}
  - {name: lisbon,    machines: 4, cores: 4, memory_mib: 8192,  perf: 3e9, lan_mbps: 1000, uplink_mbps: 1000}
  - {name: sao-paulo, machines: 6, cores: 8, memory_mib: 16384, perf: 4e9, lan_mbps: 1000, uplink_mbps: 622}
  - {name: santiago,  machines: 2, cores: 2, memory_mib: 4096,  perf: 2e9, lan_mbps: 100,  uplink_mbps: 622}
  - {name: tokyo,     machines: 8, cores: 8, memory_mib: 32768, perf: 8e9, lan_mbps: 1000, uplink_mbps: 100}
links:
  - {between: [madrid, lisbon], mbps: 1000, latency_ms: 8}
  - {between: [lisbon, sao-paulo], mbps: 100, latency_ms: 110}
  - {between: [madrid, sao-paulo], mbps: 45, latency_ms: 120}
  - {between: [sao-paulo, santiago], mbps: 622, latency_ms: 40}
  - {between: [santiago, tokyo], mbps: 34, latency_ms: 230}
  - {between: [madrid, tokyo], mbps: 10, latency_ms: 250}
`

// exampleGraph parses exampleGrid and builds its graph, as ExampleNew
// shows step by step.
func exampleGraph() (*graph.Grid, *graph.Graph) {
	grid, err := graph.ParseGrid("grid.yaml", []byte(exampleGrid))
	if err != nil {
		panic(err)
	}
	g, err := graph.New(grid)
	if err != nil {
		panic(err)
	}
	return grid, g
}

func ExampleNew() {
	grid, err := graph.ParseGrid("grid.yaml", []byte(exampleGrid))
	if err != nil {
		fmt.Println(err)
		return
	}
	g, err := graph.New(grid)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("%d clusters, %d links\n", g.Len(), len(g.Edges()))
	// Output:
	// 5 clusters, 6 links
}

func ExampleGraph_Zones() {
	_, g := exampleGraph()
	for k := 1; k <= 3; k++ {
		zones, err := g.Zones(k)
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Printf("%d zones: %v\n", k, g.ZoneNames(zones))
	}
	// Output:
	// 1 zones: [[madrid lisbon sao-paulo santiago tokyo]]
	// 2 zones: [[madrid lisbon sao-paulo santiago] [tokyo]]
	// 3 zones: [[madrid lisbon] [sao-paulo santiago] [tokyo]]
}

func ExampleGraph_WidestFrom() {
	grid, g := exampleGraph()
	master, _ := grid.Index("madrid")
	for c, mbps := range g.WidestFrom(master) {
		fmt.Printf("%-9s %g Mbit/s\n", g.Cluster(c).Name, mbps)
	}
	// Output:
	// madrid    +Inf Mbit/s
	// lisbon    1000 Mbit/s
	// sao-paulo 100 Mbit/s
	// santiago  100 Mbit/s
	// tokyo     34 Mbit/s
}

// A grid file is YAML (or JSON): clusters of identical machines, and the
// WAN links between them. Decoding is strict: every problem of the file is
// reported with its field path.
func ExampleParseGrid() {
	grid, err := graph.ParseGrid("grid.yaml", []byte(`clusters:
  - {name: lab, machines: 4, cores: 8, memory_mib: 16384, perf: 2e9, lan_mbps: 1000, uplink_mbps: 100}
  - {name: far, machines: 2, cores: 4, memory_mib: 8192, perf: 1e9, lan_mbps: 100, uplink_mbps: 20}
links:
  - {between: [lab, far], mbps: 10, latency_ms: 40}
`))
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, c := range grid.Clusters {
		fmt.Printf("%s: %d machines of %d cores, %g ops/s each\n", c.Name, c.Machines, c.Cores, c.Perf)
	}
	fmt.Printf("%s-%s: %g Mbit/s\n", grid.Links[0].Between[0], grid.Links[0].Between[1], grid.Links[0].Mbps)

	_, err = graph.ParseGrid("bad.yaml", []byte(`clusters:
  - {name: lab, machines: 0, cores: 8, memory_mib: 16384, perf: 2e9, lan_mbps: 1000, uplink_mbps: 100, gpus: 1}
links: []
`))
	fmt.Println(err)
	// Output:
	// lab: 4 machines of 8 cores, 2e+09 ops/s each
	// far: 2 machines of 4 cores, 1e+09 ops/s each
	// lab-far: 10 Mbit/s
	// bad.yaml: clusters[0].machines: must be an integer >= 1, got 0
	// bad.yaml: clusters[0].gpus: unknown field
}

// The widest path between two clusters is the bandwidth a transfer
// between them can count on: over all paths, the largest smallest link.
func ExampleGraph_Widest() {
	grid, g := exampleGraph()
	b := g.Widest()
	lisbon, _ := grid.Index("lisbon")
	tokyo, _ := grid.Index("tokyo")
	santiago, _ := grid.Index("santiago")
	fmt.Printf("lisbon-tokyo: %g Mbit/s\n", b[lisbon][tokyo])
	fmt.Printf("lisbon-santiago: %g Mbit/s\n", b[lisbon][santiago])
	// Output:
	// lisbon-tokyo: 34 Mbit/s
	// lisbon-santiago: 100 Mbit/s
}

// The spanning tree of Kruskal's algorithm: the cheapest (widest) links
// that join every cluster, in the order they were taken.
func ExampleGraph_SpanningTree() {
	_, g := exampleGraph()
	for _, e := range g.SpanningTree() {
		fmt.Printf("%s-%s %g Mbit/s\n", g.Cluster(e.U).Name, g.Cluster(e.V).Name, e.Mbps)
	}
	// Output:
	// madrid-lisbon 1000 Mbit/s
	// sao-paulo-santiago 622 Mbit/s
	// lisbon-sao-paulo 100 Mbit/s
	// santiago-tokyo 34 Mbit/s
}
