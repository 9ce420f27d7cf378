package main

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/metasched/metasched/metasched/api"
	"github.com/metasched/metasched/metasched/client"
)

func newResizeCmd(e *env) *cobra.Command {
	var (
		d      daemonFlags
		output string
		r      api.ResizeRequest
	)
	cmd := &cobra.Command{
		Use:   "resize JOB VM [--vcpus N] [--memory-mib M]",
		Short: "Resize a running job's VM live",
		Long: `resize changes the vCPUs and memory of one VM of a provisioning or running
job while it runs, through the agent of its site. A VM grows up to its maxima
(its size plus the daemon's vm_headroom) and as far as its host has room; a
hypervisor that cannot do what is asked (QEMU does not take vCPUs out of a
running VM) refuses it, and the daemon says why (exit code 1). It prints the
VM's new size, or with --output json the VM.`,
		Args: exactArgs(2, "a job ID and the name of one of its VMs"),
		RunE: func(cmd *cobra.Command, args []string) error {
			fl := cmd.Flags()
			if !fl.Changed("vcpus") && !fl.Changed("memory-mib") {
				return usagef("give --vcpus, --memory-mib or both")
			}
			if fl.Changed("vcpus") && r.VCPUs < 1 {
				return usagef("--vcpus: must be >= 1, not %d", r.VCPUs)
			}
			if fl.Changed("memory-mib") && r.MemoryMiB < 1 {
				return usagef("--memory-mib: must be >= 1, not %d", r.MemoryMiB)
			}
			return callDaemon(cmd.Context(), e, &d, output, "",
				func(ctx context.Context, c *client.Client) (api.VM, error) {
					return c.ResizeVM(ctx, args[0], args[1], r)
				},
				func(w io.Writer, vm api.VM) {
					fmt.Fprintf(w, "%s on %s: %d vCPUs (at most %d), %d MiB (at most %d)\n",
						vm.Name, vm.Host, vm.VCPUs, vm.MaxVCPUs, vm.MemoryMiB, vm.MaxMemoryMiB)
				})
		},
	}
	d.register(cmd)
	outputFlag(cmd, &output)
	cmd.Flags().IntVar(&r.VCPUs, "vcpus", 0, "the VM's new number of vCPUs")
	cmd.Flags().IntVar(&r.MemoryMiB, "memory-mib", 0, "the VM's new memory in MiB")
	return cmd
}
