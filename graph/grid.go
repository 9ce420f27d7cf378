package graph

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	yb "github.com/yourbasic/graph"

	"github.com/metasched/metasched/internal/yamlx"
)

// Cluster is one cluster of a grid file (docs/reference/grid-file.md,
// "clusters"): identical
// machines behind one LAN and one WAN uplink.
type Cluster struct {
	Name        string  `json:"name"`
	Machines    int     `json:"machines"`
	Cores       int     `json:"cores"`      // per machine
	MemoryMiB   int     `json:"memory_mib"` // per machine
	Perf        float64 `json:"perf"`       // operations per second per machine
	LANMbps     float64 `json:"lan_mbps"`
	UplinkMbps  float64 `json:"uplink_mbps"`
	CostPerHour float64 `json:"cost_per_hour,omitempty"` // per machine
	// Hypervisor is "test" (one file-based test-driver host per machine;
	// "" means the same), "sim" (one simulated host per machine, in
	// memory: hypervisorproxy/sim) or a libvirt URI template where {i}
	// stands for the machine's number.
	Hypervisor string `json:"hypervisor,omitempty"`
}

// Link is a WAN link between two clusters.
type Link struct {
	Between   [2]string `json:"between"`
	Mbps      float64   `json:"mbps"`
	LatencyMs float64   `json:"latency_ms,omitempty"`
}

// Grid is a grid file: clusters and the links between them. A valid grid
// has at least one cluster and is connected.
type Grid struct {
	Clusters []Cluster `json:"clusters"`
	Links    []Link    `json:"links"`
}

// HypervisorTest is the default hypervisor of a cluster: one file-based
// libvirt test-driver host per machine.
const HypervisorTest = "test"

// HypervisorSim is a cluster of simulated hosts (in memory, no libvirt),
// one per machine, of the cluster's cores and memory.
const HypervisorSim = "sim"

// Bounds of bandwidths, so that 1/bandwidth scales to an int64 cost (see
// Cost) without overflow or loss of order.
const (
	MinMbps = 1e-3 // 1 kbit/s
	MaxMbps = 1e9  // 1 Pbit/s
)

var (
	gridFields    = []string{"clusters", "links"}
	clusterFields = []string{"name", "machines", "cores", "memory_mib", "perf", "lan_mbps",
		"uplink_mbps", "cost_per_hour", "hypervisor"}
	linkFields = []string{"between", "mbps", "latency_ms"}
)

// ParseGrid decodes a grid file (YAML or JSON, docs/reference/grid-file.md)
// strictly: unknown fields, values of the wrong type or out of range,
// duplicate cluster names, links to unknown clusters, repeated links and a
// grid that is not connected are errors. Every problem of the file is
// reported, one per line in document order, as "FILE: FIELD.PATH: problem".
func ParseGrid(file string, data []byte) (*Grid, error) {
	d, root, err := yamlx.Parse(file, data)
	if err != nil {
		return nil, err
	}
	top, ok := root.Map(gridFields...)
	if !ok {
		return nil, d.Err()
	}
	g := &Grid{}
	if vs, ok := top.Seq("clusters", true); ok {
		for _, v := range vs {
			g.Clusters = append(g.Clusters, decodeCluster(v))
		}
	}
	linksRead := true
	if v, ok := top.Get("links", false); ok && !v.IsNull() {
		vs, ok := v.Seq()
		linksRead = ok
		if ok {
			for _, v := range vs {
				g.Links = append(g.Links, decodeLink(v))
			}
		}
	}
	// Values that could not be decoded were reported; the rules on values
	// (shared with Validate) report the rest.
	g.check(func(path, msg string) {
		// "links" carries the connectivity problem, checked only when every
		// cluster and link could be read: problems inside links do not
		// hide it.
		if path == "links" || !d.Failed(path) {
			d.Errorf(path, "%s", msg)
		}
	}, d.Failed, linksRead)
	if err := d.Err(); err != nil {
		return nil, err
	}
	return g, nil
}

func decodeCluster(v yamlx.Value) Cluster {
	c := Cluster{Hypervisor: HypervisorTest}
	m, ok := v.Map(clusterFields...)
	if !ok {
		return c
	}
	c.Name, _ = m.Str("name", true)
	c.Machines, _ = m.Int("machines", true)
	c.Cores, _ = m.Int("cores", true)
	c.MemoryMiB, _ = m.Int("memory_mib", true)
	c.Perf, _ = m.Float("perf", true)
	c.LANMbps, _ = m.Float("lan_mbps", true)
	c.UplinkMbps, _ = m.Float("uplink_mbps", true)
	c.CostPerHour, _ = m.Float("cost_per_hour", false)
	if s, ok := m.Str("hypervisor", false); ok && s != "" {
		c.Hypervisor = s
	}
	return c
}

func decodeLink(v yamlx.Value) Link {
	var l Link
	m, ok := v.Map(linkFields...)
	if !ok {
		return l
	}
	if b, ok := m.Get("between", true); ok {
		if vs, ok := b.Seq(); ok {
			if len(vs) != 2 {
				b.Errorf("must list exactly 2 cluster names, got %d", len(vs))
			} else {
				l.Between[0], _ = vs[0].Str()
				l.Between[1], _ = vs[1].Str()
			}
		}
	}
	l.Mbps, _ = m.Float("mbps", true)
	l.LatencyMs, _ = m.Float("latency_ms", false)
	return l
}

// Validate applies the rules of ParseGrid to a grid built in code (from live
// inventory, say). The error lists every problem as "FIELD.PATH: problem".
func (g *Grid) Validate() error {
	var errs []error
	g.check(func(path, msg string) { errs = append(errs, errors.New(path+": "+msg)) },
		func(string) bool { return false }, true)
	return errors.Join(errs...)
}

// Index returns the position of the cluster called name.
func (g *Grid) Index(name string) (int, bool) {
	i := slices.IndexFunc(g.Clusters, func(c Cluster) bool { return c.Name == name })
	return i, i >= 0
}

// check calls bad for each problem with its field path. failed says which
// paths were already reported as undecodable, so that the checks that need
// them (links to clusters, connectivity) are not misled; linksRead is
// false when the links could not be read as a list.
func (g *Grid) check(bad func(path, msg string), failed func(path string) bool, linksRead bool) {
	if len(g.Clusters) == 0 {
		bad("clusters", "must list at least one cluster")
	}
	index := map[string]int{}
	namesOK := true // every cluster's name could be read
	for i, c := range g.Clusters {
		at := func(f string) string { return fmt.Sprintf("clusters[%d].%s", i, f) }
		if c.Name == "" && failed(fmt.Sprintf("clusters[%d]", i)) {
			namesOK = false // reported: not a mapping, or no readable name
		} else if !yamlx.IsName(c.Name) {
			bad(at("name"), fmt.Sprintf("must match [a-z0-9-]+, got %q", c.Name))
		} else if j, dup := index[c.Name]; dup {
			bad(at("name"), fmt.Sprintf("duplicate cluster name %q (also clusters[%d])", c.Name, j))
		} else {
			index[c.Name] = i
		}
		for _, f := range []struct {
			name string
			v    int
		}{{"machines", c.Machines}, {"cores", c.Cores}, {"memory_mib", c.MemoryMiB}} {
			if f.v < 1 {
				bad(at(f.name), fmt.Sprintf("must be an integer >= 1, got %d", f.v))
			}
		}
		if !(c.Perf > 0) || math.IsInf(c.Perf, 0) {
			bad(at("perf"), fmt.Sprintf("must be a number > 0 (operations per second per machine), got %g", c.Perf))
		}
		if msg := mbpsRule(c.LANMbps); msg != "" {
			bad(at("lan_mbps"), msg)
		}
		if msg := mbpsRule(c.UplinkMbps); msg != "" {
			bad(at("uplink_mbps"), msg)
		}
		if !(c.CostPerHour >= 0) || math.IsInf(c.CostPerHour, 0) {
			bad(at("cost_per_hour"), fmt.Sprintf("must be a number >= 0, got %g", c.CostPerHour))
		}
		if msg := hypervisorRule(c); msg != "" {
			bad(at("hypervisor"), msg)
		}
	}

	type pair struct{ a, b int }
	seen := map[pair]int{}
	linksOK := linksRead
	for i, l := range g.Links {
		at := func(f string) string { return fmt.Sprintf("links[%d].%s", i, f) }
		if msg := mbpsRule(l.Mbps); msg != "" {
			bad(at("mbps"), msg)
		}
		if !(l.LatencyMs >= 0) || math.IsInf(l.LatencyMs, 0) {
			bad(at("latency_ms"), fmt.Sprintf("must be a number >= 0, got %g", l.LatencyMs))
		}
		if failed(at("between")) || !namesOK {
			linksOK = false
			continue
		}
		ends := [2]int{}
		known := true
		for e, name := range l.Between {
			j, ok := index[name]
			if !ok {
				bad(fmt.Sprintf("links[%d].between[%d]", i, e), fmt.Sprintf("unknown cluster %q", name))
				known = false
			}
			ends[e] = j
		}
		if !known {
			linksOK = false
			continue
		}
		if ends[0] == ends[1] {
			bad(at("between"), fmt.Sprintf("a link joins two different clusters, got %q twice", l.Between[0]))
			continue
		}
		p := pair{min(ends[0], ends[1]), max(ends[0], ends[1])}
		if j, dup := seen[p]; dup {
			bad(at("between"), fmt.Sprintf("repeats the link %s–%s of links[%d]", l.Between[0], l.Between[1], j))
			continue
		}
		seen[p] = i
	}

	// Connectivity, when every cluster and link could be read.
	if !linksOK || len(index) != len(g.Clusters) || len(g.Clusters) < 2 {
		return
	}
	u := yb.New(len(g.Clusters))
	for p := range seen {
		u.AddBoth(p.a, p.b)
	}
	if comps := yb.Components(u); len(comps) > 1 {
		parts := make([]string, len(comps))
		for i, comp := range comps {
			slices.Sort(comp)
			names := make([]string, len(comp))
			for j, c := range comp {
				names[j] = g.Clusters[c].Name
			}
			parts[i] = "{" + strings.Join(names, ", ") + "}"
		}
		slices.Sort(parts)
		bad("links", fmt.Sprintf("the grid is not connected: %d separate groups of clusters %s; add links between them",
			len(comps), strings.Join(parts, " ")))
	}
}

func mbpsRule(x float64) string {
	if !(x >= MinMbps && x <= MaxMbps) {
		return fmt.Sprintf("must be a bandwidth in Mbit/s between %g and %g, got %g", float64(MinMbps), float64(MaxMbps), x)
	}
	return ""
}

func hypervisorRule(c Cluster) string {
	switch {
	case c.Hypervisor == HypervisorTest || c.Hypervisor == "" || c.Hypervisor == HypervisorSim:
	case !strings.Contains(c.Hypervisor, "://"):
		return fmt.Sprintf(`must be "test", "sim" or a libvirt URI template such as "qemu+ssh://node{i}/system", got %q`, c.Hypervisor)
	case c.Machines > 1 && !strings.Contains(c.Hypervisor, "{i}"):
		return fmt.Sprintf("must contain {i} (the machine's number) for a cluster of %d machines, got %q", c.Machines, c.Hypervisor)
	}
	return ""
}
