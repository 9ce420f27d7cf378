// Package cli is what the project's two programs, metasched and taskfarm,
// share about running their command tree: the exit codes and the error
// that marks bad usage.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"
)

// Exit codes.
const (
	OK          = 0
	Failure     = 1
	Usage       = 2
	Interrupted = 130
)

// UsageError marks bad usage or bad input: exit code 2.
type UsageError struct{ Err error }

func (e UsageError) Error() string { return e.Err.Error() }
func (e UsageError) Unwrap() error { return e.Err }

// Usagef is a UsageError of a formatted error.
func Usagef(format string, args ...any) error {
	return UsageError{fmt.Errorf(format, args...)}
}

// Execute runs the command tree on args and returns the program's exit
// code: OK; Usage for a UsageError; Interrupted when ctx was cancelled
// (Ctrl-C, SIGTERM) and the error says so; else Failure. An error is
// printed to stderr after the program's name.
func Execute(ctx context.Context, root *cobra.Command, args []string, stdout, stderr io.Writer) int {
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return OK
	}
	fmt.Fprintf(stderr, "%s: %v\n", root.Name(), err)
	var ue UsageError
	switch {
	case errors.As(err, &ue):
		return Usage
	case errors.Is(err, context.Canceled) && ctx.Err() != nil:
		return Interrupted
	}
	return Failure
}
