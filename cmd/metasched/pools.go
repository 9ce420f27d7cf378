package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/metasched/metasched/metasched/api"
	"github.com/metasched/metasched/metasched/client"
)

// The commands about the daemon's pools: pools, switches, and status
// without a job.

func newPoolsCmd(e *env) *cobra.Command {
	var (
		d      daemonFlags
		output string
	)
	cmd := &cobra.Command{
		Use:   "pools",
		Short: "List the daemon's pools: queues, hosts and rates",
		Long: `pools lists the daemon's pools, one per job type: the jobs queued and active
(planned, provisioning or running), the hosts in the pool and how many are
busy (running VMs of jobs) or idle, the hosts switching in and out, and the
current estimates of the arrival rate λ (jobs per second) and the service
rate µ (completions per busy host-second) that the switching policy uses. An
estimate marked * is a prior: too few events have been seen yet.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return callDaemon(cmd.Context(), e, &d, output, "",
				func(ctx context.Context, c *client.Client) ([]api.Pool, error) { return c.Pools(ctx) }, printPools)
		},
	}
	d.register(cmd)
	outputFlag(cmd, &output)
	return cmd
}

func printPools(w io.Writer, pools []api.Pool) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "POOL\tQUEUED\tACTIVE\tHOSTS\tBUSY\tIDLE\tIN\tOUT\tλ/s\tµ/host·s")
	prior := false
	for _, p := range pools {
		mark := ""
		if p.Rates.Prior {
			mark, prior = "*", true
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%.3g%s\t%.3g%s\n", p.Name, p.Queued, p.Active, len(p.Hosts),
			p.Busy, p.Idle, p.SwitchingIn, p.SwitchingOut, p.Rates.Arrival, mark, p.Rates.Service, mark)
	}
	tw.Flush()
	if prior {
		fmt.Fprintln(w, "* a prior: too few events for an estimate yet")
	}
}

// daemonStatus is what status without a job shows: --output json writes
// it as it is.
type daemonStatus struct {
	Pools  []api.Pool     `json:"pools"`
	Policy api.PolicyView `json:"policy"`
	// Switches are those in flight.
	Switches []api.SwitchView `json:"switches"`
}

func (s *daemonStatus) print(w io.Writer) {
	printPools(w, s.Pools)
	fmt.Fprintln(w)
	p := s.Policy
	fmt.Fprintf(w, "Policy in force: %s", dash(p.InForce))
	if p.Configured != p.InForce {
		fmt.Fprintf(w, " (configured: %s)", dash(p.Configured))
	}
	if p.Note != "" {
		fmt.Fprintf(w, ": %s", p.Note)
	}
	fmt.Fprintln(w)
	if t := p.Table; t != nil {
		fmt.Fprintf(w, "Optimal table: %s, %d states", t.Source, t.States)
		if !t.SolvedAt.IsZero() {
			fmt.Fprintf(w, ", solved at %s", stamp(t.SolvedAt))
		}
		if t.Solving {
			fmt.Fprint(w, "; solving again for the current rates")
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "Decisions: %d, of which %d started a switch", p.Decisions, p.Switches)
	if p.Last != "" {
		fmt.Fprintf(w, "; last: %s at %s", p.Last, stamp(p.LastAt))
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "Switches in flight: %d\n", len(s.Switches))
}

func newSwitchesCmd(e *env) *cobra.Command {
	var (
		d      daemonFlags
		output string
		all    bool
		q      client.SwitchesQuery
	)
	cmd := &cobra.Command{
		Use:   "switches [--all [--before ID] [--limit N]]",
		Short: "List the switches of hosts between pools",
		Long: `switches lists the switches of hosts between pools that are in flight (with
--all, also those that ended, as long as the daemon keeps them: see
retention in the serve configuration), newest first: the pools the host
leaves and joins, the host, the phase of the two-phase protocol
(prepare-release at the source, reconfigure, prepare-add at the
destination, commit), how long it has taken, and why it failed if it did.
--limit bounds the page (0: the daemon's page size) and, when more switches
follow, the last line gives the --before of the next page.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if q.Limit < 0 {
				return usagef("--limit: must be 0 (the daemon's page size) or more, got %d", q.Limit)
			}
			q.Active = !all
			return callDaemon(cmd.Context(), e, &d, output, "",
				func(ctx context.Context, c *client.Client) (api.SwitchList, error) {
					return c.Switches(ctx, q)
				},
				printSwitchList)
		},
	}
	d.register(cmd)
	outputFlag(cmd, &output)
	fl := cmd.Flags()
	fl.BoolVar(&all, "all", false, "also the switches that ended")
	fl.StringVar(&q.Before, "before", "", "only switches started before this ID (the next page)")
	fl.IntVar(&q.Limit, "limit", 0, "at most this many switches (0: the daemon's page size)")
	cmd.AddCommand(newSwitchStartCmd(e))
	return cmd
}

func newSwitchStartCmd(e *env) *cobra.Command {
	var (
		d      daemonFlags
		output string
	)
	cmd := &cobra.Command{
		Use:   "start FROM TO",
		Short: "Switch a host from pool FROM to pool TO now (an operator's)",
		Long: `start asks the daemon to switch one host from pool FROM to pool TO, whatever
the policy says (POST /v1/switches): the daemon picks an idle host of FROM if
it has one, and runs the two-phase protocol. FROM must keep min_pool_hosts.
It prints the switch as switches lists it; follow it with switches.`,
		Args: exactArgs(2, "the pools FROM and TO"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return callDaemon(cmd.Context(), e, &d, output, "",
				func(ctx context.Context, c *client.Client) (api.SwitchView, error) {
					return c.RequestSwitch(ctx, args[0], args[1])
				},
				func(w io.Writer, sv api.SwitchView) { printSwitches(w, []api.SwitchView{sv}) })
		},
	}
	d.register(cmd)
	outputFlag(cmd, &output)
	return cmd
}

func printSwitchList(w io.Writer, l api.SwitchList) {
	printSwitches(w, l.Switches)
	if l.Next != "" {
		fmt.Fprintf(w, "More switches: --before %s\n", l.Next)
	}
}

func printSwitches(w io.Writer, sw []api.SwitchView) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tFROM\tTO\tHOST\tPHASE\tSECONDS\tREASON")
	for _, s := range sw {
		reason := s.Reason
		if s.FailedIn != "" {
			reason = strings.TrimPrefix(fmt.Sprintf("%s (failed in %s)", reason, s.FailedIn), " ")
		}
		if s.ClearedTo != "" {
			reason = strings.TrimPrefix(reason+"; cleared to "+s.ClearedTo, "; ")
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%.1f\t%s\n", s.ID, s.From, s.To, dash(s.Host), s.Phase, s.Seconds, dash(reason))
	}
	tw.Flush()
}
