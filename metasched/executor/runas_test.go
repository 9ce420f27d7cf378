package executor_test

import (
	"context"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/rs/zerolog"

	"github.com/metasched/metasched/internal/syncbuf"
	"github.com/metasched/metasched/metasched/executor"
)

// TestCommandRunAs: a daemon that runs as root runs the job's command as
// run_as (nobody here: uid, gid, groups and HOME its), while the
// supervisor stays root: the attempt's files are root's and private, the
// daemon reads the output and the exit, and the command can read its
// hostfile but neither write in its run directory nor forge its exit
// record. A daemon
// that runs as another user runs the command as itself.
func TestCommandRunAs(t *testing.T) {
	t.Setenv("HOME", "/home/of-the-daemon")
	work := userDir(t)
	out := newWatchWriter("")
	r := shRun(t, `id -u; id -g; id -G; echo "$HOME"; cat "$METASCHED_HOSTFILE" >/dev/null && echo hostfile read
run=$(dirname "$METASCHED_HOSTFILE")
{ echo 0 > "$run/attempt-0/exit"; } 2>/dev/null && echo forged the exit record
{ echo x > "$run/x"; } 2>/dev/null && echo wrote in the run directory
touch mine && echo wrote in the working directory
exit 3`, out)
	res, err := newCommand(t, executor.CommandOptions{WorkDir: work}).Run(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(executor.Result{ExitCode: 3, Reason: "exit status 3"}, res); diff != "" {
		t.Fatalf("result (-want +got):\n%s\noutput %q", diff, out.String())
	}
	uid, gid, home := os.Getuid(), os.Getgid(), "/home/of-the-daemon"
	want := strconv.Itoa(uid) + "\n" + strconv.Itoa(gid) + "\n"
	if os.Geteuid() == 0 {
		nobody, err := user.Lookup("nobody")
		if err != nil {
			t.Fatal(err)
		}
		uid, gid, home = nobodyUID, nobodyUID, nobody.HomeDir
		want = "65534\n65534\n"
	}
	got := out.String()
	if !strings.HasPrefix(got, want) {
		t.Fatalf("output %q: want the command's uid and gid first, %q", got, want)
	}
	lines := strings.Split(strings.TrimSuffix(strings.TrimPrefix(got, want), "\n"), "\n")
	if os.Geteuid() == 0 {
		if lines[0] != "65534" {
			t.Errorf("supplementary groups %q, want nobody's only (65534)", lines[0])
		}
		if diff := cmp.Diff([]string{home, "hostfile read", "wrote in the working directory"}, lines[1:]); diff != "" {
			t.Errorf("what the command could do (-want +got):\n%s", diff)
		}
	} else if !slices.Contains(lines, "hostfile read") || !slices.Contains(lines, home) {
		t.Errorf("output %q: want the daemon's HOME and the hostfile read", got)
	}
	fi, err := os.Stat(filepath.Join(work, "mine"))
	if err != nil {
		t.Fatal(err)
	}
	if owner := fi.Sys().(*syscall.Stat_t).Uid; int(owner) != uid {
		t.Errorf("the command's file is uid %d's, want %d's", owner, uid)
	}
	if os.Geteuid() == 0 {
		// The attempt's files are root's and private; the run directory
		// root's, crossed but not listed; the hostfile and the working
		// directory the job's account's, and private.
		adir := executor.AttemptDir(r.Dir, 0)
		for _, f := range []struct {
			name string
			uid  uint32
			mode os.FileMode
		}{
			{".", 0, 0o700}, {"output", 0, 0o600}, {"exit", 0, 0o600}, {"supervisor", 0, 0o600},
			{"supervisor.log", 0, 0o600}, {"lock", 0, 0o600}, {"cgroup", 0, 0o600},
			{"..", 0, 0o711}, {"../" + executor.HostfileName, nobodyUID, 0o600}, {"../" + executor.WorkName, nobodyUID, 0o700},
		} {
			fi, err := os.Stat(filepath.Join(adir, f.name))
			if err != nil {
				t.Fatal(err)
			}
			if owner := fi.Sys().(*syscall.Stat_t).Uid; owner != f.uid || fi.Mode().Perm() != f.mode {
				t.Errorf("%s is uid %d's, mode %04o; want uid %d's, mode %04o", f.name, owner, fi.Mode().Perm(), f.uid, f.mode)
			}
		}
	}
}

// TestCommandRunAsRefused: NewCommand refuses, naming run_as, root, an
// unknown user, no user at all when the daemon runs as root, and a user
// the daemon cannot switch to when it does not.
func TestCommandRunAsRefused(t *testing.T) {
	t.Parallel()
	type refusal struct{ runAs, want string }
	cases := []refusal{
		{"metasched-no-such-user", `run_as: no user "metasched-no-such-user" on this machine`},
		{"4000000000", `run_as: no user "4000000000" on this machine`},
	}
	if os.Geteuid() == 0 {
		cases = append(cases,
			refusal{"root", `run_as: "root" names root (uid 0): jobs never run as root`},
			refusal{"0", `run_as: "0" names root (uid 0): jobs never run as root`},
			refusal{"", "run_as: required when the daemon runs as root"})
	} else {
		cases = append(cases, refusal{"root", `run_as: "root" is root (uid 0), but the daemon runs as`})
	}
	for _, c := range cases {
		ex, err := executor.NewCommand(zerolog.Nop(), executor.CommandOptions{RunAs: c.runAs})
		if err == nil || !strings.Contains(err.Error(), c.want) || ex != nil {
			t.Errorf("run_as %q: %v, %v; want the error %q", c.runAs, ex, err, c.want)
		}
	}
}

// TestCheckRunAs checks the rules of run_as for daemons of any user,
// whoever runs the test: root switches to an unprivileged user, another
// user only runs as itself.
func TestCheckRunAs(t *testing.T) {
	t.Parallel()
	if _, err := user.Lookup("nobody"); err != nil {
		t.Skip("no user nobody on this machine:", err)
	}
	tests := []struct {
		runAs    string
		euid     int
		uid      uint32
		switched bool
		wantErr  string
	}{
		{runAs: "nobody", euid: 0, uid: nobodyUID, switched: true},
		{runAs: "65534", euid: 0, uid: nobodyUID, switched: true},
		{runAs: "root", euid: 0, wantErr: `run_as: "root" names root (uid 0): jobs never run as root`},
		{runAs: "", euid: 0, wantErr: "run_as: required when the daemon runs as root"},
		{runAs: "", euid: nobodyUID, uid: nobodyUID},
		{runAs: "nobody", euid: nobodyUID, uid: nobodyUID},
		{runAs: "65534", euid: nobodyUID, uid: nobodyUID},
		{runAs: "", euid: 4000000000, uid: 4000000000}, // a uid with no name runs as itself
		{runAs: "root", euid: nobodyUID,
			wantErr: `run_as: "root" is root (uid 0), but the daemon runs as nobody (uid 65534) and cannot switch users: leave run_as out, or name the daemon's own user, or start the daemon as root`},
		{runAs: "nobody", euid: 4000000000,
			wantErr: `run_as: "nobody" is nobody (uid 65534), but the daemon runs as uid 4000000000 and cannot switch users`},
		{runAs: "metasched-no-such-user", euid: nobodyUID, wantErr: `run_as: no user "metasched-no-such-user" on this machine`},
	}
	for _, tt := range tests {
		uid, switched, err := executor.CheckRunAs(tt.runAs, tt.euid)
		switch {
		case tt.wantErr != "":
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("run_as %q, daemon uid %d: %v, want the error %q", tt.runAs, tt.euid, err, tt.wantErr)
			}
		case err != nil || uid != tt.uid || switched != tt.switched:
			t.Errorf("run_as %q, daemon uid %d: uid %d, switched %v, %v; want uid %d, switched %v",
				tt.runAs, tt.euid, uid, switched, err, tt.uid, tt.switched)
		}
	}
}

// TestSupervisorIDs: the supervisor never starts a command as root, and
// takes the ids only together.
func TestSupervisorIDs(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		uid, gid, groups string
		ok               bool
		wantErr          string
	}{
		{},
		{uid: "65534", gid: "65534", groups: "65534,100", ok: true},
		{uid: "65534", gid: "65534", ok: true},
		{uid: "0", gid: "0", wantErr: "--uid 0: a command never runs as root"},
		{gid: "65534", wantErr: "--gid and --groups go with --uid"},
		{uid: "65534", gid: "x", wantErr: `--gid "x": not a numeric id`},
		{uid: "65534", gid: "1", groups: "1,,2", wantErr: `--groups "": not a numeric id`},
	} {
		ok, err := executor.ParseIDs(tt.uid, tt.gid, tt.groups)
		if tt.wantErr != "" {
			if err == nil || err.Error() != tt.wantErr {
				t.Errorf("%+v: %v, want %q", tt, err, tt.wantErr)
			}
			continue
		}
		if err != nil || ok != tt.ok {
			t.Errorf("%+v: ids %v, %v; want %v", tt, ok, err, tt.ok)
		}
	}
}

// TestCommandRunDirUnreachable: a daemon that runs as root warns at its
// start that the jobs run on its machine and as whom, and in a job's run
// when the run directory lies below a directory the user cannot search:
// the command cannot read its hostfile.
func TestCommandRunDirUnreachable(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("the commands switch users only under a daemon that runs as root")
	}
	var log syncbuf.Buffer
	ex, err := executor.NewCommand(zerolog.New(&log), executor.CommandOptions{RunAs: "nobody"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(log.String(), `"level":"warn"`) ||
		!strings.Contains(log.String(), "the host-command executor runs every job's command on this machine, the daemon's own, as user nobody (uid 65534)") {
		t.Errorf("no warning at the start: %s", log.String())
	}
	private := t.TempDir() // 0700, root's
	if err := os.Chmod(private, 0o700); err != nil {
		t.Fatal(err)
	}
	out := newWatchWriter("")
	r := shRun(t, `cat "$METASCHED_HOSTFILE" 2>/dev/null || echo cannot read it`, out)
	r.Dir = filepath.Join(private, "runs", "j-1")
	res, err := ex.Run(context.Background(), r)
	if err != nil || res != (executor.Result{}) {
		t.Fatalf("Run = %+v, %v; want done", res, err)
	}
	if out.String() != "cannot read it\n" {
		t.Errorf("output %q: the command read the hostfile in a private directory", out.String())
	}
	want := "user nobody (uid 65534) cannot reach the job's run directory (" + private + " is mode 0700, owned by uid 0 and gid 0)"
	if !strings.Contains(log.String(), want) {
		t.Errorf("the log does not say %q:\n%s", want, log.String())
	}
}
