package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/metasched/metasched/metasched/api"
	"github.com/metasched/metasched/selection"
)

func newOutputsCmd(e *env) *cobra.Command {
	var (
		d           daemonFlags
		output, dir string
	)
	cmd := &cobra.Command{
		Use:   "outputs ID",
		Short: "List or fetch a finished job's output files",
		Long: `outputs lists the output files of a finished job's last attempt (the job
file's outputs, copied out of the master VM when its command ended) with
their sizes, and the outputs the master did not write. With --out DIR it
writes each file under DIR at its path (DIR/logs/summary.json), creating the
directories, replacing a file of the same name; a name that would leave DIR
is refused.

The daemon keeps a job's outputs with its run directory: retention.job_dirs
after the job ended (24 hours by default).`,
		Args: exactArgs(1, "one job ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			c, err := d.client()
			if err != nil {
				return err
			}
			ctx, id := cmd.Context(), args[0]
			list, err := c.Outputs(ctx, id)
			if err != nil {
				return daemonError(c, err, "")
			}
			if dir == "" {
				if output == "json" {
					return writeJSON(e.stdout, list)
				}
				printOutputs(e.stdout, list)
				return nil
			}
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return fmt.Errorf("--out: %w", err)
			}
			root, err := os.OpenRoot(dir)
			if err != nil {
				return fmt.Errorf("--out: %w", err)
			}
			defer root.Close()
			for _, f := range list.Files {
				if why := selection.CheckJobFilePath(f.Name); why != "" || !filepath.IsLocal(filepath.FromSlash(f.Name)) {
					return fmt.Errorf("job %s: output %q: refused, it would be written outside %s: %s", id, f.Name, dir, why)
				}
				data, err := c.Output(ctx, id, f.Name)
				if err != nil {
					return daemonError(c, err, "")
				}
				name := filepath.FromSlash(f.Name)
				if d := filepath.Dir(name); d != "." {
					if err := root.MkdirAll(d, 0o755); err != nil {
						return fmt.Errorf("job %s: output %s: %w", id, f.Name, err)
					}
				}
				if err := root.WriteFile(name, data, 0o644); err != nil {
					return fmt.Errorf("job %s: output %s: %w", id, f.Name, err)
				}
				if output != "json" {
					fmt.Fprintf(e.stdout, "%s  %d bytes\n", f.Name, len(data))
				}
			}
			if output == "json" {
				return writeJSON(e.stdout, list)
			}
			printMissing(e.stdout, list)
			return nil
		},
	}
	d.register(cmd)
	outputFlag(cmd, &output)
	cmd.Flags().StringVar(&dir, "out", "", "write the files under this directory")
	return cmd
}

// printOutputs writes the output files as a table, then the missing ones.
func printOutputs(w io.Writer, l api.OutputList) {
	fmt.Fprintf(w, "Job %s, attempt %d: %d output files\n", l.Job, l.Attempt, len(l.Files))
	if len(l.Files) > 0 {
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "NAME\tBYTES")
		for _, f := range l.Files {
			fmt.Fprintf(tw, "%s\t%d\n", f.Name, f.Size)
		}
		tw.Flush()
	}
	printMissing(w, l)
}

// printMissing names the outputs the master did not write.
func printMissing(w io.Writer, l api.OutputList) {
	for _, m := range l.Missing {
		fmt.Fprintf(w, "missing: %s (not copied out of the master VM: see metasched logs %s)\n", m, l.Job)
	}
}
