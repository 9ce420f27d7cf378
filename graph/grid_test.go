package graph_test

import (
	"math"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/metasched/metasched/graph"
)

// Three valid clusters, one per line so that a case can replace one, and two
// links joining them: spain – latam-a – us.
const (
	gridClusters3 = `clusters:
  - {name: spain, machines: 8, cores: 4, memory_mib: 16384, perf: 4.0e9, lan_mbps: 1000, uplink_mbps: 100}
  - {name: latam-a, machines: 2, cores: 2, memory_mib: 4096, perf: 1e9, lan_mbps: 100, uplink_mbps: 10}
  - {name: us, machines: 1, cores: 8, memory_mib: 32768, perf: 8e9, lan_mbps: 10000, uplink_mbps: 1000}
`
	gridLinks3 = `links:
  - {between: [spain, latam-a], mbps: 10, latency_ms: 180}
  - {between: [latam-a, us], mbps: 100}
`
	gridBase = gridClusters3 + gridLinks3
)

// gridWant3 is the grid of gridBase, with every default.
func gridWant3() *graph.Grid {
	return &graph.Grid{
		Clusters: []graph.Cluster{
			{Name: "spain", Machines: 8, Cores: 4, MemoryMiB: 16384, Perf: 4e9, LANMbps: 1000, UplinkMbps: 100, Hypervisor: "test"},
			{Name: "latam-a", Machines: 2, Cores: 2, MemoryMiB: 4096, Perf: 1e9, LANMbps: 100, UplinkMbps: 10, Hypervisor: "test"},
			{Name: "us", Machines: 1, Cores: 8, MemoryMiB: 32768, Perf: 8e9, LANMbps: 10000, UplinkMbps: 1000, Hypervisor: "test"},
		},
		Links: []graph.Link{
			{Between: [2]string{"spain", "latam-a"}, Mbps: 10, LatencyMs: 180},
			{Between: [2]string{"latam-a", "us"}, Mbps: 100},
		},
	}
}

// withCluster returns gridBase with cluster i replaced by the flow mapping
// line.
func withCluster(i int, line string) string {
	return replaceLine(gridClusters3, i+1, "  - "+line) + gridLinks3
}

// withLink returns gridBase with link i replaced by the flow mapping line.
func withLink(i int, line string) string {
	return gridClusters3 + replaceLine(gridLinks3, i+1, "  - "+line)
}

// withExtraLink returns gridBase with one more link.
func withExtraLink(line string) string {
	return gridBase + "  - " + line + "\n"
}

// oneCluster returns a grid file of the single cluster line, without links.
func oneCluster(line string) string {
	return "clusters:\n  - " + line + "\n"
}

func replaceLine(s string, i int, line string) string {
	lines := strings.Split(s, "\n")
	lines[i] = line
	return strings.Join(lines, "\n")
}

// gridWith returns gridWant3 changed by f.
func gridWith(f func(g *graph.Grid)) *graph.Grid {
	g := gridWant3()
	f(g)
	return g
}

// gridSingle is the grid of a file of the cluster soloLine.
func gridSingle() *graph.Grid {
	return &graph.Grid{Clusters: []graph.Cluster{
		{Name: "solo", Machines: 1, Cores: 1, MemoryMiB: 1, Perf: 0.5, LANMbps: 0.001, UplinkMbps: 1e9, Hypervisor: "test"},
	}}
}

const soloLine = "{name: solo, machines: 1, cores: 1, memory_mib: 1, perf: 0.5, lan_mbps: 0.001, uplink_mbps: 1e9}"

// parseGridCases are valid grid files and their grids (TestParseGrid),
// and seeds of FuzzParseGrid.
var parseGridCases = []struct {
	name string
	in   string
	want *graph.Grid
}{
	{
		name: "full file",
		in: `# every field, block style
clusters:
  - name: spain          # a comment
    machines: 8
    cores: 4
    memory_mib: 16384
    perf: 4.0e9
    lan_mbps: 1000
    uplink_mbps: 100
    cost_per_hour: 0.25
    hypervisor: "qemu+ssh://es{i}.example.org/system"
  - name: latam-a
    machines: 1
    cores: 2
    memory_mib: 4096
    perf: 1000000000
    lan_mbps: 100.5
    uplink_mbps: 10
    cost_per_hour: 0
    hypervisor: qemu:///system
  - name: 3rd
    machines: 2.0
    cores: 1e1
    memory_mib: 512
    perf: 2.5e8
    lan_mbps: 0.001
    uplink_mbps: 1e9
    hypervisor: sim
links:
  - between: [spain, latam-a]
    mbps: 10
    latency_ms: 180
  - between:
      - 3rd
      - spain
    mbps: 1e9
    latency_ms: 0.5
`,
		want: &graph.Grid{
			Clusters: []graph.Cluster{
				{Name: "spain", Machines: 8, Cores: 4, MemoryMiB: 16384, Perf: 4e9, LANMbps: 1000, UplinkMbps: 100,
					CostPerHour: 0.25, Hypervisor: "qemu+ssh://es{i}.example.org/system"},
				{Name: "latam-a", Machines: 1, Cores: 2, MemoryMiB: 4096, Perf: 1e9, LANMbps: 100.5, UplinkMbps: 10,
					Hypervisor: "qemu:///system"},
				{Name: "3rd", Machines: 2, Cores: 10, MemoryMiB: 512, Perf: 2.5e8, LANMbps: 0.001, UplinkMbps: 1e9,
					Hypervisor: "sim"},
			},
			Links: []graph.Link{
				{Between: [2]string{"spain", "latam-a"}, Mbps: 10, LatencyMs: 180},
				{Between: [2]string{"3rd", "spain"}, Mbps: 1e9, LatencyMs: 0.5},
			},
		},
	},
	{name: "defaults", in: gridBase, want: gridWant3()},
	{
		name: "json",
		in: `{
	"clusters": [
		{"name": "spain", "machines": 8, "cores": 4, "memory_mib": 16384, "perf": 4.0e9, "lan_mbps": 1000, "uplink_mbps": 100},
		{"name": "latam-a", "machines": 2, "cores": 2, "memory_mib": 4096, "perf": 1e9, "lan_mbps": 100, "uplink_mbps": 10,
		 "hypervisor": "qemu+tcp://latam{i}/system", "cost_per_hour": 1.5},
		{"name": "us", "machines": 1, "cores": 8, "memory_mib": 32768, "perf": 8e9, "lan_mbps": 10000, "uplink_mbps": 1000}
	],
	"links": [
		{"between": ["spain", "latam-a"], "mbps": 10, "latency_ms": 180},
		{"between": ["latam-a", "us"], "mbps": 100}
	]
}
`,
		want: gridWith(func(g *graph.Grid) {
			g.Clusters[1].Hypervisor = "qemu+tcp://latam{i}/system"
			g.Clusters[1].CostPerHour = 1.5
		}),
	},
	{
		name: "links in reversed order and reversed ends",
		in:   gridClusters3 + "links:\n  - {between: [us, latam-a], mbps: 100}\n  - {between: [latam-a, spain], mbps: 10, latency_ms: 180}\n",
		want: gridWith(func(g *graph.Grid) {
			g.Links = []graph.Link{
				{Between: [2]string{"us", "latam-a"}, Mbps: 100},
				{Between: [2]string{"latam-a", "spain"}, Mbps: 10, LatencyMs: 180},
			}
		}),
	},
	{
		name: "a triangle: extra links are fine",
		in:   withExtraLink("{between: [us, spain], mbps: 0.5}"),
		want: gridWith(func(g *graph.Grid) {
			g.Links = append(g.Links, graph.Link{Between: [2]string{"us", "spain"}, Mbps: 0.5})
		}),
	},
	{name: "one cluster without links", in: oneCluster(soloLine), want: gridSingle()},
	{name: "one cluster, empty links", in: oneCluster(soloLine) + "links: []\n", want: gridSingle()},
	{name: "one cluster, null links", in: oneCluster(soloLine) + "links:\n", want: gridSingle()},
	{
		name: "one cluster, json",
		in:   `{"clusters": [{"name": "solo", "machines": 1, "cores": 1, "memory_mib": 1, "perf": 0.5, "lan_mbps": 0.001, "uplink_mbps": 1e9}]}`,
		want: gridSingle(),
	},
	{
		name: "one machine with a URI without {i}",
		in:   oneCluster("{name: m, machines: 1, cores: 1, memory_mib: 1, perf: 1, lan_mbps: 1, uplink_mbps: 1, hypervisor: 'qemu:///system'}"),
		want: &graph.Grid{Clusters: []graph.Cluster{
			{Name: "m", Machines: 1, Cores: 1, MemoryMiB: 1, Perf: 1, LANMbps: 1, UplinkMbps: 1, Hypervisor: "qemu:///system"},
		}},
	},
}

func TestParseGrid(t *testing.T) {
	for _, tt := range parseGridCases {
		t.Run(tt.name, func(t *testing.T) {
			got, err := graph.ParseGrid("grid.yaml", []byte(tt.in))
			if err != nil {
				t.Fatalf("ParseGrid: %v", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("grid (-want +got):\n%s", diff)
			}
			if err := got.Validate(); err != nil {
				t.Errorf("Validate of a parsed grid: %v", err)
			}
			if _, err := graph.New(got); err != nil {
				t.Errorf("New of a parsed grid: %v", err)
			}
		})
	}
}

const msgMbps0 = "must be a bandwidth in Mbit/s between 0.001 and 1e+09, got 0"

// parseGridErrorCases are invalid grid files and their errors
// (TestParseGridErrors), and seeds of FuzzParseGrid.
var parseGridErrorCases = []struct {
	name string
	in   string
	// want holds, for each line of the error in order, the parts it
	// must contain in that order, separated by "…": the file, the
	// field path and a recognisable part of the message. The error
	// must have exactly that many lines.
	want []string
}{
	// The file as a whole.
	{"empty", "", []string{"grid.yaml: empty document"}},
	{"only a comment", "# nothing\n", []string{"grid.yaml: empty document"}},
	{"syntax", "clusters:\n - a\n  b: 1\n", []string{"grid.yaml: line 3: mapping values are not allowed in this context"}},
	{"two documents", gridBase + "---\n" + gridBase, []string{"grid.yaml: line 8: only one document is allowed"}},
	{"not a mapping", "[1, 2]\n", []string{"grid.yaml: must be a mapping"}},

	// Unknown, duplicate and missing fields.
	{"unknown top-level field", gridBase + "zones: 3\n", []string{"grid.yaml: zones: unknown field"}},
	{"unknown cluster field", withCluster(1, "{name: latam-a, machines: 2, cores: 2, memory_mib: 4096, perf: 1e9, lan_mbps: 100, uplink_mbps: 10, gpus: 1}"),
		[]string{"grid.yaml: clusters[1].gpus: unknown field"}},
	{"misspelt cluster field", withCluster(0, "{name: spain, machines: 8, cores: 4, memory_mib: 16384, perf: 4.0e9, lan_mbps: 1000, uplink_mbps: 100, cost_per_hr: 1}"),
		[]string{"grid.yaml: clusters[0].cost_per_hr: unknown field"}},
	{"unknown link field", withLink(1, "{between: [latam-a, us], mbps: 100, jitter_ms: 3}"),
		[]string{"grid.yaml: links[1].jitter_ms: unknown field"}},
	{"duplicate cluster field", withCluster(1, "{name: latam-a, machines: 2, cores: 2, cores: 3, memory_mib: 4096, perf: 1e9, lan_mbps: 100, uplink_mbps: 10}"),
		[]string{"grid.yaml: clusters[1].cores: duplicate field"}},
	{"duplicate top-level field", gridBase + "links: []\n", []string{"grid.yaml: links: duplicate field"}},
	{"duplicate link field", withLink(0, "{between: [spain, latam-a], mbps: 10, mbps: 20}"),
		[]string{"grid.yaml: links[0].mbps: duplicate field"}},
	{"missing clusters", "links: []\n", []string{"grid.yaml: clusters: missing required field"}},
	{"missing name", oneCluster("{machines: 1, cores: 1, memory_mib: 1, perf: 1, lan_mbps: 1, uplink_mbps: 1}"),
		[]string{"grid.yaml: clusters[0].name: missing required field"}},
	{"missing machines", withCluster(0, "{name: spain, cores: 4, memory_mib: 16384, perf: 4.0e9, lan_mbps: 1000, uplink_mbps: 100}"),
		[]string{"grid.yaml: clusters[0].machines: missing required field"}},
	{"missing cores", withCluster(0, "{name: spain, machines: 8, memory_mib: 16384, perf: 4.0e9, lan_mbps: 1000, uplink_mbps: 100}"),
		[]string{"grid.yaml: clusters[0].cores: missing required field"}},
	{"missing memory_mib", withCluster(1, "{name: latam-a, machines: 2, cores: 2, perf: 1e9, lan_mbps: 100, uplink_mbps: 10}"),
		[]string{"grid.yaml: clusters[1].memory_mib: missing required field"}},
	{"missing perf", withCluster(1, "{name: latam-a, machines: 2, cores: 2, memory_mib: 4096, lan_mbps: 100, uplink_mbps: 10}"),
		[]string{"grid.yaml: clusters[1].perf: missing required field"}},
	{"missing lan_mbps", withCluster(2, "{name: us, machines: 1, cores: 8, memory_mib: 32768, perf: 8e9, uplink_mbps: 1000}"),
		[]string{"grid.yaml: clusters[2].lan_mbps: missing required field"}},
	{"missing uplink_mbps", withCluster(2, "{name: us, machines: 1, cores: 8, memory_mib: 32768, perf: 8e9, lan_mbps: 10000}"),
		[]string{"grid.yaml: clusters[2].uplink_mbps: missing required field"}},
	{"missing everything in a cluster, in field order", withCluster(2, "{name: us}"), []string{
		"grid.yaml: clusters[2].machines: missing required field",
		"grid.yaml: clusters[2].cores: missing required field",
		"grid.yaml: clusters[2].memory_mib: missing required field",
		"grid.yaml: clusters[2].perf: missing required field",
		"grid.yaml: clusters[2].lan_mbps: missing required field",
		"grid.yaml: clusters[2].uplink_mbps: missing required field",
	}},
	{"missing mbps", withLink(1, "{between: [latam-a, us]}"), []string{"grid.yaml: links[1].mbps: missing required field"}},
	{"missing between", withLink(0, "{mbps: 10}"), []string{"grid.yaml: links[0].between: missing required field"}},

	// Wrong types.
	{"machines string", withCluster(0, "{name: spain, machines: eight, cores: 4, memory_mib: 16384, perf: 4.0e9, lan_mbps: 1000, uplink_mbps: 100}"),
		[]string{"grid.yaml: clusters[0].machines: must be a number"}},
	{"machines quoted", withCluster(0, `{name: spain, machines: "8", cores: 4, memory_mib: 16384, perf: 4.0e9, lan_mbps: 1000, uplink_mbps: 100}`),
		[]string{"grid.yaml: clusters[0].machines: must be a number"}},
	{"machines fraction", withCluster(0, "{name: spain, machines: 2.5, cores: 4, memory_mib: 16384, perf: 4.0e9, lan_mbps: 1000, uplink_mbps: 100}"),
		[]string{"grid.yaml: clusters[0].machines: must be an integer"}},
	{"perf infinite", withCluster(0, "{name: spain, machines: 8, cores: 4, memory_mib: 16384, perf: .inf, lan_mbps: 1000, uplink_mbps: 100}"),
		[]string{"grid.yaml: clusters[0].perf: must be a number"}},
	{"lan_mbps nan", withCluster(1, "{name: latam-a, machines: 2, cores: 2, memory_mib: 4096, perf: 1e9, lan_mbps: .nan, uplink_mbps: 10}"),
		[]string{"grid.yaml: clusters[1].lan_mbps: must be a number"}},
	{"name number", oneCluster("{name: 12, machines: 1, cores: 1, memory_mib: 1, perf: 1, lan_mbps: 1, uplink_mbps: 1}"),
		[]string{"grid.yaml: clusters[0].name: must be a string"}},
	{"hypervisor number", withCluster(2, "{name: us, machines: 1, cores: 8, memory_mib: 32768, perf: 8e9, lan_mbps: 10000, uplink_mbps: 1000, hypervisor: 5}"),
		[]string{"grid.yaml: clusters[2].hypervisor: must be a string"}},
	{"mbps string", withLink(0, "{between: [spain, latam-a], mbps: fast}"), []string{"grid.yaml: links[0].mbps: must be a number"}},
	{"latency string", withLink(0, "{between: [spain, latam-a], mbps: 10, latency_ms: 10ms}"), []string{"grid.yaml: links[0].latency_ms: must be a number"}},
	{"clusters not a list", "clusters: {name: spain}\n", []string{"grid.yaml: clusters: must be a list"}},
	{"clusters null", "clusters:\n", []string{"grid.yaml: clusters: must be a list"}},
	{"cluster not a mapping", "clusters:\n  - {name: a, machines: 1, cores: 1, memory_mib: 1, perf: 1, lan_mbps: 1, uplink_mbps: 1}\n  - b\n",
		[]string{"grid.yaml: clusters[1]: must be a mapping"}},
	{"links not a list", gridClusters3 + "links: 3\n", []string{"grid.yaml: links: must be a list"}},
	{"link not a mapping", withLink(1, "[latam-a, us]"), []string{"grid.yaml: links[1]: must be a mapping"}},
	{"between not a list", withLink(1, "{between: latam-a, mbps: 100}"), []string{"grid.yaml: links[1].between: must be a list"}},
	{"between name a number", withLink(1, "{between: [latam-a, 7], mbps: 100}"), []string{"grid.yaml: links[1].between[1]: must be a string"}},

	// Values out of range.
	{"machines 0", withCluster(0, "{name: spain, machines: 0, cores: 4, memory_mib: 16384, perf: 4.0e9, lan_mbps: 1000, uplink_mbps: 100}"),
		[]string{"grid.yaml: clusters[0].machines: must be an integer >= 1, got 0"}},
	{"cores -1", withCluster(1, "{name: latam-a, machines: 2, cores: -1, memory_mib: 4096, perf: 1e9, lan_mbps: 100, uplink_mbps: 10}"),
		[]string{"grid.yaml: clusters[1].cores: must be an integer >= 1, got -1"}},
	{"memory 0", withCluster(1, "{name: latam-a, machines: 2, cores: 2, memory_mib: 0, perf: 1e9, lan_mbps: 100, uplink_mbps: 10}"),
		[]string{"grid.yaml: clusters[1].memory_mib: must be an integer >= 1, got 0"}},
	{"perf 0", withCluster(2, "{name: us, machines: 1, cores: 8, memory_mib: 32768, perf: 0, lan_mbps: 10000, uplink_mbps: 1000}"),
		[]string{"grid.yaml: clusters[2].perf: must be a number > 0…, got 0"}},
	{"perf negative", withCluster(2, "{name: us, machines: 1, cores: 8, memory_mib: 32768, perf: -1e9, lan_mbps: 10000, uplink_mbps: 1000}"),
		[]string{"grid.yaml: clusters[2].perf: must be a number > 0"}},
	{"lan_mbps 0", withCluster(0, "{name: spain, machines: 8, cores: 4, memory_mib: 16384, perf: 4.0e9, lan_mbps: 0, uplink_mbps: 100}"),
		[]string{"grid.yaml: clusters[0].lan_mbps: " + msgMbps0}},
	{"lan_mbps too small", withCluster(0, "{name: spain, machines: 8, cores: 4, memory_mib: 16384, perf: 4.0e9, lan_mbps: 0.0009, uplink_mbps: 100}"),
		[]string{"grid.yaml: clusters[0].lan_mbps: must be a bandwidth in Mbit/s…, got 0.0009"}},
	{"uplink_mbps -5", withCluster(1, "{name: latam-a, machines: 2, cores: 2, memory_mib: 4096, perf: 1e9, lan_mbps: 100, uplink_mbps: -5}"),
		[]string{"grid.yaml: clusters[1].uplink_mbps: must be a bandwidth in Mbit/s…, got -5"}},
	{"uplink_mbps too large", withCluster(1, "{name: latam-a, machines: 2, cores: 2, memory_mib: 4096, perf: 1e9, lan_mbps: 100, uplink_mbps: 2e9}"),
		[]string{"grid.yaml: clusters[1].uplink_mbps: must be a bandwidth in Mbit/s…, got 2e+09"}},
	{"cost_per_hour -1", withCluster(2, "{name: us, machines: 1, cores: 8, memory_mib: 32768, perf: 8e9, lan_mbps: 10000, uplink_mbps: 1000, cost_per_hour: -1}"),
		[]string{"grid.yaml: clusters[2].cost_per_hour: must be a number >= 0, got -1"}},
	{"mbps 0", withLink(0, "{between: [spain, latam-a], mbps: 0}"), []string{"grid.yaml: links[0].mbps: " + msgMbps0}},
	{"mbps too large", withLink(0, "{between: [spain, latam-a], mbps: 1.5e9}"),
		[]string{"grid.yaml: links[0].mbps: must be a bandwidth in Mbit/s…, got 1.5e+09"}},
	{"latency_ms -1", withLink(1, "{between: [latam-a, us], mbps: 100, latency_ms: -1}"),
		[]string{"grid.yaml: links[1].latency_ms: must be a number >= 0, got -1"}},

	// Names.
	{"name upper case", oneCluster("{name: Spain, machines: 1, cores: 1, memory_mib: 1, perf: 1, lan_mbps: 1, uplink_mbps: 1}"),
		[]string{`grid.yaml: clusters[0].name: must match [a-z0-9-]+, got "Spain"`}},
	{"name empty", oneCluster(`{name: "", machines: 1, cores: 1, memory_mib: 1, perf: 1, lan_mbps: 1, uplink_mbps: 1}`),
		[]string{`grid.yaml: clusters[0].name: must match [a-z0-9-]+, got ""`}},
	{"name with a space", oneCluster(`{name: "la spain", machines: 1, cores: 1, memory_mib: 1, perf: 1, lan_mbps: 1, uplink_mbps: 1}`),
		[]string{`grid.yaml: clusters[0].name: must match [a-z0-9-]+, got "la spain"`}},
	{"duplicate cluster name", `clusters:
  - {name: a, machines: 1, cores: 1, memory_mib: 1, perf: 1, lan_mbps: 1, uplink_mbps: 1}
  - {name: b, machines: 1, cores: 1, memory_mib: 1, perf: 1, lan_mbps: 1, uplink_mbps: 1}
  - {name: a, machines: 2, cores: 1, memory_mib: 1, perf: 1, lan_mbps: 1, uplink_mbps: 1}
links:
  - {between: [a, b], mbps: 1}
`, []string{`grid.yaml: clusters[2].name: duplicate cluster name "a" (also clusters[0])`}},

	// Links.
	{"link to an unknown cluster", withLink(1, "{between: [latam-a, usa], mbps: 100}"),
		[]string{`grid.yaml: links[1].between[1]: unknown cluster "usa"`}},
	{"link between two unknown clusters", withLink(0, "{between: [es, latam], mbps: 10}"),
		[]string{`grid.yaml: links[0].between[0]: unknown cluster "es"`, `grid.yaml: links[0].between[1]: unknown cluster "latam"`}},
	{"link with 1 name", withLink(0, "{between: [spain], mbps: 10}"),
		[]string{"grid.yaml: links[0].between: must list exactly 2 cluster names, got 1"}},
	{"link with 3 names", withLink(0, "{between: [spain, latam-a, us], mbps: 10}"),
		[]string{"grid.yaml: links[0].between: must list exactly 2 cluster names, got 3"}},
	{"link with no names", withLink(0, "{between: [], mbps: 10}"),
		[]string{"grid.yaml: links[0].between: must list exactly 2 cluster names, got 0"}},
	{"link from a cluster to itself", withExtraLink("{between: [us, us], mbps: 5}"),
		[]string{`grid.yaml: links[2].between: a link joins two different clusters, got "us" twice`}},
	{"repeated link", withExtraLink("{between: [spain, latam-a], mbps: 5}"),
		[]string{"grid.yaml: links[2].between: repeats the link spain–latam-a of links[0]"}},
	{"repeated link, reversed", withExtraLink("{between: [us, latam-a], mbps: 5}"),
		[]string{"grid.yaml: links[2].between: repeats the link us–latam-a of links[1]"}},

	// Connectivity.
	{"disconnected: two groups", `clusters:
  - {name: a, machines: 1, cores: 1, memory_mib: 1, perf: 1, lan_mbps: 1, uplink_mbps: 1}
  - {name: c, machines: 1, cores: 1, memory_mib: 1, perf: 1, lan_mbps: 1, uplink_mbps: 1}
  - {name: b, machines: 1, cores: 1, memory_mib: 1, perf: 1, lan_mbps: 1, uplink_mbps: 1}
  - {name: d, machines: 1, cores: 1, memory_mib: 1, perf: 1, lan_mbps: 1, uplink_mbps: 1}
links:
  - {between: [d, c], mbps: 1}
  - {between: [a, b], mbps: 1}
`, []string{"grid.yaml: links: the grid is not connected: 2 separate groups of clusters {a, b} {c, d}; add links between them"}},
	{"disconnected: one cluster apart", gridClusters3 + "links:\n  - {between: [spain, us], mbps: 10}\n",
		[]string{"grid.yaml: links: the grid is not connected: 2 separate groups of clusters {latam-a} {spain, us}"}},
	{"disconnected: no links", gridClusters3,
		[]string{"grid.yaml: links: the grid is not connected: 3 separate groups of clusters {latam-a} {spain} {us}"}},
	{"disconnected: empty links", gridClusters3 + "links: []\n",
		[]string{"grid.yaml: links: the grid is not connected: 3 separate groups"}},
	{"empty clusters list", "clusters: []\n", []string{"grid.yaml: clusters: must list at least one cluster"}},
	{"empty clusters list with a link", "clusters: []\nlinks:\n  - {between: [a, b], mbps: 1}\n", []string{
		"grid.yaml: clusters: must list at least one cluster",
		`grid.yaml: links[0].between[0]: unknown cluster "a"`,
		`grid.yaml: links[0].between[1]: unknown cluster "b"`,
	}},

	// Hypervisors.
	{"hypervisor word", withCluster(2, "{name: us, machines: 1, cores: 8, memory_mib: 32768, perf: 8e9, lan_mbps: 10000, uplink_mbps: 1000, hypervisor: xen}"),
		[]string{`grid.yaml: clusters[2].hypervisor: must be "test", "sim" or a libvirt URI template…, got "xen"`}},
	{"hypervisor Test", withCluster(2, "{name: us, machines: 1, cores: 8, memory_mib: 32768, perf: 8e9, lan_mbps: 10000, uplink_mbps: 1000, hypervisor: Test}"),
		[]string{`grid.yaml: clusters[2].hypervisor: must be "test", "sim" or a libvirt URI template`}},
	{"hypervisor URI without {i} for 8 machines", withCluster(0, `{name: spain, machines: 8, cores: 4, memory_mib: 16384, perf: 4.0e9, lan_mbps: 1000, uplink_mbps: 100, hypervisor: "qemu+ssh://es/system"}`),
		[]string{`grid.yaml: clusters[0].hypervisor: must contain {i} (the machine's number) for a cluster of 8 machines, got "qemu+ssh://es/system"`}},

	// Everything at once, in document order.
	{
		name: "several problems",
		in: "links:\n" +
			"  - {between: [a, b], mbps: 0}\n" +
			"  - {between: [b, nowhere], mbps: 10, latency_ms: -3}\n" +
			"  - {between: [b, a], mbps: 10}\n" +
			"clusters:\n" +
			"  - {name: a, machines: 0, cores: 1, memory_mib: 1, perf: 1, lan_mbps: 1, uplink_mbps: 1, colour: red}\n" +
			"  - {name: B, machines: 1, cores: x, memory_mib: 1, perf: 0, lan_mbps: 1, uplink_mbps: 1}\n" +
			"  - {name: b, machines: 2, cores: 1, memory_mib: 1, perf: 1, lan_mbps: 1, uplink_mbps: 1, hypervisor: 'qemu:///system'}\n" +
			"  - {name: a, machines: 1, cores: 1, memory_mib: 1, perf: 1, lan_mbps: 1}\n" +
			"version: 2\n",
		want: []string{
			"grid.yaml: links[0].mbps: " + msgMbps0,
			`grid.yaml: links[1].between[1]: unknown cluster "nowhere"`,
			"grid.yaml: links[1].latency_ms: must be a number >= 0, got -3",
			"grid.yaml: links[2].between: repeats the link b–a of links[0]",
			"grid.yaml: clusters[0].machines: must be an integer >= 1, got 0",
			"grid.yaml: clusters[0].colour: unknown field",
			`grid.yaml: clusters[1].name: must match [a-z0-9-]+, got "B"`,
			"grid.yaml: clusters[1].cores: must be a number",
			"grid.yaml: clusters[1].perf: must be a number > 0",
			"grid.yaml: clusters[2].hypervisor: must contain {i}",
			// A missing field is reported at its mapping, which starts
			// before the name.
			"grid.yaml: clusters[3].uplink_mbps: missing required field",
			`grid.yaml: clusters[3].name: duplicate cluster name "a" (also clusters[0])`,
			"grid.yaml: version: unknown field",
		},
	},
}

func TestParseGridErrors(t *testing.T) {
	for _, tt := range parseGridErrorCases {
		t.Run(tt.name, func(t *testing.T) {
			g, err := graph.ParseGrid("grid.yaml", []byte(tt.in))
			if err == nil {
				t.Fatalf("ParseGrid succeeded, want an error with %q", tt.want)
			}
			if g != nil {
				t.Errorf("ParseGrid returned a grid with an error")
			}
			checkLines(t, err.Error(), tt.want)
		})
	}
}

// checkLines checks that the error text has one line per element of want,
// in order, each containing the parts of that element ("…" between parts)
// in order.
func checkLines(t *testing.T, got string, want []string) {
	t.Helper()
	lines := strings.Split(got, "\n")
	ok := len(lines) == len(want)
	for i := 0; ok && i < len(lines); i++ {
		rest := lines[i]
		for part := range strings.SplitSeq(want[i], "…") {
			_, after, found := strings.Cut(rest, part)
			ok, rest = ok && found, after
		}
	}
	if !ok {
		t.Errorf("error:\n%s\nwant %d lines containing, in order:\n%s", got, len(want), strings.Join(want, "\n"))
	}
}

// TestParseGridStopsAtLinksItCannotRead checks that a link that could not
// be read is not also reported as a disconnected grid (and the other way
// round, a grid whose links all parse is checked for connectivity).
func TestParseGridStopsAtLinksItCannotRead(t *testing.T) {
	for _, in := range []string{
		gridClusters3 + "links:\n  - {between: [spain, latam-a], mbps: 10}\n  - {between: [latam-a], mbps: 10}\n",
		gridClusters3 + "links:\n  - {between: [spain, latam-a], mbps: 10}\n  - {between: [latam-a, 3], mbps: 10}\n",
		gridClusters3 + "links:\n  - {between: [spain, latam-a], mbps: 10}\n  - {between: [latam-a, usa], mbps: 10}\n",
		gridClusters3 + "links:\n  - {between: [spain, latam-a], mbps: 10}\n  - latam-a us\n",
		gridClusters3 + "links:\n  - {between: [spain, latam-a], mbps: 10}\n  - {mbps: 10}\n",
	} {
		_, err := graph.ParseGrid("grid.yaml", []byte(in))
		if err == nil {
			t.Fatalf("ParseGrid(%q) succeeded", in)
		}
		if got := err.Error(); strings.Count(got, "\n") != 0 || strings.Contains(got, "not connected") {
			t.Errorf("ParseGrid(%q):\n%s\nwant a single error about links[1]", in, got)
		}
	}
}

// TestParseGridDisconnectedWithOtherLinkProblems: a grid whose links parse
// but leave it disconnected is reported as such even when a link has
// another problem, as Validate does.
//
// It fails: the report function of ParseGrid drops a message at path "links"
// when d.Failed("links") is true, which it is as soon as any problem was
// reported inside links (links[0].mbps here), not only when the links could
// not be read.
func TestParseGridDisconnectedWithOtherLinkProblems(t *testing.T) {
	const disconnected = "grid.yaml: links: the grid is not connected: 2 separate groups of clusters {spain, latam-a} {us}"
	for _, tt := range []struct {
		name string
		in   string
		want []string
	}{
		{"mbps 0", gridClusters3 + "links:\n  - {between: [spain, latam-a], mbps: 0}\n",
			[]string{disconnected, "grid.yaml: links[0].mbps: must be a bandwidth"}},
		{"latency -1", gridClusters3 + "links:\n  - {between: [spain, latam-a], mbps: 1, latency_ms: -1}\n",
			[]string{disconnected, "grid.yaml: links[0].latency_ms: must be a number >= 0"}},
		{"repeated link", gridClusters3 + "links:\n  - {between: [spain, latam-a], mbps: 1}\n  - {between: [latam-a, spain], mbps: 2}\n",
			[]string{disconnected, "grid.yaml: links[1].between: repeats the link"}},
		{"self link", gridClusters3 + "links:\n  - {between: [spain, latam-a], mbps: 1}\n  - {between: [us, us], mbps: 2}\n",
			[]string{disconnected, "grid.yaml: links[1].between: a link joins two different clusters"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := graph.ParseGrid("grid.yaml", []byte(tt.in))
			if err == nil {
				t.Fatal("ParseGrid succeeded")
			}
			checkLines(t, err.Error(), tt.want)
		})
	}
}

// TestParseGridLinksToUnreadableClusters: a cluster that could not be read
// is reported once; the links to it are not also reported as links to an
// unknown cluster (grid.go, check: "failed says which paths were already
// reported as undecodable, so that the checks that need them (links to
// clusters, connectivity) are not misled").
//
// It fails: check looks up the ends of a link among the names that could be
// read, so each link to such a cluster gets a second message "unknown
// cluster".
func TestParseGridLinksToUnreadableClusters(t *testing.T) {
	for _, tt := range []struct {
		name string
		in   string
		want string
	}{
		{"cluster not a mapping", withCluster(1, "latam-a"), "grid.yaml: clusters[1]: must be a mapping"},
		{"cluster without a name", withCluster(2, "{machines: 1, cores: 8, memory_mib: 32768, perf: 8e9, lan_mbps: 10000, uplink_mbps: 1000}"),
			"grid.yaml: clusters[2].name: missing required field"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := graph.ParseGrid("grid.yaml", []byte(tt.in))
			if err == nil {
				t.Fatal("ParseGrid succeeded")
			}
			checkLines(t, err.Error(), []string{tt.want})
		})
	}
}

func TestValidate(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	tests := []struct {
		name   string
		change func(g *graph.Grid)
		want   string // the whole error text; "" for a valid grid
	}{
		{"valid", func(g *graph.Grid) {}, ""},
		{"valid URI", func(g *graph.Grid) { g.Clusters[1].Hypervisor = "qemu+ssh://latam{i}/system" }, ""},
		{"valid one cluster", func(g *graph.Grid) { g.Clusters = g.Clusters[:1]; g.Links = nil }, ""},
		{"valid bounds", func(g *graph.Grid) { g.Links[0].Mbps, g.Links[1].Mbps = graph.MinMbps, graph.MaxMbps }, ""},
		{"no clusters", func(g *graph.Grid) { g.Clusters = nil; g.Links = nil }, "clusters: must list at least one cluster"},
		{"machines", func(g *graph.Grid) { g.Clusters[0].Machines = 0 }, "clusters[0].machines: must be an integer >= 1, got 0"},
		{"cores", func(g *graph.Grid) { g.Clusters[1].Cores = -1 }, "clusters[1].cores: must be an integer >= 1, got -1"},
		{"memory", func(g *graph.Grid) { g.Clusters[2].MemoryMiB = 0 }, "clusters[2].memory_mib: must be an integer >= 1, got 0"},
		{"perf 0", func(g *graph.Grid) { g.Clusters[1].Perf = 0 },
			"clusters[1].perf: must be a number > 0 (operations per second per machine), got 0"},
		{"perf nan", func(g *graph.Grid) { g.Clusters[1].Perf = nan },
			"clusters[1].perf: must be a number > 0 (operations per second per machine), got NaN"},
		{"perf inf", func(g *graph.Grid) { g.Clusters[1].Perf = inf },
			"clusters[1].perf: must be a number > 0 (operations per second per machine), got +Inf"},
		{"lan", func(g *graph.Grid) { g.Clusters[0].LANMbps = 0 },
			"clusters[0].lan_mbps: must be a bandwidth in Mbit/s between 0.001 and 1e+09, got 0"},
		{"uplink", func(g *graph.Grid) { g.Clusters[2].UplinkMbps = -5 },
			"clusters[2].uplink_mbps: must be a bandwidth in Mbit/s between 0.001 and 1e+09, got -5"},
		{"uplink nan", func(g *graph.Grid) { g.Clusters[2].UplinkMbps = nan },
			"clusters[2].uplink_mbps: must be a bandwidth in Mbit/s between 0.001 and 1e+09, got NaN"},
		{"cost", func(g *graph.Grid) { g.Clusters[0].CostPerHour = -1 }, "clusters[0].cost_per_hour: must be a number >= 0, got -1"},
		{"cost inf", func(g *graph.Grid) { g.Clusters[0].CostPerHour = inf }, "clusters[0].cost_per_hour: must be a number >= 0, got +Inf"},
		{"hypervisor without {i}", func(g *graph.Grid) { g.Clusters[1].Hypervisor = "qemu:///system" },
			`clusters[1].hypervisor: must contain {i} (the machine's number) for a cluster of 2 machines, got "qemu:///system"`},
		{"name upper case", func(g *graph.Grid) { g.Clusters[2].Name = "US"; g.Links = g.Links[:1] },
			`clusters[2].name: must match [a-z0-9-]+, got "US"`},
		{"name empty", func(g *graph.Grid) { g.Clusters[2].Name = ""; g.Links = g.Links[:1] },
			`clusters[2].name: must match [a-z0-9-]+, got ""`},
		{"duplicate name", func(g *graph.Grid) { g.Clusters[2].Name = "spain"; g.Links = g.Links[:1] },
			`clusters[2].name: duplicate cluster name "spain" (also clusters[0])`},
		{"mbps", func(g *graph.Grid) { g.Links[1].Mbps = 0 },
			"links[1].mbps: must be a bandwidth in Mbit/s between 0.001 and 1e+09, got 0"},
		{"mbps too large", func(g *graph.Grid) { g.Links[1].Mbps = 1.0000001e9 },
			"links[1].mbps: must be a bandwidth in Mbit/s between 0.001 and 1e+09, got 1.0000001e+09"},
		{"latency", func(g *graph.Grid) { g.Links[0].LatencyMs = -1 }, "links[0].latency_ms: must be a number >= 0, got -1"},
		{"latency nan", func(g *graph.Grid) { g.Links[0].LatencyMs = nan }, "links[0].latency_ms: must be a number >= 0, got NaN"},
		{"unknown cluster", func(g *graph.Grid) { g.Links[1].Between[1] = "usa" }, `links[1].between[1]: unknown cluster "usa"`},
		{"empty link", func(g *graph.Grid) { g.Links = append(g.Links, graph.Link{Mbps: 1}) },
			"links[2].between[0]: unknown cluster \"\"\nlinks[2].between[1]: unknown cluster \"\""},
		{"self link", func(g *graph.Grid) {
			g.Links = append(g.Links, graph.Link{Between: [2]string{"latam-a", "latam-a"}, Mbps: 1})
		}, `links[2].between: a link joins two different clusters, got "latam-a" twice`},
		{"repeated link", func(g *graph.Grid) {
			g.Links = append(g.Links, graph.Link{Between: [2]string{"us", "latam-a"}, Mbps: 1})
		}, "links[2].between: repeats the link us–latam-a of links[1]"},
		{"disconnected", func(g *graph.Grid) { g.Links = g.Links[1:] },
			"links: the grid is not connected: 2 separate groups of clusters {latam-a, us} {spain}; add links between them"},
		{"disconnected with another link problem", func(g *graph.Grid) { g.Links = g.Links[:1]; g.Links[0].Mbps = 0 },
			"links[0].mbps: must be a bandwidth in Mbit/s between 0.001 and 1e+09, got 0\n" +
				"links: the grid is not connected: 2 separate groups of clusters {spain, latam-a} {us}; add links between them"},
		{"several", func(g *graph.Grid) {
			g.Clusters[0].Machines = 0
			g.Clusters[1].Perf = -2
			g.Clusters[1].UplinkMbps = 0
			g.Links[0].LatencyMs = -1
			g.Links[1].Between = [2]string{"us", "mars"}
		}, "clusters[0].machines: must be an integer >= 1, got 0\n" +
			"clusters[1].perf: must be a number > 0 (operations per second per machine), got -2\n" +
			"clusters[1].uplink_mbps: must be a bandwidth in Mbit/s between 0.001 and 1e+09, got 0\n" +
			"links[0].latency_ms: must be a number >= 0, got -1\n" +
			`links[1].between[1]: unknown cluster "mars"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := gridWant3() // a valid grid built in code
			tt.change(g)
			err := g.Validate()
			got := ""
			if err != nil {
				got = err.Error()
			}
			if got != tt.want {
				t.Errorf("Validate:\n%s\nwant:\n%s", got, tt.want)
			}
			// New validates the same way.
			_, err = graph.New(g)
			if (err == nil) != (tt.want == "") {
				t.Errorf("New: error %v, Validate: %q", err, tt.want)
			}
			if err != nil && err.Error() != "invalid grid: "+tt.want {
				t.Errorf("New: %v\nwant invalid grid: %s", err, tt.want)
			}
		})
	}
}

func TestGridIndex(t *testing.T) {
	g := gridWant3()
	for _, tt := range []struct {
		name string
		i    int
		ok   bool
	}{{"spain", 0, true}, {"latam-a", 1, true}, {"us", 2, true}, {"Spain", -1, false}, {"", -1, false}} {
		if i, ok := g.Index(tt.name); i != tt.i || ok != tt.ok {
			t.Errorf("Index(%q) = %d, %v, want %d, %v", tt.name, i, ok, tt.i, tt.ok)
		}
	}
}
