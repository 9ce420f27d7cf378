// Command metasched is the metascheduler's one binary: it plans jobs on
// grids, solves and simulates switching policies and runs site agents; it
// will run the daemon.
//
// Exit codes: 0 success, 1 failure, 2 bad usage or bad input, 130
// interrupted.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
