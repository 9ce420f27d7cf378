package gramvm

import (
	"context"
	"slices"

	"github.com/metasched/metasched/graph"
	"github.com/metasched/metasched/selection"
)

// bytesPerMbit converts Mbit/s to bytes/s.
const bytesPerMbit = 1e6 / 8

// Load is what running jobs move over the grid's WAN, in Mbit/s.
type Load struct {
	// UplinkMbps is the traffic over each cluster's uplink; a cluster
	// that carries none is absent.
	UplinkMbps map[string]float64 `json:"uplink_mbps"`
	// Links lists the links that carry traffic, in grid order.
	Links []LinkLoad `json:"links"`
}

// LinkLoad is the traffic over one link.
type LinkLoad struct {
	Between [2]string `json:"between"`
	Mbps    float64   `json:"mbps"`
}

// Usage returns the traffic running jobs put on the grid's WAN. A job
// whose master is in cluster m moves rate_c·Comm bytes/s between each other
// cluster c of its plan and m: over c's uplink, m's uplink and the links
// of the widest path between c and m (graph.Graph.WidestPath: their path
// in the grid's maximum-bandwidth spanning tree, whose narrowest link is
// B(c, m)). Workers in the master's cluster use its LAN, which is not
// counted.
// Errors are for an invalid grid or a job that does not fit it.
func Usage(grid *graph.Grid, running []RunningJob) (Load, error) {
	md, err := newModel(grid, running)
	if err != nil {
		return Load{}, err
	}
	up, links := md.load(md.currentRates())
	return md.publicLoad(up, links), nil
}

// PlanLoaded is Plan on the grid left to a new job by the running ones:
// each cluster's uplink and each link reduced by the running jobs' traffic
// (Usage), to no less than graph.MinMbps. A plan of a job that shares a
// saturated link with them is limited by it (ClusterPlan.Limit uplink, path
// or master-share). With no running jobs it is Plan. It also returns the
// load it subtracted.
func (s *Service) PlanLoaded(ctx context.Context, job *selection.Job, free map[string][]string, running []RunningJob, opt selection.Options) (Placement, Load, error) {
	return s.PlanAvailable(ctx, job, availableNow(free), running, opt)
}

// model is newModel on a snapshot's grid, its running jobs at the perf
// the calibration measured for their VMs.
func (s *Service) model(running []RunningJob) (*model, error) {
	md, err := newModel(&s.grid, running)
	if err != nil {
		return nil, err
	}
	md.perf = func(c int, job *selection.Job) float64 {
		p, _ := s.jobPerf(&s.grid, c, job)
		return p
	}
	return md, nil
}

// jobName names a job in an error, even a nil one.
func jobName(j *selection.Job) string {
	if j == nil {
		return "(no job)"
	}
	return j.Name
}

// load returns the Mbit/s the jobs at these rates move over each uplink
// and each link (grid order).
func (md *model) load(rates [][]float64) (up, links []float64) {
	up = make([]float64, len(md.grid.Clusters))
	links = make([]float64, len(md.grid.Links))
	for j, jm := range md.jobs {
		for i, p := range jm.parts {
			if p.c == jm.m {
				continue
			}
			x := rates[j][i] * jm.rj.Job.TaskBytes / bytesPerMbit
			up[p.c] += x
			up[jm.m] += x
			for _, l := range md.g.WidestPath(p.c, jm.m) {
				links[l] += x
			}
		}
	}
	return up, links
}

// loadedGrid is the grid less the load, each bandwidth at least
// graph.MinMbps.
func (md *model) loadedGrid(up, links []float64) *graph.Grid {
	g := &graph.Grid{Clusters: slices.Clone(md.grid.Clusters), Links: slices.Clone(md.grid.Links)}
	for i, x := range up {
		if x > 0 {
			g.Clusters[i].UplinkMbps = max(g.Clusters[i].UplinkMbps-x, graph.MinMbps)
		}
	}
	for i, x := range links {
		if x > 0 {
			g.Links[i].Mbps = max(g.Links[i].Mbps-x, graph.MinMbps)
		}
	}
	return g
}

func (md *model) publicLoad(up, links []float64) Load {
	ld := Load{UplinkMbps: map[string]float64{}, Links: []LinkLoad{}}
	for i, x := range up {
		if x > 0 {
			ld.UplinkMbps[md.grid.Clusters[i].Name] = x
		}
	}
	for i, x := range links {
		if x > 0 {
			ld.Links = append(ld.Links, LinkLoad{Between: md.grid.Links[i].Between, Mbps: x})
		}
	}
	return ld
}
