package gramvm

import (
	"context"
	"slices"
	"strconv"

	"github.com/metasched/metasched/selection"
)

// Prepared is the service's grid as given running jobs leave it, taken
// once, for planning many jobs on it (the daemon prepares one per dispatch
// round). Its plans are those of PlanAvailable with the same running jobs,
// and cost less:
//
//   - the snapshot, the running jobs' traffic and the loaded grid are made
//     once, not per plan;
//   - the graph (Kruskal zones, widest paths) is made once per calibration
//     of the jobs' VMs (their pool's image and vCPUs);
//   - hill climbing sees a job's shape and the count of free hosts of
//     each cluster only, so a job of a shape already searched on the same
//     counts gets that search's answer again, given the first free hosts
//     of each cluster (as Nomad's computed node classes and Kubernetes'
//     equivalence classes reuse a feasibility answer). A placement on a
//     host that can still take a VM of the shape leaves the counts as they
//     were: a backlog of jobs of a few shapes is searched a few times;
//   - its searches share their memory (selection.Scratch), one after
//     another.
//
// The graphs and plans it hands out share their explanations (Measured,
// Calibrated, a plan's zones): read them only. Not safe for concurrent
// use.
type Prepared struct {
	base   *Service
	load   Load
	graphs map[calibrationKey]*planGraph
	plans  map[string]selection.Plan
	// scratch is the memory its searches share, one after another.
	scratch selection.Scratch
	// Reused counts the plans given from an earlier search.
	Reused int
}

// calibrationKey is what a job's graph depends on: its pool's image and
// its VMs' vCPUs (the measured perf of a cluster is per vCPU and image).
type calibrationKey struct {
	pool  string
	vcpus int
}

// Prepare takes the service's grid and measurements as they are now, less
// the traffic of the running jobs (PlanLoaded).
func (s *Service) Prepare(running []RunningJob) (*Prepared, error) {
	base := s.snapshot()
	md, err := base.model(running)
	if err != nil {
		return nil, err
	}
	up, links := md.load(md.currentRates())
	return &Prepared{base: base.withGrid(md.loadedGrid(up, links)), load: md.publicLoad(up, links),
		graphs: map[calibrationKey]*planGraph{}, plans: map[string]selection.Plan{}}, nil
}

// Load is the traffic of the running jobs taken off the grid.
func (p *Prepared) Load() Load { return p.load }

// Plan is Service.PlanLoaded on the prepared grid.
func (p *Prepared) Plan(ctx context.Context, job *selection.Job, free map[string][]string, opt selection.Options) (Placement, error) {
	return p.base.placeFree(ctx, job, free, opt, p)
}

// PlanAvailable is Service.PlanAvailable on the prepared grid.
func (p *Prepared) PlanAvailable(ctx context.Context, job *selection.Job, avail map[string][]HostFree, opt selection.Options) (Placement, error) {
	return p.base.placeOn(ctx, job, avail, opt, p)
}

// shapeKey is what hill climbing's answer depends on: the job's shape,
// its pool (the calibration), the options, and each cluster's free hosts.
func (p *Prepared) shapeKey(job *selection.Job, opt selection.Options, counts []int) string {
	b := make([]byte, 0, 96+4*len(counts))
	b = append(b, job.Type...)
	b = append(b, '|')
	b = append(b, job.Shape()...)
	for _, x := range append([]int{opt.Master, opt.Restarts, opt.ExcludedReasons}, counts...) {
		b = append(b, '|')
		b = strconv.AppendInt(b, int64(x), 10)
	}
	return string(b)
}

// reused is a plan searched for another job of the same shape, made the
// job's: its name, and lists of its own (the caller may keep them).
func reused(p selection.Plan, job *selection.Job) selection.Plan {
	p.Job = job.Name
	p.Clusters = slices.Clone(p.Clusters)
	p.Excluded = slices.Clone(p.Excluded)
	return p
}
