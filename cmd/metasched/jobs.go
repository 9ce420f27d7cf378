package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"text/tabwriter"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/metasched/metasched/metasched/api"
	"github.com/metasched/metasched/metasched/client"
	"github.com/metasched/metasched/metasched/wire"
	"github.com/metasched/metasched/selection"
)

// The commands about jobs on a running daemon: submit, jobs, status,
// cancel, logs, and plan without a grid.

// exactArgs wants n arguments, named in the error as what.
func exactArgs(n int, what string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != n {
			return usagef("%s: want %s, got %d arguments", cmd.CommandPath(), what, len(args))
		}
		return nil
	}
}

func newSubmitCmd(e *env) *cobra.Command {
	var (
		d           daemonFlags
		output, key string
	)
	cmd := &cobra.Command{
		Use:   "submit FILE",
		Short: "Submit a job file to the daemon",
		Long: `submit sends a job file (YAML or JSON, see docs/reference/job-file.md) to
the daemon, which checks it, stores it and queues it in the pool of its type;
it prints the new job's ID and state ("j-000000000001 queued"), or with
--output json the job.

An input of the job file given as "from: FILE" (a file of this machine,
relative to the job file's directory, any bytes) is read here and sent as
the input's data (base64); the inputs' bounds are checked first, and a
missing, unreadable or too big file is refused, naming the field.

A job file the daemon refuses is reported with every field's problem, one per
line, and exit code 2. Follow the job with "metasched status ID" and read its
output with "metasched logs ID".

A submission whose answer is lost (a timeout, a dropped connection, 502, 503,
504) is sent again with the same idempotency key, so that it makes one job.
--idempotency-key KEY sets the key (1 to 255 letters, digits or -_.:~+/=): a
script that runs submit again after a failure, with the same key and file,
gets the job the first run made instead of a second one.`,
		Args: exactArgs(1, "one job file"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return callDaemon(cmd.Context(), e, &d, output, args[0],
				func(ctx context.Context, c *client.Client) (api.Job, error) {
					body, err := readFlagFile("", args[0])
					if err != nil {
						return api.Job{}, err
					}
					if body, err = inlineInputs(args[0], body); err != nil {
						return api.Job{}, err
					}
					s, err := c.SubmitWith(ctx, body, client.SubmitOptions{IdempotencyKey: key})
					return s.Job, err
				}, printJobState)
		},
	}
	d.register(cmd)
	outputFlag(cmd, &output)
	cmd.Flags().StringVar(&key, "idempotency-key", "", "the submission's idempotency key (default: a random one)")
	return cmd
}

// printJobState writes "ID state".
func printJobState(w io.Writer, j api.Job) {
	fmt.Fprintf(w, "%s %s\n", j.ID, j.State)
}

// parseStates reads --state: job states separated by commas.
func parseStates(s string) ([]api.State, error) {
	if s == "" {
		return nil, nil
	}
	var out []api.State
	for x := range strings.SplitSeq(s, ",") {
		st := api.State(strings.TrimSpace(x))
		if !st.Valid() {
			names := make([]string, len(api.States))
			for i, n := range api.States {
				names[i] = string(n)
			}
			return nil, usagef("--state: unknown state %q: want one or more of %s, separated by commas", x, strings.Join(names, ", "))
		}
		if !slices.Contains(out, st) {
			out = append(out, st)
		}
	}
	return out, nil
}

func newJobsCmd(e *env) *cobra.Command {
	var (
		d                    daemonFlags
		output, state, after string
		q                    client.JobsQuery
	)
	cmd := &cobra.Command{
		Use:   "jobs [--state S[,S]] [--type T] [--limit N]",
		Short: "List the daemon's jobs",
		Long: `jobs lists the daemon's jobs, oldest first: their ID, name, type, state,
master cluster, machines, predicted and measured run times and their ratio
(measured/predicted), and the reason of their last change of state. --state (queued, planned, provisioning, running,
done, failed, cancelled; several separated by commas) and --type select jobs;
--limit bounds the page (0: the daemon's page size) and, when more jobs
follow, the last line gives the --after of the next page.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			states, err := parseStates(state)
			if err != nil {
				return err
			}
			if q.Limit < 0 {
				return usagef("--limit: must be 0 (the daemon's page size) or more, got %d", q.Limit)
			}
			q.States, q.After = states, after
			return callDaemon(cmd.Context(), e, &d, output, "",
				func(ctx context.Context, c *client.Client) (api.JobList, error) { return c.Jobs(ctx, q) }, printJobs)
		},
	}
	d.register(cmd)
	outputFlag(cmd, &output)
	fl := cmd.Flags()
	fl.StringVar(&state, "state", "", "only jobs in these states, separated by commas")
	fl.StringVar(&q.Type, "type", "", "only jobs of this type (pool)")
	fl.StringVar(&after, "after", "", "only jobs after this ID (the next page)")
	fl.IntVar(&q.Limit, "limit", 0, "at most this many jobs (0: the daemon's page size)")
	return cmd
}

func printJobs(w io.Writer, list api.JobList) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tNAME\tTYPE\tSTATE\tMASTER\tMACHINES\tPREDICTED\tMEASURED\tRATIO\tREASON")
	for _, j := range list.Jobs {
		master, machines := "-", "-"
		if p := j.Placement; p != nil && p.Plan.Feasible {
			master, machines = p.Plan.Master, fmt.Sprint(p.Plan.Machines)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", j.ID, j.Name, j.Type, j.State, master, machines,
			seconds(j.PredictedS), seconds(j.MeasuredS), ratio(j.Ratio), dash(j.Reason))
	}
	tw.Flush()
	if list.Next != "" {
		fmt.Fprintf(w, "More jobs: --after %s\n", list.Next)
	}
}

func newStatusCmd(e *env) *cobra.Command {
	var (
		d      daemonFlags
		output string
	)
	cmd := &cobra.Command{
		Use:   "status [ID]",
		Short: "Show a job in detail, or the daemon's pools and policy",
		Long: `status ID shows one job in detail: its state and the reason of its last
change, its plan with the explanation of each cluster used or left out (as
"metasched plan" prints it), its VMs, every transition with its time, its
predicted and measured run times and their ratio, the tasks each cluster
was predicted to do and did (from the task-farm summary of the job's master,
when it wrote one), and its exit code.

status without ID shows the daemon's pools (as "metasched pools"), the
switching policy in force and the number of switches of hosts between pools
in flight. With --output json: the job, or {"pools", "policy", "switches"}
with the switches in flight.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 1 {
				return usagef("%s: want at most one job ID, got %d arguments", cmd.CommandPath(), len(args))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				return callDaemon(cmd.Context(), e, &d, output, "",
					func(ctx context.Context, c *client.Client) (api.Job, error) { return c.Job(ctx, args[0]) }, printJob)
			}
			return callDaemon(cmd.Context(), e, &d, output, "", func(ctx context.Context, c *client.Client) (s daemonStatus, err error) {
				if s.Pools, err = c.Pools(ctx); err != nil {
					return s, err
				}
				if s.Policy, err = c.Policy(ctx); err != nil {
					return s, err
				}
				l, err := c.Switches(ctx, client.SwitchesQuery{Active: true})
				s.Switches = l.Switches
				return s, err
			}, func(w io.Writer, s daemonStatus) { s.print(w) })
		},
	}
	d.register(cmd)
	outputFlag(cmd, &output)
	return cmd
}

// printJob writes one job in detail.
func printJob(w io.Writer, j api.Job) {
	fmt.Fprintf(w, "Job %s: %s, type %s\n", j.ID, j.Name, j.Type)
	state := string(j.State)
	if j.Attempts > 1 {
		state += fmt.Sprintf(" (attempt %d)", j.Attempts)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 1, ' ', 0)
	fmt.Fprintf(tw, "State:\t%s\n", state)
	fmt.Fprintf(tw, "Reason:\t%s\n", dash(j.Reason))
	fmt.Fprintf(tw, "Submitted:\t%s\n", stamp(j.Submitted))
	fmt.Fprintf(tw, "Updated:\t%s\n", stamp(j.Updated))
	predicted := seconds(j.PredictedS)
	if j.StartEndS > 0 {
		predicted += fmt.Sprintf(" (%s of tasks, whole, and %s to start and end)", seconds(j.TaskS()), seconds(j.StartEndS))
	}
	fmt.Fprintf(tw, "Run time:\tpredicted %s, measured %s, ratio %s\n", predicted, seconds(j.MeasuredS), ratio(j.Ratio))
	// The emulated executor runs a plan's time scaled (its time_scale):
	// say so, beside the plan's own run time printed below.
	if j.Placement != nil && j.Placement.Plan.Runtime > 0 && j.TaskS() > 0 {
		if scale := j.TaskS() / j.Placement.Plan.Runtime; math.Abs(scale-1) > 0.01 {
			fmt.Fprintf(tw, "Time scale:\tthe plan's %s of tasks run in %s here (× %.3g: the emulated executor's time_scale)\n",
				seconds(j.Placement.Plan.Runtime), seconds(j.TaskS()), scale)
		}
	}
	if j.ProgramS > 0 {
		fmt.Fprintf(tw, "Program:\t%s by its own summary (its master's start to its last result), ratio %s to the plan's run time\n", seconds(j.ProgramS), ratio(j.ProgramRatio()))
	}
	if j.ExitCode != nil {
		fmt.Fprintf(tw, "Exit code:\t%d\n", *j.ExitCode)
	}
	fmt.Fprintf(tw, "Tasks:\t%s\n", taskSummary(&j.Spec))
	if len(j.Spec.Command) > 0 {
		fmt.Fprintf(tw, "Command:\t%s\n", strings.Join(j.Spec.Command, " "))
	}
	if j.Spec.Elastic {
		fmt.Fprintf(tw, "Elastic:\tyes: it goes on when it loses a worker VM (not its master)\n")
	}
	tw.Flush()

	fmt.Fprintln(w)
	switch p := j.Placement; {
	case p != nil:
		fmt.Fprintf(w, "Plan (%s, %d plans evaluated):\n", p.Plan.Algorithm, p.Plan.Evaluations)
		printPlanBody(w, wire.DomainPlan(p.Plan))
		fmt.Fprintln(w)
		printMeasured(w, p.Measured)
		printCalibrated(w, p.Calibrated)
	case j.State.Terminal():
		fmt.Fprintln(w, "Never planned.")
	default:
		fmt.Fprintln(w, "Not planned yet.")
	}

	if len(j.Clusters) > 0 {
		fmt.Fprintln(w)
		fmt.Fprintln(w, "Tasks per cluster:")
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "CLUSTER\tPREDICTED\tDONE")
		for _, c := range j.Clusters {
			done := "-"
			if c.TasksDone != nil {
				done = fmt.Sprint(*c.TasksDone)
			}
			fmt.Fprintf(tw, "%s\t%.4g\t%s\n", c.Name, c.TasksPredicted, done)
		}
		tw.Flush()
	}

	if len(j.VMs) > 0 {
		fmt.Fprintln(w)
		fmt.Fprintln(w, "VMs:")
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "NAME\tSITE\tHOST\tROLE")
		for _, v := range j.VMs {
			role := "worker"
			if v.Master {
				role = "master"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", v.Name, v.Site, v.Host, role)
		}
		tw.Flush()
	}

	if len(j.LostWorkers) > 0 {
		fmt.Fprintln(w)
		fmt.Fprintln(w, "Lost workers (the job went on without them):")
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "NAME\tSITE\tHOST\tAT\tWHY")
		for _, l := range j.LostWorkers {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", l.Name, l.Site, l.Host, stamp(l.At), l.Reason)
		}
		tw.Flush()
	}

	fmt.Fprintln(w)
	fmt.Fprintln(w, "Transitions:")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "AT\tFROM\tTO\tREASON")
	for _, t := range j.Transitions {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", stamp(t.At), dash(string(t.From)), t.To, dash(t.Reason))
	}
	tw.Flush()
}

// ratio shows measured over predicted run time.
func ratio(r float64) string {
	if r <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.3g", r)
}

// taskSummary describes a job's work as plan's first line does.
func taskSummary(j *api.JobSpec) string {
	return fmt.Sprintf("%d tasks of %.3g operations, %.3g bytes to and from the master each, efficiency >= %g, VMs of %d vCPUs and %d MiB",
		j.Tasks, j.TaskOps, j.TaskBytes, j.Efficiency, j.VM.VCPUs, j.VM.MemoryMiB)
}

// printMeasured writes the line about the links a plan measured.
func printMeasured(w io.Writer, measured []string) {
	if len(measured) == 0 {
		fmt.Fprintln(w, "Measured links: none yet; the plan uses the configured bandwidths")
		return
	}
	fmt.Fprintf(w, "Measured links: %s\n", strings.Join(measured, "; "))
}

// printCalibrated writes the line about the clusters' figures a plan took
// from the calibration, when it took any.
func printCalibrated(w io.Writer, calibrated []string) {
	if len(calibrated) > 0 {
		fmt.Fprintf(w, "Calibrated: %s\n", strings.Join(calibrated, "; "))
	}
}

func newCancelCmd(e *env) *cobra.Command {
	var (
		d      daemonFlags
		output string
	)
	cmd := &cobra.Command{
		Use:   "cancel ID",
		Short: "Cancel a job",
		Long: `cancel cancels a job: a queued job leaves its queue, a job being provisioned
or running has its VMs destroyed. It prints the job's ID and the state the
cancel left it in, or with --output json the job. A job that has already
ended cannot be cancelled (exit code 1).`,
		Args: exactArgs(1, "one job ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return callDaemon(cmd.Context(), e, &d, output, "",
				func(ctx context.Context, c *client.Client) (api.Job, error) { return c.Cancel(ctx, args[0]) }, printJobState)
		},
	}
	d.register(cmd)
	outputFlag(cmd, &output)
	return cmd
}

func newLogsCmd(e *env) *cobra.Command {
	var d daemonFlags
	var raw bool
	cmd := &cobra.Command{
		Use:   "logs ID",
		Short: "Print a job's output",
		Long: `logs prints a job's output as the daemon keeps it (the command executor's
captured output, the emulated executor's record) on stdout: unchanged when
stdout is a file or a pipe, or with --raw; on a terminal, every byte the
terminal would take as a control (escape sequences, carriage returns,
bells, bytes that are not UTF-8) is written escaped, as \x1b, \r or \xff,
so that a job's output cannot retitle, clear or rewrite the terminal.
Newlines and tabs stay.`,
		Args: exactArgs(1, "one job ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := d.client()
			if err != nil {
				return err
			}
			out, err := c.Logs(cmd.Context(), args[0])
			if err != nil {
				return daemonError(c, err, "")
			}
			if len(out) == 0 {
				// Nothing yet: say why, on stderr (stdout stays the output).
				if j, err := c.Job(cmd.Context(), args[0]); err == nil && !j.State.Terminal() && j.State != api.Running {
					fmt.Fprintf(e.stderr, "%s has not started: it is %s (no output yet)\n", j.ID, j.State)
				}
			}
			if e.tty && !raw {
				out = terminalSafe(out)
			}
			_, err = e.stdout.Write(out)
			return err
		},
	}
	d.register(cmd)
	cmd.Flags().BoolVar(&raw, "raw", false, "write the output unchanged, control bytes too, even on a terminal")
	return cmd
}

// terminalSafe returns b with every byte a terminal would take as a
// control escaped: the C0 controls but newline and tab, DEL and bytes
// that are not UTF-8 as \xNN (\r for a carriage return), the C1 controls
// (U+0080–U+009F) as \u00NN, and a backslash as \\ so that the escapes
// read back unambiguously. Printable UTF-8 stays.
func terminalSafe(b []byte) []byte {
	out := make([]byte, 0, len(b))
	for len(b) > 0 {
		r, n := utf8.DecodeRune(b)
		switch {
		case r == utf8.RuneError && n <= 1:
			out = fmt.Appendf(out, "\\x%02x", b[0])
		case r == '\\':
			out = append(out, '\\', '\\')
		case r == '\n' || r == '\t':
			out = append(out, b[0])
		case r == '\r':
			out = append(out, '\\', 'r')
		case r < 0x20 || r == 0x7f:
			out = fmt.Appendf(out, "\\x%02x", r)
		case r >= 0x80 && r <= 0x9f:
			out = fmt.Appendf(out, "\\u%04x", r)
		default:
			out = append(out, b[:n]...)
		}
		b = b[n:]
	}
	return out
}

// planDaemon is plan without --grid: the daemon's dry run.
func planDaemon(cmd *cobra.Command, e *env, f planFlags) error {
	if err := checkOutput(f.output); err != nil {
		return err
	}
	for _, name := range []string{"algorithm", "restarts", "master"} {
		if cmd.Flags().Changed(name) {
			return usagef("--%s: only with --grid: the daemon plans by the job file's placement and master, with its own settings", name)
		}
	}
	body, err := readFlagFile("--job", f.job)
	if err != nil {
		return err
	}
	if body, err = inlineInputs(f.job, body); err != nil {
		return err
	}
	c, err := f.daemon.client()
	if err != nil {
		return err
	}
	res, err := c.Plan(cmd.Context(), body)
	if err != nil {
		return daemonError(c, err, f.job)
	}
	if f.output == "json" {
		if err := writeJSON(e.stdout, res); err != nil {
			return err
		}
	} else {
		printPlanResult(e.stdout, res, body, f.job)
	}
	if p := res.Placement.Plan; !p.Feasible && !res.Waits {
		return fmt.Errorf("no plan: %s", p.Reason)
	}
	return nil
}

// printPlanResult writes the daemon's dry run as plan writes an offline
// plan, then the free hosts, the measured links and whether the job would
// wait.
func printPlanResult(w io.Writer, res api.PlanResult, body []byte, path string) {
	p := wire.DomainPlan(res.Placement.Plan)
	// The daemon accepted the file, so it parses here too; the job line
	// falls back on what the plan says if it does not.
	job, err := selection.ParseJob(path, body)
	if err != nil {
		job = &selection.Job{Name: p.Job, Tasks: p.Tasks}
	}
	printPlan(w, p, job)
	fmt.Fprintln(w)
	names := make([]string, 0, len(res.FreeHosts))
	for n := range res.FreeHosts {
		names = append(names, n)
	}
	slices.Sort(names)
	free := make([]string, len(names))
	for i, n := range names {
		free[i] = fmt.Sprintf("%s %d", n, res.FreeHosts[n])
	}
	pool := ""
	if job.Type != "" {
		pool = " of pool " + job.Type
	}
	if len(free) == 0 {
		fmt.Fprintf(w, "Free hosts%s: none\n", pool)
	} else {
		fmt.Fprintf(w, "Free hosts%s: %s\n", pool, strings.Join(free, ", "))
	}
	printMeasured(w, res.Placement.Measured)
	printCalibrated(w, res.Placement.Calibrated)
	if res.Waits {
		fmt.Fprintln(w, "Submitted now, the job would wait in its pool's queue.")
	}
}
