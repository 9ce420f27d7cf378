package hypervisorproxy

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/metasched/metasched/graph"
	"github.com/metasched/metasched/hypervisorproxy/domxml"
)

// GenerateHosts returns the hosts of the site's cluster entry in the grid:
// one per machine, named SITE-0, SITE-1, ... For a cluster on the test
// driver, hostFile(name) must return the path of the host's test-driver
// file (which the caller writes with the cluster's cores and memory); for
// a URI template, {i} stands for the machine's number; a cluster of
// simulated hosts (graph.HypervisorSim) gets sim:///NAME URIs of the
// cluster's cores and memory, with no delays.
func GenerateHosts(g *graph.Grid, site, pool string, hostFile func(name string) string) ([]SiteHost, *graph.Cluster, error) {
	var c *graph.Cluster
	for i := range g.Clusters {
		if g.Clusters[i].Name == site {
			c = &g.Clusters[i]
		}
	}
	if c == nil {
		return nil, nil, fmt.Errorf("site %q: %w: no such cluster in the grid", site, ErrNotFound)
	}
	hosts := make([]SiteHost, c.Machines)
	for i := range hosts {
		name := fmt.Sprintf("%s-%d", site, i)
		uri := strings.ReplaceAll(c.Hypervisor, "{i}", strconv.Itoa(i))
		switch c.Hypervisor {
		case "", graph.HypervisorTest:
			uri = "test://" + hostFile(name)
		case graph.HypervisorSim:
			uri = SimURI(name, c.Cores, c.MemoryMiB)
		}
		hosts[i] = SiteHost{Name: name, URI: uri, Pool: pool}
	}
	return hosts, c, nil
}

// generateHosts makes one host per machine of the site's cluster entry
// (GenerateHosts) and writes the test-driver file of each test host, with
// the cluster's cores and memory, under DATA_DIR/hosts (a temporary
// directory without a data_dir).
func (a *Agent) generateHosts(g *graph.Grid) ([]SiteHost, error) {
	if g == nil {
		return nil, fmt.Errorf("agent: site %s lists no hosts and there is no grid to generate them from", a.site.Site)
	}
	dir := a.dataDir
	if dir == "" {
		var err error
		if a.tmpDir, err = os.MkdirTemp("", "metasched-agent-"); err != nil {
			return nil, fmt.Errorf("agent: %w", err)
		}
		dir = a.tmpDir
	}
	dir = filepath.Join(dir, "hosts")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("agent: %w", err)
	}
	hosts, c, err := GenerateHosts(g, a.site.Site, a.site.Pool, func(name string) string {
		p, _ := filepath.Abs(filepath.Join(dir, name+".xml"))
		return p
	})
	if err != nil {
		return nil, fmt.Errorf("agent: %w", err)
	}
	for _, h := range hosts {
		if !strings.HasPrefix(h.URI, "test://") {
			continue
		}
		x, err := domxml.Node{CPUs: c.Cores, MemoryMiB: c.MemoryMiB}.XML()
		if err != nil {
			return nil, fmt.Errorf("agent: host %s: %w", h.Name, err)
		}
		if err := os.WriteFile(strings.TrimPrefix(h.URI, "test://"), []byte(x), 0o644); err != nil {
			return nil, fmt.Errorf("agent: host %s: %w", h.Name, err)
		}
	}
	return hosts, nil
}
