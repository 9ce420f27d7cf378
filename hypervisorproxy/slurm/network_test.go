package slurm_test

import (
	"bytes"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/metasched/metasched/hypervisorproxy/netlab"
	"github.com/metasched/metasched/hypervisorproxy/slurm"
	"github.com/metasched/metasched/hypervisorproxy/slurm/slurmtest"
)

// A cluster on a bridge of a lab grid: slurmctld and each slurmd in a
// network namespace of its own with its address, the clients through the
// wrappers that enter slurmctld's; a command run in an allocation on each
// node finds its node's address, and reaches the other node.
func TestClusterOnABridge(t *testing.T) {
	t.Parallel()
	if err := netlab.Check(); err != nil {
		t.Fatal(err)
	}
	g := netlab.NewGridT(t, netlab.GridOptions{Sites: []string{"b"}})
	addrs := []netip.Prefix{netip.MustParsePrefix("10.77.2.200/16"), netip.MustParsePrefix("10.77.2.201/16"), netip.MustParsePrefix("10.77.2.202/16")}
	c := slurmtest.StartT(t, slurmtest.Spec{Nodes: []slurmtest.NodeSpec{{Name: "b1"}, {Name: "b2"}},
		Partitions: []slurmtest.PartitionSpec{{Name: "batch", Nodes: []string{"b1", "b2"}, Default: true}},
		Network:    &slurmtest.Network{Namespace: g.Namespace(), Bridge: g.Bridge("b"), Addresses: addrs}})
	ctx := t.Context()
	nodes, err := c.Nodes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i, n := range nodes {
		if n.Address != addrs[1+i].Addr().String() {
			t.Errorf("node %s at %s, want %s", n.Name, n.Address, addrs[1+i].Addr())
		}
	}
	alloc, err := c.Allocate(ctx, slurm.AllocSpec{Job: "j", Partition: "batch", Nodes: []string{"b1", "b2"}, CPUs: 1, TimeLimit: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	for i, node := range []string{"b1", "b2"} {
		other := addrs[2-i].Addr().String()
		var out, errOut bytes.Buffer
		code, err := c.Run(ctx, alloc.ID, slurm.Command{Node: node, Stdout: &out, Stderr: &errOut,
			Argv: []string{"/bin/bash", "-c", `ip -o -4 addr show scope global | awk '{print $4}'; exec 3<>/dev/tcp/` + other + `/22 && echo reached || echo "not reached"`}})
		// Nothing listens on port 22 of the other node: a refused
		// connection says it was reached; a timeout would not.
		if err != nil || code != 0 {
			t.Fatalf("run on %s: exit %d, %v: %s", node, code, err, errOut.String())
		}
		lines := strings.Split(strings.TrimSpace(out.String()), "\n")
		if len(lines) == 0 || lines[0] != addrs[1+i].String() {
			t.Errorf("%s's addresses: %q, want %s", node, out.String(), addrs[1+i])
		}
		if !strings.Contains(errOut.String(), "Connection refused") {
			t.Errorf("%s to %s: %q %q, want the connection refused (reached, nothing listening)", node, other, out.String(), errOut.String())
		}
	}
}
