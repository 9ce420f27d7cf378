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

Run the grid:
  serve          the daemon (with no flags: the built-in demo)
  agent          one site's agent (hypervisor proxy) over libvirt, or simulated hosts
  image          build and check guest images (the bundled one, a Debian cloud image)
  tls            the grid's certificates (ca, cert)
  token          the daemon's API tokens (create, list, revoke)
  store          the daemon's store (backup, restore, migrate into etcd)

Use a running daemon (--server or METASCHED_SERVER, default http://127.0.0.1:8080;
the token of --token-file, METASCHED_TOKEN_FILE or METASCHED_TOKEN; --output json):
  submit, jobs, status, cancel, resize, logs, outputs    jobs and their results
  plan           a job's plan (without --grid: the daemon's dry run)
  pools, switches, hosts         pools; switches (start); servers (drain, undrain, clear)
  calibration, calibrate                                 the sites' figures measured in VMs

Research, offline:
  plan --grid    GramVM's selection of clusters for a job on a grid file
  policy         solve, evaluate and print switching policies (solve, evaluate, papers)
  simulate       the policy simulator, the papers' figures, selection streams
  experiment     the papers' workload on QEMU VMs here (realgrid, demo-vms), the daemon at scale

Shell completion: metasched completion bash|zsh|fish (see its --help).`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.Version = version()
	root.SetVersionTemplate("metasched {{.Version}}\n")
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{Err: err} })
	root.AddCommand(newVersionCmd(e), newPolicyCmd(e), newPlanCmd(e), newSimulateCmd(e), newAgentCmd(e), newServeCmd(e),
		newSubmitCmd(e), newJobsCmd(e), newStatusCmd(e), newCancelCmd(e), newResizeCmd(e), newLogsCmd(e), newOutputsCmd(e),
		newPoolsCmd(e), newSwitchesCmd(e), newHostsCmd(e), newCalibrationCmd(e), newCalibrateCmd(e), newImageCmd(e), newExperimentCmd(e), newTLSCmd(e), newTokenCmd(e), newStoreCmd(e), newDocsCmd(e))
	completionCmds(root)
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

// commit is the build's commit when the build has no version control
// information of its own (go build -buildvcs=false, as GOFLAGS may say):
// make build sets it with -ldflags "-X main.commit=…".
var commit string

// version is what version and --version print: the module's version
// ("devel" for a checkout), the commit it was built from (with "+dirty"
// when its work tree had changes) and the Go that built it.
func version() string {
	v, rev, dirty, goVersion := "devel", commit, false, "unknown"
	if bi, ok := debug.ReadBuildInfo(); ok {
		goVersion = bi.GoVersion
		if bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			v = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				dirty = s.Value == "true"
			}
		}
	}
	rev, dirtyMark := strings.CutSuffix(rev, "+dirty")
	dirty = dirty || dirtyMark
	switch {
	case rev == "":
		rev = "commit unknown"
	case len(rev) > 12:
		rev = "commit " + rev[:12]
	default:
		rev = "commit " + rev
	}
	if dirty {
		rev += "+dirty"
	}
	return v + " (" + rev + ", " + goVersion + ")"
}
