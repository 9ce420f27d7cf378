package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/metasched/metasched/switching"
	"github.com/metasched/metasched/switching/papers"
)

func newPolicyPapersCmd(e *env) *cobra.Command {
	var output string
	var tolerance float64
	cmd := &cobra.Command{
		Use:   "papers",
		Short: "Solve the papers' example models and print the solved tables beside the printed ones",
		Long: `Solve the models of Palmer and Mitrani's Tables 1 and 2 and Fisher et al.'s
Table I (discounted criterion, α = 0.95, Λ = 1, rates as printed, no price on
blocked arrivals: the papers' model) and print each solved table beside the
printed one. Cells where they differ are marked with '*'.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			return policyPapers(cmd.Context(), e, output, tolerance)
		},
	}
	cmd.Flags().StringVar(&output, "output", "table", "table or json")
	cmd.Flags().Float64Var(&tolerance, "tolerance", 1e-9, "value-iteration tolerance (sup-norm)")
	return cmd
}

type paperReport struct {
	Name      string  `json:"name"`
	Source    string  `json:"source"`
	Title     string  `json:"title"`
	View      string  `json:"view"`
	Sweeps    int     `json:"sweeps"`
	Converged bool    `json:"converged"`
	Cells     int     `json:"cells"`
	Different int     `json:"different"`
	Paper     [][]int `json:"paper"`
	Solved    [][]int `json:"solved"`
	Note      string  `json:"note"`
	// Actions say what the tables' numbers mean.
	Actions []actionLegend `json:"actions"`
	// HorizonDifferent counts the cells where the finite-horizon policy
	// with Horizon steps to go differs from the printed table.
	Horizon          int  `json:"horizon,omitempty"`
	HorizonDifferent *int `json:"horizon_different,omitempty"`

	rows, cols string // the queues on the view's axes, "j1"…
}

func policyPapers(ctx context.Context, e *env, output string, tolerance float64) error {
	var reps []paperReport
	for _, ref := range papers.References() {
		m := ref.Model()
		sol, err := switching.Solve(ctx, m, switching.SolveOptions{
			Criterion: switching.Discounted, Tolerance: tolerance, Now: time.Now,
		})
		if err != nil {
			if errors.Is(err, switching.ErrCanceled) {
				return fmt.Errorf("interrupted: %w", context.Canceled)
			}
			return fmt.Errorf("%s: %w", ref.Name, err)
		}
		v, err := switching.ParseView(m, ref.View)
		if err != nil {
			return fmt.Errorf("%s: view: %w", ref.Name, err)
		}
		vr := newViewReport(v, sol.Table)
		solved := vr.Actions
		cmp, err := papers.Compare(ref, solved)
		if err != nil {
			return err
		}
		rep := paperReport{Name: ref.Name, Source: ref.Source, Title: ref.Title, View: ref.View,
			Sweeps: sol.Sweeps, Converged: sol.Converged, Cells: cmp.Cells, Different: cmp.Different,
			Paper: ref.Table, Solved: solved, Note: ref.Note, Actions: actionsOf(m), rows: vr.Rows, cols: vr.Cols}
		if ref.Horizon > 0 {
			fin, err := switching.Solve(ctx, m, switching.SolveOptions{Criterion: switching.Discounted, Horizon: ref.Horizon})
			if err != nil {
				return fmt.Errorf("%s: horizon %d: %w", ref.Name, ref.Horizon, err)
			}
			fc, err := papers.Compare(ref, newViewReport(v, fin.Table).Actions)
			if err != nil {
				return err
			}
			rep.Horizon, rep.HorizonDifferent = ref.Horizon, &fc.Different
		}
		reps = append(reps, rep)
		if output == "table" {
			printPaper(e.stdout, rep, cmp)
		}
	}
	if output == "json" {
		return writeJSON(e.stdout, reps)
	}
	return nil
}

func printPaper(w io.Writer, r paperReport, c papers.Comparison) {
	fmt.Fprintf(w, "== %s: %s\n", r.Source, r.Title)
	fmt.Fprintf(w, "view %s; solved: discounted (α = 0.95), Λ = 1, converged after %d sweeps\n", r.View, r.Sweeps)
	printActions(w, r.Actions)
	var paper, solved strings.Builder
	printGrid(&paper, r.rows, r.cols, r.Paper, nil)
	printGrid(&solved, r.rows, r.cols, r.Solved, c.Differ)
	pl := strings.Split(strings.TrimRight(paper.String(), "\n"), "\n")
	sl := strings.Split(strings.TrimRight(solved.String(), "\n"), "\n")
	width := 0
	for _, l := range pl {
		width = max(width, len([]rune(l)))
	}
	fmt.Fprintf(w, "%-*s    %s\n", width, "printed in the paper", "solved here (* = differs)")
	for i := range max(len(pl), len(sl)) {
		a, b := "", ""
		if i < len(pl) {
			a = pl[i]
		}
		if i < len(sl) {
			b = sl[i]
		}
		fmt.Fprintf(w, "%s%s    %s\n", a, strings.Repeat(" ", width-len([]rune(a))), b)
	}
	var res strings.Builder
	if r.Different == 0 {
		fmt.Fprintf(&res, "identical in all %d cells.", r.Cells)
	} else {
		fmt.Fprintf(&res, "%d of %d cells differ.", r.Different, r.Cells)
	}
	if r.HorizonDifferent != nil {
		fmt.Fprintf(&res, " The finite-horizon policy with %d steps to go differs in %d cells.", r.Horizon, *r.HorizonDifferent)
	}
	fmt.Fprintf(&res, " Note: %s.", r.Note)
	writeWrapped(w, res.String(), "result: ", "        ")
	fmt.Fprintln(w)
}
