package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/metasched/metasched/internal/httpx"
	"github.com/metasched/metasched/internal/tlsx"
	"github.com/metasched/metasched/metasched/client"
)

// The daemon the client commands talk to, when no flag says.
const (
	envServer     = "METASCHED_SERVER"
	envToken      = "METASCHED_TOKEN"
	envTokenFile  = "METASCHED_TOKEN_FILE"
	envCAFile     = "METASCHED_CA_FILE"
	envCertFile   = "METASCHED_CERT_FILE"
	envKeyFile    = "METASCHED_KEY_FILE"
	defaultServer = "http://127.0.0.1:8080"
)

// daemonFlags are the flags every command that talks to the daemon has.
// The token never comes as an argument (the process list would show
// it): from a file, or from the environment.
type daemonFlags struct {
	server, tokenFile, caFile, certFile, keyFile string
}

func (d *daemonFlags) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&d.server, "server", "", "the daemon's address, https://HOST:PORT, or the addresses of a grid's daemons (on etcd) separated by commas, tried in turn (default $"+envServer+", else "+defaultServer+")")
	fl.StringVar(&d.tokenFile, "token-file", "", "a file holding the daemon's API token, private to its owner (default $"+envTokenFile+", else the token in $"+envToken+")")
	fl.StringVar(&d.caFile, "ca-file", "", "the CA certificate the daemon's certificate must be signed by (default $"+envCAFile+", else the system's CAs)")
	fl.StringVar(&d.certFile, "cert-file", "", "a client certificate of the grid's CA to present instead of a token, over https (default $"+envCertFile+")")
	fl.StringVar(&d.keyFile, "key-file", "", "the key of --cert-file (default $"+envKeyFile+")")
}

// client returns a client of the daemon: --server, else METASCHED_SERVER,
// else the default address (several, separated by commas: the daemons of a
// grid on etcd, tried in turn); the token of --token-file, else of
// METASCHED_TOKEN_FILE, else METASCHED_TOKEN, which one of them must
// give; over https, the daemon's certificate checked against --ca-file,
// else METASCHED_CA_FILE, else the system's CAs.
func (d *daemonFlags) client() (*client.Client, error) {
	server := firstNonEmpty(d.server, os.Getenv(envServer), defaultServer)
	var bases []string
	for _, one := range strings.Split(server, ",") {
		b, err := daemonURL(strings.TrimSpace(one))
		if err == nil && len(bases) > 0 && strings.HasPrefix(b, "https://") != strings.HasPrefix(bases[0], "https://") {
			err = fmt.Errorf("the daemons of one grid all serve https, or all plain http: %q and %q", bases[0], b)
		}
		if err != nil {
			return nil, usagef("%s: %w", firstNonEmptyName(d.server, "--server", envServer), err)
		}
		bases = append(bases, b)
	}
	base := strings.Join(bases, ", ")
	certFile := firstNonEmpty(d.certFile, os.Getenv(envCertFile))
	keyFile := firstNonEmpty(d.keyFile, os.Getenv(envKeyFile))
	if (certFile == "") != (keyFile == "") {
		return nil, usagef("--cert-file and --key-file (or %s and %s) go together", envCertFile, envKeyFile)
	}
	token := os.Getenv(envToken)
	var err error
	if file, name := firstNonEmpty(d.tokenFile, os.Getenv(envTokenFile)), firstNonEmptyName(d.tokenFile, "--token-file", envTokenFile); file != "" {
		if token, err = httpx.ReadTokenFile(file); err != nil {
			return nil, usagef("%s: %w", name, err)
		}
	}
	if token == "" && certFile == "" {
		return nil, usagef("no token for the daemon at %s: give --token-file FILE, or set %s or %s (the daemon writes its operator token to DATA_DIR/token)", base, envTokenFile, envToken)
	}
	c := client.NewMany(bases, token)
	caFile := firstNonEmpty(d.caFile, os.Getenv(envCAFile))
	if !strings.HasPrefix(base, "https://") {
		switch {
		case caFile != "" && d.caFile != "":
			return nil, usagef("--ca-file: the daemon at %s serves plain HTTP: give its https:// address", base)
		case certFile != "":
			return nil, usagef("%s: a client certificate goes over https only: give the daemon's https:// address", firstNonEmptyName(d.certFile, "--cert-file", envCertFile))
		}
		return c, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if certFile != "" {
		pair, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, usagef("%s: %w", firstNonEmptyName(d.certFile, "--cert-file", envCertFile), err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	if caFile != "" {
		if cfg.RootCAs, err = tlsx.CAPool(caFile); err != nil {
			return nil, usagef("%s: %w", firstNonEmptyName(d.caFile, "--ca-file", envCAFile), err)
		}
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = cfg
	return c.WithHTTPClient(&http.Client{Timeout: client.DefaultTimeout, Transport: tr}), nil
}

// firstNonEmptyName names where a value came from: flag when the flag's
// value is set, else the environment variable.
func firstNonEmptyName(flagValue, flag, env string) string {
	if flagValue != "" {
		return flag
	}
	return env
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
		return tlsError(c, err)
	}
	switch re.Status {
	case http.StatusBadRequest, http.StatusRequestEntityTooLarge, http.StatusUnsupportedMediaType:
		if file != "" {
			err = fmt.Errorf("%s: %w", file, err)
		}
		return usageError{Err: err}
	case http.StatusUnauthorized:
		return fmt.Errorf("unauthorized by the daemon at %s (check --token-file, %s or %s): %w", c.Base(), envTokenFile, envToken, err)
	}
	return err
}

// tlsError says what is wrong with the daemon's certificate, when that is
// why a call failed.
func tlsError(c *client.Client, err error) error {
	var cve *tls.CertificateVerificationError
	if !errors.As(err, &cve) {
		return err
	}
	return fmt.Errorf("%w (the daemon's CA: --ca-file or %s)", tlsx.Explain(cve.Err, "the daemon at "+c.Base()), envCAFile)
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
