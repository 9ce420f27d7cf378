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

func newHostsCmd(e *env) *cobra.Command {
	var (
		d      daemonFlags
		output string
	)
	cmd := &cobra.Command{
		Use:   "hosts",
		Short: "List the grid's hosts; drain one for maintenance, or clear a stranded one",
		Long: `hosts lists every host of the grid: its site and pool, its state (busy,
idle, switching, stranded or unreachable), its VMs and the vCPUs and memory
they leave free, and, for a host held by a switch or stranded, the switch
(its ID, source and destination pools) and the reason.

A host that could join neither pool in a failed switch is stranded: the
daemon uses it again only once an operator has checked it and run
"metasched hosts clear NAME".

"metasched hosts drain NAME" takes a host out of service for maintenance
(draining while jobs are still on it, drained once none is left);
"metasched hosts undrain NAME" returns it to its pool.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return callDaemon(cmd.Context(), e, &d, output, "",
				func(ctx context.Context, c *client.Client) ([]api.HostView, error) { return c.Hosts(ctx) }, printHosts)
		},
	}
	d.register(cmd)
	outputFlag(cmd, &output)
	cmd.AddCommand(newHostsClearCmd(e), newHostsDrainCmd(e), newHostsUndrainCmd(e))
	return cmd
}

// hostNote says what holds a host: its switch and the reason.
func hostNote(h api.HostView) string {
	note := ""
	if h.Switch != "" {
		note = fmt.Sprintf("%s %s→%s", h.Switch, dash(h.From), dash(h.To))
	}
	if h.Reason != "" {
		if note != "" {
			note += ": "
		}
		note += h.Reason
	}
	return dash(note)
}

func printHosts(w io.Writer, hosts []api.HostView) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "HOST\tSITE\tPOOL\tSTATE\tVMS\tFREE vCPU\tFREE MiB\tSWITCH/REASON")
	for _, h := range hosts {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t%d\t%s\n", h.Name, h.Site, dash(h.Pool), h.State, len(h.VMs),
			h.FreeVCPUs, h.FreeMemoryMiB, hostNote(h))
	}
	tw.Flush()
}

func newHostsClearCmd(e *env) *cobra.Command {
	var (
		d            daemonFlags
		output, pool string
	)
	cmd := &cobra.Command{
		Use:   "clear NAME [--pool P]",
		Short: "Return a stranded host to a pool",
		Long: `hosts clear returns a stranded host to service, once an operator has checked
it: into --pool, or without it into the pool the failed switch took it
from. It prints the host's new pool and state, or with --output json the
host. A host that is not stranded cannot be cleared (exit code 1).`,
		Args: exactArgs(1, "one host name"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return callDaemon(cmd.Context(), e, &d, output, "",
				func(ctx context.Context, c *client.Client) (api.HostView, error) {
					return c.ClearHost(ctx, args[0], pool)
				}, func(w io.Writer, h api.HostView) {
					fmt.Fprintf(w, "%s: %s in pool %s\n", h.Name, h.State, dash(h.Pool))
				})
		},
	}
	d.register(cmd)
	outputFlag(cmd, &output)
	cmd.Flags().StringVar(&pool, "pool", "", "the pool to return the host to (default: the switch's source pool)")
	return cmd
}

// printDrained prints a host's state after a drain or an undrain.
func printDrained(w io.Writer, h api.HostView) {
	switch h.State {
	case api.HostDraining:
		jobs := map[string]bool{}
		for _, v := range h.VMs {
			if v.Job != "" {
				jobs[v.Job] = true
			}
		}
		fmt.Fprintf(w, "%s: draining (out of pool %s; %s of %s still on it: it is drained when they have ended)\n",
			h.Name, dash(h.Pool), counted(len(h.VMs), "VM"), counted(len(jobs), "job"))
	case api.HostDrained:
		fmt.Fprintf(w, "%s: drained (out of pool %s, no VM of the daemon's on it: it may be stopped)\n", h.Name, dash(h.Pool))
	default:
		fmt.Fprintf(w, "%s: %s in pool %s\n", h.Name, h.State, dash(h.Pool))
	}
}

func newHostsDrainCmd(e *env) *cobra.Command {
	var (
		d      daemonFlags
		output string
		move   bool
	)
	cmd := &cobra.Command{
		Use:   "drain NAME [--move]",
		Short: "Take a host out of service for maintenance",
		Long: `hosts drain takes a host out of its pool's service at once: no new VM is
placed on it, no switch takes it, and the switching policy no longer counts
it among its pool's servers. The jobs already on it run to their end there,
or, with --move, have their VMs live-migrated to other hosts of the same
pool and site that have room (a VM with no such host stays and finishes its
job). The host is "draining" while a job is left on it and "drained" after:
then it may be stopped. The drain survives a restart of the daemon, until
"metasched hosts undrain NAME". A host held by a switch, or stranded,
cannot be drained (exit code 1).`,
		Example: `  metasched hosts drain spain-3
  metasched hosts drain spain-3 --move
  metasched hosts            # spain-3 drained: stop it
  metasched hosts undrain spain-3`,
		Args: exactArgs(1, "one host name"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return callDaemon(cmd.Context(), e, &d, output, "",
				func(ctx context.Context, c *client.Client) (api.HostView, error) {
					return c.DrainHost(ctx, args[0], move)
				}, printDrained)
		},
	}
	d.register(cmd)
	outputFlag(cmd, &output)
	cmd.Flags().BoolVar(&move, "move", false, "live-migrate the host's VMs to other hosts of its pool at its site")
	return cmd
}

func newHostsUndrainCmd(e *env) *cobra.Command {
	var (
		d      daemonFlags
		output string
	)
	cmd := &cobra.Command{
		Use:   "undrain NAME",
		Short: "Return a drained host to its pool",
		Long: `hosts undrain returns a draining or drained host to its pool's service. A
host that is not drained cannot be undrained (exit code 1).`,
		Args: exactArgs(1, "one host name"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return callDaemon(cmd.Context(), e, &d, output, "",
				func(ctx context.Context, c *client.Client) (api.HostView, error) {
					return c.UndrainHost(ctx, args[0])
				}, printDrained)
		},
	}
	d.register(cmd)
	outputFlag(cmd, &output)
	return cmd
}

// counted is "1 job", "2 jobs", "2 switches".
func counted(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	if strings.HasSuffix(noun, "ch") || strings.HasSuffix(noun, "s") {
		return fmt.Sprintf("%d %ses", n, noun)
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
