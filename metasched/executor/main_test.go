package executor_test

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/rs/zerolog"

	"github.com/metasched/metasched/metasched/executor"
	"github.com/metasched/metasched/selection"
)

// daemonEnv, set to a directory, makes the test binary play a daemon that
// runs one long command (see TestCommandDiesWithDaemon).
const daemonEnv = "METASCHED_EXECUTOR_TEST_DAEMON"

// TestMain makes the test binary a child subreaper, as the daemon is: the
// background processes of a test job whose shell dies are re-parented to
// it and reaped by Command.Run, so that kill(-pgid, 0) finds no process of
// the job's group once Run has returned, whether or not init reaps.
func TestMain(m *testing.M) {
	if dir := os.Getenv(daemonEnv); dir != "" {
		os.Exit(playDaemon(dir))
	}
	if err := executor.BecomeSubreaper(); err != nil {
		fmt.Fprintln(os.Stderr, "executor tests:", err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}

// playDaemon runs a command that prints its PID and sleeps, until the
// test kills this process.
func playDaemon(dir string) int {
	ex := executor.NewCommand(zerolog.Nop(), executor.CommandOptions{})
	_, err := ex.Run(context.Background(), executor.Run{
		JobID:  "j-1",
		Job:    &selection.Job{Name: "orphan", Command: []string{"/bin/sh", "-c", "echo pid=$$; exec sleep 60"}},
		VMs:    []executor.VM{{Name: "vm-0", Site: "s", Host: "h", Master: true, VCPUs: 1}},
		Dir:    dir,
		Output: os.Stdout,
	})
	fmt.Fprintln(os.Stderr, "the command ended while its daemon lived:", err)
	return 1
}
