package executor

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"net/netip"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/rs/zerolog"

	"github.com/metasched/metasched/gramvm/taskfarm"
	hp "github.com/metasched/metasched/hypervisorproxy"
	"github.com/metasched/metasched/hypervisorproxy/image"
	"github.com/metasched/metasched/selection"
)

// GuestAgent is what the guest executor needs of a site's agent: its
// guest API, which reaches a VM's QEMU guest agent.
type GuestAgent interface {
	GuestExec(ctx context.Context, vm string, e hp.GuestExec) (hp.GuestProcess, error)
	GuestExecStatus(ctx context.Context, vm string, pid int) (hp.GuestExecStatus, error)
	GuestWriteFile(ctx context.Context, vm, path string, data []byte, mode os.FileMode) error
	GuestReadFile(ctx context.Context, vm, path string, offset int64, max int) (hp.GuestFileChunk, error)
}

// The guest's side of a run (see the package documentation, "Guest").
const (
	// GuestRunner is the runner of the bundled guest image.
	GuestRunner = "/usr/bin/metasched-run"
	// GuestHostfile is the job's hostfile inside each VM.
	GuestHostfile = "/etc/metasched/hostfile"
	// GuestJobFile holds the METASCHED_ variables of the VM, for sh's ".".
	GuestJobFile = "/etc/metasched/job"
	// GuestHosts is the VM's name resolution.
	GuestHosts = "/etc/hosts"
	// GuestRunnerCopy is where the executor puts its own copy of the
	// runner in a VM of a cloud image, which need not have one.
	GuestRunnerCopy = "/run/metasched/metasched-run"
	// GuestNodeDir holds, on a Slurm node, a directory per allocation
	// of metasched's (by its VM name): the job's hostfile, variables,
	// runner, run directory and working directory there. The node is
	// shared (with Slurm's own jobs, and other allocations): nothing of
	// the node's own, such as /etc/hosts, is written.
	GuestNodeDir = "/tmp/metasched"
	// guestHostKey is the guest's ssh host key that the job's VMs are
	// told of (known_hosts): the Ed25519 one, which cloud-init makes.
	guestHostKey = "/etc/ssh/ssh_host_ed25519_key.pub"
	// guestPath is the environment's PATH of the job's command.
	guestPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
	// guestStateName is the daemon's record of a guest attempt, in the
	// attempt's directory: how far the log took each VM's output.
	guestStateName = "guest-state.json"
	// maxPendingLine bounds a line kept until its end comes: a longer one
	// goes to the log cut.
	maxPendingLine = 64 << 10
)

// NodeDir is the directory of VM vm's own on a Slurm node, under
// GuestNodeDir: what the executor (and the calibration) keep there.
func NodeDir(vm string) string { return path.Join(GuestNodeDir, vm) }

// Defaults of GuestOptions.
const (
	DefaultGuestPoll     = 500 * time.Millisecond
	DefaultGuestRetryFor = time.Minute
	// guestStopWait bounds the stop of a VM's process after a cancel.
	guestStopWait = 30 * time.Second
	// maxRetryPause is the longest pause between two tries of an agent.
	maxRetryPause = 5 * time.Second
)

// GuestDir is the runner's directory of an attempt inside a VM.
func GuestDir(jobID string, attempt int) string {
	return path.Join("/run/metasched", jobID, strconv.Itoa(attempt))
}

// GuestWorkDir is the working directory of the job's command inside a VM
// of the bundled image (the command runs as root).
func GuestWorkDir(jobID string) string { return path.Join("/root", jobID) }

// GuestHome is the home of a VM's job user (a cloud image's).
func GuestHome(user string) string { return path.Join("/home", user) }

// workDir is the working directory of the job's command in vm: in its job
// user's home on a cloud image, else root's.
func (run *guestRun) workDir(vm *guestVM) string {
	if vm.node() {
		return path.Join(NodeDir(vm.Name), "work")
	}
	if vm.User == "" {
		return GuestWorkDir(run.r.JobID)
	}
	return path.Join(GuestHome(vm.User), run.r.JobID)
}

// GuestOptions configures the guest executor.
type GuestOptions struct {
	// Agents finds the agent of a site; required.
	Agents func(site string) (GuestAgent, error)
	// Poll is how often the VMs' output and exit files are read; 0 means
	// DefaultGuestPoll.
	Poll time.Duration
	// MaxOutput and OutputRate bound the job's log as for Command: at most
	// MaxOutput bytes kept of an attempt's output (all VMs together; the
	// runner keeps at most as much of each VM's), read at most OutputRate
	// bytes per second (beyond a burst of 64 KiB). 0: the defaults.
	MaxOutput  int64
	OutputRate int64
	// RetryFor is how long a VM's agent may fail before the run fails; 0
	// means DefaultGuestRetryFor.
	RetryFor time.Duration
	// Clock is the clock of the polls and retries; nil is the real one.
	Clock clockwork.Clock
}

// Guest runs the job's command inside every VM of the job through the site
// agents' guest API, under the guest image's runner. It is safe for
// concurrent use.
type Guest struct {
	log zerolog.Logger
	opt GuestOptions
}

// NewGuest returns the guest executor.
func NewGuest(log zerolog.Logger, opt GuestOptions) (*Guest, error) {
	if opt.Agents == nil {
		return nil, errors.New("guest executor: no way to find the sites' agents")
	}
	if opt.Poll <= 0 {
		opt.Poll = DefaultGuestPoll
	}
	if opt.MaxOutput <= 0 {
		opt.MaxOutput = DefaultMaxOutput
	}
	if opt.OutputRate <= 0 {
		opt.OutputRate = DefaultOutputRate
	}
	if opt.RetryFor <= 0 {
		opt.RetryFor = DefaultGuestRetryFor
	}
	if opt.Clock == nil {
		opt.Clock = clockwork.NewRealClock()
	}
	return &Guest{log: log.With().Str("executor", "guest").Logger(), opt: opt}, nil
}

// Name returns "guest", the executor's name in the daemon's configuration.
func (g *Guest) Name() string { return "guest" }

// guestState is what the daemon keeps of a guest attempt, in
// Run.Dir/attempt-N/guest-state.json, written as the log takes output.
type guestState struct {
	// Offsets is, per VM, the bytes of its output file the log took
	// (up to the end of the last whole line).
	Offsets map[string]int64 `json:"offsets"`
	// Kept is the bytes written to the log; Capped says the cap note was.
	Kept   int64 `json:"kept"`
	Capped bool  `json:"capped,omitempty"`
	// Exited is, per VM, the exit status that was reported in the log.
	Exited map[string]int `json:"exited,omitempty"`
	// Lost is, per worker VM the job lost, why, once the log said so.
	Lost map[string]string `json:"lost,omitempty"`
	// Pending is the text last given to the log, ending at Kept, recorded
	// here before the log takes it: a daemon killed in between gives the
	// log, after its restart, the part of it that the log had not taken
	// (Run.OutputFrom), so that no line is lost or taken twice.
	Pending string `json:"pending,omitempty"`
}

// guestVM is one VM of a run as the executor follows it.
// node reports whether vm is an allocation on a Slurm node.
func (vm *guestVM) node() bool { return vm.Kind == hp.KindSlurm }

// dirOf is vm's run directory: the attempt's (GuestDir), or on a Slurm
// node one of the VM's own.
func (run *guestRun) dirOf(vm *guestVM) string {
	if vm.node() {
		return path.Join(NodeDir(vm.Name), "run")
	}
	return run.gdir
}

// hostfileOf and jobFileOf are where vm has the job's hostfile and its
// variables.
func (run *guestRun) hostfileOf(vm *guestVM) string {
	if vm.node() {
		return path.Join(NodeDir(vm.Name), "hostfile")
	}
	return GuestHostfile
}

func (run *guestRun) jobFileOf(vm *guestVM) string {
	if vm.node() {
		return path.Join(NodeDir(vm.Name), "job")
	}
	return GuestJobFile
}

type guestVM struct {
	VM
	rank    int
	agent   GuestAgent
	pending []byte // output read but not yet in the log: a line not ended
	eof     bool   // the last read reached the end of the output file
	exited  bool
	code    int
	// lost says the job lost the VM (Run.Lost): it is no longer
	// followed nor stopped.
	lost bool
}

// guestRun is one Run of the guest executor.
type guestRun struct {
	g     *Guest
	log   zerolog.Logger
	r     Run
	name  string
	adir  string
	gdir  string
	vms   []*guestVM
	st    guestState
	out   io.Writer
	dirty bool
	buf   []byte // text for the log not yet recorded as Pending

	tokens float64
	last   time.Time
}

// Run contextualizes every VM of r (fresh attempts only), starts the job's
// command in each of them under the runner (workers first, the master
// last), copies their output to r.Output line by line, each line prefixed
// with the VM's name, and returns the master's exit once it has ended
// (workers still running are stopped). With r.Resume it starts nothing and
// follows the runner's files; a master whose runner never started gives
// ErrLost. On cancel it stops the command in every VM and returns ctx's
// error wrapped (a cancel whose cause is ErrDetached leaves them running).
func (g *Guest) Run(ctx context.Context, r Run) (Result, error) {
	name := jobName(r)
	if err := ctx.Err(); err != nil {
		return Result{}, fmt.Errorf("job %s: %w", name, err)
	}
	if r.Job == nil {
		return Result{}, fmt.Errorf("job %s: no job file", name)
	}
	if len(r.Job.Command) == 0 {
		return Result{}, &noCommandError{job: name}
	}
	if r.Dir == "" {
		return Result{}, fmt.Errorf("job %s: no run directory for the guest executor's record", name)
	}
	if _, err := guestHostfile(r.VMs); err != nil {
		return Result{}, fmt.Errorf("job %s: hostfile: %w", name, err)
	}
	run := &guestRun{g: g, r: r, name: name, gdir: GuestDir(r.JobID, r.Attempt), out: output(r),
		log:    g.log.With().Str("job", r.JobID).Int("attempt", r.Attempt).Logger(),
		tokens: outputBurst, last: g.opt.Clock.Now()}
	run.adir = AttemptDir(r.Dir, r.Attempt)
	if err := os.MkdirAll(run.adir, 0o755); err != nil {
		return Result{}, fmt.Errorf("job %s: run directory: %w", name, err)
	}
	if err := run.loadState(); err != nil {
		return Result{}, fmt.Errorf("job %s: %w", name, err)
	}
	if r.Resume {
		run.givePending(r.OutputFrom)
	}
	for i, vm := range r.VMs {
		a, err := g.opt.Agents(vm.Site)
		if err != nil {
			return Result{}, fmt.Errorf("job %s: VM %s: the agent of site %s: %w", name, vm.Name, vm.Site, err)
		}
		gv := &guestVM{VM: vm, rank: i, agent: a}
		if code, ok := run.st.Exited[vm.Name]; ok {
			gv.exited, gv.code = true, code
		}
		_, gv.lost = run.st.Lost[vm.Name]
		run.vms = append(run.vms, gv)
	}
	run.checkLost()
	if r.Resume {
		if _, err := run.retry(ctx, run.vms[0], "read the runner's pid", func(ctx context.Context) error {
			_, err := run.vms[0].agent.GuestReadFile(ctx, run.vms[0].Name, path.Join(run.dirOf(run.vms[0]), "pid"), 0, 64)
			return err
		}); err != nil {
			if errors.Is(err, hp.ErrNotFound) {
				return Result{}, fmt.Errorf("job %s: attempt %d: the master VM %s has no runner: %w", name, r.Attempt, run.vms[0].Name, ErrLost)
			}
			return run.cancelled(ctx, err)
		}
		run.log.Info().Msg("resuming: following the runner in every VM")
	} else if err := run.start(ctx); err != nil {
		return run.cancelled(ctx, err)
	}
	return run.follow(ctx)
}

// cancelled is how Run ends on an error err: after a cancel, the processes
// are stopped (unless the daemon detaches) and ctx's error returned.
func (run *guestRun) cancelled(ctx context.Context, err error) (Result, error) {
	if ctx.Err() == nil {
		run.stopAll(ctx)
		return Result{}, fmt.Errorf("job %s: %w", run.name, err)
	}
	if errors.Is(context.Cause(ctx), ErrDetached) {
		run.log.Info().Msg("the daemon stops: the job runs on in its VMs")
		return Result{}, fmt.Errorf("job %s: %w", run.name, ErrDetached)
	}
	run.log.Info().Err(ctx.Err()).Msg("stopping the job in every VM")
	run.stopAll(ctx)
	run.saveState()
	return Result{}, fmt.Errorf("job %s: stopped: %w", run.name, ctx.Err())
}

// start contextualizes every VM and starts the command in each: the
// workers together, then the master.
func (run *guestRun) start(ctx context.Context) error {
	c := guestContext{hostfile: mustHostfile(run.r.VMs), hosts: guestHosts(run.r.VMs),
		command: []byte(shellJoin(run.r.Job.Command) + "\n"), maxBytes: strconv.FormatInt(run.g.opt.MaxOutput, 10)}
	if err := run.sshContext(ctx, &c); err != nil {
		return err
	}
	order := append(append([]*guestVM{}, run.vms[1:]...), run.vms[0])
	// The workers start at once, each through its own agent calls (a
	// guest under a CPU quota answers slowly: one after the other, their
	// starts would add up before the master's); the master starts last.
	workers, master := order[:len(order)-1], order[len(order)-1:]
	for _, group := range [][]*guestVM{workers, master} {
		run.checkLost()
		errs := make([]error, len(group))
		var wg sync.WaitGroup
		for i, vm := range group {
			if vm.lost {
				continue
			}
			wg.Go(func() { errs[i] = run.startVM(ctx, vm, &c) })
		}
		wg.Wait()
		for i, vm := range group {
			switch {
			case vm.lost:
			case errs[i] == nil:
				run.log.Info().Str("vm", vm.Name).Str("site", vm.Site).Msg("command started in the VM")
			case run.dropIfLost(vm, errs[i]):
				// a worker lost while the job starts: the others start
			default:
				return errs[i]
			}
		}
	}
	return nil
}

// guestContext is what every VM of an attempt is given.
type guestContext struct {
	hostfile, hosts, command []byte
	maxBytes                 string
	// For the VMs with a job user (a cloud image's): the attempt's ssh
	// key and the job's VMs' host keys.
	key        SSHKey
	knownHosts []byte
}

// mustHostfile is the hostfile of VMs that Run checked.
func mustHostfile(vms []VM) []byte {
	b, _ := guestHostfile(vms)
	return b
}

// sshContext makes what the VMs with a job user need to reach each other
// with ssh: the attempt's key (AttemptSSHKey: the one their seeds
// authorized) and the known_hosts of the job's VMs' host keys, by name
// and address, read from each VM (one without the key is left out: ssh
// to it asks, and fails in a job).
func (run *guestRun) sshContext(ctx context.Context, c *guestContext) error {
	users := false
	for _, vm := range run.vms {
		users = users || vm.User != ""
	}
	if !users {
		return nil
	}
	key, err := AttemptSSHKey(run.r.Dir, run.r.Attempt, run.r.JobID)
	if err != nil {
		return err
	}
	c.key = key
	lines := make([]string, len(run.vms))
	var wg sync.WaitGroup
	for i, vm := range run.vms {
		if vm.lost || vm.User == "" {
			continue
		}
		wg.Go(func() {
			var chunk hp.GuestFileChunk
			if _, err := run.retry(ctx, vm, "read "+guestHostKey, func(ctx context.Context) error {
				var err error
				chunk, err = vm.agent.GuestReadFile(ctx, vm.Name, guestHostKey, 0, 4096)
				return err
			}); err != nil {
				run.log.Warn().Err(err).Str("vm", vm.Name).Msg("no ssh host key: the job's other VMs do not know it")
				return
			}
			f := strings.Fields(string(chunk.Data))
			if len(f) < 2 {
				run.log.Warn().Str("vm", vm.Name).Msg("an ssh host key that is not one: the job's other VMs do not know it")
				return
			}
			addr, _ := netip.ParsePrefix(vm.Address)
			lines[i] = vm.Name + "," + addr.Addr().String() + " " + f[0] + " " + f[1] + "\n"
		})
	}
	wg.Wait()
	c.knownHosts = []byte(strings.Join(lines, ""))
	return nil
}

// startVM contextualizes vm and starts the command in it: as its job user
// (with the runner's copy, its ssh key and known hosts) on a cloud image,
// as root with the image's runner on the bundled one.
func (run *guestRun) startVM(ctx context.Context, vm *guestVM, c *guestContext) error {
	if vm.node() {
		return run.startNode(ctx, vm, c)
	}
	work := run.workDir(vm)
	dirs := []string{"-p", path.Dir(GuestHostfile), run.gdir, work}
	for _, in := range run.r.Job.Inputs {
		if d := path.Dir(in.Path); d != "." && !slices.Contains(dirs, path.Join(work, d)) {
			dirs = append(dirs, path.Join(work, d))
		}
	}
	files := []guestFile{
		{GuestHostfile, c.hostfile, 0o644},
		{GuestHosts, c.hosts, 0o644},
		{GuestJobFile, run.jobFile(vm), 0o644},
		{path.Join(run.gdir, "command"), c.command, 0o644},
	}
	var owned []string // what the job user is given
	if vm.User != "" {
		ssh := path.Join(GuestHome(vm.User), ".ssh")
		dirs = append(dirs, ssh)
		files = append(files,
			guestFile{path.Join(ssh, "id_ed25519"), c.key.Private, 0o600},
			guestFile{path.Join(ssh, "authorized_keys"), []byte(c.key.Authorized + "\n"), 0o600},
			guestFile{path.Join(ssh, "known_hosts"), c.knownHosts, 0o644},
			guestFile{GuestRunnerCopy, []byte(image.RunnerScript), 0o755})
		owned = []string{ssh, run.gdir, work}
	}
	if err := run.writeFiles(ctx, vm, dirs, files); err != nil {
		return err
	}
	args := []string{"start", run.gdir, work, c.maxBytes}
	start := hp.GuestExec{Path: GuestRunner, Args: args, Env: run.env(vm)}
	if vm.User != "" {
		if err := run.execOK(ctx, vm, "give the job user its files", hp.GuestExec{Path: "/bin/chown",
			Args: append([]string{"-R", vm.User + ":"}, owned...)}); err != nil {
			return err
		}
		// runuser (util-linux) as found on the command's PATH: sh finds it.
		start = hp.GuestExec{Path: "/bin/sh", Env: run.env(vm),
			Args: append([]string{"-c", `exec runuser -u "$0" -- /bin/sh "$@"`, vm.User, GuestRunnerCopy}, args...)}
	}
	return run.execOK(ctx, vm, "start the runner", start)
}

// guestFile is a file the executor writes into a VM.
type guestFile struct {
	path string
	data []byte
	mode os.FileMode
}

// writeFiles makes dirs (mkdir's arguments) in vm, then writes the job's
// inputs into its working directory and files.
func (run *guestRun) writeFiles(ctx context.Context, vm *guestVM, dirs []string, files []guestFile) error {
	if err := run.execOK(ctx, vm, "mkdir", hp.GuestExec{Path: "/bin/mkdir", Args: dirs}); err != nil {
		return err
	}
	work := run.workDir(vm)
	for _, in := range run.r.Job.Inputs {
		p := path.Join(work, in.Path)
		if _, err := run.retry(ctx, vm, "write the input "+in.Path, func(ctx context.Context) error {
			return vm.agent.GuestWriteFile(ctx, vm.Name, p, in.Bytes(), 0o644)
		}); err != nil {
			return err
		}
	}
	for _, f := range files {
		if _, err := run.retry(ctx, vm, "write "+f.path, func(ctx context.Context) error {
			return vm.agent.GuestWriteFile(ctx, vm.Name, f.path, f.data, f.mode)
		}); err != nil {
			return err
		}
	}
	return nil
}

// cleanNodes removes the directory of each allocation on a Slurm node
// (but those of skip, which could not be reached) once the job has ended
// or been stopped there (the node is shared: nothing of the job's is left
// on it), within ctx; a failure is logged.
func (run *guestRun) cleanNodes(ctx context.Context, skip map[*guestVM]bool) {
	var wg sync.WaitGroup
	for _, vm := range run.vms {
		if !vm.node() || vm.lost || skip[vm] {
			continue
		}
		wg.Go(func() {
			if err := run.execOK(ctx, vm, "remove the job's directory", hp.GuestExec{Path: "/bin/rm",
				Args: []string{"-rf", "--", NodeDir(vm.Name)}}); err != nil {
				run.log.Warn().Err(err).Str("vm", vm.Name).Msg("the job's directory is left on the node")
			}
		})
	}
	wg.Wait()
}

// startNode starts the command on a Slurm node: its files in the VM's
// own directory (GuestNodeDir), the executor's copy of the runner run in
// the foreground (run), in a step of the allocation that lasts as long as
// the command; it returns once the runner has written the command's pid,
// or fails with what the runner said if it ends before.
func (run *guestRun) startNode(ctx context.Context, vm *guestVM, c *guestContext) error {
	base := NodeDir(vm.Name)
	dir, work, runner := run.dirOf(vm), run.workDir(vm), path.Join(base, "metasched-run")
	dirs := []string{"-p", dir, work}
	for _, in := range run.r.Job.Inputs {
		if d := path.Dir(in.Path); d != "." && !slices.Contains(dirs, path.Join(work, d)) {
			dirs = append(dirs, path.Join(work, d))
		}
	}
	// A directory of that name is an earlier daemon's (VM names repeat
	// with a new data directory): an attempt starts afresh.
	if err := run.execOK(ctx, vm, "clear the job's directory", hp.GuestExec{Path: "/bin/rm", Args: []string{"-rf", "--", base}}); err != nil {
		return err
	}
	files := []guestFile{
		{run.hostfileOf(vm), c.hostfile, 0o644},
		{run.jobFileOf(vm), run.jobFile(vm), 0o644},
		{path.Join(dir, "command"), c.command, 0o644},
		{runner, []byte(image.RunnerScript), 0o755},
	}
	if err := run.writeFiles(ctx, vm, dirs, files); err != nil {
		return err
	}
	what := "start the runner"
	p, err := run.startExec(ctx, vm, what, hp.GuestExec{Path: "/bin/sh", Args: []string{runner, "run", dir, work, c.maxBytes},
		Env: run.env(vm), CaptureOutput: true})
	if err != nil {
		return err
	}
	for pause := 20 * time.Millisecond; ; {
		_, err := run.retry(ctx, vm, what, func(ctx context.Context) error {
			_, err := vm.agent.GuestReadFile(ctx, vm.Name, path.Join(dir, "pid"), 0, 64)
			return err
		})
		if err == nil {
			return nil
		}
		if !errors.Is(err, hp.ErrNotFound) {
			return err
		}
		st, err := run.status(ctx, vm, what, p.PID)
		if err != nil {
			return err
		}
		if st.Exited {
			return fmt.Errorf("VM %s on %s: %s: the runner ended (exit status %d) before the command started: %s",
				vm.Name, vm.Host, what, st.ExitCode, strings.TrimSpace(string(st.Stderr)))
		}
		if err := run.backoff(ctx, &pause); err != nil {
			return err
		}
	}
}

// startExec starts e in vm, trying again as retry does.
func (run *guestRun) startExec(ctx context.Context, vm *guestVM, what string, e hp.GuestExec) (hp.GuestProcess, error) {
	var p hp.GuestProcess
	_, err := run.retry(ctx, vm, what, func(ctx context.Context) error {
		var err error
		p, err = vm.agent.GuestExec(ctx, vm.Name, e)
		return err
	})
	return p, err
}

// backoff waits *pause, or until ctx ends, and doubles *pause up to the
// poll: the pace of a wait for a program in a VM.
func (run *guestRun) backoff(ctx context.Context, pause *time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-run.g.opt.Clock.After(*pause):
	}
	*pause = min(2**pause, run.g.opt.Poll)
	return nil
}

// vars are the METASCHED_ variables of the command in vm.
func (run *guestRun) vars(vm *guestVM) [][2]string {
	role := "worker"
	if vm.Master {
		role = "master"
	}
	master := run.vms[0]
	addr, _ := netip.ParsePrefix(master.Address)
	return [][2]string{
		{"METASCHED_JOB_ID", run.r.JobID},
		{"METASCHED_JOB_NAME", run.r.Job.Name},
		{"METASCHED_TASKS", strconv.Itoa(run.r.Job.Tasks)},
		{"METASCHED_TASK_OPS", FormatNumber(run.r.Job.TaskOps)},
		{"METASCHED_TASK_BYTES", FormatNumber(run.r.Job.TaskBytes)},
		{"METASCHED_ROLE", role},
		{"METASCHED_RANK", strconv.Itoa(vm.rank)},
		{"METASCHED_MASTER", master.Name},
		{"METASCHED_MASTER_ADDRESS", addr.Addr().String()},
		{"METASCHED_HOSTFILE", run.hostfileOf(vm)},
	}
}

func (run *guestRun) env(vm *guestVM) []string {
	home := "/root"
	if vm.User != "" {
		home = GuestHome(vm.User)
	}
	env := []string{"PATH=" + guestPath, "HOME=" + home}
	for _, kv := range run.vars(vm) {
		env = append(env, kv[0]+"="+kv[1])
	}
	return env
}

// jobFile is GuestJobFile of vm: its variables, for sh's ".".
func (run *guestRun) jobFile(vm *guestVM) []byte {
	var b strings.Builder
	for _, kv := range run.vars(vm) {
		fmt.Fprintf(&b, "%s=%s\nexport %s\n", kv[0], shellQuote(kv[1]), kv[0])
	}
	return []byte(b.String())
}

// follow copies the VMs' output to the log until the master's exit.
func (run *guestRun) follow(ctx context.Context) (Result, error) {
	clock := run.g.opt.Clock
	for {
		master, err := run.poll(ctx, false)
		if err != nil {
			run.saveState()
			return run.cancelled(ctx, err)
		}
		run.saveState()
		if master {
			return run.finish(ctx)
		}
		select {
		case <-ctx.Done():
			return run.cancelled(ctx, ctx.Err())
		case <-clock.After(run.g.opt.Poll):
		}
	}
}

// poll reads every VM's exit and output once (all of the output when
// drain); it reports whether the master has exited. The agents are asked
// for every VM at once (a guest under a CPU quota answers slowly: one VM
// after the other, a round of many VMs takes seconds, and the master's
// end is seen that much later), then the answers are taken in the VMs'
// order.
func (run *guestRun) poll(ctx context.Context, drain bool) (bool, error) {
	run.checkLost()
	var active []*guestVM
	for _, vm := range run.vms {
		if !vm.lost {
			active = append(active, vm)
		}
	}
	most := hp.MaxGuestRead
	if !drain {
		// The output's rate, shared among the VMs.
		run.refill()
		most = min(most, int(run.tokens)/max(1, len(active)))
	}
	reads := make([]outputRead, len(active))
	var wg sync.WaitGroup
	for i, vm := range active {
		r := &reads[i]
		r.off = run.st.Offsets[vm.Name] + int64(len(vm.pending))
		wg.Go(func() {
			if !vm.exited && !drain {
				if r.exitErr = run.readExit(ctx, vm); r.exitErr != nil {
					return
				}
			}
			if !run.st.Capped && most >= 1 {
				r.chunk, r.err = run.fetchOutput(ctx, vm, r.off, most)
				r.fetched = true
			}
		})
	}
	wg.Wait()
	for i, vm := range active {
		r := reads[i]
		err := r.exitErr
		if err == nil {
			err = run.takeOutput(ctx, vm, r, drain)
		}
		if err != nil {
			if run.dropIfLost(vm, err) {
				continue
			}
			return false, err
		}
		if vm.exited && !vm.Master {
			if _, ok := run.st.Exited[vm.Name]; !ok {
				run.note(fmt.Sprintf("[metasched: the command in %s exited with status %d]\n", vm.Name, vm.code))
				run.st.Exited[vm.Name] = vm.code
				run.dirty = true
				run.log.Info().Str("vm", vm.Name).Int("exit_code", vm.code).Msg("the command ended in a worker VM")
			}
		}
	}
	return run.vms[0].exited, nil
}

// outputRead is what a poll read of a VM: its exit's error, and a chunk of
// its output from off.
type outputRead struct {
	exitErr error
	off     int64
	fetched bool
	chunk   hp.GuestFileChunk
	err     error
}

// errVMLost: the job lost the VM (Run.Lost) while its agent was being
// tried.
var errVMLost = errors.New("the job lost the VM")

// lostNow reports whether the job has lost the worker vm, and why.
func (run *guestRun) lostNow(vm *guestVM) (string, bool) {
	if vm.Master || run.r.Lost == nil {
		return "", false
	}
	why, ok := run.r.Lost()[vm.Name]
	return why, ok
}

// checkLost takes the workers the job has lost (Run.Lost) out of the run:
// the rest of a line a lost VM had begun goes to the log, then a line
// that says it was lost; from then on the VM is neither followed nor
// stopped. A VM lost before a restart (no longer among the run's VMs) is
// noted once all the same.
func (run *guestRun) checkLost() {
	if run.r.Lost == nil {
		return
	}
	lost := run.r.Lost()
	names := slices.Sorted(maps.Keys(lost))
	for _, name := range names {
		i := slices.IndexFunc(run.vms, func(v *guestVM) bool { return v.Name == name })
		var vm *guestVM
		if i >= 0 {
			vm = run.vms[i]
		}
		if vm != nil && (vm.Master || vm.lost) {
			continue // the master is never lost: the daemon stops the run instead
		}
		if vm != nil {
			vm.lost = true
			run.takeLines(vm, true)
		}
		if _, noted := run.st.Lost[name]; noted {
			continue
		}
		why := lost[name]
		run.note(fmt.Sprintf("[metasched: worker VM %s lost (%s): the job goes on without it]\n", name, why))
		run.st.Lost[name] = why
		run.dirty = true
		run.log.Info().Str("vm", name).Str("why", why).Msg("the job lost a worker VM: no longer followed")
	}
}

// dropIfLost reports whether err comes of vm's loss (Run.Lost): the VM
// is then out of the run (see checkLost).
func (run *guestRun) dropIfLost(vm *guestVM, err error) bool {
	if err == nil {
		return false
	}
	if _, lost := run.lostNow(vm); !lost && !errors.Is(err, errVMLost) {
		return false
	}
	run.checkLost()
	return vm.lost
}

// readExit reads vm's exit file, when there is one.
func (run *guestRun) readExit(ctx context.Context, vm *guestVM) error {
	var chunk hp.GuestFileChunk
	_, err := run.retry(ctx, vm, "read the exit file", func(ctx context.Context) error {
		var err error
		chunk, err = vm.agent.GuestReadFile(ctx, vm.Name, path.Join(run.dirOf(vm), "exit"), 0, 64)
		return err
	})
	if errors.Is(err, hp.ErrNotFound) {
		return nil // still running
	}
	if err != nil {
		return err
	}
	s := strings.TrimSpace(string(chunk.Data))
	code, perr := strconv.Atoi(s)
	if perr != nil || code < 0 || code > 255 {
		return fmt.Errorf("VM %s: exit file %q: not an exit status 0-255", vm.Name, s)
	}
	vm.exited, vm.code = true, code
	return nil
}

// fetchOutput reads at most most bytes of vm's output file from off.
func (run *guestRun) fetchOutput(ctx context.Context, vm *guestVM, off int64, most int) (hp.GuestFileChunk, error) {
	var chunk hp.GuestFileChunk
	_, err := run.retry(ctx, vm, "read the output", func(ctx context.Context) error {
		var err error
		chunk, err = vm.agent.GuestReadFile(ctx, vm.Name, path.Join(run.dirOf(vm), "output"), off, most)
		return err
	})
	return chunk, err
}

// takeOutput writes the whole lines of what a poll read of vm's output to
// the log; when drain, it reads on to the end of the file and writes all
// of it, the last line ended.
func (run *guestRun) takeOutput(ctx context.Context, vm *guestVM, r outputRead, drain bool) error {
	for r.fetched {
		if errors.Is(r.err, hp.ErrNotFound) {
			return nil // not made yet
		}
		if r.err != nil {
			return r.err
		}
		if !drain {
			run.tokens -= float64(len(r.chunk.Data))
		}
		vm.pending = append(vm.pending, r.chunk.Data...)
		vm.eof = r.chunk.EOF
		run.takeLines(vm, drain && r.chunk.EOF)
		if r.chunk.EOF || len(r.chunk.Data) == 0 || !drain || run.st.Capped {
			return nil
		}
		r.off = run.st.Offsets[vm.Name] + int64(len(vm.pending))
		r.chunk, r.err = run.fetchOutput(ctx, vm, r.off, hp.MaxGuestRead)
	}
	return nil
}

// refill adds the tokens of the time since the last refill.
func (run *guestRun) refill() {
	now := run.g.opt.Clock.Now()
	// A poll may take what the rate gives between two polls.
	burst := max(float64(outputBurst), float64(run.g.opt.OutputRate)*run.g.opt.Poll.Seconds())
	run.tokens = min(burst, run.tokens+float64(run.g.opt.OutputRate)*now.Sub(run.last).Seconds())
	run.last = now
}

// takeLines writes vm's whole pending lines to the log, prefixed with its
// name (and the rest too when all).
func (run *guestRun) takeLines(vm *guestVM, all bool) {
	for len(vm.pending) > 0 && !run.st.Capped {
		i := bytes.IndexByte(vm.pending, '\n')
		var line []byte
		switch {
		case i >= 0:
			line = vm.pending[:i+1]
		case all || len(vm.pending) >= maxPendingLine:
			line = vm.pending
		default:
			return
		}
		text := vm.Name + "| " + string(bytes.TrimSuffix(line, []byte("\n"))) + "\n"
		if run.st.Kept+int64(len(text)) > run.g.opt.MaxOutput {
			run.note(capNote(run.g.opt.MaxOutput)[1:])
			run.st.Capped = true
			return
		}
		run.write(text)
		run.st.Offsets[vm.Name] += int64(len(line))
		vm.pending = vm.pending[len(line):]
	}
}

// note writes a line of the executor's own to the log.
func (run *guestRun) note(s string) { run.write(s) }

// write adds s to the text for the log; saveState records it, then gives
// it to the log.
func (run *guestRun) write(s string) {
	run.buf = append(run.buf, s...)
	run.st.Kept += int64(len(s))
	run.dirty = true
}

// finish ends a run whose master exited: the rest of every VM's output,
// the workers still running stopped, the master's exit returned.
func (run *guestRun) finish(ctx context.Context) (Result, error) {
	if _, err := run.poll(ctx, true); err != nil {
		run.saveState()
		return run.cancelled(ctx, err)
	}
	run.saveState()
	run.copyOutputs(ctx)
	// The workers still running are stopped; their exits are read all
	// at once, as a poll does.
	run.checkLost()
	var running []*guestVM
	for _, vm := range run.vms[1:] {
		if !vm.exited && !vm.lost {
			running = append(running, vm)
		}
	}
	errs := make([]error, len(running))
	var wg sync.WaitGroup
	for i, vm := range running {
		wg.Go(func() { errs[i] = run.readExit(ctx, vm) })
	}
	wg.Wait()
	var stopping []*guestVM
	for i, vm := range running {
		if err := errs[i]; (err == nil && vm.exited) || run.dropIfLost(vm, err) {
			continue
		}
		run.log.Info().Str("vm", vm.Name).Msg("the master ended: stopping the command in the worker VM")
		stopping = append(stopping, vm)
	}
	run.stopVMs(ctx, stopping)
	res := Result{ExitCode: run.vms[0].code}
	if res.ExitCode != 0 {
		res.Reason = fmt.Sprintf("exit status %d in the master VM %s", res.ExitCode, run.vms[0].Name)
	}
	run.saveState() // the notes of workers lost meanwhile
	run.log.Info().Int("exit_code", res.ExitCode).Int64("output_kept", run.st.Kept).Msg("the job ended")
	return res, nil
}

// OutputsDir is where the guest executor copies a job's outputs, in its
// run directory.
func OutputsDir(dir string, attempt int) string {
	return filepath.Join(AttemptDir(dir, attempt), "outputs")
}

// copyOutputs copies the job's outputs out of the master VM into the
// attempt's outputs directory, each at most selection.MaxOutputFileLen
// bytes; a missing or cut file is noted in the log.
func (run *guestRun) copyOutputs(ctx context.Context) {
	master := run.vms[0]
	odir := OutputsDir(run.r.Dir, run.r.Attempt)
	for _, rel := range run.r.Job.Outputs {
		if why := selection.CheckJobFilePath(rel); why != "" || !filepath.IsLocal(rel) {
			run.note(fmt.Sprintf("[metasched: output %q not copied: %s]\n", rel, why))
			continue
		}
		src, dst := path.Join(GuestWorkDir(run.r.JobID), rel), filepath.Join(odir, filepath.FromSlash(rel))
		n, cut, err := run.copyOut(ctx, master, src, dst)
		switch {
		case errors.Is(err, hp.ErrNotFound):
			run.note(fmt.Sprintf("[metasched: output %s: no such file in %s]\n", rel, master.Name))
		case err != nil:
			run.note(fmt.Sprintf("[metasched: output %s not copied: %v]\n", rel, err))
		case cut:
			run.note(fmt.Sprintf("[metasched: output %s cut at %d bytes]\n", rel, n))
		default:
			run.log.Info().Str("output", rel).Int64("bytes", n).Msg("output copied out of the master VM")
		}
	}
	run.copySummary(ctx, odir)
	run.saveState()
}

// copySummary copies the task-farm summary out of the master VM, as an
// output, whenever the master wrote one (the daemon reads the tasks each
// site did from it); a master without one is not noted.
func (run *guestRun) copySummary(ctx context.Context, odir string) {
	if slices.Contains(run.r.Job.Outputs, taskfarm.SummaryFile) {
		return // copied as an output of the job file
	}
	master := run.vms[0]
	src := path.Join(GuestWorkDir(run.r.JobID), taskfarm.SummaryFile)
	n, cut, err := run.copyOut(ctx, master, src, filepath.Join(odir, taskfarm.SummaryFile))
	switch {
	case errors.Is(err, hp.ErrNotFound):
	case err != nil:
		run.note(fmt.Sprintf("[metasched: %s not copied: %v]\n", taskfarm.SummaryFile, err))
	case cut:
		run.note(fmt.Sprintf("[metasched: %s cut at %d bytes]\n", taskfarm.SummaryFile, n))
	default:
		run.log.Info().Int64("bytes", n).Msg("task-farm summary copied out of the master VM")
	}
}

// copyOut copies the guest file src of vm to dst, at most
// selection.MaxOutputFileLen bytes; cut says there was more.
func (run *guestRun) copyOut(ctx context.Context, vm *guestVM, src, dst string) (n int64, cut bool, err error) {
	var data []byte
	for {
		var chunk hp.GuestFileChunk
		if _, err := run.retry(ctx, vm, "read the output file "+src, func(ctx context.Context) error {
			var err error
			chunk, err = vm.agent.GuestReadFile(ctx, vm.Name, src, int64(len(data)), hp.MaxGuestRead)
			return err
		}); err != nil {
			return 0, false, err
		}
		data = append(data, chunk.Data...)
		if len(data) > selection.MaxOutputFileLen {
			data, cut = data[:selection.MaxOutputFileLen], true
			break
		}
		if chunk.EOF || len(chunk.Data) == 0 {
			break
		}
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return 0, false, err
	}
	if err := writeDurably(filepath.Dir(dst), filepath.Base(dst), data); err != nil {
		return 0, false, err
	}
	return int64(len(data)), cut, nil
}

// stopAll stops the command in every VM that may still run it.
func (run *guestRun) stopAll(ctx context.Context) {
	run.checkLost()
	var stopping []*guestVM
	for _, vm := range run.vms {
		if !vm.exited && !vm.lost {
			stopping = append(stopping, vm)
		}
	}
	run.stopVMs(ctx, stopping)
}

// stopVMs stops the command in vms, then removes the job's directories
// on its Slurm nodes but those it could not reach: at most guestStopWait
// in all, with a context of its own (ctx may be done), so that a host out
// of reach holds the run's end for that long and no longer.
func (run *guestRun) stopVMs(ctx context.Context, vms []*guestVM) {
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), guestStopWait)
	defer cancel()
	failed := make([]bool, len(vms))
	var wg sync.WaitGroup
	for i, vm := range vms {
		wg.Go(func() { failed[i] = !run.stopVM(sctx, vm) })
	}
	wg.Wait()
	skip := map[*guestVM]bool{}
	for i, vm := range vms {
		if failed[i] {
			skip[vm] = true
		}
	}
	run.cleanNodes(sctx, skip)
}

// stopVM stops the command in vm, and says whether it could.
func (run *guestRun) stopVM(ctx context.Context, vm *guestVM) bool {
	stop := hp.GuestExec{Path: GuestRunner, Args: []string{"stop", run.dirOf(vm)}}
	if vm.node() {
		stop = hp.GuestExec{Path: "/bin/sh", Args: []string{path.Join(NodeDir(vm.Name), "metasched-run"), "stop", run.dirOf(vm)}}
	}
	if err := run.execOK(ctx, vm, "stop the runner", stop); err != nil {
		run.log.Warn().Err(err).Str("vm", vm.Name).Msg("cannot stop the command in the VM")
		return false
	}
	return true
}

// execOK runs a program in vm and waits for it; a non-zero exit is an
// error with its standard error.
func (run *guestRun) execOK(ctx context.Context, vm *guestVM, what string, e hp.GuestExec) error {
	e.CaptureOutput = true
	p, err := run.startExec(ctx, vm, what, e)
	if err != nil {
		return err
	}
	for pause := 20 * time.Millisecond; ; {
		st, err := run.status(ctx, vm, what, p.PID)
		if err != nil {
			return err
		}
		if st.Exited {
			if st.ExitCode != 0 || st.Signal != 0 {
				why := fmt.Sprintf("exit status %d", st.ExitCode)
				if st.Signal != 0 {
					why = fmt.Sprintf("killed by signal %d", st.Signal)
				}
				return fmt.Errorf("VM %s on %s: %s (%s): %s: %s", vm.Name, vm.Host, what, e.Path, why, strings.TrimSpace(string(st.Stderr)))
			}
			return nil
		}
		if err := run.backoff(ctx, &pause); err != nil {
			return err
		}
	}
}

// status is the state of program pid in vm, asked again as retry does.
func (run *guestRun) status(ctx context.Context, vm *guestVM, what string, pid int) (hp.GuestExecStatus, error) {
	var st hp.GuestExecStatus
	_, err := run.retry(ctx, vm, what, func(ctx context.Context) error {
		var err error
		st, err = vm.agent.GuestExecStatus(ctx, vm.Name, pid)
		return err
	})
	return st, err
}

// retry calls f until it succeeds, fails for good (ErrNotFound, ErrInvalid,
// returned as is), or has failed for RetryFor; its pauses double up to
// maxRetryPause. It returns the tries made.
func (run *guestRun) retry(ctx context.Context, vm *guestVM, what string, f func(context.Context) error) (int, error) {
	clock := run.g.opt.Clock
	var first time.Time
	pause := run.g.opt.Poll / 4
	for tries := 1; ; tries++ {
		err := f(ctx)
		switch {
		case err == nil:
			return tries, nil
		case errors.Is(err, hp.ErrNotFound) && !errors.Is(err, hp.ErrGuestAgent), errors.Is(err, hp.ErrInvalid):
			return tries, fmt.Errorf("VM %s on %s: %s: %w", vm.Name, vm.Host, what, err)
		case ctx.Err() != nil:
			return tries, ctx.Err()
		}
		if why, lost := run.lostNow(vm); lost {
			return tries, fmt.Errorf("VM %s on %s: %s: %w (%s): %w", vm.Name, vm.Host, what, errVMLost, why, err)
		}
		now := clock.Now()
		if first.IsZero() {
			first = now
		}
		if now.Sub(first) >= run.g.opt.RetryFor {
			return tries, fmt.Errorf("VM %s on %s: %s: its agent failed for %s: %w", vm.Name, vm.Host, what, run.g.opt.RetryFor, err)
		}
		run.log.Warn().Err(err).Str("vm", vm.Name).Str("call", what).Dur("retry_in", pause).Msg("the VM's agent failed: trying again")
		select {
		case <-ctx.Done():
			return tries, ctx.Err()
		case <-clock.After(pause):
		}
		pause = min(2*pause, maxRetryPause)
	}
}

func (run *guestRun) loadState() error {
	run.st = guestState{Offsets: map[string]int64{}, Exited: map[string]int{}, Lost: map[string]string{}}
	data, err := os.ReadFile(filepath.Join(run.adir, guestStateName))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("guest record: %w", err)
	}
	if err := json.Unmarshal(data, &run.st); err != nil {
		return fmt.Errorf("guest record %s: %w", filepath.Join(run.adir, guestStateName), err)
	}
	if run.st.Offsets == nil {
		run.st.Offsets = map[string]int64{}
	}
	if run.st.Exited == nil {
		run.st.Exited = map[string]int{}
	}
	if run.st.Lost == nil {
		run.st.Lost = map[string]string{}
	}
	return nil
}

// saveState writes the record when something changed since the last
// write, the text for the log among it (Pending), then gives that text to
// the log: the record is durable before the log takes anything, and a
// restart gives the log what it did not take (givePending).
func (run *guestRun) saveState() {
	if !run.dirty {
		return
	}
	run.st.Pending += string(run.buf)
	run.buf = run.buf[:0]
	data, err := json.Marshal(run.st)
	if err == nil {
		err = writeDurably(run.adir, guestStateName, data)
	}
	if err != nil {
		run.log.Warn().Err(err).Msg("cannot record how far the log took the output: a restart may repeat more of it")
	} else {
		run.dirty = false
	}
	run.givePending(-1)
}

// givePending writes the text recorded as Pending to the log, the part of
// it before from skipped (from is where the log stands in the attempt's
// output, -1 when the log took everything before Pending). Text the log
// refuses stays pending, to be given again with the next.
func (run *guestRun) givePending(from int64) {
	p := run.st.Pending
	if from >= 0 {
		at := run.st.Kept - int64(len(p))
		p = p[min(max(from-at, 0), int64(len(p))):]
	}
	if p == "" {
		run.st.Pending = ""
		return
	}
	if _, err := io.WriteString(run.out, p); err != nil {
		outputRefused(run.log, err, "given again with the next")
		run.st.Pending = p
		return
	}
	run.st.Pending = ""
}

// guestHostfile is the job's hostfile inside its VMs: one VM per line,
// master first, in OpenMPI's hostfile syntax, by address:
//
//	ADDRESS slots=VCPUS # name=NAME site=SITE role=master|worker
//
// Nothing in it changes when a VM is live-migrated (its name, address and
// site stay; only its physical host changes), so it stays true after a
// move.
func guestHostfile(vms []VM) ([]byte, error) {
	if _, err := hostfile(vms); err != nil { // checks names, sites, hosts, vCPUs, the master
		return nil, err
	}
	var b strings.Builder
	for i, vm := range vms {
		p, err := netip.ParsePrefix(vm.Address)
		if err != nil || !p.Addr().Is4() {
			return nil, fmt.Errorf("VM %d (%s): address %q: want an IPv4 address with its prefix length (10.77.1.12/16)", i, vm.Name, vm.Address)
		}
		role := "worker"
		if vm.Master {
			role = "master"
		}
		fmt.Fprintf(&b, "%s slots=%d # name=%s site=%s role=%s\n", p.Addr(), vm.VCPUs, vm.Name, vm.Site, role)
	}
	return []byte(b.String()), nil
}

// guestHosts is /etc/hosts of the job's VMs.
func guestHosts(vms []VM) []byte {
	var b strings.Builder
	b.WriteString("127.0.0.1 localhost\n::1 localhost\n")
	for _, vm := range vms {
		p, _ := netip.ParsePrefix(vm.Address)
		fmt.Fprintf(&b, "%s %s\n", p.Addr(), vm.Name)
	}
	return []byte(b.String())
}

// shellQuote quotes s for sh.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// shellJoin is argv as a sh command line.
func shellJoin(argv []string) string {
	q := make([]string, len(argv))
	for i, a := range argv {
		q[i] = shellQuote(a)
	}
	return strings.Join(q, " ")
}
