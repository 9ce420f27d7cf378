// Command taskfarm is the papers' master-worker application, run by the
// jobs in their VMs (the bundled guest image has it at /usr/bin/taskfarm):
//
//	taskfarm run                       the job's command in every VM: the master
//	                                   or the worker processes, by METASCHED_ROLE
//	taskfarm bench --seconds S         the compute kernel's rate
//	taskfarm sink --port P             the end of a bandwidth probe
//	taskfarm probe --to ADDR:PORT --bytes N
//
// It is built static, without cgo:
//
//	CGO_ENABLED=0 go build -o bin/taskfarm ./cmd/taskfarm
//
// Exit codes: 0 success, 1 failure, 2 bad usage or bad input (a bad flag
// or environment variable, named), 130 interrupted.
//
// The logic is in package gramvm/taskfarm; the design is described in
// docs/internals/taskfarm.md of the repository.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, &env{args: os.Args[1:], getenv: os.Getenv, stdout: os.Stdout, stderr: os.Stderr, dir: "."})
	stop()
	os.Exit(code)
}
