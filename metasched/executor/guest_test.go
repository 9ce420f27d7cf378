package executor_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/metasched/metasched/gramvm/taskfarm"
	hp "github.com/metasched/metasched/hypervisorproxy"
	"github.com/metasched/metasched/metasched/executor"
	"github.com/metasched/metasched/selection"
)

// fakeRunner is the contract's metasched-run for the host: the command runs
// in a session of its own (its PID in DIR/pid leads its process group),
// its output, capped, goes to DIR/output, and its exit status to DIR/exit
// once the output is complete.
const fakeRunner = `#!/bin/sh
set -e
case $1 in
start)
	dir=$2 work=$3 max=$4
	mkdir -p "$dir" "$work"
	[ -f "$dir/pid" ] && exit 0
	rm -f "$dir/fifo"; mkfifo "$dir/fifo"
	(
		cd "$work"
		{ dd bs=1 count="$max" status=none; cat >/dev/null; } <"$dir/fifo" >"$dir/output" &
		reader=$!
		setsid sh -c "$(cat "$dir/command")" </dev/null >"$dir/fifo" 2>&1 &
		pid=$!
		echo "$pid" >"$dir/pid.tmp"; mv "$dir/pid.tmp" "$dir/pid"
		set +e
		wait "$pid"; code=$?
		wait "$reader"
		echo "$code" >"$dir/exit.tmp"; mv "$dir/exit.tmp" "$dir/exit"
	) </dev/null >/dev/null 2>&1 &
	while [ ! -f "$dir/pid" ]; do sleep 0.01; done
	;;
stop)
	dir=$2
	[ -f "$dir/pid" ] || exit 0
	pg=$(cat "$dir/pid")
	kill -TERM "-$pg" 2>/dev/null || exit 0
	( sleep 5; kill -KILL "-$pg" 2>/dev/null ) </dev/null >/dev/null 2>&1 &
	;;
esac
`

// fakeGuests plays the guest API of the agents of every VM of a test: a
// VM's guest paths are under root/VM on the host, and its programs run on
// the host with their absolute arguments mapped there (the runner is
// fakeRunner). The command sees GUEST_ROOT, the root of its VM.
type fakeGuests struct {
	root   string
	runner string

	mu    sync.Mutex
	procs map[int]*fakeProc
	next  int
	fail  map[string]error // per VM: every call fails with it
	execs []string         // "VM PATH ARGS..." of every GuestExec
}

type fakeProc struct {
	done   chan struct{}
	status hp.GuestExecStatus
}

func newFakeGuests(t *testing.T, vms []executor.VM) *fakeGuests {
	t.Helper()
	root := t.TempDir()
	f := &fakeGuests{root: root, runner: filepath.Join(root, "metasched-run"), procs: map[int]*fakeProc{}, fail: map[string]error{}}
	if err := os.WriteFile(f.runner, []byte(fakeRunner), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, vm := range vms {
		if err := os.MkdirAll(filepath.Join(root, vm.Name, "etc"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(f.killAll)
	return f
}

func (f *fakeGuests) agents(string) (executor.GuestAgent, error) { return f, nil }

// vmRoot is where vm's guest paths are, or an error as an agent gives it.
func (f *fakeGuests) vmRoot(vm string) (string, error) {
	f.mu.Lock()
	err := f.fail[vm]
	f.mu.Unlock()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(f.root, vm)
	if _, err := os.Stat(dir); err != nil {
		return "", fmt.Errorf("vm %s: %w", vm, hp.ErrNotFound)
	}
	return dir, nil
}

func (f *fakeGuests) setFail(vm string, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fail[vm] = err
}

func (f *fakeGuests) GuestExec(ctx context.Context, vm string, e hp.GuestExec) (hp.GuestProcess, error) {
	root, err := f.vmRoot(vm)
	if err != nil {
		return hp.GuestProcess{}, err
	}
	prog, eargs := e.Path, e.Args
	switch {
	case prog == executor.GuestRunner:
		prog = f.runner
	case prog == "/bin/sh" && len(eargs) > 3 && strings.Contains(eargs[1], "runuser") && eargs[3] == executor.GuestRunnerCopy:
		// runuser -u USER -- sh RUNNER ARGS: the host has no job user;
		// the fake runner runs ARGS.
		prog, eargs = f.runner, eargs[4:]
	case prog == "/bin/chown":
		prog = "true" // the host has no job user
	}
	args := make([]string, len(eargs))
	for i, a := range eargs {
		if strings.HasPrefix(a, "/") {
			a = root + a
		}
		args[i] = a
	}
	cmd := exec.Command(prog, args...)
	cmd.Env = append(append([]string{}, e.Env...), "GUEST_ROOT="+root)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		return hp.GuestProcess{}, fmt.Errorf("guest-exec %s: %w", e.Path, err)
	}
	p := &fakeProc{done: make(chan struct{})}
	f.mu.Lock()
	f.next++
	pid := f.next
	f.procs[pid] = p
	f.execs = append(f.execs, strings.Join(append([]string{vm, e.Path}, e.Args...), " "))
	f.mu.Unlock()
	go func() {
		err := cmd.Wait()
		p.status = hp.GuestExecStatus{Exited: true, ExitCode: cmd.ProcessState.ExitCode()}
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
				p.status.Signal = int(ws.Signal())
			}
		}
		if e.CaptureOutput {
			p.status.Stdout, p.status.Stderr = stdout.Bytes(), stderr.Bytes()
		}
		close(p.done)
	}()
	return hp.GuestProcess{PID: pid}, nil
}

func (f *fakeGuests) GuestExecStatus(ctx context.Context, vm string, pid int) (hp.GuestExecStatus, error) {
	if _, err := f.vmRoot(vm); err != nil {
		return hp.GuestExecStatus{}, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	p := f.procs[pid]
	if p == nil {
		return hp.GuestExecStatus{}, fmt.Errorf("guest-exec-status: pid %d: %w", pid, hp.ErrInvalid)
	}
	select {
	case <-p.done:
		delete(f.procs, pid) // the guest agent forgets it
		return p.status, nil
	default:
		return hp.GuestExecStatus{}, nil
	}
}

func (f *fakeGuests) GuestWriteFile(ctx context.Context, vm, path string, data []byte, mode os.FileMode) error {
	root, err := f.vmRoot(vm)
	if err != nil {
		return err
	}
	return os.WriteFile(root+path, data, mode)
}

func (f *fakeGuests) GuestReadFile(ctx context.Context, vm, path string, offset int64, max int) (hp.GuestFileChunk, error) {
	root, err := f.vmRoot(vm)
	if err != nil {
		return hp.GuestFileChunk{}, err
	}
	file, err := os.Open(root + path)
	if errors.Is(err, os.ErrNotExist) {
		return hp.GuestFileChunk{}, fmt.Errorf("%s: %w", path, hp.ErrNotFound)
	}
	if err != nil {
		return hp.GuestFileChunk{}, err
	}
	defer file.Close() // read-only
	if max == 0 {
		max = hp.MaxGuestRead
	}
	buf := make([]byte, max)
	n, err := file.ReadAt(buf, offset)
	if err != nil && err != io.EOF {
		return hp.GuestFileChunk{}, err
	}
	fi, err := file.Stat()
	if err != nil {
		return hp.GuestFileChunk{}, err
	}
	return hp.GuestFileChunk{Data: buf[:n], EOF: offset+int64(n) >= fi.Size()}, nil
}

// pids are the process groups the runner started, per VM.
func (f *fakeGuests) pids() map[string]int {
	out := map[string]int{}
	matches, _ := filepath.Glob(filepath.Join(f.root, "*", "run", "metasched", "*", "*", "pid")) // its only error is a malformed pattern
	for _, m := range matches {
		data, err := os.ReadFile(m)
		if err != nil {
			continue
		}
		if pid, err := strconv.Atoi(strings.TrimSpace(string(data))); err == nil {
			vm, _, _ := strings.Cut(strings.TrimPrefix(m, f.root+"/"), "/")
			out[vm] = pid
		}
	}
	return out
}

func (f *fakeGuests) killAll() {
	for _, pg := range f.pids() {
		_ = syscall.Kill(-pg, syscall.SIGKILL) // best effort: a group already gone is what is wanted
	}
	// A killed command's runner then writes its exit file: wait for it
	// (a lost VM's, which no one stopped, too) before the directories go.
	pids, _ := filepath.Glob(filepath.Join(f.root, "*", "run", "metasched", "*", "*", "pid")) // its only error is a malformed pattern
	for _, pid := range pids {
		exit := filepath.Join(filepath.Dir(pid), "exit")
		for start := time.Now(); time.Since(start) < 10*time.Second; time.Sleep(10 * time.Millisecond) {
			if _, err := os.Stat(exit); err == nil {
				break
			}
		}
	}
}

// waitGone waits until the process group pg has no process left.
func waitGone(t *testing.T, vm string, pg int) {
	t.Helper()
	for start := time.Now(); syscall.Kill(-pg, 0) == nil; time.Sleep(10 * time.Millisecond) {
		if time.Since(start) > time.Minute {
			t.Fatalf("the command of %s (process group %d) still runs a minute after the run ended", vm, pg)
		}
	}
}

// guestVMs is a 3-VM job over two sites, the master first.
func guestVMs() []executor.VM {
	return []executor.VM{
		{Name: "j-1-m", Site: "spain", Host: "spain-1", Master: true, VCPUs: 2, Address: "10.77.1.10/16"},
		{Name: "j-1-w1", Site: "spain", Host: "spain-2", VCPUs: 1, Address: "10.77.1.11/16"},
		{Name: "j-1-w2", Site: "latam-a", Host: "latam-a-1", VCPUs: 4, Address: "10.77.2.12/16"},
	}
}

// guestScript runs its part per role: master or worker.
func guestRun(t *testing.T, master, worker string, out io.Writer) executor.Run {
	script := `case $METASCHED_ROLE in master) ` + master + ` ;; *) ` + worker + ` ;; esac`
	return executor.Run{JobID: "j-1", Job: &selection.Job{Name: "render", Tasks: 30, TaskOps: 123456789125, TaskBytes: 4096.5,
		Command: []string{"sh", "-c", script}},
		VMs: guestVMs(), Dir: t.TempDir(), Attempt: 1, Output: out}
}

func newGuest(t *testing.T, f *fakeGuests, opt executor.GuestOptions) *executor.Guest {
	t.Helper()
	opt.Agents = f.agents
	if opt.Poll == 0 {
		opt.Poll = 20 * time.Millisecond
	}
	g, err := executor.NewGuest(testLogger(t), opt)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// workersDone is a master's wait for the exit of every worker's command.
const workersDone = `for w in j-1-w1 j-1-w2; do while [ ! -f "$GUEST_ROOT/../$w/run/metasched/j-1/1/exit" ]; do sleep 0.02; done; done`

func TestGuestRunsInEveryVM(t *testing.T) {
	t.Parallel()
	f := newFakeGuests(t, guestVMs())
	out := newWatchWriter("")
	show := `echo "role=$METASCHED_ROLE rank=$METASCHED_RANK master=$METASCHED_MASTER job=$METASCHED_JOB_ID hostfile=$METASCHED_HOSTFILE"; ` +
		`echo "tasks=$METASCHED_TASKS ops=$METASCHED_TASK_OPS bytes=$METASCHED_TASK_BYTES"; printf 'no newline'`
	r := guestRun(t, workersDone+`; `+show, show, out)
	res, err := newGuest(t, f, executor.GuestOptions{}).Run(t.Context(), r)
	if err != nil {
		t.Fatal(err)
	}
	if res != (executor.Result{}) {
		t.Fatalf("result %+v, want done; log %q", res, out.String())
	}
	log := out.String()
	for _, want := range []string{
		"j-1-w1| role=worker rank=1 master=j-1-m job=j-1 hostfile=/etc/metasched/hostfile\n",
		"j-1-w2| role=worker rank=2 master=j-1-m job=j-1 hostfile=/etc/metasched/hostfile\n",
		"j-1-m| role=master rank=0 master=j-1-m job=j-1 hostfile=/etc/metasched/hostfile\n",
		"j-1-m| no newline\n", "j-1-w1| no newline\n", "j-1-w2| no newline\n",
		// task_ops and task_bytes as they parse back exactly
		"j-1-m| tasks=30 ops=1.23456789125e+11 bytes=4096.5\n", "j-1-w2| tasks=30 ops=1.23456789125e+11 bytes=4096.5\n",
		"[metasched: the command in j-1-w1 exited with status 0]\n",
	} {
		if !strings.Contains(log, want) {
			t.Errorf("the log has no %q:\n%s", want, log)
		}
	}
	wantFiles := map[string]string{
		"/etc/metasched/hostfile": "10.77.1.10 slots=2 # name=j-1-m site=spain role=master\n" +
			"10.77.1.11 slots=1 # name=j-1-w1 site=spain role=worker\n" +
			"10.77.2.12 slots=4 # name=j-1-w2 site=latam-a role=worker\n",
		"/etc/hosts": "127.0.0.1 localhost\n::1 localhost\n10.77.1.10 j-1-m\n10.77.1.11 j-1-w1\n10.77.2.12 j-1-w2\n",
	}
	for _, vm := range guestVMs() {
		for p, want := range wantFiles {
			got, err := os.ReadFile(filepath.Join(f.root, vm.Name, p))
			if err != nil || string(got) != want {
				t.Errorf("%s of %s: %q, %v; want %q", p, vm.Name, got, err, want)
			}
		}
	}
	// The job file is sh's: sourced, it gives the worker's variables.
	job := filepath.Join(f.root, "j-1-w2", executor.GuestJobFile)
	got, err := exec.Command("sh", "-c", `. "$1" && echo "$METASCHED_ROLE $METASCHED_RANK $METASCHED_MASTER_ADDRESS $METASCHED_JOB_NAME $METASCHED_TASK_OPS $METASCHED_TASK_BYTES"`, "sh", job).Output()
	if err != nil || string(got) != "worker 2 10.77.1.10 render 1.23456789125e+11 4096.5\n" {
		t.Errorf("the job file of j-1-w2 gives %q, %v", got, err)
	}
	// The workers start (together, in any order), the master last.
	var starts []string
	for _, e := range f.execs {
		if strings.Contains(e, executor.GuestRunner+" start") {
			starts = append(starts, strings.Fields(e)[0])
		}
	}
	if len(starts) != 3 || starts[2] != "j-1-m" || !slices.Contains(starts[:2], "j-1-w1") || !slices.Contains(starts[:2], "j-1-w2") {
		t.Errorf("runner started in %v, want the workers first, then the master", starts)
	}
}

// On a cloud image the command runs as the VM's job user, in its home,
// with the executor's copy of the runner; every VM holds the attempt's ssh
// key, authorizes it and knows the other VMs' host keys.
func TestGuestJobUser(t *testing.T) {
	t.Parallel()
	vms := guestVMs()
	for i := range vms {
		vms[i].User = "metasched"
	}
	f := newFakeGuests(t, vms)
	hostKey := map[string]string{}
	for _, vm := range vms[:2] { // j-1-w2 has no host key: left out
		hostKey[vm.Name] = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAI" + strings.Repeat(strconv.Itoa(len(vm.Name)), 20) + " root@" + vm.Name
		if err := os.MkdirAll(filepath.Join(f.root, vm.Name, "etc/ssh"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(f.root, vm.Name, "etc/ssh/ssh_host_ed25519_key.pub"), []byte(hostKey[vm.Name]+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out := newWatchWriter("")
	r := guestRun(t, workersDone+`; echo "home=$HOME pwd=$(pwd)"`, `echo "home=$HOME"`, out)
	r.VMs = vms
	res, err := newGuest(t, f, executor.GuestOptions{}).Run(t.Context(), r)
	if err != nil || res != (executor.Result{}) {
		t.Fatalf("run: %+v, %v; log %q", res, err, out.String())
	}
	if want := "j-1-m| home=/home/metasched pwd=" + f.root + "/j-1-m/home/metasched/j-1\n"; !strings.Contains(out.String(), want) {
		t.Errorf("the log has no %q:\n%s", want, out.String())
	}
	key, err := executor.AttemptSSHKey(r.Dir, r.Attempt, r.JobID)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(key.Authorized, "ssh-ed25519 ") || !strings.HasSuffix(key.Authorized, " metasched-job-j-1") {
		t.Errorf("the attempt's key: %q", key.Authorized)
	}
	known := "j-1-m,10.77.1.10 " + strings.Join(strings.Fields(hostKey["j-1-m"])[:2], " ") + "\n" +
		"j-1-w1,10.77.1.11 " + strings.Join(strings.Fields(hostKey["j-1-w1"])[:2], " ") + "\n"
	for _, vm := range vms {
		ssh := filepath.Join(f.root, vm.Name, "home/metasched/.ssh")
		for name, want := range map[string]string{"id_ed25519": string(key.Private), "authorized_keys": key.Authorized + "\n", "known_hosts": known} {
			got, err := os.ReadFile(filepath.Join(ssh, name))
			if err != nil || string(got) != want {
				t.Errorf("%s of %s: %q, %v; want %q", name, vm.Name, got, err, want)
			}
		}
		if fi, err := os.Stat(filepath.Join(ssh, "id_ed25519")); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("the private key of %s: %v, %v; want mode 0600", vm.Name, fi, err)
		}
		if fi, err := os.Stat(filepath.Join(f.root, vm.Name, executor.GuestRunnerCopy)); err != nil || fi.Mode().Perm() != 0o755 {
			t.Errorf("the runner's copy in %s: %v, %v", vm.Name, fi, err)
		}
	}
	var chowns, runusers int
	for _, e := range f.execs {
		if strings.Contains(e, "/bin/chown -R metasched: /home/metasched/.ssh /run/metasched/j-1/1 /home/metasched/j-1") {
			chowns++
		}
		if strings.Contains(e, `exec runuser -u "$0" -- /bin/sh "$@" metasched `+executor.GuestRunnerCopy+" start /run/metasched/j-1/1 /home/metasched/j-1 ") {
			runusers++
		}
	}
	if chowns != 3 || runusers != 3 {
		t.Errorf("%d chowns and %d starts as the job user, want 3 each:\n%s", chowns, runusers, strings.Join(f.execs, "\n"))
	}
	// The key is the attempt's: made once, the same when asked again.
	again, err := executor.AttemptSSHKey(r.Dir, r.Attempt, r.JobID)
	if err != nil || !bytes.Equal(again.Private, key.Private) {
		t.Errorf("the attempt's key changed: %v", err)
	}
	other, err := executor.AttemptSSHKey(r.Dir, r.Attempt+1, r.JobID)
	if err != nil || bytes.Equal(other.Private, key.Private) {
		t.Errorf("the next attempt has the same key: %v", err)
	}
}

func TestGuestMasterExitDecidesAndStopsWorkers(t *testing.T) {
	t.Parallel()
	f := newFakeGuests(t, guestVMs())
	out := newWatchWriter("")
	r := guestRun(t, `while [ ! -f "$GUEST_ROOT/../j-1-w2/run/metasched/j-1/1/exit" ]; do sleep 0.02; done; echo failing; exit 3`,
		`if [ "$METASCHED_RANK" = 2 ]; then exit 0; fi; echo waiting; exec sleep 600`, out)
	res, err := newGuest(t, f, executor.GuestOptions{}).Run(t.Context(), r)
	if err != nil {
		t.Fatal(err)
	}
	want := executor.Result{ExitCode: 3, Reason: "exit status 3 in the master VM j-1-m"}
	if res != want {
		t.Fatalf("result %+v, want %+v; log %q", res, want, out.String())
	}
	if !strings.Contains(out.String(), "j-1-m| failing\n") {
		t.Errorf("log %q has not the master's line", out.String())
	}
	pids := f.pids()
	waitGone(t, "j-1-w1", pids["j-1-w1"])
}

func TestGuestCancelStopsEveryVM(t *testing.T) {
	t.Parallel()
	f := newFakeGuests(t, guestVMs())
	out := newWatchWriter("j-1-w2| ready")
	r := guestRun(t, `echo ready; exec sleep 600`, `echo ready; exec sleep 600`, out)
	ctx, cancel := context.WithCancel(t.Context())
	done := startRun(t, ctx, newGuest(t, f, executor.GuestOptions{}), r, out)
	cancel()
	rr := waitRun(t, done)
	if !errors.Is(rr.err, context.Canceled) {
		t.Fatalf("Run after cancel: %+v, %v; want context.Canceled", rr.res, rr.err)
	}
	pids := f.pids()
	if len(pids) != 3 {
		t.Fatalf("runner pids %v, want one per VM", pids)
	}
	for vm, pg := range pids {
		waitGone(t, vm, pg)
	}
}

func TestGuestResumeFollowsWithoutRestart(t *testing.T) {
	t.Parallel()
	f := newFakeGuests(t, guestVMs())
	gate := filepath.Join(t.TempDir(), "go")
	master := `echo started >>"$GUEST_ROOT/../starts"; echo one; echo two; while [ ! -f ` + gate + ` ]; do sleep 0.02; done; echo three; exit 5`
	out1 := newWatchWriter("j-1-m| two")
	r := guestRun(t, master, `echo worker`, out1)
	g := newGuest(t, f, executor.GuestOptions{})
	ctx, detach := context.WithCancelCause(t.Context())
	done := startRun(t, ctx, g, r, out1)
	detach(executor.ErrDetached)
	if rr := waitRun(t, done); !errors.Is(rr.err, executor.ErrDetached) {
		t.Fatalf("detached Run: %+v, %v; want ErrDetached", rr.res, rr.err)
	}
	if err := syscall.Kill(-f.pids()["j-1-m"], 0); err != nil {
		t.Fatalf("the master's command does not run on after the detach: %v", err)
	}

	out2 := newWatchWriter("")
	r.Output, r.Resume, r.OutputFrom = out2, true, int64(len(out1.String())) // as the daemon gives it
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	res, err := g.Run(t.Context(), r)
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 5 {
		t.Fatalf("resumed result %+v, want exit 5; log %q", res, out2.String())
	}
	all := out1.String() + out2.String()
	for _, line := range []string{"j-1-m| one\n", "j-1-m| two\n", "j-1-m| three\n", "j-1-w1| worker\n", "j-1-w2| worker\n"} {
		if n := strings.Count(all, line); n != 1 {
			t.Errorf("%q is %d times in the logs of both runs, want once:\n%s----\n%s", line, n, out1.String(), out2.String())
		}
	}
	starts, err := os.ReadFile(filepath.Join(f.root, "starts"))
	if err != nil || string(starts) != "started\n" {
		t.Errorf("the master's command started %q times (%v), want once", starts, err)
	}
}

// crashWriter is a job's log in a daemon killed at the first write that
// holds mark: the guest executor's record is kept as it was on disk at
// that moment; the write is taken when took, and nothing after it.
type crashWriter struct {
	mark, state string
	took        bool
	crash       func()

	mu      sync.Mutex
	buf     bytes.Buffer
	crashed bool
	record  []byte // the record at the crash; nil when there was none
}

func (w *crashWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.crashed {
		return 0, errors.New("the daemon is dead")
	}
	if !strings.Contains(string(p), w.mark) {
		w.buf.Write(p)
		return len(p), nil
	}
	w.crashed = true
	w.record, _ = os.ReadFile(w.state) // none yet is a state too: the test compares the record
	w.crash()
	if !w.took {
		return 0, errors.New("the daemon is dead")
	}
	w.buf.Write(p)
	return len(p), nil
}

// TestGuestResumeAfterKill: a daemon killed as the log took the output of
// a poll, or just before, gives the log every line once after its
// restart: the executor records the text before the log takes it.
func TestGuestResumeAfterKill(t *testing.T) {
	t.Parallel()
	for _, took := range []bool{true, false} {
		t.Run(fmt.Sprintf("took=%v", took), func(t *testing.T) {
			t.Parallel()
			f := newFakeGuests(t, guestVMs())
			gate := filepath.Join(t.TempDir(), "go")
			master := `for i in 1 2 3 4 5 6 7 8; do echo line-$i; done; while [ ! -f ` + gate + ` ]; do sleep 0.02; done; echo last`
			ctx, detach := context.WithCancelCause(t.Context())
			r := guestRun(t, master, `echo worker`, nil)
			state := filepath.Join(executor.AttemptDir(r.Dir, r.Attempt), "guest-state.json")
			out1 := &crashWriter{mark: "line-", state: state, took: took, crash: func() { detach(executor.ErrDetached) }}
			r.Output = out1
			g := newGuest(t, f, executor.GuestOptions{})
			if _, err := g.Run(ctx, r); !errors.Is(err, executor.ErrDetached) {
				t.Fatalf("Run of the killed daemon: %v, want ErrDetached", err)
			}
			// The disk as the kill left it.
			if out1.record == nil {
				if err := os.Remove(state); err != nil && !errors.Is(err, os.ErrNotExist) {
					t.Fatal(err)
				}
			} else if err := os.WriteFile(state, out1.record, 0o644); err != nil {
				t.Fatal(err)
			}

			out2 := newWatchWriter("")
			r.Output, r.Resume, r.OutputFrom = out2, true, int64(out1.buf.Len())
			if err := os.WriteFile(gate, nil, 0o644); err != nil {
				t.Fatal(err)
			}
			if _, err := g.Run(t.Context(), r); err != nil {
				t.Fatal(err)
			}
			all := out1.buf.String() + out2.String()
			for _, line := range []string{"j-1-m| line-1\n", "j-1-m| line-5\n", "j-1-m| line-8\n", "j-1-m| last\n", "j-1-w1| worker\n", "j-1-w2| worker\n"} {
				if n := strings.Count(all, line); n != 1 {
					t.Errorf("%q is %d times in the logs before and after the kill, want once:\n%s----\n%s", line, n, out1.buf.String(), out2.String())
				}
			}
		})
	}
}

func TestGuestResumeLostMaster(t *testing.T) {
	t.Parallel()
	f := newFakeGuests(t, guestVMs())
	r := guestRun(t, `true`, `true`, nil)
	r.Resume = true
	_, err := newGuest(t, f, executor.GuestOptions{}).Run(t.Context(), r)
	if !errors.Is(err, executor.ErrLost) {
		t.Fatalf("Resume with no runner in the master: %v, want ErrLost", err)
	}
	if len(f.execs) != 0 {
		t.Errorf("Resume ran %v in the guests, want nothing", f.execs)
	}
}

func TestGuestAgentErrorNamesVM(t *testing.T) {
	t.Parallel()
	f := newFakeGuests(t, guestVMs())
	f.setFail("j-1-w2", fmt.Errorf("guest-ping: %w", hp.ErrGuestAgent))
	r := guestRun(t, `exec sleep 600`, `exec sleep 600`, nil)
	_, err := newGuest(t, f, executor.GuestOptions{RetryFor: 100 * time.Millisecond}).Run(t.Context(), r)
	if !errors.Is(err, hp.ErrGuestAgent) || !strings.Contains(err.Error(), "VM j-1-w2 on latam-a-1") {
		t.Fatalf("Run with j-1-w2's agent failing: %v; want ErrGuestAgent naming the VM", err)
	}
	// The worker started before the failure was stopped.
	pids := f.pids()
	if _, ok := pids["j-1-w1"]; !ok {
		t.Fatalf("j-1-w1 was not started: %v", pids)
	}
	waitGone(t, "j-1-w1", pids["j-1-w1"])
}

func TestGuestOutputCap(t *testing.T) {
	t.Parallel()
	f := newFakeGuests(t, guestVMs())
	out := newWatchWriter("")
	r := guestRun(t, `i=0; while [ $i -lt 500 ]; do echo "line $i"; i=$((i+1)); done`, `true`, out)
	res, err := newGuest(t, f, executor.GuestOptions{MaxOutput: 2048}).Run(t.Context(), r)
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("Run: %+v, %v", res, err)
	}
	log := out.String()
	if len(log) > 2048+300 || !strings.Contains(log, "reached its cap of 2048 bytes") {
		t.Fatalf("log of %d bytes with a cap of 2048:\n%s", len(log), log)
	}
}

func TestGuestBadAddress(t *testing.T) {
	t.Parallel()
	f := newFakeGuests(t, guestVMs())
	r := guestRun(t, `true`, `true`, nil)
	r.VMs[2].Address = ""
	_, err := newGuest(t, f, executor.GuestOptions{}).Run(t.Context(), r)
	if err == nil || !strings.Contains(err.Error(), `VM 2 (j-1-w2): address ""`) {
		t.Fatalf("Run with a VM without address: %v", err)
	}
	if len(f.execs) != 0 {
		t.Errorf("ran %v in the guests, want nothing", f.execs)
	}
}

// TestGuestInputsOutputs: the job's inputs are in every VM's working
// directory before the command starts; its outputs are copied out of the
// master VM into the attempt's outputs directory, a missing one noted in
// the log.
func TestGuestInputsOutputs(t *testing.T) {
	t.Parallel()
	f := newFakeGuests(t, guestVMs())
	out := newWatchWriter("")
	r := guestRun(t, `cat params.txt data/in.csv; mkdir -p sub; cp data/in.csv sub/copy.csv; cp data/in.bin bin.out; echo done >result.txt`,
		`cat params.txt`, out)
	r.Job.Inputs = []selection.InputFile{{Path: "params.txt", Content: "a=1\n"}, {Path: "data/in.csv", Content: "x,y\n1,2\n"},
		{Path: "data/in.bin", Data: []byte{0, 1, 0xfe, 0xff, '\n', 0}}}
	r.Job.Outputs = []string{"result.txt", "sub/copy.csv", "bin.out", "missing.txt"}
	res, err := newGuest(t, f, executor.GuestOptions{}).Run(t.Context(), r)
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("Run: %+v, %v; log %q", res, err, out.String())
	}
	log := out.String()
	for _, want := range []string{"j-1-m| a=1\n", "j-1-m| x,y\n", "j-1-m| 1,2\n", "j-1-w1| a=1\n", "j-1-w2| a=1\n",
		"[metasched: output missing.txt: no such file in j-1-m]\n"} {
		if !strings.Contains(log, want) {
			t.Errorf("the log has no %q:\n%s", want, log)
		}
	}
	odir := executor.OutputsDir(r.Dir, r.Attempt)
	for p, want := range map[string]string{"result.txt": "done\n", "sub/copy.csv": "x,y\n1,2\n", "bin.out": "\x00\x01\xfe\xff\n\x00"} {
		got, err := os.ReadFile(filepath.Join(odir, p))
		if err != nil || string(got) != want {
			t.Errorf("output %s: %q, %v; want %q", p, got, err, want)
		}
	}
	if _, err := os.Stat(filepath.Join(odir, "missing.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing.txt in the outputs: %v", err)
	}
}

// TestGuestCopiesTaskFarmSummary: a task-farm summary the master wrote is
// copied out like an output, though the job file does not list it; a
// master that wrote none leaves nothing and no note.
func TestGuestCopiesTaskFarmSummary(t *testing.T) {
	t.Parallel()
	const summary = `{"tasks":3,"done":3}`
	for _, wrote := range []bool{true, false} {
		f := newFakeGuests(t, guestVMs())
		out := newWatchWriter("")
		master := "echo master"
		if wrote {
			master = "echo '" + summary + "' >" + taskfarm.SummaryFile
		}
		r := guestRun(t, master, "echo worker", out)
		r.Job.Outputs = []string{"result.txt"}
		res, err := newGuest(t, f, executor.GuestOptions{}).Run(t.Context(), r)
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("Run: %+v, %v; log %q", res, err, out.String())
		}
		got, err := os.ReadFile(filepath.Join(executor.OutputsDir(r.Dir, r.Attempt), taskfarm.SummaryFile))
		switch {
		case wrote && (err != nil || string(got) != summary+"\n"):
			t.Errorf("the summary copied: %q, %v; want %q", got, err, summary+"\n")
		case !wrote && !errors.Is(err, os.ErrNotExist):
			t.Errorf("a master without a summary: %q, %v", got, err)
		}
		if log := out.String(); strings.Contains(log, taskfarm.SummaryFile) || !strings.Contains(log, "output result.txt: no such file") {
			t.Errorf("summary written %t, the log:\n%s", wrote, log)
		}
	}
}

// lostVMs is what the daemon answers to Run.Lost: the workers the job
// lost, set by the test.
type lostVMs struct {
	mu   sync.Mutex
	vms  map[string]string
	asks int
}

func (l *lostVMs) lose(vm, why string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.vms == nil {
		l.vms = map[string]string{}
	}
	l.vms[vm] = why
}

func (l *lostVMs) get() map[string]string {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.asks++
	out := map[string]string{}
	for k, v := range l.vms {
		out[k] = v
	}
	return out
}

// TestGuestLostWorker: a worker VM the job loses while it runs (its host
// switched away: the VM is destroyed, so its agent's calls fail from
// then on) is no longer followed nor stopped; what it printed before
// stays in the log, a line says it was lost, the other VMs go on, and the
// master's exit decides. (Before, the run failed once the lost VM's agent
// had failed for RetryFor, naming the VM.)
func TestGuestLostWorker(t *testing.T) {
	t.Parallel()
	f := newFakeGuests(t, guestVMs())
	gate := filepath.Join(t.TempDir(), "go")
	out := newWatchWriter("j-1-w2| before")
	r := guestRun(t, `echo started; while [ ! -f `+gate+` ]; do sleep 0.02; done; echo "master done"; exit 0`,
		`echo before; exec sleep 600`, out)
	var lost lostVMs
	r.Lost = lost.get
	done := startRun(t, t.Context(), newGuest(t, f, executor.GuestOptions{RetryFor: 100 * time.Millisecond}), r, out)
	const why = "host latam-a-1 switched from pool render by s-000004"
	lost.lose("j-1-w2", why)
	f.setFail("j-1-w2", fmt.Errorf("guest-ping: %w", hp.ErrGuestAgent))
	// The run goes on past RetryFor of the lost VM's failures.
	time.Sleep(300 * time.Millisecond)
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	rr := waitRun(t, done)
	if rr.err != nil || rr.res != (executor.Result{}) {
		t.Fatalf("Run after a worker was lost: %+v, %v; want the master's exit 0; log:\n%s", rr.res, rr.err, out.String())
	}
	log := out.String()
	note := "[metasched: worker VM j-1-w2 lost (" + why + "): the job goes on without it]\n"
	for _, want := range []string{"j-1-w2| before\n", "j-1-w1| before\n", "j-1-m| master done\n", note} {
		if !strings.Contains(log, want) {
			t.Errorf("the log has no %q:\n%s", want, log)
		}
	}
	if n := strings.Count(log, "worker VM j-1-w2 lost"); n != 1 {
		t.Errorf("the loss is noted %d times, want once:\n%s", n, log)
	}
	if after := log[strings.Index(log, note):]; strings.Contains(after, "j-1-w2|") {
		t.Errorf("output of the lost VM after its loss:\n%s", log)
	}
	f.mu.Lock()
	execs := slices.Clone(f.execs)
	f.mu.Unlock()
	stopped := map[string]bool{}
	for _, e := range execs {
		if strings.Contains(e, executor.GuestRunner+" stop") {
			stopped[strings.Fields(e)[0]] = true
		}
	}
	if !stopped["j-1-w1"] || stopped["j-1-w2"] {
		t.Errorf("stopped %v at the master's end, want j-1-w1 and not the lost j-1-w2", stopped)
	}
	// The attempt's record keeps the loss: a restarted daemon does not
	// note it again.
	data, err := os.ReadFile(filepath.Join(executor.AttemptDir(r.Dir, 1), "guest-state.json"))
	if err != nil || !strings.Contains(string(data), `"lost":{"j-1-w2":"`+why+`"}`) {
		t.Errorf("guest-state.json %s, %v: want the lost VM", data, err)
	}
}

// TestGuestResumeAfterLostWorker: the daemon restarted after the job
// lost a worker (its VMs no longer list it): the resumed run follows the
// VMs left, notes the loss once, and ends with the master's exit.
func TestGuestResumeAfterLostWorker(t *testing.T) {
	t.Parallel()
	f := newFakeGuests(t, guestVMs())
	gate := filepath.Join(t.TempDir(), "go")
	out1 := newWatchWriter("j-1-w2| before")
	r := guestRun(t, `echo started; while [ ! -f `+gate+` ]; do sleep 0.02; done; exit 4`, `echo before; exec sleep 600`, out1)
	g := newGuest(t, f, executor.GuestOptions{})
	ctx, detach := context.WithCancelCause(t.Context())
	done := startRun(t, ctx, g, r, out1)
	detach(executor.ErrDetached)
	if rr := waitRun(t, done); !errors.Is(rr.err, executor.ErrDetached) {
		t.Fatalf("detached Run: %+v, %v; want ErrDetached", rr.res, rr.err)
	}
	// While the daemon is down, the job loses j-1-w2: the record no
	// longer lists it, and its VM is gone.
	var lost lostVMs
	lost.lose("j-1-w2", "host latam-a-1 unreachable for 1m0s or more")
	f.setFail("j-1-w2", fmt.Errorf("vm j-1-w2: %w", hp.ErrNotFound))
	out2 := newWatchWriter("")
	r.VMs, r.Output, r.Resume, r.Lost, r.OutputFrom = r.VMs[:2], out2, true, lost.get, int64(len(out1.String()))
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	res, err := g.Run(t.Context(), r)
	if err != nil || res.ExitCode != 4 {
		t.Fatalf("resumed Run: %+v, %v; want the master's exit 4; log %q", res, err, out2.String())
	}
	if n := strings.Count(out1.String()+out2.String(), "[metasched: worker VM j-1-w2 lost (host latam-a-1 unreachable for 1m0s or more)"); n != 1 {
		t.Errorf("the loss is noted %d times in the logs, want once:\n%s----\n%s", n, out1.String(), out2.String())
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, e := range f.execs {
		if strings.HasPrefix(e, "j-1-w2 ") && strings.Contains(e, " stop") {
			t.Errorf("the lost VM was stopped: %s", e)
		}
	}
}
