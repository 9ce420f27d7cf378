package lab

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"

	"github.com/metasched/metasched/hypervisorproxy/slurm/slurmtest"
)

// slurmAddress is the address of daemon k (0: slurmctld, then the nodes)
// of the i-th site when it runs Slurm: 10.77.(i+1).(200+k), outside the
// range of the VMs' addresses.
func slurmAddress(i, k int) netip.Prefix {
	return netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 77, byte(i + 1), byte(200 + k)}), 16)
}

// startSlurm starts the i-th site's Slurm cluster on its bridge.
func (l *Lab) startSlurm(ctx context.Context, i int, s Site) (*slurmtest.Cluster, error) {
	spec := slurmtest.Spec{Network: &slurmtest.Network{Namespace: l.grid.Namespace(), Bridge: l.grid.Bridge(s.Name),
		Addresses: []netip.Prefix{slurmAddress(i, 0)}}}
	for k, h := range s.hosts() {
		spec.Nodes = append(spec.Nodes, slurmtest.NodeSpec{Name: h, CPUs: s.Cores, MemoryMiB: s.MemoryMiB})
		spec.Network.Addresses = append(spec.Network.Addresses, slurmAddress(i, k+1))
	}
	for k, p := range l.spec.Pools {
		var nodes []string
		if k == 0 {
			nodes = s.hosts()
		}
		spec.Partitions = append(spec.Partitions, slurmtest.PartitionSpec{Name: p.Name, Nodes: nodes, Default: k == 0})
	}
	dir := filepath.Join(l.opt.Dir, "slurm-"+s.Name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	c, err := slurmtest.Start(ctx, dir, spec)
	if err != nil {
		return nil, err
	}
	l.opt.Logf("slurm: site %s, %d nodes", s.Name, s.Hosts)
	return c, nil
}

// writeSlurmSite writes the site file of a Slurm site: its nodes are its
// hosts, each pool the partition of its name.
func (l *Lab) writeSlurmSite(s Site) (*Agent, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	parts := map[string]string{}
	for _, p := range l.spec.Pools {
		parts[p.Name] = p.Name
	}
	c := l.Slurm[s.Name]
	hosts := ""
	for _, h := range s.hosts() {
		hosts += fmt.Sprintf("  - {name: %s, uri: \"slurm:%s\"}\n", h, h)
	}
	name := "site-" + s.Name + ".yaml"
	err = l.write(name, fmt.Sprintf("site: %s\nlisten: 127.0.0.1:%d\n%s\ndata_dir: agent-%s\n%shosts:\n%s",
		s.Name, port, agentTLS(s.Name), s.Name, c.SlurmBlock(parts, 0), hosts))
	if err != nil {
		return nil, err
	}
	return l.agentAt(s.Name, name, port)
}
