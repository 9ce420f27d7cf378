package metasched

import (
	"context"
	"fmt"
	"strings"

	"github.com/metasched/metasched/gramvm"
	"github.com/metasched/metasched/metasched/api"
	"github.com/metasched/metasched/selection"
)

// DryRun plans a job on the live grid without changing anything.
func (d *Daemon) DryRun(ctx context.Context, body []byte) (api.PlanResult, error) {
	j, err := d.parseJob(ctx, body)
	if err != nil {
		return api.PlanResult{}, err
	}
	d.mu.Lock()
	free := d.freeLocked(j.Type, j.VM)
	running := d.runningJobsLocked(d.now())
	d.mu.Unlock()
	pl, _, err := d.planLoaded(ctx, j, free, running, selection.Options{Master: -1})
	if err != nil {
		return api.PlanResult{}, err
	}
	counts := map[string]int{}
	for s, hs := range free {
		counts[s] = len(hs)
	}
	return api.PlanResult{Placement: pl, FreeHosts: counts, Waits: !pl.Plan.Feasible, Explanation: explain(&pl)}, nil
}

// explain writes a placement's explanation as text.
func explain(pl *gramvm.Placement) string {
	var b strings.Builder
	p := &pl.Plan
	if !p.Feasible {
		fmt.Fprintf(&b, "job %s waits: %s\n", p.Job, p.Reason)
	} else {
		fmt.Fprintf(&b, "job %s: master %s (host %s), %d machines, %.4g tasks/s, predicted %.4gs\n",
			p.Job, p.Master, pl.Master.Host, p.Machines, p.Rate, p.Runtime)
		for _, c := range p.Clusters {
			fmt.Fprintf(&b, "  %s: %d workers of %d free, %.4g Mbit/s, limit %s: %s\n", c.Name, c.Machines, c.Free, c.BandwidthMbps, c.Limit, c.Why)
		}
	}
	for _, x := range p.Excluded {
		fmt.Fprintf(&b, "  %s left out: %s\n", x.Name, x.Reason)
	}
	for _, m := range pl.Measured {
		fmt.Fprintf(&b, "  link %s\n", m)
	}
	for _, m := range pl.Calibrated {
		fmt.Fprintf(&b, "  calibrated %s\n", m)
	}
	return b.String()
}
