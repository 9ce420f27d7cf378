package executor_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"testing"

	"github.com/rs/zerolog"

	"github.com/metasched/metasched/metasched/executor"
	"github.com/metasched/metasched/selection"
)

// daemonEnv, set to a directory, makes the test binary play a daemon that
// runs one command, the script in scriptEnv, as attempt 1 of a job in that
// directory, with its output to stdout, until the test kills this process
// (see TestCommandOutlivesDaemon).
const (
	daemonEnv = "METASCHED_EXECUTOR_TEST_DAEMON"
	scriptEnv = "METASCHED_EXECUTOR_TEST_SCRIPT"
)

// TestMain lets the test binary be a command's supervisor, as the daemon's
// binary is: Command runs /proc/self/exe with SupervisorArg.
func TestMain(m *testing.M) {
	executor.MaybeSupervise()
	if dir := os.Getenv(daemonEnv); dir != "" {
		os.Exit(playDaemon(dir))
	}
	os.Exit(m.Run())
}

// playDaemon runs the command of scriptEnv and reports how it ended; the
// test kills it before.
func playDaemon(dir string) int {
	ex, err := executor.NewCommand(zerolog.Nop(), executor.CommandOptions{RunAs: jobUser()})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	res, err := ex.Run(context.Background(), daemonRun(dir, os.Getenv(scriptEnv), os.Stdout))
	fmt.Fprintf(os.Stderr, "the command ended while its daemon lived: %+v, %v\n", res, err)
	return 1
}

// daemonRun is the run playDaemon makes: attempt 1 of job j-1 in dir.
func daemonRun(dir, script string, out io.Writer) executor.Run {
	return executor.Run{
		JobID:   "j-1",
		Job:     &selection.Job{Name: "survivor", Command: []string{"/bin/sh", "-c", script}},
		VMs:     []executor.VM{{Name: "vm-0", Site: "s", Host: "h", Master: true, VCPUs: 1}},
		Dir:     dir,
		Attempt: 1,
		Output:  out,
	}
}
