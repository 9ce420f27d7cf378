// Package slurmtest starts real Slurm clusters for tests: munged,
// slurmctld and a slurmd per node (Debian's build runs several on one
// machine), under a temporary directory, on ports the system gives, and
// stops them by PID. Each slurmd runs in a PID namespace of its own, so
// that the job steps it started end with it.
package slurmtest

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/metasched/metasched/hypervisorproxy/slurm"
)

// Binaries are the programs a cluster needs, from the Debian packages
// slurmctld, slurmd, slurm-client and munge (make test installs them).
var Binaries = []string{"/usr/sbin/munged", "/usr/sbin/slurmctld", "/usr/sbin/slurmd", "/usr/bin/unshare",
	"/usr/bin/sinfo", "/usr/bin/squeue", "/usr/bin/scontrol", "/usr/bin/salloc", "/usr/bin/srun", "/usr/bin/scancel"}

// Check says what is missing to start a cluster.
func Check() error {
	var missing []string
	for _, b := range Binaries {
		if _, err := os.Stat(b); err != nil {
			missing = append(missing, b)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("slurmtest: missing %s (the Debian packages slurmctld, slurmd, slurm-client and munge; make test-deps installs them)",
			strings.Join(missing, ", "))
	}
	if os.Geteuid() != 0 {
		return errors.New("slurmtest: a test cluster runs its daemons as root")
	}
	return nil
}

// NodeSpec is a node of the cluster.
type NodeSpec struct {
	Name      string
	CPUs      int // 0: 2
	MemoryMiB int // 0: 1000
}

// PartitionSpec is a partition of the cluster as slurm.conf gives it.
type PartitionSpec struct {
	Name    string
	Nodes   []string
	Default bool
}

// Spec is a cluster to start.
type Spec struct {
	Nodes      []NodeSpec
	Partitions []PartitionSpec
	// Network, when set, puts slurmctld and each slurmd in a network
	// namespace of its own, joined to a bridge with an address of its
	// own; else they all run on 127.0.0.1.
	Network *Network
}

// Network places a cluster's daemons on a bridge.
type Network struct {
	// Namespace is the network namespace (a name under /run/netns) that
	// holds Bridge.
	Namespace, Bridge string
	// Addresses are slurmctld's, then one per node, with their prefix
	// length.
	Addresses []netip.Prefix
}

// Cluster is a running test cluster.
type Cluster struct {
	*slurm.Cluster
	Dir  string
	spec Spec
	// netns are the network namespaces made for the daemons (Network),
	// by daemon: "ctld" and the nodes.
	netns map[string]string

	mu    sync.Mutex
	ctld  *proc
	nodes map[string]*proc
	munge *proc
}

type proc struct {
	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

func start(log string, argv ...string) (*proc, error) {
	name, args := argv[0], argv[1:]
	f, err := os.OpenFile(log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	cmd := exec.Command(name, args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &proc{cmd: cmd, done: make(chan struct{})}
	go func() { p.err = cmd.Wait(); close(p.done) }()
	return p, nil
}

// stop ends the process by its PID: SIGTERM to its group, then SIGKILL
// after grace.
func (p *proc) stop(grace time.Duration) {
	if p == nil {
		return
	}
	select {
	case <-p.done:
		return
	default:
	}
	// Its process group: a slurmd's is unshare, the namespace's bash
	// (which, as its namespace's first process, takes no SIGTERM) and
	// slurmd itself, whose end ends the others.
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

func freePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// Start starts a cluster under dir and waits until every node is idle.
func Start(ctx context.Context, dir string, spec Spec) (*Cluster, error) {
	if err := Check(); err != nil {
		return nil, err
	}
	if n := spec.Network; n != nil && len(n.Addresses) != 1+len(spec.Nodes) {
		return nil, fmt.Errorf("slurmtest: network: %d addresses for slurmctld and %d nodes", len(n.Addresses), len(spec.Nodes))
	}
	c := &Cluster{Dir: dir, spec: spec, nodes: map[string]*proc{}, netns: map[string]string{}}
	c.Cluster = &slurm.Cluster{Conf: filepath.Join(dir, "slurm.conf"), Timeout: 20 * time.Second}
	if err := c.start(ctx); err != nil {
		c.Stop()
		return nil, err
	}
	return c, nil
}

func (c *Cluster) start(ctx context.Context) error {
	dir := c.Dir
	for _, d := range []string{"munge", "munge/key", "state", "log", "spool"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o700); err != nil {
			return err
		}
	}
	// munged wants its socket's directory open to all, and its key private.
	if err := os.Chmod(filepath.Join(dir, "munge"), 0o755); err != nil {
		return err
	}
	key := make([]byte, 1024)
	rand.Read(key)
	keyFile := filepath.Join(dir, "munge/key/munge.key")
	if err := os.WriteFile(keyFile, key, 0o600); err != nil {
		return err
	}
	sock := filepath.Join(dir, "munge/socket")
	var err error
	c.munge, err = start(filepath.Join(dir, "log/munged.log"), "/usr/sbin/munged", "--foreground", "--force",
		"--socket="+sock, "--key-file="+keyFile, "--log-file="+filepath.Join(dir, "log/munged.log"),
		"--pid-file="+filepath.Join(dir, "munge/munged.pid"), "--seed-file="+filepath.Join(dir, "munge/seed"))
	if err != nil {
		return fmt.Errorf("slurmtest: munged: %w", err)
	}
	if err := waitFile(ctx, sock, c.munge); err != nil {
		return fmt.Errorf("slurmtest: munged: %w", err)
	}
	if err := c.makeNetwork(ctx); err != nil {
		return err
	}
	ports, err := freePorts(1 + len(c.spec.Nodes))
	if err != nil {
		return err
	}
	if err := os.WriteFile(c.Conf, []byte(c.conf(ports, sock)), 0o644); err != nil {
		return err
	}
	if err := c.startController(false); err != nil {
		return err
	}
	for _, n := range c.spec.Nodes {
		if err := os.MkdirAll(filepath.Join(dir, "spool", n.Name), 0o700); err != nil {
			return err
		}
		if err := c.startNode(n.Name); err != nil {
			return err
		}
	}
	return c.WaitIdle(ctx, time.Minute)
}

// startNode starts the node's slurmd.
func (c *Cluster) startNode(name string) error {
	// slurmd runs in a PID namespace of its own, so that every job step
	// it started ends with it. The namespace's first process is bash,
	// which reaps the orphans a step leaves (the init of a real node
	// does; a zombie left would keep its step's process group alive, and
	// Slurm drains the node: "Kill task failed").
	p, err := start(filepath.Join(c.Dir, "log/slurmd-"+name+".out"), c.in(name, "/usr/bin/unshare", "--pid", "--fork", "--kill-child",
		"/bin/bash", "-c", `"$@" & c=$!; while kill -0 "$c" 2>/dev/null; do wait "$c"; done`, "slurmd-init",
		"/usr/sbin/slurmd", "-D", "-N", name, "-f", c.Conf)...)
	if err != nil {
		return fmt.Errorf("slurmtest: slurmd %s: %w", name, err)
	}
	c.mu.Lock()
	c.nodes[name] = p
	c.mu.Unlock()
	return nil
}

// conf is the cluster's slurm.conf.
func (c *Cluster) conf(ports []int, sock string) string {
	addr := func(i int) string { // daemon i: slurmctld, then the nodes
		if c.spec.Network == nil {
			return "127.0.0.1"
		}
		return c.spec.Network.Addresses[i].Addr().String()
	}
	d := c.Dir
	var b strings.Builder
	fmt.Fprintf(&b, `ClusterName=test
SlurmctldHost=localhost(`+addr(0)+`)
SlurmctldPort=%d
AuthType=auth/munge
AuthInfo=socket=%s
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation=%s/state
SlurmdSpoolDir=%s/spool/%%n
SlurmctldPidFile=%s/slurmctld.pid
SlurmdPidFile=%s/spool/%%n/slurmd.pid
SlurmctldLogFile=%s/log/slurmctld.log
SlurmdLogFile=%s/log/slurmd-%%n.log
ProctrackType=proctrack/pgid
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
MpiDefault=none
SlurmctldTimeout=10
SlurmdTimeout=10
InactiveLimit=0
MinJobAge=2
KillWait=2
UnkillableStepTimeout=5
`, ports[0], sock, d, d, d, d, d, d)
	for i, n := range c.spec.Nodes {
		cpus, mem := n.CPUs, n.MemoryMiB
		if cpus == 0 {
			cpus = 2
		}
		if mem == 0 {
			mem = 1000
		}
		fmt.Fprintf(&b, "NodeName=%s NodeHostname=localhost NodeAddr=%s Port=%d CPUs=%d RealMemory=%d State=UNKNOWN\n",
			n.Name, addr(1+i), ports[1+i], cpus, mem)
	}
	for _, p := range c.spec.Partitions {
		def := "NO"
		if p.Default {
			def = "YES"
		}
		nodes := strings.Join(p.Nodes, ",")
		if nodes == "" {
			nodes = `""`
		}
		fmt.Fprintf(&b, "PartitionName=%s Nodes=%s Default=%s MaxTime=INFINITE State=UP\n", p.Name, nodes, def)
	}
	return b.String()
}

func (c *Cluster) startController(keep bool) error {
	args := []string{"-D", "-i", "-f", c.Conf}
	if keep {
		args = append(args, "-R")
	}
	p, err := start(filepath.Join(c.Dir, "log/slurmctld.out"), c.in("ctld", append([]string{"/usr/sbin/slurmctld"}, args...)...)...)
	if err != nil {
		return fmt.Errorf("slurmtest: slurmctld: %w", err)
	}
	c.mu.Lock()
	c.ctld = p
	c.mu.Unlock()
	return nil
}

// StopController stops slurmctld by its PID.
func (c *Cluster) StopController() {
	c.mu.Lock()
	p := c.ctld
	c.mu.Unlock()
	p.stop(10 * time.Second)
}

// RestartController stops slurmctld and starts it again: with keep
// (slurmctld -R) it recovers the partitions as they were changed at run
// time; without, from slurm.conf.
func (c *Cluster) RestartController(ctx context.Context, keep bool) error {
	c.StopController()
	if err := c.startController(keep); err != nil {
		return err
	}
	return c.waitAnswer(ctx, time.Minute)
}

// StopNode stops the node's slurmd (and so its job steps) by its PID.
func (c *Cluster) StopNode(name string) {
	c.mu.Lock()
	p := c.nodes[name]
	c.mu.Unlock()
	p.stop(10 * time.Second)
}

// StartNode starts a stopped node's slurmd again: Slurm returns the node
// to service when it registers (ReturnToService=2).
func (c *Cluster) StartNode(name string) error {
	c.mu.Lock()
	p := c.nodes[name]
	c.mu.Unlock()
	if p != nil {
		select {
		case <-p.done:
		default:
			return fmt.Errorf("slurmtest: slurmd %s runs", name)
		}
	}
	return c.startNode(name)
}

// waitAnswer waits until the controller answers.
func (c *Cluster) waitAnswer(ctx context.Context, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		_, err := c.Nodes(ctx)
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("slurmtest: the controller does not answer after %s: %w\n%s", limit, err, c.logs())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// WaitIdle waits until every node is up and idle.
func (c *Cluster) WaitIdle(ctx context.Context, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	var last string
	for {
		nodes, err := c.Nodes(ctx)
		if err == nil && len(nodes) == len(c.spec.Nodes) {
			idle := 0
			for _, n := range nodes {
				if n.State == "idle" && !n.Down() {
					idle++
				}
			}
			if idle == len(nodes) {
				return nil
			}
			last = fmt.Sprintf("%d of %d nodes idle: %+v", idle, len(nodes), nodes)
		} else if err != nil {
			last = err.Error()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("slurmtest: nodes not idle after %s: %s\n%s", limit, last, c.logs())
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// logs is the tail of the daemons' logs, for an error.
func (c *Cluster) logs() string {
	var b bytes.Buffer
	files, _ := filepath.Glob(filepath.Join(c.Dir, "log", "*"))
	for _, f := range files {
		data, _ := os.ReadFile(f)
		if len(data) > 2000 {
			data = data[len(data)-2000:]
		}
		fmt.Fprintf(&b, "--- %s\n%s\n", filepath.Base(f), data)
	}
	return b.String()
}

// PIDs are the PIDs of the cluster's daemons still running.
func (c *Cluster) PIDs() []int {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []int
	for _, p := range append([]*proc{c.munge, c.ctld}, mapValues(c.nodes)...) {
		if p == nil {
			continue
		}
		select {
		case <-p.done:
		default:
			out = append(out, p.cmd.Process.Pid)
		}
	}
	return out
}

func mapValues(m map[string]*proc) []*proc {
	var out []*proc
	for _, p := range m {
		out = append(out, p)
	}
	return out
}

// Stop cancels every job, then stops every daemon by its PID: the
// slurmds (their PID namespaces take the job steps with them), slurmctld,
// munged.
func (c *Cluster) Stop() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if jobs, err := c.Jobs(ctx); err == nil {
		for _, j := range jobs {
			_ = c.Release(ctx, j.ID)
		}
	}
	c.mu.Lock()
	nodes := mapValues(c.nodes)
	ctld, munge := c.ctld, c.munge
	c.mu.Unlock()
	var wg sync.WaitGroup
	for _, p := range nodes {
		wg.Go(func() { p.stop(10 * time.Second) })
	}
	wg.Wait()
	ctld.stop(10 * time.Second)
	munge.stop(10 * time.Second)
	c.removeNetwork()
}

// StartT starts a cluster under the test's temporary directory, stopped
// at the test's end; a cluster that cannot start fails the test.
func StartT(t testing.TB, spec Spec) *Cluster {
	t.Helper()
	c, err := Start(t.Context(), t.TempDir(), spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	return c
}

// waitFile waits until path exists, or the process ends.
func waitFile(ctx context.Context, path string, p *proc) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := os.Stat(path); err == nil {
			return nil
		}
		select {
		case <-p.done:
			return fmt.Errorf("ended before %s appeared: %v", path, p.err)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s did not appear in 30 s", path)
		}
	}
}

// Running lists the PIDs of the processes (not zombies) whose command
// line has word as an argument: how a test finds a job's process on a
// node, whose PID in its slurmd's namespace is not this one's.
func Running(word string) []string {
	var out []string
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		b, err := os.ReadFile(filepath.Join(d, "cmdline"))
		if err != nil || !slices.Contains(strings.Split(string(b), "\x00"), word) {
			continue
		}
		if st, _ := os.ReadFile(filepath.Join(d, "stat")); !strings.Contains(string(st), ") Z ") {
			out = append(out, filepath.Base(d))
		}
	}
	return out
}
