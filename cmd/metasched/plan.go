package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/metasched/metasched/graph"
	"github.com/metasched/metasched/selection"
)

type planFlags struct {
	job, grid, algorithm, master, output string
	restarts                             int
	daemon                               daemonFlags
	// algorithmSet says --algorithm was given: it then overrides the job
	// file's placement.
	algorithmSet bool
}

func newPlanCmd(e *env) *cobra.Command {
	var f planFlags
	cmd := &cobra.Command{
		Use:   "plan --job FILE [--grid FILE]",
		Short: "Choose the clusters and master cluster that run a job fastest, and explain why",
		Long: `plan chooses where a master-worker job runs on a grid: the master cluster, the
worker clusters and how many machines of each, so that the job runs fastest
while every worker stays above the job's efficiency. It prints the plan with
an explanation: for each cluster used, its bandwidth, its machines and what
bound them; for each cluster left out, why.

With --grid, offline: the grid file says what exists, every machine is free,
and the job's type is not checked against the daemon's pools. The job file's
placement (gramvm: hill climbing; met, mct, olb) and master are used unless
--algorithm or --master is given.

Without --grid, the daemon (--server, --token) plans the job as it would if
it were submitted now, without submitting it: on the free hosts of the job's
pool and the links' measured bandwidths, by hill climbing with its own
settings and the job file's placement and master (so --algorithm, --restarts
and --master are for offline plans).
The plan is printed as offline, followed by the free hosts of each cluster,
the measured links, and whether the job would wait in its pool's queue.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f.algorithmSet = cmd.Flags().Changed("algorithm")
			if f.grid == "" {
				return planDaemon(cmd, e, f)
			}
			return planCmd(cmd.Context(), e, f)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.job, "job", "", "job file (YAML or JSON)")
	fl.StringVar(&f.grid, "grid", "", "grid file (YAML or JSON); without it, ask the daemon")
	fl.StringVar(&f.algorithm, "algorithm", string(selection.HillClimb), "hillclimb, exhaustive, met, mct or olb")
	fl.IntVar(&f.restarts, "restarts", selection.DefaultRestarts, "hill-climbing restarts: the number of Kruskal zones")
	fl.StringVar(&f.master, "master", "", "force this master cluster (hillclimb and exhaustive)")
	fl.StringVar(&f.output, "output", "table", "table or json")
	f.daemon.register(cmd)
	return cmd
}

// loadGrid reads and validates a grid file and builds its graph.
func loadGrid(path string) (*graph.Graph, error) {
	grid, err := parseFlagFile("--grid", path, graph.ParseGrid)
	if err != nil {
		return nil, err
	}
	g, err := graph.New(grid)
	if err != nil {
		return nil, usageError{Err: fmt.Errorf("%s: %w", path, err)}
	}
	return g, nil
}

// loadJob reads and validates a job file.
func loadJob(path string) (*selection.Job, error) {
	return parseFlagFile("--job", path, selection.ParseJob)
}

// parseAlgorithm checks an algorithm name.
func parseAlgorithm(flag, s string) (selection.Algorithm, error) {
	a := selection.Algorithm(s)
	if !slices.Contains(selection.Algorithms, a) {
		names := make([]string, len(selection.Algorithms))
		for i, x := range selection.Algorithms {
			names[i] = string(x)
		}
		return "", usagef("%s: unknown algorithm %q: want one of %s", flag, s, strings.Join(names, ", "))
	}
	return a, nil
}

func planCmd(ctx context.Context, e *env, f planFlags) error {
	if err := checkOutput(f.output); err != nil {
		return err
	}
	alg, err := parseAlgorithm("--algorithm", f.algorithm)
	if err != nil {
		return err
	}
	if f.restarts < 1 {
		return usagef("--restarts: must be >= 1, got %d", f.restarts)
	}
	g, err := loadGrid(f.grid)
	if err != nil {
		return err
	}
	job, err := loadJob(f.job)
	if err != nil {
		return err
	}
	if !f.algorithmSet && job.Placement != "" {
		alg = job.Placement.Algorithm()
	}
	master := -1
	switch {
	case f.master != "":
		if alg != selection.HillClimb && alg != selection.Exhaustive {
			return usagef("--master: the single-cluster baselines (%s) choose their own cluster; use it with hillclimb or exhaustive", alg)
		}
		m, ok := g.Grid().Index(f.master)
		if !ok {
			return usagef("--master: no cluster %q in %s", f.master, f.grid)
		}
		master = m
	case job.Master != "":
		if alg != selection.HillClimb && alg != selection.Exhaustive {
			return usagef("%s: master: the single-cluster baselines (%s) choose their own cluster: give --algorithm hillclimb or exhaustive, or --master", f.job, alg)
		}
		m, ok := g.Grid().Index(job.Master)
		if !ok {
			return usagef("%s: master: no cluster %q in %s", f.job, job.Master, f.grid)
		}
		master = m
	}
	pl, err := selection.NewPlanner(selection.Problem{Graph: g, Job: job})
	if err != nil {
		return usageError{Err: err}
	}
	p, err := plan(ctx, pl, alg, selection.Options{Master: master, Restarts: f.restarts})
	if err != nil {
		return err
	}
	if f.output == "json" {
		if err := writeJSON(e.stdout, p); err != nil {
			return err
		}
	} else {
		printPlan(e.stdout, p, job)
	}
	if !p.Feasible {
		return fmt.Errorf("no plan: %s", p.Reason)
	}
	return nil
}

// plan runs one algorithm, and gives every plan the Kruskal zones.
func plan(ctx context.Context, pl *selection.Planner, alg selection.Algorithm, o selection.Options) (selection.Plan, error) {
	var (
		p   selection.Plan
		err error
	)
	switch alg {
	case selection.HillClimb:
		p, err = pl.HillClimb(ctx, o)
	case selection.Exhaustive:
		p, err = pl.Exhaustive(ctx, o)
	default:
		p, err = pl.Baseline(alg, nil)
	}
	if err != nil {
		if ctx.Err() != nil {
			return p, err
		}
		return p, usageError{Err: err}
	}
	if p.Zones == nil {
		zones, err := pl.Graph().Zones(max(o.Restarts, 1))
		if err != nil {
			return p, err
		}
		p.Zones = pl.Graph().ZoneNames(zones)
	}
	return p, nil
}

// printPlan writes a plan as a grid user reads it.
func printPlan(w io.Writer, p selection.Plan, job *selection.Job) {
	fmt.Fprintf(w, "Job %s: %d tasks of %.3g operations, %.3g bytes to and from the master each, efficiency >= %g\n",
		job.Name, job.Tasks, job.TaskOps, job.TaskBytes, job.Efficiency)
	fmt.Fprintf(w, "Algorithm: %s", p.Algorithm)
	if p.Algorithm == selection.HillClimb {
		fmt.Fprintf(w, ", %d restarts from the Kruskal zones", len(p.Zones))
	}
	fmt.Fprintf(w, " (%d plans evaluated)\n", p.Evaluations)
	if len(p.Zones) > 0 {
		zs := make([]string, len(p.Zones))
		for i, z := range p.Zones {
			zs[i] = "{" + strings.Join(z, ", ") + "}"
		}
		fmt.Fprintf(w, "Zones: %s\n", strings.Join(zs, " "))
	}
	fmt.Fprintln(w)
	printPlanBody(w, p)
}

// printPlanBody writes what a plan chose and why: the clusters used, and
// those left out.
func printPlanBody(w io.Writer, p selection.Plan) {
	if !p.Feasible {
		fmt.Fprintf(w, "No plan: %s\n", p.Reason)
	} else {
		forced := ""
		if p.MasterForced {
			forced = " (forced)"
		}
		fmt.Fprintf(w, "Master on %s%s. %d machines (%s and the master) finish %s, whole, in %s (%.4g tasks/s)",
			p.Master, forced, p.Machines, counted(p.Machines-1, "worker"), counted(p.Tasks, "task"), duration(p.Runtime), p.Rate)
		if p.Start > 0 {
			fmt.Fprintf(w, ", once the cluster is ready in %s", duration(p.Start))
		}
		if p.CostPerHour > 0 {
			fmt.Fprintf(w, ", %.4g per hour", p.CostPerHour)
		}
		fmt.Fprintln(w, ".")
		fmt.Fprintln(w)
		var rows [][]string
		for _, c := range p.Clusters {
			name := c.Name
			if c.Master {
				name += " (master)"
			}
			rows = append(rows, []string{name, fmt.Sprint(c.Machines), fmt.Sprint(c.Free), fmt.Sprint(c.Tasks), fmt.Sprintf("%.4g", c.BandwidthMbps),
				fmt.Sprintf("%.4g", c.Rate), string(c.Limit), c.Why})
		}
		writeColumns(w, []string{"CLUSTER", "WORKERS", "FREE", "TASKS", "MBIT/S", "TASKS/S", "LIMIT", "WHY"}, rows)
	}
	if len(p.Excluded) > 0 {
		fmt.Fprintln(w)
		fmt.Fprintln(w, "Left out:")
		for _, x := range p.Excluded {
			writeWrapped(w, x.Reason, "  "+x.Name+": ", "    ")
		}
	}
}

// duration formats seconds for people.
func duration(s float64) string {
	switch {
	case s < 120:
		return fmt.Sprintf("%.3g s", s)
	case s < 7200:
		return fmt.Sprintf("%.1f min (%.0f s)", s/60, s)
	}
	return fmt.Sprintf("%.1f h (%.0f s)", s/3600, s)
}
