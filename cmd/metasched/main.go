// Command metasched is the metascheduler's one binary: it runs the daemon
// (serve) and one site's agent (agent), talks to a running daemon (submit,
// jobs, status, cancel, logs, plan, pools, switches, hosts), plans jobs on
// grid files offline (plan --grid), and solves and simulates switching
// policies and selection algorithms (policy, simulate).
//
// Exit codes: 0 success, 1 failure, 2 bad usage or bad input, 130
// interrupted.
//
// The design is described in docs/internals/architecture.md of the
// repository, "The command line".
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/metasched/metasched/metasched/executor"
)

func main() {
	// The command executor runs each job's command under this binary run
	// again as its supervisor.
	executor.MaybeSupervise()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
