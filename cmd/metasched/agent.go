package main

import (
	"context"
	"errors"
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
	"github.com/metasched/metasched/hypervisorproxy/slurm"
	"github.com/metasched/metasched/hypervisorproxy/virt"
	"github.com/metasched/metasched/internal/httpx"
	"github.com/metasched/metasched/internal/tlsx"
)

func newAgentCmd(e *env) *cobra.Command {
	var (
		configs             []string
		logFormat, logLevel string
	)
	cmd := &cobra.Command{
		Use:   "agent --config site.yaml [--config site2.yaml ...]",
		Short: "Run one site's hypervisor proxy (its hosts over libvirt, an HTTP API)",
		Long: `agent runs one site's hypervisor proxy: it connects to every host of the site
over libvirt, and serves an HTTPS API (the daemon's client certificate; a
bearer token over plain HTTP on loopback with insecure_http) to list hosts and VMs,
create, resize, live-migrate and destroy VMs, reconfigure a host for another
pool, and measure the bandwidth to another agent.

The site file (see docs/reference/site-file.md) names the site, the listen
address, the agent's certificate, key and CA (tls) and the hosts with their
libvirt URIs; without hosts, one file-based libvirt test-driver host per
machine of the site's cluster in the grid file is made, with the cluster's
cores and memory. --config given more than once
runs the agents of several sites in one process, each as it would run alone
(its own listen address, certificate and data directory); the process ends
when any of them ends. Logs are structured (zerolog) on stderr. Ctrl-C stops
the agent.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if len(configs) == 0 {
				return usagef("--config: required (a site file)")
			}
			log, err := newLogger(e.stderr, logFormat, logLevel)
			if err != nil {
				return err
			}
			sites := make([]servedSite, len(configs))
			for i, config := range configs {
				s := &sites[i]
				s.config = config
				if s.site, s.token, s.grid, err = loadSite(config); err != nil {
					return err
				}
				for _, o := range sites[:i] {
					switch {
					case o.site.Site == s.site.Site:
						return usageError{Err: fmt.Errorf("%s: site: %q is %s's too: a site has one agent", config, s.site.Site, o.config)}
					case s.site.DataDir != "" && o.site.DataDir == s.site.DataDir:
						return usageError{Err: fmt.Errorf("%s: data_dir: %s is %s's too", config, s.site.DataDir, o.config)}
					}
				}
			}
			ctx, cancel := context.WithCancel(cmd.Context())
			defer cancel()
			for i := range sites {
				if err := sites[i].start(ctx, log); err != nil {
					return err
				}
				defer sites[i].close()
			}
			// Each site serves until the context ends; the first to end
			// (an error, or the signal) ends the others.
			errs := make(chan error, len(sites))
			for i := range sites {
				go func() {
					err := sites[i].agent.Serve(ctx, sites[i].ln)
					cancel()
					errs <- err
				}()
			}
			var all []error
			for range sites {
				if err := <-errs; err != nil {
					all = append(all, err)
				}
			}
			return errors.Join(all...)
		},
	}
	cmd.Flags().StringArrayVar(&configs, "config", nil, "site file (YAML); more than once: one process serves each site")
	cmd.Flags().StringVar(&logFormat, "log-format", "auto", "log format: json, console, or auto (console on a terminal)")
	cmd.Flags().StringVar(&logLevel, "log-level", "info", "log level: debug, info, warn or error")
	return cmd
}

// servedSite is one site that an agent process serves.
type servedSite struct {
	config string
	site   *hp.Site
	token  string
	grid   *graph.Grid
	agent  *hp.Agent
	ln     net.Listener
	log    zerolog.Logger
}

// start makes the site's agent and its listener.
func (s *servedSite) start(ctx context.Context, log zerolog.Logger) error {
	warnFileLimit(log, s.site.MaxUnproven)
	alog := log.With().Str("site", s.site.Site).Logger()
	var creds *tlsx.Source
	scheme := "https"
	if s.site.TLS != nil {
		var err error
		if creds, err = tlsx.NewSource(*s.site.TLS, tlsx.KindAgent, alog, nil); err != nil {
			return usageError{Err: fmt.Errorf("%s: %w", s.config, err)}
		}
	} else {
		scheme = "http"
		alog.Warn().Str("listen", s.site.Listen).Msg("insecure_http: the API is plain HTTP with a bearer token, on the loopback interface only; give tls to serve the grid")
	}
	if sl := s.site.Slurm; sl != nil {
		// A controller out of reach, or a credential munge refuses, stops
		// the agent here rather than leaving every node unreachable.
		if err := slurm.Check(ctx, sl); err != nil {
			return fmt.Errorf("%s: slurm: %w", s.config, err)
		}
	}
	a, err := hp.New(ctx, hp.Config{Site: s.site, TLS: creds, Token: s.token, Grid: s.grid,
		Connect: slurm.Connector(s.site.Slurm, sim.Connector(virt.Connector(log))), Logger: alog})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", s.site.Listen)
	if err != nil {
		a.Close()
		return fmt.Errorf("%s: listen: %w", s.config, err)
	}
	s.agent, s.ln, s.log = a, ln, alog
	alog.Info().Str("address", scheme+"://"+ln.Addr().String()).Msg("agent listening")
	return nil
}

// close closes the site's listener (if Serve has not) and agent.
func (s *servedSite) close() {
	_ = s.ln.Close()
	if err := s.agent.Close(); err != nil {
		s.log.Warn().Err(err).Msg("agent close")
	}
	s.log.Info().Msg("agent stopped")
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
