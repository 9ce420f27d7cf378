package main

import (
	"fmt"
	"io"
	"net"
	"os"
	"time"

	"github.com/rs/zerolog"
	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/metasched/metasched/graph"
	hp "github.com/metasched/metasched/hypervisorproxy"
	"github.com/metasched/metasched/hypervisorproxy/sim"
	"github.com/metasched/metasched/hypervisorproxy/virt"
	"github.com/metasched/metasched/internal/httpx"
	"github.com/metasched/metasched/internal/tlsx"
)

func newAgentCmd(e *env) *cobra.Command {
	var config, logFormat, logLevel string
	cmd := &cobra.Command{
		Use:   "agent --config site.yaml",
		Short: "Run one site's hypervisor proxy (its hosts over libvirt, an HTTP API)",
		Long: `agent runs one site's hypervisor proxy: it connects to every host of the site
over libvirt, and serves an HTTPS API (the daemon's client certificate; a
bearer token over plain HTTP on loopback with insecure_http) to list hosts and VMs,
create, resize, live-migrate and destroy VMs, reconfigure a host for another
pool, and measure the bandwidth to another agent.

The site file (see the README) names the site, the listen address, the
agent's certificate, key and CA (tls) and the hosts with their libvirt URIs; without hosts, one file-based
libvirt test-driver host per machine of the site's cluster in the grid file
is made, with the cluster's cores and memory. Logs are structured (zerolog)
on stderr. Ctrl-C stops the agent.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if config == "" {
				return usagef("--config: required (a site file)")
			}
			log, err := newLogger(e.stderr, logFormat, logLevel)
			if err != nil {
				return err
			}
			site, token, grid, err := loadSite(config)
			if err != nil {
				return err
			}
			warnFileLimit(log, site.MaxUnproven)
			ctx := cmd.Context()
			alog := log.With().Str("site", site.Site).Logger()
			var creds *tlsx.Source
			scheme := "https"
			if site.TLS != nil {
				if creds, err = tlsx.NewSource(*site.TLS, tlsx.KindAgent, alog, nil); err != nil {
					return usageError{Err: fmt.Errorf("%s: %w", config, err)}
				}
			} else {
				scheme = "http"
				alog.Warn().Str("listen", site.Listen).Msg("insecure_http: the API is plain HTTP with a bearer token, on the loopback interface only; give tls to serve the grid")
			}
			a, err := hp.New(ctx, hp.Config{Site: site, TLS: creds, Token: token, Grid: grid,
				Connect: sim.Connector(virt.Connector(log)), Logger: alog})
			if err != nil {
				return err
			}
			defer a.Close()
			ln, err := net.Listen("tcp", site.Listen)
			if err != nil {
				return fmt.Errorf("%s: listen: %w", config, err)
			}
			log.Info().Str("site", site.Site).Str("address", scheme+"://"+ln.Addr().String()).Msg("agent listening")
			err = a.Serve(ctx, ln)
			log.Info().Str("site", site.Site).Msg("agent stopped")
			return err
		},
	}
	cmd.Flags().StringVar(&config, "config", "", "site file (YAML)")
	cmd.Flags().StringVar(&logFormat, "log-format", "auto", "log format: json, console, or auto (console on a terminal)")
	cmd.Flags().StringVar(&logLevel, "log-level", "info", "log level: debug, info, warn or error")
	return cmd
}

// loadSite reads a site file, its token file (plain HTTP) and, when it
// names one, its grid file.
func loadSite(path string) (*hp.Site, string, *graph.Grid, error) {
	site, err := parseFlagFile("--config", path, hp.ParseSite)
	if err != nil {
		return nil, "", nil, err
	}
	var token string
	if site.TLS == nil {
		if token, err = httpx.ReadTokenFile(site.TokenFile); err != nil {
			return nil, "", nil, usageError{Err: fmt.Errorf("%s: token_file: %w", path, err)}
		}
	}
	var grid *graph.Grid
	if site.Grid != "" {
		if grid, err = parseFlagFile(path+": grid", site.Grid, graph.ParseGrid); err != nil {
			return nil, "", nil, err
		}
		if len(site.Hosts) == 0 {
			if _, _, err := hp.GenerateHosts(grid, site.Site, "", func(string) string { return "" }); err != nil {
				return nil, "", nil, usageError{Err: fmt.Errorf("%s: site: %w", path, err)}
			}
		}
	}
	return site, token, grid, nil
}

// logTimeFormat is the logs' time: RFC 3339 with milliseconds.
const logTimeFormat = "2006-01-02T15:04:05.000Z07:00"

// newLogger makes the zerolog logger of a long-running command.
func newLogger(w io.Writer, format, level string) (zerolog.Logger, error) {
	lvl, err := zerolog.ParseLevel(level)
	if err != nil || level == "" {
		return zerolog.Logger{}, usagef("--log-level: must be debug, info, warn or error, not %q", level)
	}
	switch format {
	case "auto":
		if f, ok := w.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
			w = zerolog.ConsoleWriter{Out: w, TimeFormat: time.TimeOnly}
		}
	case "console":
		w = zerolog.ConsoleWriter{Out: w, TimeFormat: time.TimeOnly, NoColor: true}
	case "json":
	default:
		return zerolog.Logger{}, usagef("--log-format: must be json, console or auto, not %q", format)
	}
	// One unit for every duration the logs give: seconds, as their
	// *_s and seconds fields.
	zerolog.DurationFieldUnit = time.Second
	// Times to the millisecond: the order of events across the daemons
	// of a grid (a leader stopping, the next one leading) shows.
	zerolog.TimeFieldFormat = logTimeFormat
	return zerolog.New(w).Level(lvl).With().Timestamp().Logger(), nil
}
