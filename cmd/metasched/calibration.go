package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/metasched/metasched/internal/yamlx"
	"github.com/metasched/metasched/metasched/api"
	"github.com/metasched/metasched/metasched/client"
	"github.com/metasched/metasched/metasched/lab"
)

// The commands about the daemon's calibration: calibration (the figures)
// and calibrate (measure them now).

func newCalibrationCmd(e *env) *cobra.Command {
	var (
		d      daemonFlags
		output string
	)
	cmd := &cobra.Command{
		Use:   "calibration",
		Short: "List the figures the daemon measured of its sites in VMs",
		Long: `calibration lists what the daemon measures of its sites in VMs, with the task
farm program of the pools' images: each site's operations per second per
vCPU for each image its pools boot (perf), its LAN, and each link VM to VM;
beside each, the grid file's figure, when it was measured and how old it is,
the hosts, its state (measured, due, measuring, failed), when it is measured
next, what a due figure waits for (an idle host: serving its pool, no VM,
no job queued in its pool), and the error of its last attempt. Plans use
the measured figures in place of the grid file's. A site whose agent boots
no guest (an in-process agent on libvirt's test driver) is not calibrated:
its plans keep the grid file's figures, and the list says so.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return callDaemon(cmd.Context(), e, &d, output, "",
				func(ctx context.Context, c *client.Client) (api.Calibration, error) { return c.Calibration(ctx) }, printCalibration)
		},
	}
	d.register(cmd)
	outputFlag(cmd, &output)
	return cmd
}

// calibratePoll is how often calibrate --wait asks the daemon.
var calibratePoll = 2 * time.Second

func newCalibrateCmd(e *env) *cobra.Command {
	var (
		d      daemonFlags
		output string
		site   string
		wait   bool
	)
	cmd := &cobra.Command{
		Use:   "calibrate [--site S] [--wait]",
		Short: "Measure the sites' figures in VMs now",
		Long: `calibrate asks the daemon to measure the figures of a site (--site; without
it, of every site that can be calibrated) now: its operations per second per
vCPU for each image its pools boot, its LAN, and the links that touch it,
each in VMs on idle hosts, one measurement at a time across the grid. It
prints the calibration with those figures due; with --wait, it waits until
each has been measured or has failed, and prints them then (exit code 1
when one failed). Interrupt it to stop waiting: the daemon goes on.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if cmd.Flags().Changed("site") && !yamlx.IsName(site) {
				return usagef("--site: must be a site's name (a-z, 0-9, -), not %q", site)
			}
			if err := checkOutput(output); err != nil {
				return err
			}
			c, err := d.client()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			v, err := c.Calibrate(ctx, site)
			if err != nil {
				return daemonError(c, err, "")
			}
			asked := askedFigures(v, site)
			if wait {
				if v, err = waitCalibrated(ctx, c, asked, v.At, e.stderr); err != nil {
					return daemonError(c, err, "")
				}
			}
			if output == "json" {
				if err := writeJSON(e.stdout, v); err != nil {
					return err
				}
			} else {
				if !wait {
					fmt.Fprintf(e.stdout, "Calibration asked for: %d figures due (%s).\n\n", len(asked), strings.Join(asked, ", "))
				}
				printCalibration(e.stdout, v)
			}
			if wait {
				var failed []string
				for _, f := range v.Figures {
					if slices.Contains(asked, f.Key) && f.State == api.CalibrationFailed {
						failed = append(failed, f.Key)
					}
				}
				if len(failed) > 0 {
					return fmt.Errorf("calibration failed for %s", strings.Join(failed, ", "))
				}
			}
			return nil
		},
	}
	d.register(cmd)
	outputFlag(cmd, &output)
	cmd.Flags().StringVar(&site, "site", "", "the site whose figures to measure (default: every site that can be calibrated)")
	cmd.Flags().BoolVar(&wait, "wait", false, "wait until every figure asked for is measured or has failed")
	return cmd
}

// askedFigures are the keys of the figures a calibration of site (every
// site: "") asked for.
func askedFigures(v api.Calibration, site string) []string {
	var out []string
	for _, f := range v.Figures {
		if site == "" || f.Site == site || f.Peer == site {
			out = append(out, f.Key)
		}
	}
	return out
}

// waitCalibrated asks the daemon until none of the figures asked for at
// is due or being measured, printing to progress how far it is when that
// changes (at most every calibratePoll) or every half minute.
func waitCalibrated(ctx context.Context, c *client.Client, asked []string, at time.Time, progress io.Writer) (api.Calibration, error) {
	last, lastAt := "", time.Time{}
	for {
		v, err := c.Calibration(ctx)
		if err != nil {
			return v, err
		}
		// Times on the daemon's clock: the view's and at are both its.
		if state := lab.CalibrationState(v); state != last || time.Since(lastAt) >= 30*time.Second {
			fmt.Fprintln(progress, lab.CalibrationProgress(v, asked, at))
			last, lastAt = state, time.Now()
		}
		pending := false
		for _, f := range v.Figures {
			if !slices.Contains(asked, f.Key) {
				continue
			}
			done := (f.State == api.CalibrationMeasured && !f.MeasuredAt.Before(at)) ||
				(f.State == api.CalibrationFailed && !f.ErrorAt.Before(at))
			pending = pending || !done
		}
		if !pending {
			return v, nil
		}
		t := time.NewTimer(calibratePoll)
		select {
		case <-ctx.Done():
			t.Stop()
			return v, ctx.Err()
		case <-t.C:
		}
	}
}

// printCalibration writes the calibration as tables.
func printCalibration(w io.Writer, v api.Calibration) {
	how := "automatic"
	if !v.Auto {
		how = "on demand only"
	}
	fmt.Fprintf(w, "Calibration (%s): measured again after %s; benchmark %d s; streams of %d bytes.\n", how,
		time.Duration(v.MaxAgeSeconds*float64(time.Second)), v.BenchSeconds, v.ProbeBytes)
	if v.Measuring != "" {
		fmt.Fprintf(w, "Measuring now: %s\n", v.Measuring)
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SITE\tCALIBRATED\tNOTE")
	for _, s := range v.Sites {
		yes := "yes"
		if !s.Calibrated {
			yes = "no"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", s.Name, yes, dash(s.Note))
	}
	tw.Flush()
	if len(v.Figures) == 0 {
		fmt.Fprintln(w, "\nNo figure: plans use the grid file's.")
		return
	}
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "FIGURE\tMEASURED\tCONFIGURED\tAT\tAGE\tHOSTS\tSTATE\tDUE")
	var notes []string
	for _, f := range v.Figures {
		value, age := "-", "-"
		if f.Value > 0 {
			value = fmt.Sprintf("%.4g %s", f.Value, f.Unit)
			age = time.Duration(f.AgeSeconds * float64(time.Second)).Round(time.Second).String()
		}
		due := stamp(f.Due)
		switch {
		case f.State == api.CalibrationMeasuring:
			due = "-"
		case f.State == api.CalibrationDue && !f.Due.After(v.At):
			due = "now"
		case f.Due.IsZero():
			due = "on demand"
		}
		configured := "-" // a start figure: the grid file has none
		if f.ConfiguredUnit != "" {
			configured = fmt.Sprintf("%.4g %s", f.Configured, f.ConfiguredUnit)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", f.Key, value, configured, stamp(f.MeasuredAt), age,
			dash(strings.Join(f.Hosts, ",")), f.State, due)
		if f.Waiting != "" {
			notes = append(notes, fmt.Sprintf("%s: %s", f.Key, f.Waiting))
		}
		if f.Error != "" {
			notes = append(notes, fmt.Sprintf("%s failed at %s: %s", f.Key, stamp(f.ErrorAt), f.Error))
		}
	}
	tw.Flush()
	if len(notes) > 0 {
		fmt.Fprintln(w)
		for _, n := range notes {
			fmt.Fprintln(w, n)
		}
	}
}
