package slurmtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Client is the path of Slurm client command name as the cluster's
// clients run it: through a wrapper that enters slurmctld's network
// namespace when the cluster has a Network (the agent's slurm.bin).
func (c *Cluster) Client(name string) string {
	if c.spec.Network == nil {
		return filepath.Join("/usr/bin", name)
	}
	return filepath.Join(c.Dir, "bin", name)
}

// in is argv run in daemon's network namespace (none without a Network).
func (c *Cluster) in(daemon string, argv ...string) []string {
	ns, ok := c.netns[daemon]
	if !ok {
		return argv
	}
	return append([]string{"/usr/bin/nsenter", "--net=/run/netns/" + ns}, argv...)
}

// makeNetwork gives slurmctld and each node a network namespace joined
// to the Network's bridge by a veth pair, with its address, and writes
// the client wrappers.
func (c *Cluster) makeNetwork(ctx context.Context) error {
	n := c.spec.Network
	if n == nil {
		return nil
	}
	tag := make([]byte, 3)
	rand.Read(tag)
	id := hex.EncodeToString(tag)
	daemons := []string{"ctld"}
	for _, nd := range c.spec.Nodes {
		daemons = append(daemons, nd.Name)
	}
	ip := func(args ...string) error {
		if out, err := exec.CommandContext(ctx, "/usr/sbin/ip", args...).CombinedOutput(); err != nil {
			return fmt.Errorf("slurmtest: ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
		return nil
	}
	for i, d := range daemons {
		ns := fmt.Sprintf("sl%s-%s", id, d)
		veth, peer := fmt.Sprintf("sl%s%d", id, i), fmt.Sprintf("sl%s%dp", id, i)
		if err := ip("netns", "add", ns); err != nil {
			return err
		}
		c.netns[d] = ns
		for _, args := range [][]string{
			{"-n", n.Namespace, "link", "add", veth, "type", "veth", "peer", "name", peer},
			{"-n", n.Namespace, "link", "set", peer, "netns", ns},
			{"-n", n.Namespace, "link", "set", veth, "master", n.Bridge, "up"},
			{"-n", ns, "addr", "add", n.Addresses[i].String(), "dev", peer},
			{"-n", ns, "link", "set", peer, "up"},
			{"-n", ns, "link", "set", "lo", "up"},
		} {
			if err := ip(args...); err != nil {
				return err
			}
		}
	}
	bin := filepath.Join(c.Dir, "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		return err
	}
	for _, name := range []string{"sinfo", "squeue", "scontrol", "salloc", "srun", "scancel", "sbatch"} {
		script := fmt.Sprintf("#!/bin/sh\nexec /usr/bin/nsenter --net=/run/netns/%s /usr/bin/%s \"$@\"\n", c.netns["ctld"], name)
		if err := os.WriteFile(filepath.Join(bin, name), []byte(script), 0o755); err != nil {
			return err
		}
	}
	c.Cluster.Bin = bin
	return nil
}

// Namespaces are the network namespaces of the cluster's daemons (none
// without a Network).
func (c *Cluster) Namespaces() []string {
	var out []string
	for _, ns := range c.netns {
		out = append(out, ns)
	}
	return out
}

// removeNetwork deletes the namespaces makeNetwork made (and so their
// veth pairs).
func (c *Cluster) removeNetwork() {
	for d, ns := range c.netns {
		_ = exec.Command("/usr/sbin/ip", "netns", "del", ns).Run()
		delete(c.netns, d)
	}
}
