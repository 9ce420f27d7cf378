package main

import (
	"context"
	"fmt"
	"io"
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
		Short: "List the grid's hosts, or clear a stranded one",
		Long: `hosts lists every host of the grid: its site and pool, its state (busy,
idle, switching, stranded or unreachable), its VMs and the vCPUs and memory
they leave free, and, for a host held by a switch or stranded, the switch
(its ID, source and destination pools) and the reason.

A host that could join neither pool in a failed switch is stranded: the
daemon uses it again only once an operator has checked it and run
"metasched hosts clear NAME".`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return callDaemon(cmd.Context(), e, &d, output, "",
				func(ctx context.Context, c *client.Client) ([]api.HostView, error) { return c.Hosts(ctx) }, printHosts)
		},
	}
	d.register(cmd)
	outputFlag(cmd, &output)
	cmd.AddCommand(newHostsClearCmd(e))
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
