package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/spf13/cobra"
)

// Execute's exit code and message for each kind of outcome.
func TestExecute(t *testing.T) {
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	for _, c := range []struct {
		name string
		ctx  context.Context
		err  error
		code int
		msg  string
	}{
		{"ok", context.Background(), nil, OK, ""},
		{"failure", context.Background(), errors.New("boom"), Failure, "prog: boom\n"},
		{"usage", context.Background(), fmt.Errorf("wrapped: %w", Usagef("--n: must be %d", 2)), Usage, "prog: wrapped: --n: must be 2\n"},
		{"interrupted", cancelled, fmt.Errorf("stopped: %w", context.Canceled), Interrupted, "prog: stopped: context canceled\n"},
		{"cancelled but not interrupted", context.Background(), context.Canceled, Failure, "prog: context canceled\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			root := &cobra.Command{Use: "prog", SilenceUsage: true, SilenceErrors: true,
				RunE: func(*cobra.Command, []string) error { return c.err }}
			var out, errOut bytes.Buffer
			if code := Execute(c.ctx, root, nil, &out, &errOut); code != c.code || errOut.String() != c.msg {
				t.Errorf("exit %d, stderr %q; want %d, %q", code, errOut.String(), c.code, c.msg)
			}
		})
	}
}
