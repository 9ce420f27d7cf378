package executor_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/rs/zerolog"

	"github.com/metasched/metasched/metasched/executor"
)

// Two owners' accounts in the tests: users every Debian machine has.
const (
	aliceAccount = "nobody"
	bobAccount   = "games"
)

func needAccounts(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("an account per owner needs a daemon that runs as root")
	}
	for _, u := range []string{aliceAccount, bobAccount} {
		if _, err := user.Lookup(u); err != nil {
			t.Skipf("no user %s on this machine: %v", u, err)
		}
	}
}

// TestCommandAccounts runs two owners' jobs against each other, each as
// its owner's account, in run directories below one directory as the
// daemon's are. Bob's job, while Alice's runs, tries to list the jobs,
// read Alice's hostfile, working directory and output, and signal her
// command: all of it is refused. Each job reads its own hostfile and
// writes in its own working directory. An owner with no account (and no
// run_as for the others) cannot run. Before, every job ran as the one
// run_as, its output was 0644 in 0755 directories, and Bob read Alice's.
func TestCommandAccounts(t *testing.T) {
	t.Parallel()
	needAccounts(t)
	runs := filepath.Join(openDir(t), "jobs")
	if err := os.Mkdir(runs, 0o711); err != nil {
		t.Fatal(err)
	}
	ex, err := executor.NewCommand(testLogger(t), executor.CommandOptions{Accounts: map[string]string{"alice": aliceAccount, "cert:bob": bobAccount}})
	if err != nil {
		t.Fatal(err)
	}

	// Alice's job: it keeps a secret in its working directory and its
	// output, and runs on.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	aliceOut := newWatchWriter("ready\n")
	alice := shRun(t, `id -un; echo the secret of alice > secret; cat "$METASCHED_HOSTFILE" > /dev/null && echo hostfile read; echo pid=$$; echo ready; exec sleep 300`, aliceOut)
	alice.JobID, alice.Owner, alice.Dir = "j-1", "alice", filepath.Join(runs, "j-1")
	done := startRun(t, ctx, ex, alice, aliceOut)
	pid := pgidOf(t, aliceOut.String())

	bobOut := newWatchWriter("")
	bob := shRun(t, fmt.Sprintf(`id -un
a=%s
try() { if "$@" > /dev/null 2>&1; then echo "did: $*"; fi; }
try ls %s
try ls "$a"
try cat "$a/hostfile"
try ls "$a/work"
try cat "$a/work/secret"
try cat "$a/attempt-0/output"
try cat "$a/attempt-0/supervisor.log"
try kill -0 %d
try cat "$METASCHED_HOSTFILE"
try touch mine`, alice.Dir, runs, pid), bobOut)
	bob.JobID, bob.Owner, bob.Dir = "j-2", "cert:bob", filepath.Join(runs, "j-2")
	res, err := ex.Run(context.Background(), bob)
	if err != nil || res != (executor.Result{}) {
		t.Fatalf("bob's job: %+v, %v; output %q", res, err, bobOut.String())
	}
	want := bobAccount + "\ndid: cat " + filepath.Join(bob.Dir, executor.HostfileName) + "\ndid: touch mine\n"
	if diff := cmp.Diff(want, bobOut.String()); diff != "" {
		t.Errorf("what bob's job did (-want +got):\n%s", diff)
	}
	cancel()
	rr := waitRun(t, done)
	if !errors.Is(rr.err, context.Canceled) {
		t.Fatalf("alice's job: %v", rr.err)
	}
	if !strings.HasPrefix(aliceOut.String(), aliceAccount+"\nhostfile read\n") {
		t.Errorf("alice's job: output %q, want it to run as %s and read its hostfile", aliceOut.String(), aliceAccount)
	}

	carol := shRun(t, "echo must not run", newWatchWriter(""))
	carol.Owner, carol.Dir = "carol", filepath.Join(runs, "j-3")
	if _, err := ex.Run(context.Background(), carol); !errors.Is(err, executor.ErrNoAccount) || !strings.Contains(err.Error(), "carol has none in executor.accounts") {
		t.Errorf("a job of an owner with no account: %v, want ErrNoAccount", err)
	}
	if err := ex.Admits("carol"); !errors.Is(err, executor.ErrNoAccount) {
		t.Errorf("Admits(carol) = %v, want ErrNoAccount", err)
	}
	if err := ex.Admits("cert:bob"); err != nil {
		t.Errorf("Admits(cert:bob) = %v", err)
	}
}

// TestCommandAccountsRefused: NewCommand refuses, naming accounts and
// the owner, an account that is root, unknown, another owner's or
// run_as's.
func TestCommandAccountsRefused(t *testing.T) {
	t.Parallel()
	needAccounts(t)
	for _, tt := range []struct {
		runAs    string
		accounts map[string]string
		want     string
	}{
		{"", map[string]string{"alice": "root"}, `accounts: alice: "root" names root (uid 0)`},
		{"", map[string]string{"alice": "0"}, `accounts: alice: "0" names root (uid 0)`},
		{"", map[string]string{"alice": "metasched-no-such-user"}, `accounts: alice: no user "metasched-no-such-user" on this machine`},
		{"", map[string]string{"alice": aliceAccount, "bob": "65534"}, "accounts: alice and bob both run as nobody (uid 65534): each owner needs an account of its own"},
		{aliceAccount, map[string]string{"bob": aliceAccount}, "accounts: bob: nobody (uid 65534) is run_as, which every owner that accounts does not name shares"},
	} {
		ex, err := executor.NewCommand(zerolog.Nop(), executor.CommandOptions{RunAs: tt.runAs, Accounts: tt.accounts})
		if err == nil || !strings.Contains(err.Error(), tt.want) || ex != nil {
			t.Errorf("run_as %q, accounts %v: %v; want the error %q", tt.runAs, tt.accounts, err, tt.want)
		}
	}
}
