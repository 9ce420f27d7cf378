package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/metasched/metasched/metasched/client"
)

// The daemon the client commands talk to, when no flag says.
const (
	envServer     = "METASCHED_SERVER"
	envToken      = "METASCHED_TOKEN"
	defaultServer = "http://127.0.0.1:8080"
)

// daemonFlags are the flags every command that talks to the daemon has.
type daemonFlags struct {
	server, token string
}

func (d *daemonFlags) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&d.server, "server", "", "the daemon's address (default $"+envServer+", else "+defaultServer+")")
	fl.StringVar(&d.token, "token", "", "the daemon's API token (default $"+envToken+"; the variable keeps it out of the process list)")
}

// client returns a client of the daemon: --server, else METASCHED_SERVER,
// else the default address; --token, else METASCHED_TOKEN, which one of
// them must give.
func (d *daemonFlags) client() (*client.Client, error) {
	server := firstNonEmpty(d.server, os.Getenv(envServer), defaultServer)
	base, err := daemonURL(server)
	if err != nil {
		if d.server != "" {
			return nil, usagef("--server: %w", err)
		}
		return nil, usagef("%s: %w", envServer, err)
	}
	token := firstNonEmpty(d.token, os.Getenv(envToken))
	if token == "" {
		return nil, usagef("no token for the daemon at %s: give --token TOKEN or set %s (the daemon prints its token when it starts)", base, envToken)
	}
	return client.New(base, token), nil
}

func firstNonEmpty(s ...string) string {
	for _, x := range s {
		if x != "" {
			return x
		}
	}
	return ""
}

// daemonURL checks a daemon's address; a bare HOST:PORT means http.
func daemonURL(s string) (string, error) {
	if !strings.Contains(s, "://") {
		s = "http://" + s
	}
	u, err := url.Parse(s)
	if err != nil {
		return "", fmt.Errorf("want http://HOST:PORT, got %q", s)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return "", fmt.Errorf("want http://HOST:PORT, got %q", s)
	}
	return strings.TrimRight(u.String(), "/"), nil
}

// outputFlag registers --output of a command that prints what the daemon
// answers.
func outputFlag(cmd *cobra.Command, p *string) {
	cmd.Flags().StringVar(p, "output", "table", "table or json (json: the daemon's answer as the API gives it, indented)")
}

// callDaemon makes one call to the daemon and prints its answer: the API's
// JSON with --output json, else table. file names the job file the call
// sends, for the errors.
func callDaemon[T any](ctx context.Context, e *env, d *daemonFlags, output, file string,
	call func(context.Context, *client.Client) (T, error), table func(io.Writer, T)) error {
	if err := checkOutput(output); err != nil {
		return err
	}
	c, err := d.client()
	if err != nil {
		return err
	}
	v, err := call(ctx, c)
	if err != nil {
		return daemonError(c, err, file)
	}
	if output == "json" {
		return writeJSON(e.stdout, v)
	}
	table(e.stdout, v)
	return nil
}

// daemonError says what went wrong with a call to the daemon. A request
// body the daemon refuses (400, 413, 415) is bad input, exit code 2, with
// its field problems on their own lines and, when it came from a file, the
// file's name first; the rest are failures (exit code 1).
func daemonError(c *client.Client, err error, file string) error {
	var re *client.RemoteError
	if !errors.As(err, &re) {
		return err
	}
	switch re.Status {
	case http.StatusBadRequest, http.StatusRequestEntityTooLarge, http.StatusUnsupportedMediaType:
		if file != "" {
			err = fmt.Errorf("%s: %w", file, err)
		}
		return usageError{Err: err}
	case http.StatusUnauthorized:
		return fmt.Errorf("unauthorized by the daemon at %s (check --token or %s): %w", c.Base(), envToken, err)
	}
	return err
}

// Small formatters of the client commands' tables.

// dash shows an empty cell as "-".
func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// stamp shows a time in UTC, so that what is printed does not depend on
// the machine's time zone.
func stamp(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

// seconds shows a run time in a table cell: "-" when unknown.
func seconds(s float64) string {
	switch {
	case s <= 0:
		return "-"
	case s < 120:
		return fmt.Sprintf("%.3g s", s)
	case s < 7200:
		return fmt.Sprintf("%.1f min", s/60)
	}
	return fmt.Sprintf("%.1f h", s/3600)
}
