package gramvm

import (
	"cmp"
	"fmt"
	"math"
	"slices"

	"github.com/metasched/metasched/graph"
	"github.com/metasched/metasched/selection"
)

// TunableVM is one VM of a running job as its host reports it.
type TunableVM struct {
	Name      string `json:"name"`
	Site      string `json:"site"`
	Host      string `json:"host"`
	VCPUs     int    `json:"vcpus"`
	MemoryMiB int    `json:"memory_mib"`
}

// RunningJob is a job that runs on the grid: its plan and hosts, the tasks
// it has left and its VMs where they are now. The VM on the placement's
// master host is the master; the others are workers.
//
// A worker's speed is the share of its machine it gets: 1 alone on its host
// with the job's vCPUs, 1/2 for each of two of the job's workers on one host
// (004 §3.2: "fair share halves their speed and their data rate"), and in
// proportion to its vCPUs when it has fewer than the job asks for. In a
// cluster where the job lists workers its rate is min(Σ speed·perf/Oper,
// b/Comm), b the bandwidth its plan gave that cluster: the plan's rate when
// nothing was tuned. In a cluster where it lists none, the plan's rate.
type RunningJob struct {
	ID             string         `json:"id"`
	Job            *selection.Job `json:"job"`
	Placement      Placement      `json:"placement"`
	RemainingTasks float64        `json:"remaining_tasks"`
	VMs            []TunableVM    `json:"vms"`
}

// hostKey names a host of a site.
type hostKey struct{ site, host string }

// model is the grid (the capacities) and the running jobs on it.
type model struct {
	grid  *graph.Grid
	g     *graph.Graph // grid's, for its widest paths
	index map[string]int
	jobs  []*jobModel
	// perf is the speed of one of a job's VMs on cluster c: the measured
	// one of its image (Service.jobPerf), or nil for the grid's perf.
	perf func(c int, job *selection.Job) float64
}

// jobModel is a running job's plan in grid indexes.
type jobModel struct {
	rj     *RunningJob
	m      int
	parts  []jobPart // the plan's clusters, in plan order
	master hostKey
	// vmCluster[i] is the cluster of VM i (moves stay in their cluster).
	vmCluster []int
}

// jobPart is one cluster of a running job's plan.
type jobPart struct {
	c        int
	b        float64 // bandwidth to the master, bytes/s
	planRate float64 // tasks/s
}

func newModel(grid *graph.Grid, running []RunningJob) (*model, error) {
	g, err := graph.New(grid)
	if err != nil {
		return nil, err
	}
	md := &model{grid: grid, g: g, index: map[string]int{}}
	for i, c := range grid.Clusters {
		md.index[c.Name] = i
	}
	ids := map[string]int{}
	for i := range running {
		rj := &running[i]
		at := fmt.Sprintf("running job %d (%q)", i, rj.ID)
		if rj.ID == "" {
			return nil, fmt.Errorf("running job %d: no ID", i)
		}
		if j, dup := ids[rj.ID]; dup {
			return nil, fmt.Errorf("%s: the same ID as running job %d", at, j)
		}
		ids[rj.ID] = i
		if rj.Job == nil {
			return nil, fmt.Errorf("%s: no job", at)
		}
		if err := rj.Job.Validate(); err != nil {
			return nil, fmt.Errorf("%s: %w", at, err)
		}
		if !(rj.RemainingTasks >= 0) || math.IsInf(rj.RemainingTasks, 0) {
			return nil, fmt.Errorf("%s: remaining tasks must be a number >= 0, got %g", at, rj.RemainingTasks)
		}
		p := &rj.Placement.Plan
		if !p.Feasible {
			return nil, fmt.Errorf("%s: its plan is not feasible", at)
		}
		m, ok := md.index[p.Master]
		if !ok {
			return nil, fmt.Errorf("%s: master cluster %q is not in the grid", at, p.Master)
		}
		jm := &jobModel{rj: rj, m: m, master: hostKey{rj.Placement.Master.Site, rj.Placement.Master.Host}}
		seen := map[int]bool{}
		for _, cp := range p.Clusters {
			c, ok := md.index[cp.Name]
			if !ok {
				return nil, fmt.Errorf("%s: cluster %q is not in the grid", at, cp.Name)
			}
			if seen[c] {
				return nil, fmt.Errorf("%s: cluster %s is twice in its plan", at, cp.Name)
			}
			seen[c] = true
			if !(cp.Rate >= 0) || math.IsInf(cp.Rate, 0) || !(cp.BandwidthMbps > 0) {
				return nil, fmt.Errorf("%s: cluster %s: the rate (%g tasks/s) must be >= 0 and the bandwidth (%g Mbit/s) > 0", at, cp.Name, cp.Rate, cp.BandwidthMbps)
			}
			jm.parts = append(jm.parts, jobPart{c: c, b: cp.BandwidthMbps * bytesPerMbit, planRate: cp.Rate})
		}
		for k, v := range rj.VMs {
			c, ok := md.index[v.Site]
			if !ok {
				return nil, fmt.Errorf("%s: VM %d (%s): site %q is not in the grid", at, k, v.Name, v.Site)
			}
			if v.VCPUs < 1 || v.MemoryMiB < 0 {
				return nil, fmt.Errorf("%s: VM %d (%s): needs vCPUs >= 1 and memory >= 0, got %d and %d MiB", at, k, v.Name, v.VCPUs, v.MemoryMiB)
			}
			jm.vmCluster = append(jm.vmCluster, c)
		}
		md.jobs = append(md.jobs, jm)
	}
	return md, nil
}

// byCluster returns the indexes of the job's parts in grid order.
func (jm *jobModel) byCluster() []int {
	idx := make([]int, len(jm.parts))
	for i := range idx {
		idx[i] = i
	}
	slices.SortFunc(idx, func(a, b int) int { return cmp.Compare(jm.parts[a].c, jm.parts[b].c) })
	return idx
}

// isWorker says whether v is a worker, not the master.
func (jm *jobModel) isWorker(v TunableVM) bool { return hostKey{v.Site, v.Host} != jm.master }

// workers returns the indexes of the job's workers in cluster c.
func (jm *jobModel) workers(vms []TunableVM, c int) []int {
	var out []int
	for i, v := range vms {
		if jm.vmCluster[i] == c && jm.isWorker(v) {
			out = append(out, i)
		}
	}
	return out
}

// perHost counts the job's workers on each host.
func (jm *jobModel) perHost(vms []TunableVM) map[hostKey]int {
	n := map[hostKey]int{}
	for _, v := range vms {
		if jm.isWorker(v) {
			n[hostKey{v.Site, v.Host}]++
		}
	}
	return n
}

// speed is a worker's share of its machine: its vCPUs' share of the job's
// (at most 1), shared fairly with the job's other workers on its host.
func (jm *jobModel) speed(v TunableVM, perHost map[hostKey]int) float64 {
	return min(1, float64(v.VCPUs)/float64(jm.rj.Job.VM.VCPUs)) / float64(perHost[hostKey{v.Site, v.Host}])
}

// rates returns the job's rate in each part of its plan with its VMs
// where vms says.
func (md *model) rates(jm *jobModel, vms []TunableVM) []float64 {
	job := jm.rj.Job
	perHost := jm.perHost(vms)
	out := make([]float64, len(jm.parts))
	for i, p := range jm.parts {
		ws := jm.workers(vms, p.c)
		if len(ws) == 0 {
			out[i] = p.planRate
			continue
		}
		sp := 0.0
		for _, w := range ws {
			sp += jm.speed(vms[w], perHost)
		}
		perf := md.grid.Clusters[p.c].Perf
		if md.perf != nil {
			perf = md.perf(p.c, job)
		}
		r := sp * perf / job.TaskOps
		if job.TaskBytes > 0 {
			r = min(r, p.b/job.TaskBytes)
		}
		out[i] = r
	}
	return out
}

// currentRates returns every running job's rates now.
func (md *model) currentRates() [][]float64 {
	out := make([][]float64, len(md.jobs))
	for j, jm := range md.jobs {
		out[j] = md.rates(jm, jm.rj.VMs)
	}
	return out
}
