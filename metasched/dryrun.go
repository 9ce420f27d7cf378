package metasched

import (
	"context"
	"fmt"
	"strings"

	"github.com/metasched/metasched/gramvm"
	"github.com/metasched/metasched/metasched/api"
	"github.com/metasched/metasched/metasched/jobfile"
	"github.com/metasched/metasched/metasched/wire"
	"github.com/metasched/metasched/selection"
)

// DryRun plans a job on the live grid without changing anything.
func (d *Daemon) DryRun(ctx context.Context, req jobfile.Request) (_ api.PlanResult, err error) {
	defer apiError(&err)
	j, err := d.checkJob(ctx, req)
	if err != nil {
		return api.PlanResult{}, err
	}
	d.lockR()
	free := d.freeLocked(j.Type, j.VM)
	running := d.runningJobsLocked(d.now())
	d.unlockR()
	var pl gramvm.Placement
	if j.PlacementOrDefault().Baseline() {
		pl, err = d.planAvailable(ctx, j, free, running)
	} else {
		pl, _, err = d.planLoaded(ctx, j, free, running, selection.Options{Master: -1})
	}
	if err != nil {
		return api.PlanResult{}, err
	}
	counts := map[string]int{}
	for s, hs := range free {
		counts[s] = len(hs)
	}
	return api.PlanResult{Placement: wire.Placement(pl), FreeHosts: counts, Waits: !pl.Plan.Feasible || pl.Plan.Start > 0, Explanation: explain(&pl)}, nil
}

// placementName is the job field's name of the algorithm of a plan.
func placementName(a selection.Algorithm) string {
	if a == selection.HillClimb {
		return string(selection.PlaceGramVM)
	}
	return string(a)
}

// forcedNote says that a plan's master was forced by the job.
func forcedNote(p *selection.Plan) string {
	if p.MasterForced {
		return " (forced)"
	}
	return ""
}

// explain writes a placement's explanation as text.
func explain(pl *gramvm.Placement) string {
	var b strings.Builder
	p := &pl.Plan
	switch {
	case !p.Feasible:
		fmt.Fprintf(&b, "job %s waits: %s (placement %s)\n", p.Job, p.Reason, placementName(p.Algorithm))
	case p.Start > 0:
		fmt.Fprintf(&b, "job %s waits for cluster %s (placement %s), ready in %.4gs of the plan: master %s (host %s), %d machines, %.4g tasks/s, predicted %.4gs\n",
			p.Job, p.Master, placementName(p.Algorithm), p.Start, p.Master, pl.Master.Host, p.Machines, p.Rate, p.Runtime)
	default:
		fmt.Fprintf(&b, "job %s: master %s%s (host %s), %d machines, %.4g tasks/s, predicted %.4gs (placement %s)\n",
			p.Job, p.Master, forcedNote(p), pl.Master.Host, p.Machines, p.Rate, p.Runtime, placementName(p.Algorithm))
	}
	if p.Feasible {
		for _, c := range p.Clusters {
			fmt.Fprintf(&b, "  %s: %d workers of %d free, %.4g Mbit/s, limit %s: %s\n", c.Name, c.Machines, c.Free, c.BandwidthMbps, c.Limit, c.Why)
		}
	}
	for _, x := range p.Excluded {
		fmt.Fprintf(&b, "  %s left out: %s\n", x.Name, x.Reason)
	}
	if p.ExcludedMore > 0 {
		fmt.Fprintf(&b, "  and %d more clusters left out (the job's record keeps the first %d; a dry run explains each)\n", p.ExcludedMore, len(p.Excluded))
	}
	for _, m := range pl.Measured {
		fmt.Fprintf(&b, "  link %s\n", m)
	}
	for _, m := range pl.Calibrated {
		fmt.Fprintf(&b, "  calibrated %s\n", m)
	}
	return b.String()
}
