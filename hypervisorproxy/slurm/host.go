package slurm

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	hp "github.com/metasched/metasched/hypervisorproxy"
)

// OwnJobs is the name of the domain a Slurm host reports for what the
// jobs of Slurm's own users hold on it (never a VM of metasched's, never
// touched): the agent counts it as taken.
const OwnJobs = "slurm-own-jobs"

// Connector opens slurm:NODE URIs as hosts of the site's Slurm cluster,
// and hands any other URI to next. Its hosts share one look at the
// cluster (sinfo and squeue) at a time.
func Connector(site *hp.SlurmSite, next hp.Connector) hp.Connector {
	if site == nil {
		return next
	}
	cs := &clusterState{site: site, c: &Cluster{Conf: site.Conf, Bin: site.Bin}}
	return func(ctx context.Context, uri string, onReconnect func()) (hp.Hypervisor, error) {
		if !hp.IsSlurmURI(uri) {
			return next(ctx, uri, onReconnect)
		}
		node, err := hp.SlurmNode(uri)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", hp.ErrInvalid, err)
		}
		h := &Host{cs: cs, node: node}
		if _, err := h.nodeNow(ctx); err != nil {
			return nil, err
		}
		return h, nil
	}
}

// Check reads the cluster's nodes once: what the agent does at its start,
// so that a controller it cannot reach, or a credential munge refuses, is
// an error then, not unreachable hosts later.
func Check(ctx context.Context, site *hp.SlurmSite) error {
	c := &Cluster{Conf: site.Conf, Bin: site.Bin}
	nodes, err := c.Nodes(ctx)
	if err != nil {
		return fmt.Errorf("slurm: the cluster of %s cannot be read: %w", confName(site.Conf), err)
	}
	have := map[string]bool{}
	for _, n := range nodes {
		for _, p := range n.Partitions {
			have[p] = true
		}
	}
	for pool, part := range site.Partitions {
		if !have[part] {
			// A partition without nodes is not listed by sinfo: fine,
			// as long as scontrol knows it.
			if _, err := c.run(ctx, "scontrol", "show", "partition", part); err != nil {
				return fmt.Errorf("slurm: partitions.%s: partition %q: %w", pool, part, err)
			}
		}
	}
	return nil
}

func confName(conf string) string {
	if conf == "" {
		return "the default slurm.conf"
	}
	return conf
}

// clusterState is the last look at the cluster, shared by its hosts and
// taken again when older than lookTTL or after a change.
type clusterState struct {
	site *hp.SlurmSite
	c    *Cluster

	mu    sync.Mutex
	at    time.Time
	nodes map[string]Node
	jobs  []Job
	err   error
}

// lookTTL is how long one look at the cluster serves its hosts: an
// inventory of the site reads sinfo and squeue once, not once per node.
const lookTTL = time.Second

func (cs *clusterState) look(ctx context.Context) (map[string]Node, []Job, error) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if !cs.at.IsZero() && time.Since(cs.at) < lookTTL {
		return cs.nodes, cs.jobs, cs.err
	}
	nodes, err := cs.c.Nodes(ctx)
	var jobs []Job
	if err == nil {
		jobs, err = cs.c.Jobs(ctx)
	}
	if err != nil {
		err = fmt.Errorf("%w: slurm: %v", hp.ErrConnLost, err)
	}
	cs.at, cs.err, cs.jobs = time.Now(), err, jobs
	cs.nodes = map[string]Node{}
	for _, n := range nodes {
		cs.nodes[n.Name] = n
	}
	return cs.nodes, cs.jobs, err
}

// changed forgets the last look.
func (cs *clusterState) changed() {
	cs.mu.Lock()
	cs.at = time.Time{}
	cs.mu.Unlock()
}

// poolOf is the pool of the site's partitions the node is in ("": none).
func (cs *clusterState) poolOf(n Node) (string, error) {
	var pools []string
	for pool, part := range cs.site.Partitions {
		if slices.Contains(n.Partitions, part) {
			pools = append(pools, pool)
		}
	}
	switch len(pools) {
	case 0:
		return "", nil
	case 1:
		return pools[0], nil
	}
	slices.Sort(pools)
	return "", fmt.Errorf("slurm: node %s is in the partitions of pools %s at once", n.Name, strings.Join(pools, ", "))
}

// Host is a node of a Slurm cluster as an agent's host: its VMs are
// metasched's allocations on it, its pool the partition it is in.
type Host struct {
	cs    *clusterState
	node  string
	procs procs
}

var _ hp.PoolHypervisor = (*Host)(nil)

// nodeNow is the node as last looked at; a node that is down or gone
// loses the connection.
func (h *Host) nodeNow(ctx context.Context) (Node, error) {
	nodes, _, err := h.cs.look(ctx)
	if err != nil {
		return Node{}, err
	}
	n, ok := nodes[h.node]
	switch {
	case !ok:
		return Node{}, fmt.Errorf("%w: slurm: no node %s in the cluster", hp.ErrConnLost, h.node)
	case n.Down():
		return Node{}, fmt.Errorf("%w: slurm: node %s is %s%s (%s)", hp.ErrConnLost, h.node, n.State, flags(n.Flags), n.Reason)
	}
	return n, nil
}

func flags(fs []string) string {
	if len(fs) == 0 {
		return ""
	}
	return "+" + strings.ToLower(strings.Join(fs, "+"))
}

// Node reports the node's CPUs and memory.
func (h *Host) Node(ctx context.Context) (hp.Node, error) {
	n, err := h.nodeNow(ctx)
	if err != nil {
		return hp.Node{}, err
	}
	return hp.Node{CPUs: n.CPUs, MemoryMiB: n.MemoryMiB, Model: "slurm node " + n.Name}, nil
}

// ownComment is the comment of an allocation of metasched's: its job and
// pool, which Domains reads back.
func ownComment(job, pool string) string { return "metasched job=" + job + " pool=" + pool }

func parseComment(c string) (job, pool string) {
	for f := range strings.FieldsSeq(c) {
		if v, ok := strings.CutPrefix(f, "job="); ok {
			job = v
		} else if v, ok := strings.CutPrefix(f, "pool="); ok {
			pool = v
		}
	}
	return job, pool
}

// Domains lists metasched's allocations on the node, by the VM names
// they were made for, and what Slurm's own jobs hold on it as OwnJobs.
func (h *Host) Domains(ctx context.Context) ([]hp.Domain, error) {
	n, err := h.nodeNow(ctx)
	if err != nil {
		return nil, err
	}
	_, jobs, err := h.cs.look(ctx)
	if err != nil {
		return nil, err
	}
	var out []hp.Domain
	cpus, mem := 0, 0
	for _, j := range jobs {
		vm, own := j.Own()
		if !own || !j.Active() || !slices.Contains(j.Nodes, h.node) {
			continue
		}
		job, pool := parseComment(j.Comment)
		st := hp.StateOther
		switch j.State {
		case "RUNNING":
			st = hp.StateRunning
		case "PENDING", "CONFIGURING":
			st = hp.StateBuilding
		}
		out = append(out, hp.Domain{Name: vm, State: st, VCPUs: j.CPUs, MaxVCPUs: j.CPUs, MemoryMiB: j.MemoryMiB,
			MaxMemoryMiB: j.MemoryMiB, Job: job, Pool: pool, Address: h.address(ctx, n)})
		cpus += j.CPUs
		mem += j.MemoryMiB
	}
	if c, m := n.AllocCPUs-cpus, n.AllocMemoryMiB-mem; c > 0 || m > 0 {
		out = append(out, hp.Domain{Name: OwnJobs, State: hp.StateRunning, VCPUs: max(c, 0), MaxVCPUs: max(c, 0),
			MemoryMiB: max(m, 0), MaxMemoryMiB: max(m, 0)})
	}
	slices.SortFunc(out, func(a, b hp.Domain) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// Create allocates the VM's CPUs and memory on the node in the partition
// of its pool, and returns once Slurm grants it.
func (h *Host) Create(ctx context.Context, spec hp.VMSpec, _ hp.VMLimits) (hp.Domain, error) {
	part := h.cs.site.Partitions[spec.Pool]
	if part == "" {
		return hp.Domain{}, fmt.Errorf("%w: pool %q has no partition on this Slurm site", hp.ErrInvalid, spec.Pool)
	}
	doms, err := h.Domains(ctx)
	if err != nil {
		return hp.Domain{}, err
	}
	if slices.ContainsFunc(doms, func(d hp.Domain) bool { return d.Name == spec.Name }) || spec.Name == OwnJobs {
		return hp.Domain{}, fmt.Errorf("%w: %s on node %s", hp.ErrExists, spec.Name, h.node)
	}
	defer h.cs.changed()
	j, err := h.cs.c.Allocate(ctx, AllocSpec{Job: spec.Name, Partition: part, Nodes: []string{h.node},
		CPUs: spec.VCPUs, MemoryMiB: spec.MemoryMiB, Comment: ownComment(spec.Job, spec.Pool),
		TimeLimit: allocTimeLimit(spec.WalltimeSeconds)})
	if err != nil {
		if j.ID > 0 {
			_ = h.cs.c.Release(context.WithoutCancel(ctx), j.ID)
		}
		return hp.Domain{}, fmt.Errorf("%w: %v", hp.ErrBusy, err)
	}
	n, _ := h.nodeNow(ctx)
	return hp.Domain{Name: spec.Name, State: hp.StateRunning, VCPUs: spec.VCPUs, MaxVCPUs: spec.VCPUs,
		MemoryMiB: spec.MemoryMiB, MaxMemoryMiB: spec.MemoryMiB, Job: spec.Job, Pool: spec.Pool, Address: h.address(ctx, n)}, nil
}

// address is the node's address as a /32 (or /128) prefix: its NodeAddr,
// resolved when it is a name; "" when it does not resolve.
func (h *Host) address(ctx context.Context, n Node) string {
	a, err := netip.ParseAddr(n.Address)
	if err != nil {
		addrs, lerr := net.DefaultResolver.LookupNetIP(ctx, "ip4", n.Address)
		if lerr != nil || len(addrs) == 0 {
			return ""
		}
		a = addrs[0]
	}
	return netip.PrefixFrom(a, a.BitLen()).String()
}

// allocTimeLimit is the time limit of an allocation for a job of that
// walltime (0: none): the walltime and a minute, as the allocation is made
// before the job's command starts, where metasched's walltime starts.
func allocTimeLimit(walltimeSeconds int64) time.Duration {
	if walltimeSeconds <= 0 {
		return 0
	}
	return time.Duration(walltimeSeconds)*time.Second + time.Minute
}

// Destroy releases the VM's allocation. OwnJobs is never touched.
func (h *Host) Destroy(ctx context.Context, name string) error {
	if name == OwnJobs {
		return fmt.Errorf("%w: %s are the jobs of Slurm's own users: metasched never touches them", hp.ErrInvalid, OwnJobs)
	}
	jobs, err := h.cs.c.Jobs(ctx)
	if err != nil {
		return fmt.Errorf("%w: slurm: %v", hp.ErrConnLost, err)
	}
	found := false
	for _, j := range jobs {
		if vm, own := j.Own(); own && vm == name && j.Active() {
			found = true
			if err := h.cs.c.Release(ctx, j.ID); err != nil {
				return err
			}
		}
	}
	h.cs.changed()
	h.forget(name)
	if !found {
		return fmt.Errorf("%w: no allocation %s on node %s", hp.ErrNotFound, name, h.node)
	}
	return nil
}

// SetVCPUs is not supported: an allocation keeps its CPUs.
func (h *Host) SetVCPUs(context.Context, string, int) (hp.Domain, error) {
	return hp.Domain{}, fmt.Errorf("%w: an allocation on a Slurm node keeps its CPUs", hp.ErrUnsupported)
}

// SetMemory is not supported: an allocation keeps its memory.
func (h *Host) SetMemory(context.Context, string, int) (hp.Domain, error) {
	return hp.Domain{}, fmt.Errorf("%w: an allocation on a Slurm node keeps its memory", hp.ErrUnsupported)
}

// Migrate is not supported: a job on a Slurm node stays there.
func (h *Host) Migrate(context.Context, string, hp.Hypervisor, hp.MigrateOptions) (hp.MigrateStats, error) {
	return hp.MigrateStats{}, fmt.Errorf("%w: a job on a Slurm node cannot move", hp.ErrUnsupported)
}

// Close does nothing: the host holds no connection.
func (h *Host) Close() error { return nil }

// Pool reports the pool of the partition the node is in.
func (h *Host) Pool(ctx context.Context) (string, error) {
	nodes, _, err := h.cs.look(ctx)
	if err != nil {
		return "", err
	}
	n, ok := nodes[h.node]
	if !ok {
		return "", fmt.Errorf("%w: slurm: no node %s in the cluster", hp.ErrConnLost, h.node)
	}
	return h.cs.poolOf(n)
}

// SetPool moves the node to the partition of pool to: drained, Slurm's
// own jobs on it left to end within the site's switch_timeout (never
// cancelled), then moved and resumed. A node in no partition of the
// site's pools is just put into to's.
func (h *Host) SetPool(ctx context.Context, from, to string) error {
	defer h.cs.changed()
	site := h.cs.site
	toPart := site.Partitions[to]
	if toPart == "" {
		return fmt.Errorf("%w: pool %q has no partition on this Slurm site", hp.ErrInvalid, to)
	}
	have, err := h.Pool(ctx)
	if err != nil {
		return err
	}
	if have == to {
		return nil // done already: a step repeated after a crash
	}
	if have == "" {
		nodes, err := h.cs.c.Nodes(ctx)
		if err != nil {
			return err
		}
		var members []string
		for _, n := range nodes {
			if slices.Contains(n.Partitions, toPart) {
				members = append(members, n.Name)
			}
		}
		return h.cs.c.SetPartition(ctx, toPart, append(members, h.node))
	}
	err = h.cs.c.MoveNode(ctx, Move{Node: h.node, From: site.Partitions[have], To: toPart, Timeout: site.SwitchTimeout}, nil)
	if errors.Is(err, ErrStillBusy) {
		return fmt.Errorf("%w: %v", hp.ErrBusy, err)
	}
	return err
}
