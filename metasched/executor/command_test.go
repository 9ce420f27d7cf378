package executor_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/metasched/metasched/metasched/executor"
)

// checkGroupGone fails when a process of the group pgid remains, zombies
// included.
func checkGroupGone(t *testing.T, pgid int) {
	t.Helper()
	if err := syscall.Kill(-pgid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Fatalf("kill(-%d, 0) = %v after Run returned, want ESRCH: a process of the job's group remains", pgid, err)
	}
}

func TestCommandExit(t *testing.T) {
	t.Parallel()
	type outcome struct {
		Result executor.Result
		Output string
	}
	tests := []struct {
		name   string
		script string
		want   outcome
	}{
		{"done", `echo out; echo err >&2`,
			outcome{executor.Result{}, "out\nerr\n"}},
		{"stdout and stderr interleaved", `echo 1; echo 2 >&2; echo 3; echo 4 >&2; printf 5`,
			outcome{executor.Result{}, "1\n2\n3\n4\n5"}},
		{"exit 3", `echo failing >&2; exit 3`,
			outcome{executor.Result{ExitCode: 3, Reason: "exit status 3"}, "failing\n"}},
		{"SIGKILL", `kill -KILL $$`,
			outcome{executor.Result{ExitCode: 128 + 9, Reason: "killed by signal SIGKILL (9)"}, ""}},
		{"SIGTERM", `echo bye; kill -TERM $$`,
			outcome{executor.Result{ExitCode: 128 + 15, Reason: "killed by signal SIGTERM (15)"}, "bye\n"}},
		{"SIGUSR1", `kill -USR1 $$`,
			outcome{executor.Result{ExitCode: 128 + 10, Reason: "killed by signal SIGUSR1 (10)"}, ""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			out := newWatchWriter("")
			ex := newCommand(t, executor.CommandOptions{WorkDir: openDir(t)})
			res, err := ex.Run(context.Background(), shRun(t, tt.script, out))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, outcome{res, out.String()}); diff != "" {
				t.Fatalf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestCommandEnvironment checks what the command sees: the hostfile, the
// METASCHED_ variables of its job (not the daemon's), PATH and LANG, the
// variables the operator allows by name, nothing else of the daemon's
// environment (its secrets), and the working directory: the one given, or
// else the job's own in its run directory.
func TestCommandEnvironment(t *testing.T) {
	t.Setenv("METASCHED_JOB_ID", "stale")
	t.Setenv("METASCHED_EXECUTOR_TEST", "the daemon's")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "s3cret")
	t.Setenv("ALLOWED_BY_NAME", "allowed")
	t.Setenv("LANG", "C.UTF-8")
	work := openDir(t)
	dir := filepath.Join(openDir(t), "runs", "j-000000000042") // created by Run
	const script = `printf '%s\n' "$METASCHED_HOSTFILE" "$METASCHED_JOB_ID" "$METASCHED_JOB_NAME" "$METASCHED_TASKS" "$METASCHED_TASK_OPS" "$METASCHED_TASK_BYTES" "[$METASCHED_EXECUTOR_TEST]" "[$AWS_SECRET_ACCESS_KEY]" "$ALLOWED_BY_NAME" "$LANG"
pwd -P
cat "$METASCHED_HOSTFILE"
echo ---
env`
	hostfile := filepath.Join(dir, executor.HostfileName)
	for _, tc := range []struct {
		name    string
		workDir string // "" : the run directory
	}{{"a working directory", work}, {"the run directory", ""}} {
		out := newWatchWriter("")
		r := shRun(t, script, out)
		r.Dir = dir
		if tc.workDir == "" {
			r.Attempt = 2 // an attempt of its own
		}
		res, err := newCommand(t, executor.CommandOptions{WorkDir: tc.workDir, Env: []string{"ALLOWED_BY_NAME", "NOT_SET_AT_ALL"}}).Run(context.Background(), r)
		if err != nil {
			t.Fatal(err)
		}
		if res != (executor.Result{}) {
			t.Fatalf("%s: result %+v, want done; output %q", tc.name, res, out.String())
		}
		wd := tc.workDir
		if wd == "" {
			wd = filepath.Join(dir, executor.WorkName)
		}
		physWork, err := filepath.EvalSymlinks(wd)
		if err != nil {
			t.Fatal(err)
		}
		got, env, _ := strings.Cut(out.String(), "---\n")
		want := strings.Join([]string{hostfile, "j-000000000042", "render-42", "300", "2e+12", "5e+07", "[]", "[]", "allowed", "C.UTF-8", physWork}, "\n") + "\n" + testHostfile
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("%s: output (-want +got):\n%s", tc.name, diff)
		}
		// Every variable is one a job gets (sh adds PWD, SHLVL and _).
		for _, line := range strings.Split(strings.TrimSpace(env), "\n") {
			k, _, _ := strings.Cut(line, "=")
			if !slices.Contains(executor.CommandEnvNames, k) && !strings.HasPrefix(k, "METASCHED_") &&
				!slices.Contains([]string{"ALLOWED_BY_NAME", "PWD", "OLDPWD", "SHLVL", "_"}, k) {
				t.Errorf("%s: the command's environment has %s, which the daemon's had and the job was not given", tc.name, line)
			}
		}
	}
	written, err := os.ReadFile(hostfile)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(testHostfile, string(written)); diff != "" {
		t.Fatalf("hostfile (-want +got):\n%s", diff)
	}
}

// TestCommandHostfile checks the hostfile of several virtual clusters, and
// that a cluster that cannot be written as one stops the run before its
// command starts.
func TestCommandHostfile(t *testing.T) {
	t.Parallel()
	vms := testVMs()
	with := func(i int, f func(*executor.VM)) []executor.VM {
		v := testVMs()
		f(&v[i])
		return v
	}
	tests := []struct {
		name    string
		vms     []executor.VM
		want    string // the hostfile
		wantErr string // or the error
	}{
		{name: "two sites", vms: vms, want: testHostfile},
		{name: "master only", vms: vms[:1], want: "render-42-0 slots=2 # site=spain host=spain-1 role=master\n"},
		{name: "no VMs", wantErr: "job render-42: hostfile: no VMs"},
		{name: "master not first", vms: []executor.VM{vms[1], vms[0]},
			wantErr: "job render-42: hostfile: VM 0 (render-42-1): the first VM must be the master"},
		{name: "two masters", vms: with(2, func(v *executor.VM) { v.Master = true }),
			wantErr: "job render-42: hostfile: VM 2 (render-42-2): a second master: only the first VM is the master"},
		{name: "no vCPU", vms: with(1, func(v *executor.VM) { v.VCPUs = 0 }),
			wantErr: "job render-42: hostfile: VM 1 (render-42-1): vcpus 0: must be at least 1"},
		{name: "space in a name", vms: with(3, func(v *executor.VM) { v.Name = "render 42" }),
			wantErr: `job render-42: hostfile: VM 3: name "render 42": must not contain white space, '#' or '='`},
		{name: "no host", vms: with(1, func(v *executor.VM) { v.Host = "" }),
			wantErr: "job render-42: hostfile: VM 1: no host"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			work := userDir(t) // the command writes there
			r := shRun(t, `cat "$METASCHED_HOSTFILE" > got`, newWatchWriter(""))
			r.VMs = tt.vms
			res, err := newCommand(t, executor.CommandOptions{WorkDir: work}).Run(context.Background(), r)
			got, readErr := os.ReadFile(filepath.Join(work, "got"))
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("error %v, want %q", err, tt.wantErr)
				}
				if readErr == nil {
					t.Fatal("the command ran")
				}
				return
			}
			if err != nil || res != (executor.Result{}) {
				t.Fatalf("Run = %+v, %v; want done", res, err)
			}
			if readErr != nil {
				t.Fatal(readErr)
			}
			if diff := cmp.Diff(tt.want, string(got)); diff != "" {
				t.Fatalf("hostfile (-want +got):\n%s", diff)
			}
		})
	}
}

// TestCommandCancel cancels running commands and checks that Run returns
// only once every process of the job's group is gone, with ctx's error.
func TestCommandCancel(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		script  string // prints pid=$$ then ready
		grace   time.Duration
		want    executor.Result
		atLeast time.Duration // from the cancel to Run's return
		output  string        // what the script prints after ready
	}{{
		name:   "child and grandchild",
		script: `echo pid=$$; sleep 60 & echo ready; sleep 60; wait`,
		grace:  executor.DefaultGrace,
		want:   executor.Result{ExitCode: 128 + 15, Reason: "killed by signal SIGTERM (15)"},
	}, {
		name:    "SIGTERM ignored: SIGKILL after the grace period",
		script:  `trap '' TERM; echo pid=$$; sleep 60 & echo ready; sleep 60; wait`,
		grace:   300 * time.Millisecond,
		want:    executor.Result{ExitCode: 128 + 9, Reason: "killed by signal SIGKILL (9)"},
		atLeast: 300 * time.Millisecond,
	}, {
		name:   "only a background process ignores SIGTERM",
		script: `echo pid=$$; (trap '' TERM; echo ready; sleep 60) & sleep 60; wait`,
		grace:  300 * time.Millisecond,
		// The shell dies of SIGTERM at once; its orphan gets SIGKILL.
		want:    executor.Result{ExitCode: 128 + 15, Reason: "killed by signal SIGTERM (15)"},
		atLeast: 300 * time.Millisecond,
	}, {
		// stderr discarded: dash reports the foreground sleep's death there.
		name:   "SIGTERM trapped: the command exits cleanly",
		script: `exec 2>/dev/null; trap 'echo bye; exit 0' TERM; echo pid=$$; echo ready; while :; do sleep 0.02; done`,
		grace:  executor.DefaultGrace,
		want:   executor.Result{},
		output: "bye\n",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			out := newWatchWriter("ready\n")
			ex := newCommand(t, executor.CommandOptions{Grace: tt.grace, WorkDir: openDir(t)})
			done := startRun(t, ctx, ex, shRun(t, tt.script, out), out)
			pgid := pgidOf(t, out.String())
			start := time.Now()
			cancel()
			rr := waitRun(t, done)
			took := rr.end.Sub(start)

			checkGroupGone(t, pgid)
			if !errors.Is(rr.err, context.Canceled) {
				t.Fatalf("error %v, want context.Canceled", rr.err)
			}
			if diff := cmp.Diff(tt.want, rr.res); diff != "" {
				t.Fatalf("result (-want +got):\n%s", diff)
			}
			// The result's signal says whether SIGKILL was needed: a bound
			// on the time from above would assume an idle machine.
			if took < tt.atLeast {
				t.Fatalf("Run returned %v after the cancel, want at least the grace period %v", took, tt.atLeast)
			}
			if got := strings.SplitN(out.String(), "ready\n", 2)[1]; got != tt.output {
				t.Fatalf("output after ready %q, want %q", got, tt.output)
			}
		})
	}
}

// TestCommandLeftovers checks that processes a command leaves running in
// its group when it exits are stopped before Run returns, and that the
// command's own result stands.
func TestCommandLeftovers(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		script  string
		atLeast time.Duration
	}{
		{"stop on SIGTERM", `echo pid=$$; sleep 60 & exit 0`, 0},
		{"ignore SIGTERM", `trap '' TERM; echo pid=$$; sleep 60 & exit 0`, 300 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			out := newWatchWriter("")
			ex := newCommand(t, executor.CommandOptions{Grace: 300 * time.Millisecond})
			start := time.Now()
			res, err := ex.Run(context.Background(), shRun(t, tt.script, out))
			took := time.Since(start)
			if err != nil || res != (executor.Result{}) {
				t.Fatalf("Run = %+v, %v; want done", res, err)
			}
			checkGroupGone(t, pgidOf(t, out.String()))
			if took < tt.atLeast {
				t.Fatalf("Run took %v, want at least the grace period %v", took, tt.atLeast)
			}
		})
	}
}

// TestCommandNotRun checks the runs that fail before any command runs.
func TestCommandNotRun(t *testing.T) {
	t.Parallel()
	work := openDir(t)
	if err := os.WriteFile(filepath.Join(work, "not-executable"), []byte("#!/bin/sh\necho hi\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name     string
		ctx      context.Context
		edit     func(*executor.Run)
		wantIs   error
		wantErr  string // the error's message, or a part of it with contains
		contains bool
	}{{
		name:    "no command",
		edit:    func(r *executor.Run) { r.Job.Command = nil },
		wantIs:  executor.ErrNoCommand,
		wantErr: "job render-42 has no command: the command executor runs the job's command",
	}, {
		name:     "program not found",
		edit:     func(r *executor.Run) { r.Job.Command = []string{"metasched-no-such-program", "-x"} },
		wantErr:  "metasched-no-such-program",
		contains: true,
	}, {
		name:     "program not executable",
		edit:     func(r *executor.Run) { r.Job.Command = []string{"./not-executable"} },
		wantIs:   os.ErrPermission,
		wantErr:  "./not-executable",
		contains: true,
	}, {
		name:    "no job file",
		edit:    func(r *executor.Run) { r.Job = nil },
		wantErr: "job j-000000000042: no job file",
	}, {
		name:    "no directory",
		edit:    func(r *executor.Run) { r.Dir = "" },
		wantErr: "job render-42: no run directory for the hostfile",
	}, {
		name:    "cancelled before",
		ctx:     cancelled,
		wantIs:  context.Canceled,
		wantErr: "job render-42: context canceled",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := tt.ctx
			if ctx == nil {
				ctx = context.Background()
			}
			r := shRun(t, "echo ran", newWatchWriter(""))
			if tt.edit != nil {
				tt.edit(&r)
			}
			ex := newCommand(t, executor.CommandOptions{WorkDir: work})
			res, err := ex.Run(ctx, r)
			if err == nil {
				t.Fatalf("Run = %+v, nil; want an error", res)
			}
			if tt.wantIs != nil && !errors.Is(err, tt.wantIs) {
				t.Fatalf("error %q is not %v", err, tt.wantIs)
			}
			if tt.contains && !strings.Contains(err.Error(), tt.wantErr) ||
				!tt.contains && err.Error() != tt.wantErr {
				t.Fatalf("error %q, want %q", err, tt.wantErr)
			}
			if got := r.Output.(*watchWriter).String(); got != "" {
				t.Fatalf("output %q: the command ran", got)
			}
		})
	}
}

// TestCommandRelativeProgram runs a program named relative to WorkDir. It
// is not parallel: a fork in another test while the program's file is
// open for writing would make exec fail with ETXTBSY (golang/go#22315).
func TestCommandRelativeProgram(t *testing.T) {
	work := openDir(t)
	if err := os.WriteFile(filepath.Join(work, "master"), []byte("#!/bin/sh\necho master \"$@\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	out := newWatchWriter("")
	r := shRun(t, "", out)
	r.Job.Command = []string{"./master", "--tasks", "300"}
	res, err := newCommand(t, executor.CommandOptions{WorkDir: work}).Run(context.Background(), r)
	if err != nil || res != (executor.Result{}) {
		t.Fatalf("Run = %+v, %v; want done", res, err)
	}
	if got, want := out.String(), "master --tasks 300\n"; got != want {
		t.Fatalf("output %q, want %q", got, want)
	}
}

// TestCommandNilOutput runs a command whose output nobody wants.
func TestCommandNilOutput(t *testing.T) {
	t.Parallel()
	r := shRun(t, "seq 100000; exit 4", nil)
	r.Output = nil
	res, err := newCommand(t, executor.CommandOptions{}).Run(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(executor.Result{ExitCode: 4, Reason: "exit status 4"}, res); diff != "" {
		t.Fatalf("result (-want +got):\n%s", diff)
	}
}

// The job's task_ops and task_bytes reach the commands as decimals that
// parse back to the same numbers.
func TestFormatNumber(t *testing.T) {
	for _, x := range []float64{0, 1, 0.1, 2e11, 5e7, 123456789125, 4096.5, 1e18, 1.0000000000000002, 3.141592653589793e-7} {
		s := executor.FormatNumber(x)
		back, err := strconv.ParseFloat(s, 64)
		if err != nil || back != x {
			t.Errorf("FormatNumber(%v) = %q, parsed back as %v, %v", x, s, back, err)
		}
	}
}
