package slurmtest

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	hp "github.com/metasched/metasched/hypervisorproxy"
	"github.com/metasched/metasched/hypervisorproxy/slurm"
)

// AgentOptions are the site of an agent for the cluster.
type AgentOptions struct {
	Site       string
	Partitions map[string]string // pool → partition
	// SwitchTimeout is the slurm block's switch_timeout (0: its default).
	SwitchTimeout time.Duration
	Extra         string // appended to the site file
}

// SiteFile is the site file of an agent for the cluster: every node a
// host, plain HTTP with the token file "token" beside it.
func (c *Cluster) SiteFile(o AgentOptions) string {
	var b strings.Builder
	fmt.Fprintf(&b, "site: %s\ninsecure_http: true\ntoken_file: token\ndata_dir: data\n%s", o.Site, c.SlurmBlock(o.Partitions, o.SwitchTimeout))
	b.WriteString("hosts:\n")
	for _, n := range c.spec.Nodes {
		fmt.Fprintf(&b, "  - {name: %s, uri: \"slurm:%s\"}\n", n.Name, n.Name)
	}
	b.WriteString(o.Extra)
	return b.String()
}

// SlurmBlock is a site file's slurm block for the cluster.
func (c *Cluster) SlurmBlock(partitions map[string]string, switchTimeout time.Duration) string {
	var b strings.Builder
	fmt.Fprintf(&b, "slurm:\n  conf: %s\n", c.Conf)
	if c.Cluster.Bin != "" {
		fmt.Fprintf(&b, "  bin: %s\n", c.Cluster.Bin)
	}
	o := AgentOptions{Partitions: partitions, SwitchTimeout: switchTimeout}
	if o.SwitchTimeout > 0 {
		fmt.Fprintf(&b, "  switch_timeout: %s\n", o.SwitchTimeout)
	}
	b.WriteString("  partitions: {")
	for i, pool := range slices.Sorted(maps.Keys(o.Partitions)) {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s: %s", pool, o.Partitions[pool])
	}
	b.WriteString("}\n")
	return b.String()
}

// StartAgent runs an agent (in this process) for the cluster, its files in
// a temporary directory, closed at the test's end.
func (c *Cluster) StartAgent(t testing.TB, o AgentOptions) *hp.Agent {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "token"), []byte("t0ken"), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := hp.ParseSite(filepath.Join(dir, "site.yaml"), []byte(c.SiteFile(o)))
	if err != nil {
		t.Fatal(err)
	}
	if err := slurm.Check(t.Context(), s.Slurm); err != nil {
		t.Fatal(err)
	}
	a, err := hp.New(t.Context(), hp.Config{Site: s, Token: "t0ken", Logger: zerolog.New(zerolog.NewTestWriter(t)),
		Connect: slurm.Connector(s.Slurm, func(_ context.Context, uri string, _ func()) (hp.Hypervisor, error) {
			return nil, fmt.Errorf("%w: not a node of the Slurm site: %s", hp.ErrInvalid, uri)
		})})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	return a
}
