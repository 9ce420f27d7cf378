package slurm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"sync"

	hp "github.com/metasched/metasched/hypervisorproxy"
)

// A Slurm host reaches its "VMs" (metasched's allocations on the node)
// as the agent reaches a guest: programs and files, through srun steps in
// the allocation that overlap its other steps. A program started runs in
// a step of its own for as long as it runs, so that Slurm accounts for it
// and ends it with the allocation; the agent remembers it until its exit
// has been read, as a guest agent does.

var _ hp.GuestAgentHypervisor = (*Host)(nil)

// maxCaptured bounds each of a program's captured outputs.
const maxCaptured = 1 << 20

// guestProc is a program a Slurm host started in VM vm: its status once
// done, or why srun could not run it (err), which every status call
// reports until the VM is destroyed (as a guest agent that fails would).
type guestProc struct {
	vm     string
	done   chan struct{}
	status hp.GuestExecStatus
	err    error
}

// procs are the programs of a host's allocations, by pid.
type procs struct {
	mu   sync.Mutex
	next int
	m    map[int]*guestProc
}

// allocation finds the allocation of VM name on the node in the site's
// last look at the cluster (at most lookTTL old), or in a fresh one when
// that has none: the programs and files of every allocation cost the
// controller one squeue a second, not one a call.
func (h *Host) allocation(ctx context.Context, name string) (Job, error) {
	j, err := h.findAllocation(ctx, name)
	if errors.Is(err, hp.ErrNotFound) {
		h.cs.changed()
		j, err = h.findAllocation(ctx, name)
	}
	if !errors.Is(err, hp.ErrNotFound) {
		return j, err
	}
	if n, nerr := h.nodeNow(ctx); nerr != nil || n.Unreachable() {
		// Its allocations end with it: the agent cannot tell.
		return Job{}, fmt.Errorf("%w: no running allocation %s on node %s, which does not answer Slurm (%s%s)",
			hp.ErrConnLost, name, h.node, n.State, flags(n.Flags))
	}
	return Job{}, err
}

// findAllocation finds the allocation of VM name in the last look.
func (h *Host) findAllocation(ctx context.Context, name string) (Job, error) {
	_, jobs, err := h.cs.look(ctx)
	if err != nil {
		return Job{}, err
	}
	for _, j := range jobs {
		if vm, own := j.Own(); own && vm == name && j.State == "RUNNING" {
			return j, nil
		}
	}
	return Job{}, fmt.Errorf("%w: no running allocation %s on node %s", hp.ErrNotFound, name, h.node)
}

// capped keeps at most maxCaptured bytes of what is written to it.
type capped struct {
	b         bytes.Buffer
	truncated bool
}

func (c *capped) Write(p []byte) (int, error) {
	if left := maxCaptured - c.b.Len(); len(p) > left {
		c.b.Write(p[:max(left, 0)])
		c.truncated = true
		return len(p), nil
	}
	return c.b.Write(p)
}

// StartGuestProcess starts a program in the VM's allocation, as a step of
// its own, and returns at once.
func (h *Host) StartGuestProcess(ctx context.Context, name string, e hp.GuestExec) (int, error) {
	j, err := h.allocation(ctx, name)
	if err != nil {
		return 0, err
	}
	p := &guestProc{vm: name, done: make(chan struct{})}
	h.procs.mu.Lock()
	if h.procs.m == nil {
		h.procs.m = map[int]*guestProc{}
	}
	h.procs.next++
	pid := h.procs.next
	h.procs.m[pid] = p
	h.procs.mu.Unlock()
	var stdout, stderr capped
	cmd := Command{Node: h.node, Env: e.Env, Argv: append([]string{e.Path}, e.Args...), Stdout: io.Discard, Stderr: io.Discard}
	if e.CaptureOutput {
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
	}
	if e.Input != nil {
		cmd.Stdin = bytes.NewReader(e.Input)
	}
	go func() {
		code, err := h.cs.c.Run(context.Background(), j.ID, cmd)
		if err != nil {
			p.err = h.runError(context.Background(), name, err)
			close(p.done)
			return
		}
		st := hp.GuestExecStatus{Exited: true, ExitCode: code}
		if e.CaptureOutput {
			st.Stdout, st.Stderr = stdout.b.Bytes(), stderr.b.Bytes()
			st.Truncated = stdout.truncated || stderr.truncated
		}
		p.status = st
		close(p.done)
	}()
	return pid, nil
}

// GuestProcessStatus reports a program's state, and forgets it once it
// has reported its exit.
func (h *Host) GuestProcessStatus(_ context.Context, name string, pid int) (hp.GuestExecStatus, error) {
	h.procs.mu.Lock()
	defer h.procs.mu.Unlock()
	p, ok := h.procs.m[pid]
	if !ok {
		return hp.GuestExecStatus{}, fmt.Errorf("%w: no program %d in %s", hp.ErrNotFound, pid, name)
	}
	select {
	case <-p.done:
		if p.err != nil {
			return hp.GuestExecStatus{}, p.err
		}
		delete(h.procs.m, pid)
		return p.status, nil
	default:
		return hp.GuestExecStatus{}, nil
	}
}

// forget drops the programs of VM name (destroyed): those srun could not
// run are kept until then.
func (h *Host) forget(name string) {
	h.procs.mu.Lock()
	defer h.procs.mu.Unlock()
	for pid, p := range h.procs.m {
		if p.vm == name {
			delete(h.procs.m, pid)
		}
	}
}

// runError is what a step of VM name that srun could not run answers:
// the VM is gone when its allocation is and its node answers Slurm (the
// last look forgotten); else the agent failed, as a guest agent whose host
// is lost does: a node that stops answering ends its allocations, and
// what that does to the job is the daemon's to decide (its grace).
func (h *Host) runError(ctx context.Context, name string, err error) error {
	if errors.Is(err, ErrNoAllocation) {
		h.cs.changed()
		if n, nerr := h.nodeNow(ctx); nerr == nil && !n.Unreachable() {
			return fmt.Errorf("%w: %s on node %s: %v", hp.ErrNotFound, name, h.node, err)
		}
	}
	return fmt.Errorf("%w: %s on node %s: %v", hp.ErrGuestAgent, name, h.node, err)
}

// runShort runs a short shell script in the VM's allocation with input,
// and returns its output and exit code.
func (h *Host) runShort(ctx context.Context, name, script string, input []byte, args ...string) ([]byte, int, error) {
	j, err := h.allocation(ctx, name)
	if err != nil {
		return nil, 0, err
	}
	var out, errOut bytes.Buffer
	cmd := Command{Node: h.node, Argv: append([]string{"/bin/sh", "-c", script, "metasched"}, args...),
		Stdout: &out, Stderr: &errOut}
	if input != nil {
		cmd.Stdin = bytes.NewReader(input)
	}
	code, err := h.cs.c.Run(ctx, j.ID, cmd)
	if err != nil {
		return nil, 0, h.runError(ctx, name, err)
	}
	if code != 0 && code != exitNotFound {
		return nil, code, fmt.Errorf("slurm: %s on node %s: exit %d: %s", name, h.node, code, bytes.TrimSpace(errOut.Bytes()))
	}
	return out.Bytes(), code, nil
}

// exitNotFound is the exit code of the scripts below for a missing file.
const exitNotFound = 44

// WriteGuestFile replaces the file at path with data and gives it mode;
// its directory must exist.
func (h *Host) WriteGuestFile(ctx context.Context, name, path string, data []byte, mode os.FileMode) error {
	_, code, err := h.runShort(ctx, name,
		`[ -d "$(dirname -- "$1")" ] || exit 44; cat > "$1.metasched-tmp" && chmod "$2" "$1.metasched-tmp" && mv -f -- "$1.metasched-tmp" "$1"`,
		data, path, strconv.FormatUint(uint64(mode.Perm()), 8))
	if err == nil && code == exitNotFound {
		return fmt.Errorf("%w: %s: no directory %s's parent on node %s", hp.ErrNotFound, name, path, h.node)
	}
	return err
}

// ReadGuestFile reads at most max bytes of a file from offset.
func (h *Host) ReadGuestFile(ctx context.Context, name, path string, offset int64, max int) (hp.GuestFileChunk, error) {
	if offset < 0 || max < 0 {
		return hp.GuestFileChunk{}, fmt.Errorf("%w: offset and max must be >= 0", hp.ErrInvalid)
	}
	// One byte more than asked says whether the file goes on.
	out, code, err := h.runShort(ctx, name, `[ -f "$1" ] || exit 44; tail -c +"$2" -- "$1" | head -c "$3"`,
		nil, path, strconv.FormatInt(offset+1, 10), strconv.Itoa(max+1))
	if err != nil {
		return hp.GuestFileChunk{}, err
	}
	if code == exitNotFound {
		return hp.GuestFileChunk{}, fmt.Errorf("%w: %s: no file %s on node %s", hp.ErrNotFound, name, path, h.node)
	}
	if len(out) > max {
		return hp.GuestFileChunk{Data: out[:max]}, nil
	}
	return hp.GuestFileChunk{Data: out, EOF: true}, nil
}
