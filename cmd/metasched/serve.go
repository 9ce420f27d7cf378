package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"time"

	"github.com/rs/zerolog"
	"github.com/spf13/cobra"

	"github.com/metasched/metasched/graph"
	"github.com/metasched/metasched/hypervisorproxy/sim"
	"github.com/metasched/metasched/hypervisorproxy/virt"
	"github.com/metasched/metasched/internal/httpsrv"
	"github.com/metasched/metasched/internal/tlsx"
	"github.com/metasched/metasched/metasched"
	"github.com/metasched/metasched/metasched/dashboard"
	"github.com/metasched/metasched/metasched/demo"
	"github.com/metasched/metasched/metasched/httpapi"
)

// The daemon's clients in the process declare what they need of it.
var (
	_ httpapi.Daemon   = (*metasched.Daemon)(nil)
	_ dashboard.Daemon = (*metasched.Daemon)(nil)
	_ demo.Daemon      = (*metasched.Daemon)(nil)
)

type serveFlags struct {
	config, listen, dataDir, logFormat, logLevel string
	cpuProfile                                   string
	demo, exitAfterDemo, keepData                bool
	demoJobs                                     int
	demoGap                                      time.Duration
}

func newServeCmd(e *env) *cobra.Command {
	var f serveFlags
	cmd := &cobra.Command{
		Use:   "serve [--config FILE]",
		Short: "Run the metasched daemon (with no flags: the built-in demo)",
		Long: `serve runs the metasched daemon: the jobs API (JSON under /v1, over HTTPS
with the configuration's tls, plain HTTP only on a loopback address; a
bearer token or a client certificate of the grid's CA), the durable store, the job lifecycle (GramVM plans each job on
the free hosts of its type's pool, the site agents create its VMs, an
executor runs it, the VMs are destroyed), the cluster manager that asks the
switching policy twice a second, and the two-phase switch coordinator.

The configuration file names the grid, the job types (pools), the agents (or
none, for in-process agents on the libvirt test driver), the policy, the
executor, the data directory and the listen address (see
docs/reference/configuration.md).

With the configuration's store in etcd, several daemons share one grid: one
leads (elected under a lease) and acts; the others stand by on their own
address, forwarding every request to the leader, and one of them takes over
within the lease (store.etcd.lease_ttl, 10 s by default) when the leader is
gone. A leader that can no longer renew its lease stops acting before the
lease can expire and stands by again; serve does not exit for that.

With no --config it runs the built-in demo: the bundled three-site grid with
in-process agents on the libvirt test driver, data in ./metasched-data, the
API on 127.0.0.1:8080, and a stream of jobs of three types with a demand
shift, so that jobs are planned across clusters, VMs created and destroyed and
servers switched toward the busy pool. It prints the address, the dashboard's
address and the absolute path of the operator token's file first, a summary
after the stream, and keeps serving until Ctrl-C (--exit-after-demo exits
after the summary).

Every demo starts fresh: a data directory that an earlier demo left (it
holds the file "demo" that the demo writes) is renamed to
DIR.previous-TIME first, and a line says so; --keep-data continues from it
instead. A data directory the demo did not write is never moved, and
serve with --config never moves one.

The operator token is generated on the first start, kept in the data
directory's database and written to DATA_DIR/token (private to its owner)
for scripts; the daemon never prints it.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !cmd.Flags().Changed("demo") {
				f.demo = f.config == ""
			}
			return serveCmd(cmd.Context(), e, f, cmd.Flags().Changed)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.config, "config", "", "configuration file (YAML); none: the built-in demo")
	fl.StringVar(&f.listen, "listen", metasched.DefaultListen, "listen address (overrides the configuration)")
	fl.StringVar(&f.dataDir, "data-dir", metasched.DefaultDataDir, "data directory (overrides the configuration)")
	fl.BoolVar(&f.demo, "demo", false, "run the demo's stream of jobs (default: on without --config)")
	fl.BoolVar(&f.exitAfterDemo, "exit-after-demo", false, "exit after the demo's summary instead of serving on")
	fl.BoolVar(&f.keepData, "keep-data", false, "demo: continue from the data an earlier demo left in the data directory instead of setting it aside")
	fl.IntVar(&f.demoJobs, "demo-jobs", 100, "jobs in the demo's stream")
	fl.DurationVar(&f.demoGap, "demo-gap", 400*time.Millisecond, "time between two jobs of the demo's stream")
	fl.StringVar(&f.logFormat, "log-format", "auto", "log format: json, console, or auto (console on a terminal)")
	fl.StringVar(&f.logLevel, "log-level", "info", "log level: debug, info, warn or error")
	fl.StringVar(&f.cpuProfile, "cpu-profile", "", "write a CPU profile of the daemon's whole run to this file (go tool pprof reads it)")
	return cmd
}

func serveCmd(ctx context.Context, e *env, f serveFlags, changed func(string) bool) error {
	if f.demoJobs < 1 {
		return usagef("--demo-jobs: must be >= 1, not %d", f.demoJobs)
	}
	if f.demoGap < 0 {
		return usagef("--demo-gap: must be >= 0, not %s", f.demoGap)
	}
	if f.exitAfterDemo && !f.demo {
		return usagef("--exit-after-demo: applies to the demo only (no --config, or --demo)")
	}
	if f.keepData && (!f.demo || f.config != "") {
		return usagef("--keep-data: applies to the built-in demo only (no --config)")
	}
	var cfg *metasched.Config
	var grid *graph.Grid
	var err error
	if f.config != "" {
		if cfg, err = parseFlagFile("--config", f.config, metasched.ParseConfig); err != nil {
			return err
		}
		if grid, err = parseFlagFile(f.config+": grid", cfg.Grid, graph.ParseGrid); err != nil {
			return err
		}
		if changed("listen") {
			cfg.Listen = f.listen
		}
		if changed("data-dir") {
			cfg.DataDir = f.dataDir
		}
	} else if cfg, grid, err = demo.Config(f.dataDir, f.listen); err != nil {
		return err
	}
	if f.demo {
		for _, jt := range demo.Types {
			if _, ok := cfg.Pool(jt.Name); !ok {
				return usagef("--demo: the demo's jobs need the job type %q, which %s does not configure", jt.Name, f.config)
			}
		}
	}
	// Absolute, so that the paths printed (the token's file) work from
	// any directory.
	if cfg.DataDir, err = filepath.Abs(cfg.DataDir); err != nil {
		return err
	}
	if cfg.TLS == nil && !tlsx.Loopback(cfg.Listen) {
		return usagef("listen %s: plain HTTP is served on a loopback address only (127.0.0.1, ::1, localhost): give the configuration's tls", cfg.Listen)
	}
	log, err := newLogger(e.stderr, f.logFormat, f.logLevel)
	if err != nil {
		return err
	}
	log.Debug().Int("procs", setProcs()).Msg("Ps (GOMAXPROCS): the CPUs and 6 more, for the goroutines waiting in fsync, unless GOMAXPROCS is set")
	if f.cpuProfile != "" {
		pf, err := os.Create(f.cpuProfile)
		if err != nil {
			return usagef("--cpu-profile: %w", err)
		}
		if err := pprof.StartCPUProfile(pf); err != nil {
			pf.Close()
			return fmt.Errorf("--cpu-profile: %w", err)
		}
		defer func() {
			pprof.StopCPUProfile()
			if err := pf.Close(); err != nil {
				log.Error().Err(err).Str("file", f.cpuProfile).Msg("the CPU profile is not complete")
			}
		}()
	}
	if cfg.TLS == nil {
		log.Warn().Str("listen", cfg.Listen).Msg("plain HTTP (the demo, or insecure_http): the API and its tokens travel unencrypted, which is safe only because it listens on this machine's loopback interface; nothing is wrong for the demo, but give the configuration's tls to serve a grid")
	}
	warnFileLimit(log, httpsrv.Config{Limits: cfg.Unproven}.WithDefaults().MaxUnproven)
	// The built-in demo starts fresh: the data an earlier demo left is set
	// aside, unless --keep-data. Only the demo's own directory is moved
	// (setAsideDemoData); with --config nothing is.
	builtin := f.demo && f.config == ""
	if builtin && !f.keepData {
		to, err := setAsideDemoData(cfg.DataDir, time.Now())
		if err != nil {
			return err
		}
		if to != "" {
			fmt.Fprintf(e.stdout, "demo: the previous demo's data is set aside in %s, and this run starts fresh (--keep-data continues from it instead)\n", to)
		}
	}
	// A demo on the data of an earlier run starts from where it ended
	// (its pools, its jobs): say so.
	_, err = os.Stat(filepath.Join(cfg.DataDir, "metasched.db"))
	reused := f.demo && err == nil
	// The agents log every VM operation; the daemon says what matters.
	agentLog := log.Level(max(log.GetLevel(), zerolog.WarnLevel))
	opts := metasched.Options{Logger: log, Connect: sim.Connector(virt.Connector(agentLog)), AgentLogger: &agentLog, Version: version()}
	// With the store in etcd, the daemon may stand by first (another
	// leads): it serves the API meanwhile by forwarding to the leader.
	for {
		err := serveTerm(ctx, e, f, cfg, grid, opts, reused, log)
		if !errors.Is(err, metasched.ErrLostLeadership) || ctx.Err() != nil {
			return err
		}
		// The store is in etcd and another daemon may lead now: stand by
		// again, and stand for the leadership again.
		log.Warn().Msg("standing by again: this daemon leads again when the election in etcd chooses it")
		reused = false
	}
}

// serveTerm runs the daemon once: it stands by first with the store in
// etcd, until it leads; it returns metasched.ErrLostLeadership when it
// stopped leading.
func serveTerm(ctx context.Context, e *env, f serveFlags, cfg *metasched.Config, grid *graph.Grid, opts metasched.Options,
	reused bool, log zerolog.Logger) error {
	var standby *httpsrv.Server
	opts.Standby = func(h http.Handler, tc *tls.Config) {
		ln, err := net.Listen("tcp", cfg.Listen)
		if err != nil {
			log.Error().Err(err).Str("listen", cfg.Listen).Msg("cannot serve while standing by")
			return
		}
		standby = httpsrv.New(h, httpsrv.Config{TLS: tc, Limits: cfg.Unproven, Logger: log})
		go func() { _ = standby.Serve(ln) }()
		fmt.Fprintf(e.stdout, "metasched daemon standing by on %s: it forwards requests to the leader until it leads itself\n", ln.Addr())
	}
	d, err := metasched.NewWithGrid(ctx, cfg, grid, opts)
	if standby != nil {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		_ = standby.Shutdown(sctx)
		cancel()
	}
	if err != nil {
		return err
	}
	defer d.Close()
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("listen %s: %w", cfg.Listen, err)
	}
	tokenFile := filepath.Join(cfg.DataDir, "token")
	// The operator token's file is its owner's only (a file left by an
	// older run keeps its mode through WriteFile: set it).
	if err := os.WriteFile(tokenFile, []byte(d.Token()+"\n"), 0o600); err != nil {
		return err
	}
	if err := os.Chmod(tokenFile, 0o600); err != nil {
		return err
	}
	if f.config == "" {
		// The built-in demo's data: the next demo sets it aside.
		if err := markDemoData(cfg.DataDir); err != nil {
			return err
		}
	}
	addr, caEnv := "http://"+ln.Addr().String(), ""
	if cfg.TLS != nil {
		addr, caEnv = "https://"+ln.Addr().String(), " "+envCAFile+"="+cfg.TLS.CA
	}
	// The token itself is never printed: its file is.
	fmt.Fprintf(e.stdout, "metasched daemon on %s (data in %s)\noperator token in %s\ndashboard: %s/ (log in with the operator token: cat %s)\n\n  export METASCHED_SERVER=%s%s\n  export %s=%s\n\n",
		addr, cfg.DataDir, tokenFile, addr, tokenFile, addr, caEnv, envTokenFile, tokenFile)
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	done := make(chan error, 1)
	go func() { done <- d.Run(runCtx, ln, httpapi.New(httpapi.All(d), log)) }()
	if f.demo {
		switch {
		case reused && f.keepData:
			fmt.Fprintf(e.stdout, "demo: continuing from the earlier run in %s (--keep-data): its jobs and its hosts' pools\n", cfg.DataDir)
		case reused && f.config == "":
			fmt.Fprintf(e.stdout, "demo: %s holds a daemon's data that no demo wrote, and it is left as it is: this run starts from it (its jobs, its hosts' pools); give --data-dir for a fresh start\n", cfg.DataDir)
		case reused:
			fmt.Fprintf(e.stdout, "demo: %s holds an earlier run (its jobs, its hosts' pools): this run starts from where it ended\n", cfg.DataDir)
		}
		stream := demo.Stream(f.demoJobs, f.demoGap, 1)
		fmt.Fprintf(e.stdout, "demo: %d jobs of %s, one every %s; most jobs render first, then most simulate\n",
			len(stream), typeNames(), f.demoGap)
		sum, err := demo.Run(runCtx, d, stream, e.stdout)
		if err != nil && ctx.Err() == nil {
			stop()
			<-done
			return err
		}
		if err == nil {
			sum.Print(e.stdout)
		}
		if f.exitAfterDemo || ctx.Err() != nil {
			stop()
			return <-done
		}
		fmt.Fprintf(e.stdout, "\nserving on %s until Ctrl-C\n", addr)
	}
	select {
	case <-ctx.Done():
		stop()
		err := <-done
		if err == nil || errors.Is(err, context.Canceled) {
			return nil // a daemon stopped by a signal exits 0
		}
		return err
	case err := <-done:
		return err
	}
}

func typeNames() string {
	var names []string
	for _, jt := range demo.Types {
		names = append(names, jt.Name)
	}
	slices.Sort(names)
	return fmt.Sprint(names)
}
