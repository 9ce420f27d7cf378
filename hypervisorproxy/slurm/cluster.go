package slurm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Cluster runs Slurm's client commands against one cluster.
type Cluster struct {
	// Conf is the cluster's slurm.conf (SLURM_CONF); it names the
	// controller and the munge socket. "": the commands' default.
	Conf string
	// Bin is the directory of sinfo, squeue, scontrol, salloc, srun and
	// scancel; "": /usr/bin.
	Bin string
	// Timeout bounds each command but srun (0: 30 s).
	Timeout time.Duration
}

// ErrCommand wraps every error of a Slurm command that ran and failed.
var ErrCommand = errors.New("slurm command failed")

// ErrNoAllocation: srun says the allocation it was to run in is gone
// (released, or ended by its time limit).
var ErrNoAllocation = errors.New("slurm: the allocation is gone")

// allocationGone are what srun says of an allocation that is gone
// (Slurm's ESLURM_INVALID_JOB_ID, ESLURM_ALREADY_DONE, and srun's own
// check of the job).
var allocationGone = []string{"Invalid job id specified", "already completing or completed", "has expired"}

func (c *Cluster) bin(name string) string {
	if c.Bin == "" {
		return filepath.Join("/usr/bin", name)
	}
	return filepath.Join(c.Bin, name)
}

// env is the environment of every command: SLURM_CONF and a fixed PATH,
// then extra.
func (c *Cluster) env(extra ...string) []string {
	env := []string{"PATH=/usr/local/bin:/usr/bin:/bin"}
	if c.Conf != "" {
		env = append(env, "SLURM_CONF="+c.Conf)
	}
	return append(env, extra...)
}

// run runs a client command under the cluster's timeout and returns its
// standard output.
func (c *Cluster) run(ctx context.Context, name string, args ...string) ([]byte, error) {
	out, _, err := c.run2(ctx, name, args...)
	return out, err
}

// run2 is run, with the command's standard error too.
func (c *Cluster) run2(ctx context.Context, name string, args ...string) (stdout, stderr []byte, err error) {
	t := c.Timeout
	if t <= 0 {
		t = 30 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, t)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.bin(name), args...)
	cmd.Env = c.env()
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(errOut.String())
		if ctx.Err() != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
			msg = fmt.Sprintf("no answer in %s (is the controller up?) %s", t, msg)
		}
		return nil, nil, fmt.Errorf("%w: %s %s: %v: %s", ErrCommand, name, strings.Join(args, " "), err, msg)
	}
	return out.Bytes(), errOut.Bytes(), nil
}

// Nodes lists the cluster's nodes.
func (c *Cluster) Nodes(ctx context.Context) ([]Node, error) {
	return readJSON(ctx, c, "sinfo", ParseNodes)
}

// Jobs lists the cluster's jobs, pending and running.
func (c *Cluster) Jobs(ctx context.Context) ([]Job, error) {
	return readJSON(ctx, c, "squeue", ParseJobs)
}

// readJSON runs a reading command with --json and decodes its document;
// a document that Slurm filled with an error comes with what the command
// said on its standard error (munge's complaint, say).
func readJSON[T any](ctx context.Context, c *Cluster, name string, parse func([]byte) (T, error)) (T, error) {
	out, errOut, err := c.run2(ctx, name, "--json")
	if err != nil {
		var zero T
		return zero, err
	}
	v, err := parse(out)
	if msg := strings.TrimSpace(string(errOut)); err != nil && msg != "" {
		err = fmt.Errorf("%w; %s said: %s", err, name, msg)
	}
	return v, err
}

// Drain stops the node taking new jobs; the jobs on it run on.
func (c *Cluster) Drain(ctx context.Context, node, reason string) error {
	if !hostName(node) {
		return fmt.Errorf("slurm: drain: %q is not a node name", node)
	}
	_, err := c.run(ctx, "scontrol", "update", "NodeName="+node, "State=DRAIN", "Reason="+reason)
	return err
}

// Resume returns a drained node to service.
func (c *Cluster) Resume(ctx context.Context, node string) error {
	if !hostName(node) {
		return fmt.Errorf("slurm: resume: %q is not a node name", node)
	}
	_, err := c.run(ctx, "scontrol", "update", "NodeName="+node, "State=RESUME")
	return err
}

// SetPartition makes the partition's nodes exactly nodes.
func (c *Cluster) SetPartition(ctx context.Context, partition string, nodes []string) error {
	if !hostName(partition) {
		return fmt.Errorf("slurm: set partition: %q is not a partition name", partition)
	}
	for _, n := range nodes {
		if !hostName(n) {
			return fmt.Errorf("slurm: set partition %s: %q is not a node name", partition, n)
		}
	}
	list := strings.Join(nodes, ",")
	if list == "" {
		list = `""`
	}
	_, err := c.run(ctx, "scontrol", "update", "PartitionName="+partition, "Nodes="+list)
	return err
}

// AllocSpec is an allocation to make.
type AllocSpec struct {
	Job       string   // metasched's job: the allocation is named AllocName(Job)
	Partition string   // the pool's partition
	Nodes     []string // the nodes planned
	// CPUs and MemoryMiB are what it takes of each node; 0 CPUs: each
	// node whole (--exclusive).
	CPUs, MemoryMiB int
	// Comment is the job's comment (no newline).
	Comment   string
	TimeLimit time.Duration
	// Wait bounds the wait for the nodes (0: the cluster's Timeout): an
	// allocation not granted by then is withdrawn.
	Wait time.Duration
}

// Allocate makes an allocation of whole nodes and returns it once
// granted.
func (c *Cluster) Allocate(ctx context.Context, s AllocSpec) (Job, error) {
	if s.Job == "" || strings.ContainsAny(s.Job, " \t\n,=") {
		return Job{}, fmt.Errorf("slurm: allocate: %q is not a job name", s.Job)
	}
	if !hostName(s.Partition) {
		return Job{}, fmt.Errorf("slurm: allocate %s: %q is not a partition name", s.Job, s.Partition)
	}
	if len(s.Nodes) == 0 {
		return Job{}, fmt.Errorf("slurm: allocate %s: no nodes", s.Job)
	}
	for _, n := range s.Nodes {
		if !hostName(n) {
			return Job{}, fmt.Errorf("slurm: allocate %s: %q is not a node name", s.Job, n)
		}
	}
	wait := s.Wait
	if wait <= 0 {
		wait = c.Timeout
	}
	if wait <= 0 {
		wait = 30 * time.Second
	}
	if strings.ContainsAny(s.Comment, "\n\r") {
		return Job{}, fmt.Errorf("slurm: allocate %s: the comment has a newline", s.Job)
	}
	args := []string{"--no-shell", "--job-name=" + AllocName(s.Job), "--partition=" + s.Partition,
		"--nodes=" + strconv.Itoa(len(s.Nodes)), "--nodelist=" + strings.Join(s.Nodes, ","),
		"--immediate=" + strconv.Itoa(max(1, int(wait.Seconds())))}
	if s.CPUs > 0 {
		args = append(args, "--ntasks-per-node=1", "--cpus-per-task="+strconv.Itoa(s.CPUs))
	} else {
		args = append(args, "--exclusive")
	}
	if s.MemoryMiB > 0 {
		args = append(args, "--mem="+strconv.Itoa(s.MemoryMiB))
	}
	if s.Comment != "" {
		args = append(args, "--comment="+s.Comment)
	}
	if s.TimeLimit > 0 {
		args = append(args, "--time="+strconv.Itoa(max(1, int((s.TimeLimit+time.Minute-1)/time.Minute))))
	}
	cl := *c
	cl.Timeout = wait + 30*time.Second
	_, errOut, err := cl.run2(ctx, "salloc", args...)
	if err != nil {
		return Job{}, err
	}
	id, ok := grantedID(errOut)
	if !ok {
		return Job{}, fmt.Errorf("%w: salloc for %s: no \"Granted job allocation\" in %q", ErrCommand, s.Job, errOut)
	}
	jobs, err := c.Jobs(ctx)
	if err != nil {
		return Job{ID: id}, err
	}
	for _, j := range jobs {
		if j.ID == id {
			return j, nil
		}
	}
	return Job{ID: id}, fmt.Errorf("slurm: allocate %s: allocation %d granted, but not in squeue", s.Job, id)
}

// grantedID finds salloc's "Granted job allocation N".
func grantedID(stderr []byte) (int, bool) {
	const granted = "Granted job allocation "
	for line := range strings.Lines(string(stderr)) {
		if _, rest, ok := strings.Cut(line, granted); ok {
			id, err := strconv.Atoi(strings.TrimSpace(rest))
			return id, err == nil && id > 0
		}
	}
	return 0, false
}

// Release cancels the allocation and every step in it.
func (c *Cluster) Release(ctx context.Context, id int) error {
	_, err := c.run(ctx, "scancel", strconv.Itoa(id))
	return err
}

// Command is a command to run on one node of an allocation.
type Command struct {
	Node string
	// Env is the command's whole environment besides Slurm's own
	// variables: nothing of the agent's is passed on.
	Env            []string
	Argv           []string
	Stdin          io.Reader // nil: no input
	Stdout, Stderr io.Writer
}

// Run runs a command on one node of allocation id through srun, as a
// step that overlaps the allocation's other steps (a look at a file while
// the job's command runs), and returns its exit code (an error when it
// could not be run).
func (c *Cluster) Run(ctx context.Context, id int, cmd Command) (int, error) {
	if !hostName(cmd.Node) {
		return -1, fmt.Errorf("slurm: run: %q is not a node name", cmd.Node)
	}
	if len(cmd.Argv) == 0 {
		return -1, errors.New("slurm: run: no command")
	}
	args := append([]string{"--jobid=" + strconv.Itoa(id), "--nodelist=" + cmd.Node, "--nodes=1", "--ntasks=1",
		"--overlap", "--export=ALL", "--quiet", "--"}, cmd.Argv...)
	x := exec.CommandContext(ctx, c.bin("srun"), args...)
	// The command's own PATH, if any, wins over the default (exec keeps
	// the last of a name); SLURM_CONF is always the cluster's.
	x.Env = c.env(slices.DeleteFunc(slices.Clone(cmd.Env), func(kv string) bool { return strings.HasPrefix(kv, "SLURM_CONF=") })...)
	if c.Conf != "" {
		x.Env = append(x.Env, "SLURM_CONF="+c.Conf)
	}
	x.Stdin, x.Stdout = cmd.Stdin, cmd.Stdout
	stderr := &exitLineFilter{w: cmd.Stderr, node: cmd.Node}
	if stderr.w == nil {
		stderr.w = io.Discard
	}
	x.Stderr = stderr
	// A process group of its own: srun, and so the step, outlive an
	// agent stopped by a signal to its group.
	x.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	err := x.Run()
	stderr.flush()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee) && ctx.Err() == nil && stderr.own != "":
		// srun's own error, not the program's exit: the step was not
		// launched, or was lost with its node.
		if slices.ContainsFunc(allocationGone, func(m string) bool { return strings.Contains(stderr.own, m) }) {
			return -1, fmt.Errorf("%w: run on %s in allocation %d: %s", ErrNoAllocation, cmd.Node, id, stderr.own)
		}
		return -1, fmt.Errorf("slurm: run on %s in allocation %d: %s", cmd.Node, id, stderr.own)
	case errors.As(err, &ee) && ctx.Err() == nil:
		return ee.ExitCode(), nil
	}
	if err != nil {
		return -1, fmt.Errorf("slurm: run on %s in allocation %d: %w", cmd.Node, id, err)
	}
	return 0, nil
}

// exitLineFilter passes a step's standard error on without the line srun
// adds when the task exits non-zero ("srun: error: NODE: task 0: Exited
// with exit code N"): the exit code is returned, and the program's own
// error output stays its own. It keeps the first error of srun's own
// (an "srun: error: " line not about the task: "Task launch for StepId=…
// failed on node …", "Unable to create step for job …", a node failure),
// which says that srun's exit status is not the program's.
type exitLineFilter struct {
	w       io.Writer
	node    string
	pending []byte
	own     string
}

func (f *exitLineFilter) Write(p []byte) (int, error) {
	f.pending = append(f.pending, p...)
	for {
		i := bytes.IndexByte(f.pending, '\n')
		if i < 0 {
			return len(p), nil
		}
		line := f.pending[:i+1]
		f.srunError(line)
		if !f.exitLine(line) {
			if _, err := f.w.Write(line); err != nil {
				return len(p), err
			}
		}
		f.pending = f.pending[i+1:]
	}
}

func (f *exitLineFilter) exitLine(line []byte) bool {
	rest, ok := bytes.CutPrefix(bytes.TrimSpace(line), []byte("srun: error: "+f.node+": task 0: Exited with exit code "))
	if !ok || len(rest) == 0 {
		return false
	}
	for _, c := range rest {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// srunError keeps line when it is the first error of srun's own.
func (f *exitLineFilter) srunError(line []byte) {
	rest, ok := bytes.CutPrefix(bytes.TrimSpace(line), []byte("srun: error: "))
	if !ok || f.own != "" || bytes.HasPrefix(rest, []byte(f.node+": task ")) {
		return
	}
	f.own = string(bytes.TrimSpace(line))
}

func (f *exitLineFilter) flush() {
	f.srunError(f.pending)
	if len(f.pending) > 0 && !f.exitLine(f.pending) {
		_, _ = f.w.Write(f.pending)
	}
	f.pending = nil
}
