package gramvm

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"

	"github.com/metasched/metasched/graph"
	"github.com/metasched/metasched/selection"
)

// HostFree is a host of a job's pool that can take one VM of the job once
// it runs nothing: In is when it can, in seconds from now (0: now; +Inf:
// not known). The daemon gives the hosts with room now In 0, and the
// others the predicted end of the jobs on them.
type HostFree struct {
	Host string  `json:"host"`
	In   float64 `json:"in_s"`
}

// availableNow is free with every host free now.
func availableNow(free map[string][]string) map[string][]HostFree {
	out := make(map[string][]HostFree, len(free))
	for site, hosts := range free {
		hs := make([]HostFree, len(hosts))
		for i, h := range hosts {
			hs[i] = HostFree{Host: h}
		}
		out[site] = hs
	}
	return out
}

// freeNow lists, per site, the hosts of avail free now (In 0), in order.
func freeNow(avail map[string][]HostFree) map[string][]string {
	out := make(map[string][]string, len(avail))
	for site, hosts := range avail {
		for _, h := range hosts {
			if h.In == 0 {
				out[site] = append(out[site], h.Host)
			}
		}
	}
	return out
}

// PlanAvailable is PlanLoaded given, per site, the hosts of the job's pool
// that can take its VM and when (avail): hill climbing (placement gramvm)
// plans on the hosts free now; a baseline (met, mct, olb) places the whole
// job on one cluster, each cluster ready at the time it has the hosts the
// job needs there alone:
//
//   - the job's run time on cluster c alone is that of the plan S = {c} on
//     every host of avail there (free now or later), which needs machines_c
//     hosts (the master's and the workers');
//   - ready_c is the time the machines_c-th host of c is free (0 when that
//     many are free now);
//   - the baseline chooses by those (selection.Planner.Baseline): MET the
//     fastest cluster whether or not it is ready, MCT the earliest sum of
//     ready_c and run time, OLB the earliest ready_c.
//
// A chosen cluster ready now gets the plan on its free hosts. One ready
// later gives a feasible plan whose Plan.Start is ready_c (in the units of
// avail's In): the job waits for it, and the placement's hosts are those it
// waits for (the first to be free), not to be used before then. A chosen
// cluster whose hosts' times are not known gives an infeasible plan that
// says so. The run times and ready times compare in the same unit: give
// In in the plan's seconds.
func (s *Service) PlanAvailable(ctx context.Context, job *selection.Job, avail map[string][]HostFree, running []RunningJob, opt selection.Options) (Placement, Load, error) {
	p, err := s.Prepare(running)
	if err != nil {
		return Placement{}, Load{}, fmt.Errorf("plan %s: %w", jobName(job), err)
	}
	pl, err := p.PlanAvailable(ctx, job, avail, opt)
	if err != nil {
		return Placement{}, Load{}, err
	}
	return pl, p.Load(), nil
}

// placeFree is placeOn with every host of free free now. Hill climbing
// plans on the lists as they are given: a plan costs no copy of the
// grid's free hosts (thousands, at grid scale), which availableNow and
// freeNow would make and unmake; the baselines take the lists as
// available now.
func (s *Service) placeFree(ctx context.Context, job *selection.Job, free map[string][]string, opt selection.Options, memo *Prepared) (Placement, error) {
	if job == nil || job.PlacementOrDefault().Algorithm() != selection.HillClimb {
		return s.placeOn(ctx, job, availableNow(free), opt, memo)
	}
	pg, err := s.graphOf(job, memo)
	if err != nil {
		return Placement{}, err
	}
	return s.placeClimb(ctx, pg, job, free, opt, memo)
}

// placeOn is place, reusing what memo (nil: nothing) holds: the graph of
// the job's calibration and the search's answer for the job's shape on the
// same free host counts.
func (s *Service) placeOn(ctx context.Context, job *selection.Job, avail map[string][]HostFree, opt selection.Options, memo *Prepared) (Placement, error) {
	if job == nil {
		return Placement{}, fmt.Errorf("plan: %w: no job", ErrInvalid)
	}
	pg, err := s.graphOf(job, memo)
	if err != nil {
		return Placement{}, err
	}
	for site, hosts := range avail {
		for i, h := range hosts {
			if !(h.In >= 0) {
				return Placement{}, fmt.Errorf("plan %s: %w: host %d (%s) of %s: its free time must be >= 0, got %g", job.Name, ErrInvalid, i, h.Host, site, h.In)
			}
		}
	}
	alg := job.PlacementOrDefault().Algorithm()
	switch alg {
	case selection.HillClimb:
		return s.placeClimb(ctx, pg, job, freeNow(avail), opt, memo)
	case "":
		return Placement{}, fmt.Errorf("plan %s: placement: %w: unknown placement %q", job.Name, ErrInvalid, job.Placement)
	}
	if opt.Master >= 0 || job.Master != "" {
		return Placement{}, fmt.Errorf("plan %s: master: %w: placement %s chooses its one cluster itself, no master can be forced", job.Name, ErrInvalid, job.Placement)
	}
	return placeBaseline(pg.g, job, alg, avail, pg.measured, pg.calibrated)
}

// planGraph is the graph a job is planned on (the service's grid with the
// measured perf of the job's VMs) and the measurements it uses.
type planGraph struct {
	g                    *graph.Graph
	measured, calibrated []string
}

// graphOf makes the graph a job is planned on, or takes memo's for the
// job's calibration (its pool's image and its VMs' vCPUs).
func (s *Service) graphOf(job *selection.Job, memo *Prepared) (*planGraph, error) {
	ck := calibrationKey{job.Type, job.VM.VCPUs}
	if memo != nil {
		if pg, ok := memo.graphs[ck]; ok {
			return pg, nil
		}
	}
	s.mu.Lock()
	grid := graph.Grid{Clusters: slices.Clone(s.grid.Clusters), Links: slices.Clone(s.grid.Links)}
	var measured []string
	for _, l := range s.grid.Links {
		if m := s.measured[key(l.Between[0], l.Between[1])]; m != nil {
			measured = append(measured, fmt.Sprintf("%s-%s: %.3g Mbit/s measured (%s), %.3g configured",
				l.Between[0], l.Between[1], m.MeasuredMbps, m.how(), m.ConfiguredMbps))
		}
	}
	calibrated := s.calibrateLocked(&grid, job)
	s.mu.Unlock()
	g, err := graph.New(&grid)
	if err != nil {
		return nil, fmt.Errorf("plan %s: %w", job.Name, err)
	}
	pg := &planGraph{g: g, measured: measured, calibrated: calibrated}
	if memo != nil {
		memo.graphs[ck] = pg
	}
	return pg, nil
}

// placeBaseline places the whole job on the one cluster the baseline alg
// chooses, given when each cluster's hosts are free (PlanAvailable).
func placeBaseline(g *graph.Graph, job *selection.Job, alg selection.Algorithm, avail map[string][]HostFree, measured, calibrated []string) (Placement, error) {
	n := g.Len()
	hosts := make([][]HostFree, n) // per cluster, by free time (stable)
	all := make([]int, n)
	for c := range n {
		cl := g.Cluster(c)
		hs := slices.Clone(avail[cl.Name])
		slices.SortStableFunc(hs, func(a, b HostFree) int { return cmp.Compare(a.In, b.In) })
		hosts[c] = hs[:min(len(hs), cl.Machines)]
		all[c] = len(hosts[c])
	}
	whole, err := selection.NewPlanner(selection.Problem{Graph: g, Job: job, Free: all})
	if err != nil {
		return Placement{}, fmt.Errorf("plan %s: %w", job.Name, err)
	}
	ready := make([]float64, n)
	free := slices.Clone(all)
	for c := range n {
		a := whole.Alone(c)
		if !a.Feasible {
			continue // the baseline leaves it out, whatever its ready time
		}
		ready[c] = hosts[c][a.Machines-1].In
		if ready[c] == 0 {
			// Ready now: planned on the hosts free now, which give the
			// same plan (at least as many as it needs).
			free[c] = 0
			for _, h := range hosts[c] {
				if h.In == 0 {
					free[c]++
				}
			}
		}
	}
	pl, err := selection.NewPlanner(selection.Problem{Graph: g, Job: job, Free: free})
	if err != nil {
		return Placement{}, fmt.Errorf("plan %s: %w", job.Name, err)
	}
	p, err := pl.Baseline(alg, ready)
	if err != nil {
		return Placement{}, fmt.Errorf("plan %s: %w", job.Name, err)
	}
	out := Placement{Plan: p, Measured: measured, Calibrated: calibrated, Workers: []HostRef{}}
	if !p.Feasible {
		return out, nil
	}
	c := p.MasterIndex
	if math.IsInf(p.Start, 1) {
		why := fmt.Sprintf("%s chose cluster %s, and when its busy hosts will be free is not known", alg, p.Master)
		p = pl.Infeasible(alg, why)
		return Placement{Plan: p, Measured: measured, Calibrated: calibrated, Workers: []HostRef{}}, nil
	}
	if p.Machines > len(hosts[c]) {
		return Placement{}, fmt.Errorf("plan %s: cluster %s: %d machines planned on %d hosts", job.Name, p.Master, p.Machines, len(hosts[c]))
	}
	name := g.Cluster(c).Name
	out.Master = HostRef{Site: name, Host: hosts[c][0].Host}
	for _, h := range hosts[c][1:p.Machines] {
		out.Workers = append(out.Workers, HostRef{Site: name, Host: h.Host})
	}
	return out, nil
}
