package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"strings"

	"github.com/metasched/metasched/internal/cli"
	"github.com/spf13/cobra"
	"golang.org/x/term"
)

// Exit codes.
const (
	exitOK          = cli.OK
	exitFailure     = cli.Failure
	exitUsage       = cli.Usage
	exitInterrupted = cli.Interrupted
)

// usageError marks bad usage or bad input: exit code 2.
type usageError = cli.UsageError

var usagef = cli.Usagef

// env is what commands share: their output streams and whether stdout is a
// terminal (progress bars are shown only then).
type env struct {
	stdout, stderr io.Writer
	tty            bool
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	e := &env{stdout: stdout, stderr: stderr}
	if f, ok := stdout.(*os.File); ok {
		e.tty = term.IsTerminal(int(f.Fd()))
	}
	return cli.Execute(ctx, newRoot(e), args, stdout, stderr)
}

func newRoot(e *env) *cobra.Command {
	root := &cobra.Command{
		Use:   "metasched",
		Short: "A metascheduler for grids of clusters",
		Long: `metasched picks the clusters that run master-worker jobs fastest, builds each
job a virtual cluster of VMs, and moves servers between pools dedicated to job
types with an optimal or heuristic switching policy.

The commands: serve (the daemon; with no flags, the built-in demo), agent
(one site's hypervisor proxy over libvirt), plan (GramVM's selection of
clusters for a job on a grid file), policy solve and policy papers (the
pool-switching engine), simulate policies and simulate experiment (the
policy simulator and the papers' figures), simulate selection (a stream of
jobs on a grid, hill climbing against the single-cluster baselines), image
build (the bundled guest image, from Debian packages), experiment realgrid
and demo-vms (the papers' workload on QEMU VMs on this machine), and tls and
token (the grid's certificates and the daemon's tokens).

The daemon's clients: submit, jobs, status, cancel, resize and logs (jobs), plan
without --grid (the daemon's dry run), pools, switches and hosts (the pools
and their servers, hosts clear for a stranded host, hosts drain and undrain
for maintenance), store backup, restore and migrate (the daemon's store; migrate
moves it into etcd), calibration and
calibrate (the sites' figures measured in VMs). They find the daemon
with --server or METASCHED_SERVER (default http://127.0.0.1:8080) and
present the token of --token-file, METASCHED_TOKEN_FILE or METASCHED_TOKEN
over https, checking the daemon against --ca-file or METASCHED_CA_FILE;
--output json prints the API's answer. tls ca and tls cert make the
grid's certificates; token create, list and revoke the daemon's tokens.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{Err: err} })
	root.AddCommand(newVersionCmd(e), newPolicyCmd(e), newPlanCmd(e), newSimulateCmd(e), newAgentCmd(e), newServeCmd(e),
		newSubmitCmd(e), newJobsCmd(e), newStatusCmd(e), newCancelCmd(e), newResizeCmd(e), newLogsCmd(e), newOutputsCmd(e),
		newPoolsCmd(e), newSwitchesCmd(e), newHostsCmd(e), newCalibrationCmd(e), newCalibrateCmd(e), newImageCmd(e), newExperimentCmd(e), newTLSCmd(e), newTokenCmd(e), newStoreCmd(e))
	// Unknown subcommands and stray arguments are usage errors.
	root.Args = cobra.NoArgs
	root.RunE = func(cmd *cobra.Command, _ []string) error { return cmd.Help() }
	return root
}

// noArgs is cobra.NoArgs as a usage error.
func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usagef("%s: unexpected argument %q", cmd.CommandPath(), strings.Join(args, " "))
	}
	return nil
}

func newVersionCmd(e *env) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version",
		Args:  noArgs,
		RunE: func(*cobra.Command, []string) error {
			fmt.Fprintln(e.stdout, "metasched", version())
			return nil
		},
	}
}

func version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	v := bi.Main.Version
	if v == "" || v == "(devel)" {
		v = "devel"
	}
	for _, s := range bi.Settings {
		if s.Key == "vcs.revision" && len(s.Value) >= 12 {
			v += " " + s.Value[:12]
		}
	}
	return v + " " + bi.GoVersion
}
