package slurm

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"
)

// PartitionChanges compares the partitions' nodes as the nodes report
// them with want (partition → its nodes): for each partition of want whose
// nodes differ, the nodes it must be given, sorted. Partitions not in want
// are not metasched's and are left as they are.
func PartitionChanges(nodes []Node, want map[string][]string) map[string][]string {
	have := map[string][]string{}
	for _, n := range nodes {
		for _, p := range n.Partitions {
			if _, ok := want[p]; ok {
				have[p] = append(have[p], n.Name)
			}
		}
	}
	out := map[string][]string{}
	for p, w := range want {
		w = slices.Sorted(slices.Values(w))
		h := slices.Sorted(slices.Values(have[p]))
		if !slices.Equal(w, h) {
			out[p] = w
		}
	}
	return out
}

// Reconcile gives every partition of want its nodes, where Slurm lost them
// (a controller restarted without -R, scontrol reconfigure), and returns
// the partitions it changed, sorted.
func (c *Cluster) Reconcile(ctx context.Context, want map[string][]string) ([]string, error) {
	nodes, err := c.Nodes(ctx)
	if err != nil {
		return nil, err
	}
	changes := PartitionChanges(nodes, want)
	names := slices.Sorted(maps.Keys(changes))
	for _, p := range names {
		if err := c.SetPartition(ctx, p, changes[p]); err != nil {
			return nil, err
		}
	}
	return names, nil
}

// ErrStillBusy is the error of a move whose node still ran jobs at its
// timeout: the move is cancelled and the node resumed where it was.
var ErrStillBusy = errors.New("slurm: the node still runs jobs")

// Move is a node's move from one partition to another.
type Move struct {
	Node, From, To string
	// Timeout bounds the wait for the node's jobs to end (0: none
	// waited for: a busy node cancels the move at once).
	Timeout time.Duration
	// Poll is the interval between looks at the node (0: 200 ms).
	Poll time.Duration
	// Prepared, when set, is called once the node is drained, before the
	// wait: the caller releases its own allocations on it there.
	Prepared func(ctx context.Context) error
}

// MoveNode moves a node between partitions in two phases: drain it (no
// new job starts there) and wait until no job holds it, never cancelling
// one; then take it out of From, put it in To, and resume it. A node still
// busy at the timeout is resumed in From and the move fails with
// ErrStillBusy. want, if not nil, is updated to the new membership of
// From and To as the move commits, so that Reconcile keeps it.
func (c *Cluster) MoveNode(ctx context.Context, m Move, want map[string][]string) error {
	if m.From == m.To {
		return fmt.Errorf("slurm: move %s: from and to are both %q", m.Node, m.From)
	}
	if err := c.Drain(ctx, m.Node, "metasched: moving to "+m.To); err != nil {
		return err
	}
	cancel := func(cause error) error {
		if err := c.Resume(context.WithoutCancel(ctx), m.Node); err != nil {
			return errors.Join(cause, err)
		}
		return cause
	}
	if m.Prepared != nil {
		if err := m.Prepared(ctx); err != nil {
			return cancel(err)
		}
	}
	poll := m.Poll
	if poll <= 0 {
		poll = 200 * time.Millisecond
	}
	deadline := time.Now().Add(m.Timeout)
	var node Node
	for {
		nodes, err := c.Nodes(ctx)
		if err != nil {
			return cancel(err)
		}
		i := slices.IndexFunc(nodes, func(n Node) bool { return n.Name == m.Node })
		if i < 0 {
			return cancel(fmt.Errorf("slurm: move %s: no such node", m.Node))
		}
		node = nodes[i]
		if !slices.Contains(node.Partitions, m.From) {
			return cancel(fmt.Errorf("slurm: move %s: it is not in partition %s (it is in %v)", m.Node, m.From, node.Partitions))
		}
		if !node.Busy() {
			break
		}
		if !time.Now().Before(deadline) {
			return cancel(fmt.Errorf("%w: %s after %s (%d CPUs allocated)", ErrStillBusy, m.Node, m.Timeout, node.AllocCPUs))
		}
		select {
		case <-ctx.Done():
			return cancel(ctx.Err())
		case <-time.After(poll):
		}
	}
	nodes, err := c.Nodes(ctx)
	if err != nil {
		return cancel(err)
	}
	members := func(p string) []string {
		var out []string
		for _, n := range nodes {
			if slices.Contains(n.Partitions, p) {
				out = append(out, n.Name)
			}
		}
		return out
	}
	from := slices.DeleteFunc(members(m.From), func(n string) bool { return n == m.Node })
	to := append(slices.DeleteFunc(members(m.To), func(n string) bool { return n == m.Node }), m.Node)
	if err := c.SetPartition(ctx, m.To, to); err != nil {
		return cancel(err)
	}
	if err := c.SetPartition(ctx, m.From, from); err != nil {
		return cancel(err)
	}
	if want != nil {
		want[m.From], want[m.To] = from, to
	}
	return c.Resume(ctx, m.Node)
}
