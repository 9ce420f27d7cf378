package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/rs/zerolog"
	"github.com/spf13/cobra"

	"github.com/metasched/metasched/gramvm/taskfarm"
	"github.com/metasched/metasched/internal/cli"
)

// Exit codes.
const (
	exitOK          = cli.OK
	exitFailure     = cli.Failure
	exitUsage       = cli.Usage
	exitInterrupted = cli.Interrupted
)

// The job's variables that `taskfarm run` reads (the guest executor sets
// them).
const (
	envRole     = "METASCHED_ROLE"
	envMaster   = "METASCHED_MASTER_ADDRESS"
	envTasks    = "METASCHED_TASKS"
	envTaskOps  = "METASCHED_TASK_OPS"
	envBytes    = "METASCHED_TASK_BYTES"
	envHostfile = "METASCHED_HOSTFILE"
	envJobID    = "METASCHED_JOB_ID"
)

// DefaultSinkPort is the sink's port when --port is not given.
const DefaultSinkPort = 7421

// usageError marks bad usage or bad input: exit code 2.
type usageError = cli.UsageError

var usagef = cli.Usagef

// env is what the program takes from its process: its arguments, its
// environment, its output streams and the directory the master writes its
// summary to.
type env struct {
	args           []string
	getenv         func(string) string
	stdout, stderr io.Writer
	dir            string
}

func run(ctx context.Context, e *env) int {
	return cli.Execute(ctx, newRoot(e), e.args, e.stdout, e.stderr)
}

func newRoot(e *env) *cobra.Command {
	root := &cobra.Command{
		Use:   "taskfarm",
		Short: "The papers' master-worker application",
		Long: `taskfarm is the master-worker application of the papers GramVM places: a
master holds T tasks and hands them to worker processes (one per vCPU of each
worker VM), which perform each task's operations of a fixed compute kernel on
its input and send the result back, receiving the next task's input while they
compute one.

run is the job's command in every VM; bench measures the kernel's rate; sink
and probe measure the bandwidth between two VMs.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		Args:          noArgs,
		RunE:          func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{Err: err} })
	root.AddCommand(newRunCmd(e), newBenchCmd(e), newSinkCmd(e), newProbeCmd(e))
	return root
}

// noArgs is cobra.NoArgs as a usage error.
func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usagef("%s: unexpected argument %q", cmd.CommandPath(), strings.Join(args, " "))
	}
	return nil
}

// newLogger logs to w (the job's log, in a VM) from info up, one line an
// event.
func newLogger(w io.Writer) zerolog.Logger {
	return zerolog.New(zerolog.ConsoleWriter{Out: w, TimeFormat: time.TimeOnly, NoColor: true}).Level(zerolog.InfoLevel).
		With().Timestamp().Logger()
}

// source is where a setting of `taskfarm run` came from: its flag when
// given, else its environment variable when set.
type source struct {
	cmd  *cobra.Command
	e    *env
	flag string
	env  string
}

// value is the setting's text and the name of where it came from ("" when
// neither gives it).
func (s source) value(flagValue string) (text, from string) {
	if s.cmd.Flags().Changed(s.flag) {
		return flagValue, "--" + s.flag
	}
	if s.env != "" {
		if v := s.e.getenv(s.env); v != "" {
			return v, s.env
		}
	}
	return "", ""
}

// either names the flag and the variable of a setting.
func (s source) either() string {
	if s.env == "" {
		return "--" + s.flag
	}
	return "--" + s.flag + " or " + s.env
}

func newRunCmd(e *env) *cobra.Command {
	var (
		role, tasks, taskOps, taskBytes, master, hostfile string
		port, procs, prefetch                             int
		workerTimeout, retryFor                           time.Duration
	)
	cmd := &cobra.Command{
		Use:   "run",
		Short: "Run the master or the worker processes of a task farm (the job's command in every VM)",
		Long: `run is a task-farm job's command in each of its VMs. With METASCHED_ROLE=master
(or --role master) it is the master: it listens on TCP --port (7420), runs no
worker itself, hands the METASCHED_TASKS tasks (--tasks) to the workers, and
ends when every task is done: it writes the summary
(tasks per worker VM and per site, bytes moved, wall time) to
taskfarm-summary.json in its working directory, prints one line
"taskfarm-summary: {json}" and exits 0. Worker VMs and their sites are named
from the hostfile (METASCHED_HOSTFILE, --hostfile) by their addresses.

With METASCHED_ROLE=worker it runs --procs worker processes (default: the
online CPUs), each with its own connection to the master at
METASCHED_MASTER_ADDRESS (--master) and --port; they try to reach the master
for --retry-for (the master starts after the workers), and exit 0 when the
master says the run is over. Each process holds --prefetch tasks (2): it
computes one while the next one's input crosses the link, so that a task
costs the longer of its computation and its transfer, not their sum, as the
planning model counts; --prefetch 1 takes one task at a time.

A task is METASCHED_TASK_OPS (--task-ops) operations of the compute kernel on
its input; METASCHED_TASK_BYTES (--task-bytes) are exchanged with the master per
task: the result is 32 bytes (half of task-bytes below 64) and the input the
rest. Non-integral values are rounded. Flags override the variables.

A worker connection on which nothing arrives for --worker-timeout (each side
sends a heartbeat every fifth of it) is dropped and its tasks given to other
workers; a live migration's pause is far shorter.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			src := func(flag, env string) source { return source{cmd: cmd, e: e, flag: flag, env: env} }
			r, from := src("role", envRole).value(role)
			switch {
			case from == "":
				return usagef("%s: required: master or worker", src("role", envRole).either())
			case r != "master" && r != "worker":
				return usagef("%s: must be master or worker, not %q", from, r)
			case port < 1 || port > 65535:
				return usagef("--port: must be from 1 to 65535, not %d", port)
			}
			log := newLogger(e.stderr)
			if id := e.getenv(envJobID); id != "" {
				log = log.With().Str("job", id).Logger()
			}
			// Every VM runs the same command line: a setting of the other
			// role is left alone.
			if r == "worker" {
				return runWorker(cmd.Context(), log, src("master", envMaster), master, port, procs, prefetch, retryFor)
			}
			cfg := taskfarm.MasterConfig{WorkerTimeout: workerTimeout, Log: log}
			var err error
			if cfg.Tasks, err = intSetting(src("tasks", envTasks), tasks, 1, math.MaxInt32); err != nil {
				return err
			}
			ops, err := numberSetting(src("task-ops", envTaskOps), taskOps, 1, 1e18)
			if err != nil {
				return err
			}
			cfg.TaskOps = uint64(ops)
			nb, err := numberSetting(src("task-bytes", envBytes), taskBytes, 0, taskfarm.MaxTaskBytes)
			if err != nil {
				return err
			}
			cfg.TaskBytes = int64(nb)
			if workerTimeout < taskfarm.MinWorkerTimeout || workerTimeout > 24*time.Hour {
				return usagef("--worker-timeout: must be from %v to 24h, not %v", taskfarm.MinWorkerTimeout, workerTimeout)
			}
			hs := src("hostfile", envHostfile)
			if path, from := hs.value(hostfile); from != "" {
				data, err := os.ReadFile(path)
				if err != nil {
					return usagef("%s: %w", from, err)
				}
				if cfg.Hosts, err = taskfarm.ParseHostfile(path, data); err != nil {
					return usagef("%s: %w", from, err)
				}
			}
			return runMaster(cmd.Context(), e, cfg, port)
		},
	}
	f := cmd.Flags()
	f.StringVar(&role, "role", "", "master or worker (default: "+envRole+")")
	f.StringVar(&tasks, "tasks", "", "the tasks of the run, T (default: "+envTasks+")")
	f.StringVar(&taskOps, "task-ops", "", "operations of the kernel per task (default: "+envTaskOps+")")
	f.StringVar(&taskBytes, "task-bytes", "", "bytes exchanged with the master per task (default: "+envBytes+")")
	f.StringVar(&master, "master", "", "a worker's master: its address or host name, without the port (default: "+envMaster+")")
	f.IntVar(&port, "port", taskfarm.DefaultPort, "the master's TCP port")
	f.IntVar(&procs, "procs", runtime.NumCPU(), "a worker VM's worker processes (default: the online CPUs)")
	f.IntVar(&prefetch, "prefetch", taskfarm.DefaultPrefetch, "the tasks each worker process holds at once: it computes one while the next arrive (1: one at a time)")
	f.StringVar(&hostfile, "hostfile", "", "the job's hostfile, which names the worker VMs and their sites (default: "+envHostfile+")")
	f.DurationVar(&workerTimeout, "worker-timeout", taskfarm.DefaultWorkerTimeout, "the master drops a worker connection silent this long")
	f.DurationVar(&retryFor, "retry-for", taskfarm.DefaultRetryFor, "a worker process that cannot reach its master this long gives up")
	return cmd
}

// intSetting is a required integer setting from min to max.
func intSetting(s source, flagValue string, min, max int) (int, error) {
	text, from := s.value(flagValue)
	if from == "" {
		return 0, usagef("%s: required", s.either())
	}
	n, err := strconv.Atoi(text)
	if err != nil || n < min || n > max {
		return 0, usagef("%s: must be a whole number from %d to %d, not %q", from, min, max, text)
	}
	return n, nil
}

// numberSetting is a required number setting from min to max, rounded to
// the nearest integer.
func numberSetting(s source, flagValue string, min, max float64) (float64, error) {
	text, from := s.value(flagValue)
	if from == "" {
		return 0, usagef("%s: required", s.either())
	}
	x, err := strconv.ParseFloat(text, 64)
	if err != nil || math.IsNaN(x) || math.Round(x) < min || math.Round(x) > max {
		return 0, usagef("%s: must be a number from %g to %g, not %q", from, min, max, text)
	}
	return math.Round(x), nil
}

func runMaster(ctx context.Context, e *env, cfg taskfarm.MasterConfig, port int) error {
	m, err := taskfarm.NewMaster(cfg)
	if err != nil {
		return usageError{Err: err}
	}
	lc := net.ListenConfig{KeepAliveConfig: net.KeepAliveConfig{Enable: true, Idle: 5 * time.Second, Interval: 5 * time.Second, Count: 3}}
	ln, err := lc.Listen(ctx, "tcp", net.JoinHostPort("", strconv.Itoa(port)))
	if err != nil {
		return fmt.Errorf("master: %w", err)
	}
	s, err := m.Serve(ctx, ln)
	if err != nil {
		return err
	}
	data, err := json.Marshal(s)
	if err != nil {
		return err
	}
	if err := writeFileAtomic(filepath.Join(e.dir, taskfarm.SummaryFile), append(data, '\n')); err != nil {
		return fmt.Errorf("master: the summary: %w", err)
	}
	fmt.Fprintf(e.stdout, "%s%s\n", taskfarm.SummaryLinePrefix, data)
	return nil
}

// writeFileAtomic writes a file whole or not at all.
func writeFileAtomic(path string, data []byte) error {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if serr := f.Sync(); err == nil {
		err = serr
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
	}
	return err
}

func runWorker(ctx context.Context, log zerolog.Logger, ms source, master string, port, procs, prefetch int, retryFor time.Duration) error {
	addr, from := ms.value(master)
	switch {
	case from == "":
		return usagef("%s: required: the master's address", ms.either())
	case procs < 1 || procs > 65535:
		return usagef("--procs: must be from 1 to 65535, not %d", procs)
	case prefetch < 1 || prefetch > taskfarm.MaxPrefetch:
		return usagef("--prefetch: must be from 1 to %d, not %d", taskfarm.MaxPrefetch, prefetch)
	case retryFor <= 0:
		return usagef("--retry-for: must be more than 0, not %v", retryFor)
	}
	if _, err := netip.ParseAddr(addr); err != nil {
		if strings.Contains(addr, ":") {
			return usagef("%s: %q has a port or is no address: give the address alone, the port with --port", from, addr)
		}
		if !isHostName(addr) {
			return usagef("%s: %q is neither an IP address nor a host name", from, addr)
		}
	}
	name, _ := os.Hostname()
	rep, err := taskfarm.RunWorkers(ctx, taskfarm.WorkerConfig{Master: net.JoinHostPort(addr, strconv.Itoa(port)),
		Procs: procs, Prefetch: prefetch, Name: name, RetryFor: retryFor, Log: log})
	log.Info().Int("procs", procs).Int("prefetch", prefetch).Int("results", rep.Tasks).Int("connections", rep.Connections).Err(err).Msg("task farm worker: ended")
	return err
}

// isHostName: RFC 1123 labels separated by dots.
func isHostName(s string) bool {
	if s == "" || len(s) > 253 {
		return false
	}
	for _, l := range strings.Split(s, ".") {
		if l == "" || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
			return false
		}
		for _, c := range l {
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-') {
				return false
			}
		}
	}
	return true
}

func newBenchCmd(e *env) *cobra.Command {
	var seconds float64
	var procs int
	cmd := &cobra.Command{
		Use:   "bench --seconds S [--procs N]",
		Short: "Measure the compute kernel's rate",
		Long: `bench runs the task farm's compute kernel on N processes for S seconds and
prints one JSON line:

  {"procs":N,"seconds":S,"ops":total,"ops_per_second":total/S,"ops_per_second_per_proc":total/S/N}

(seconds is the time measured, from the start to the last process's end).`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			switch {
			case math.IsNaN(seconds) || seconds <= 0 || seconds > 3600:
				return usagef("--seconds: must be more than 0 and at most 3600, not %g", seconds)
			case procs < 1 || procs > 4096:
				return usagef("--procs: must be from 1 to 4096, not %d", procs)
			}
			r, err := taskfarm.Bench(cmd.Context(), procs, time.Duration(seconds*float64(time.Second)))
			if err != nil {
				return err
			}
			return printJSON(e.stdout, r)
		},
	}
	cmd.Flags().Float64Var(&seconds, "seconds", 1, "how long to run the kernel, in seconds")
	cmd.Flags().IntVar(&procs, "procs", runtime.NumCPU(), "processes running the kernel (default: the online CPUs)")
	return cmd
}

func printJSON(w io.Writer, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", data)
	return err
}

func newSinkCmd(e *env) *cobra.Command {
	var port, count int
	cmd := &cobra.Command{
		Use:   "sink --port P",
		Short: "Answer bandwidth probes",
		Long: `sink accepts TCP connections on port P; on each it reads everything until the
prober half-closes, then writes back one JSON line
{"bytes":n,"seconds":first-read-to-last-read} and closes. It serves until it is
stopped (SIGTERM, SIGINT), or, with --count N, until it has answered N probes.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			switch {
			case port < 1 || port > 65535:
				return usagef("--port: must be from 1 to 65535, not %d", port)
			case count < 0:
				return usagef("--count: must be 0 (no end) or more, not %d", count)
			}
			ln, err := net.Listen("tcp", net.JoinHostPort("", strconv.Itoa(port)))
			if err != nil {
				return fmt.Errorf("sink: %w", err)
			}
			log := newLogger(e.stderr)
			log.Info().Str("listen", ln.Addr().String()).Msg("taskfarm sink: listening")
			return taskfarm.Sink(cmd.Context(), ln, count, log)
		},
	}
	cmd.Flags().IntVar(&port, "port", DefaultSinkPort, "TCP port to listen on")
	cmd.Flags().IntVar(&count, "count", 0, "end after answering this many probes (0: serve until stopped)")
	return cmd
}

func newProbeCmd(e *env) *cobra.Command {
	var to string
	var nbytes int64
	var wait, timeout time.Duration
	cmd := &cobra.Command{
		Use:   "probe --to ADDR:PORT --bytes N",
		Short: "Measure the bandwidth to a sink",
		Long: `probe sends N bytes over one TCP connection to the sink at ADDR:PORT,
half-closes it, reads the sink's answer and prints one JSON line
{"bytes":n,"seconds":s,"mbps":n*8/s/1e6}, the sink's bytes and time. A
refused connection is tried again for --wait (the sink may not listen yet);
the whole probe is bounded by --timeout.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			host, p, err := net.SplitHostPort(to)
			switch {
			case to == "":
				return usagef("--to: required: the sink's ADDR:PORT")
			case err != nil:
				return usagef("--to: %q: %v", to, err)
			case host == "":
				return usagef("--to: %q has no address", to)
			case nbytes < 1 || nbytes > taskfarm.MaxProbeBytes:
				return usagef("--bytes: must be from 1 to %d, not %d", int64(taskfarm.MaxProbeBytes), nbytes)
			case wait < 0:
				return usagef("--wait: must be 0 or more, not %v", wait)
			case timeout <= 0:
				return usagef("--timeout: must be more than 0, not %v", timeout)
			}
			if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
				return usagef("--to: %q: the port must be from 1 to 65535", to)
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			until := time.Now().Add(wait)
			for {
				r, err := taskfarm.Probe(ctx, to, nbytes)
				if err == nil {
					return printJSON(e.stdout, r)
				}
				if !errors.Is(err, syscall.ECONNREFUSED) || time.Now().After(until) {
					return err
				}
				select {
				case <-ctx.Done():
					return err
				case <-time.After(100 * time.Millisecond):
				}
			}
		},
	}
	cmd.Flags().StringVar(&to, "to", "", "the sink, ADDR:PORT")
	cmd.Flags().Int64Var(&nbytes, "bytes", 0, "bytes to send")
	cmd.Flags().DurationVar(&wait, "wait", 30*time.Second, "how long to try again a refused connection")
	cmd.Flags().DurationVar(&timeout, "timeout", 5*time.Minute, "the longest the probe may take")
	return cmd
}
