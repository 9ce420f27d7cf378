package gramvm

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/metasched/metasched/graph"
	hp "github.com/metasched/metasched/hypervisorproxy"
	"github.com/metasched/metasched/selection"
)

// Defaults of TuneOptions.
const (
	DefaultMaxPerHost = 1
	DefaultMaxPerLink = 2
)

// The actions of a TuningDecision.
const (
	ActionConsolidate = "consolidate"
	ActionShrink      = "shrink"
)

// bytesPerMbit converts Mbit/s to bytes/s.
const bytesPerMbit = 1e6 / 8

// relNetTie is the relative difference under which two decisions' nets tie.
const relNetTie = 1e-9

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

// HostCapacity is a host's size and what its VMs leave free, as the
// site's agent reports it.
type HostCapacity struct {
	Site          string `json:"site"`
	Host          string `json:"host"`
	CPUs          int    `json:"cpus"`
	MemoryMiB     int    `json:"memory_mib"`
	FreeVCPUs     int    `json:"free_vcpus"`
	FreeMemoryMiB int    `json:"free_memory_mib"`
}

// HostCapacities lists the capacity of every host of the inventories, in
// the agents' order.
func HostCapacities(invs []hp.Inventory) []HostCapacity {
	var out []HostCapacity
	for _, inv := range invs {
		for _, h := range inv.Hosts {
			out = append(out, HostCapacity{Site: inv.Site, Host: h.Name, CPUs: h.CPUs, MemoryMiB: h.MemoryMiB,
				FreeVCPUs: h.FreeVCPUs, FreeMemoryMiB: h.FreeMemoryMiB})
		}
	}
	return out
}

// JobVMs lists the VMs the inventories show for a job, in the agents'
// order.
func JobVMs(invs []hp.Inventory, job string) []TunableVM {
	var out []TunableVM
	for _, inv := range invs {
		for _, h := range inv.Hosts {
			for _, v := range h.VMs {
				if v.Job == job {
					out = append(out, TunableVM{Name: v.Name, Site: inv.Site, Host: h.Name, VCPUs: v.VCPUs, MemoryMiB: v.MemoryMiB})
				}
			}
		}
	}
	return out
}

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
// of the widest path between c and m. That path is the one in the grid's
// maximum-bandwidth spanning tree, built from graph.Graph.Edges by the rule
// package graph documents for its widest paths (links by decreasing
// bandwidth, ties by cluster index), so its narrowest link is B(c, m).
// Workers in the master's cluster use its LAN, which is not counted.
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
	base := s.snapshot()
	md, err := newModel(&base.grid, running)
	if err != nil {
		return Placement{}, Load{}, fmt.Errorf("plan %s: %w", jobName(job), err)
	}
	up, links := md.load(md.currentRates())
	p, err := base.withGrid(md.loadedGrid(up, links)).Plan(ctx, job, free, opt)
	if err != nil {
		return Placement{}, Load{}, err
	}
	return p, md.publicLoad(up, links), nil
}

// TuneOptions bound the migrations of Tune.
type TuneOptions struct {
	// MaxPerHost caps the migrations touching one host at a time (as
	// source or destination); 0 means DefaultMaxPerHost.
	MaxPerHost int `json:"max_per_host"`
	// MaxPerLink caps the migrations over one link at a time: a
	// cluster's LAN for the moves inside it; 0 means DefaultMaxPerLink.
	MaxPerLink int `json:"max_per_link"`
	// CanShrink says whether the hypervisor of a site can unplug vCPUs
	// of a running VM; nil: none can.
	CanShrink func(site string) bool `json:"-"`
	// InFlight counts the migrations already under way per host name
	// and per LAN (LANKey), so that the caps hold across decisions.
	InFlight map[string]int `json:"in_flight,omitempty"`
}

// LANKey is the key of a cluster's LAN in TuneOptions.InFlight.
func LANKey(cluster string) string { return "lan:" + cluster }

// Move is one live migration of a decision.
type Move struct {
	VM   string `json:"vm"`
	Site string `json:"site"`
	From string `json:"from"`
	To   string `json:"to"`
}

// Shrink is one vCPU hot-unplug of a decision.
type Shrink struct {
	VM    string `json:"vm"`
	Site  string `json:"site"`
	Host  string `json:"host"`
	VCPUs int    `json:"vcpus"` // after the shrink
}

// TuningDecision is one candidate action on a running job (the target) in
// one cluster, with what it would do to the new job and to the target.
type TuningDecision struct {
	NewJob string `json:"new_job"`
	Target string `json:"target"`
	// Action is ActionConsolidate or ActionShrink.
	Action  string   `json:"action"`
	Cluster string   `json:"cluster"`
	Moves   []Move   `json:"moves,omitempty"`
	Shrinks []Shrink `json:"shrinks,omitempty"`
	// GainSeconds is how much sooner the new job ends: its predicted run
	// time T/R now less that after the action.
	GainSeconds float64 `json:"gain_seconds"`
	// LossSeconds is how much later the target ends: its remaining tasks
	// at its rate after the action less at its rate now.
	LossSeconds float64 `json:"loss_seconds"`
	// MigrationSeconds is the memory of the moved VMs over the cluster's
	// LAN bandwidth (0 for a shrink).
	MigrationSeconds    float64 `json:"migration_seconds"`
	NewJobSecondsBefore float64 `json:"new_job_seconds_before"`
	NewJobSecondsAfter  float64 `json:"new_job_seconds_after"`
	TargetSecondsBefore float64 `json:"target_seconds_before"`
	TargetSecondsAfter  float64 `json:"target_seconds_after"`
	// Accepted is GainSeconds > LossSeconds + MigrationSeconds.
	Accepted bool   `json:"accepted"`
	Reason   string `json:"reason"`
}

// net is what a decision saves in all.
func (d *TuningDecision) net() float64 { return d.GainSeconds - d.LossSeconds - d.MigrationSeconds }

// Tune decides how to free hosts and bandwidth for a new job by
// consolidating or shrinking the VMs of running jobs (004 §3.2). free are
// the new job's free hosts (FreeHosts), hosts the capacities of the hosts
// of the running jobs' VMs.
//
// It plans the new job on the loaded grid (PlanLoaded, hill climbing with
// selection.Options{Master: -1}: any master, the default restarts). When
// the plan is feasible, the clusters that hold it back are those it uses
// whose limit is a link (their uplink, the path to the new master, the new
// master's uplink) and those where more free machines would give it more
// workers (limit free, or left out though its VM fits). Each running job
// is a target in each cluster where it has workers and whose traffic
// crosses such a link, or where more machines would help and it is of the
// new job's type (its hosts are in the new job's pool). For each target
// and cluster Tune evaluates:
//
//   - consolidate: k pairs of the target's full-speed workers share a host,
//     one of each pair moving live to the other's host where the host has
//     the vCPUs and memory for it; both then run at half speed. It frees
//     the source hosts for the new job and lowers the target's data rate
//     once its compute falls below its bandwidth. k runs from 1 to the
//     pairs the caps allow: the moves of a decision start together, so at
//     most MaxPerLink − InFlight[LANKey(cluster)] of them, and no host in
//     more than MaxPerHost − InFlight[host] (one pair uses a host once).
//   - shrink, where opt.CanShrink(cluster): the vCPUs of k of the target's
//     workers halve, and so does their speed; a host whose freed vCPUs let
//     the new job's VM fit counts as free. k runs from 1 to every worker
//     with at least 2 vCPUs.
//
// For each k the new job is planned again with the freed hosts and the
// target's lower traffic: GainSeconds is the difference of its run times,
// LossSeconds the target's extra time for its remaining tasks,
// MigrationSeconds the moved memory over the cluster's LAN (moves that
// share the LAN share its bandwidth, however they are grouped in rounds);
// the best k (largest net gain − loss − migration, then fewer) is the
// candidate's. A candidate is accepted when its gain exceeds its loss and
// migration.
//
// Every candidate is returned, the best first: accepted ones first, then
// by net, then by target ID, consolidate before shrink, and grid order.
// When the first is accepted it is the one to carry out; the others are
// stale once it is done. No candidates (nil) is the answer when the new
// job has no plan (its wait cannot be weighed) or nothing holds it back.
// Errors are for bad input and cancellation. Each k costs one plan of the
// new job: O(clusters + links) to load the grid plus a hill climb.
func (s *Service) Tune(ctx context.Context, newJob *selection.Job, free map[string][]string, hosts []HostCapacity, running []RunningJob, opt TuneOptions) ([]TuningDecision, error) {
	if newJob == nil {
		return nil, errors.New("tune: no new job")
	}
	if err := newJob.Validate(); err != nil {
		return nil, fmt.Errorf("tune %s: %w", newJob.Name, err)
	}
	if opt.MaxPerHost < 0 || opt.MaxPerLink < 0 {
		return nil, fmt.Errorf("tune %s: caps must be >= 0, got %d per host and %d per link", newJob.Name, opt.MaxPerHost, opt.MaxPerLink)
	}
	if opt.MaxPerHost == 0 {
		opt.MaxPerHost = DefaultMaxPerHost
	}
	if opt.MaxPerLink == 0 {
		opt.MaxPerLink = DefaultMaxPerLink
	}
	base := s.snapshot()
	md, err := newModel(&base.grid, running)
	if err != nil {
		return nil, fmt.Errorf("tune %s: %w", newJob.Name, err)
	}
	caps := map[hostKey]HostCapacity{}
	for i, h := range hosts {
		k := hostKey{h.Site, h.Host}
		if _, dup := caps[k]; dup {
			return nil, fmt.Errorf("tune %s: hosts[%d]: host %s of %s listed twice", newJob.Name, i, h.Host, h.Site)
		}
		caps[k] = h
	}
	t := &tuner{s: base, md: md, job: newJob, free: free, caps: caps, opt: opt, rates: md.currentRates()}
	up, links := md.load(t.rates)
	loaded := md.loadedGrid(up, links)
	before, err := t.plan(ctx, loaded, free)
	if err != nil {
		return nil, err
	}
	if !before.Plan.Feasible {
		return nil, nil
	}
	t.before = before.Plan.Runtime
	lg, err := graph.New(loaded)
	if err != nil {
		return nil, fmt.Errorf("tune %s: %w", newJob.Name, err)
	}
	t.pressure(before.Plan, newTree(loaded, lg))

	var out []TuningDecision
	order := make([]int, len(md.jobs))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return cmp.Compare(md.jobs[a].rj.ID, md.jobs[b].rj.ID) })
	for _, j := range order {
		jm := md.jobs[j]
		for _, pi := range jm.byCluster() {
			c := jm.parts[pi].c
			if len(jm.workers(jm.rj.VMs, c)) == 0 || !t.relevant(jm, c) {
				continue
			}
			d, err := t.consolidate(ctx, j, pi)
			if err != nil {
				return nil, err
			}
			out = append(out, d)
			if name := md.grid.Clusters[c].Name; opt.CanShrink != nil && opt.CanShrink(name) {
				d, err := t.shrink(ctx, j, pi)
				if err != nil {
					return nil, err
				}
				out = append(out, d)
			}
		}
	}
	t.rank(out)
	return out, nil
}

// jobName names a job in an error, even a nil one.
func jobName(j *selection.Job) string {
	if j == nil {
		return "(no job)"
	}
	return j.Name
}

// snapshot copies the service's grid and measurements.
func (s *Service) snapshot() *Service {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := make(map[[2]string]*Link, len(s.measured))
	for k, l := range s.measured {
		c := *l
		m[k] = &c
	}
	return &Service{alpha: s.alpha, grid: graph.Grid{Clusters: slices.Clone(s.grid.Clusters), Links: slices.Clone(s.grid.Links)}, measured: m}
}

// withGrid is a service like s on another grid with the same links, sharing
// s's measurements (read only).
func (s *Service) withGrid(g *graph.Grid) *Service {
	return &Service{alpha: s.alpha, grid: *g, measured: s.measured}
}

// hostKey names a host of a site.
type hostKey struct{ site, host string }

// model is the grid (the capacities) and the running jobs on it.
type model struct {
	grid  *graph.Grid
	index map[string]int
	tree  *tree
	jobs  []*jobModel
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
	md := &model{grid: grid, index: map[string]int{}, tree: newTree(grid, g)}
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
		r := sp * md.grid.Clusters[p.c].Perf / job.TaskOps
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
			for _, l := range md.tree.path(p.c, jm.m) {
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

// tree is a grid's maximum-bandwidth spanning tree, the paths of
// graph.Graph.WidestFrom.
type tree struct {
	adj    [][]arc
	parent map[int][]arc // per root, each vertex's arc towards it
}

// arc leads to a vertex over a link (an index into the grid's links).
type arc struct{ to, link int }

// newTree builds the tree by the rule of package graph: Kruskal on the
// links by decreasing bandwidth, ties by U then V. O(E log E).
func newTree(grid *graph.Grid, g *graph.Graph) *tree {
	idx := map[string]int{}
	for i, c := range grid.Clusters {
		idx[c.Name] = i
	}
	linkOf := map[[2]int]int{}
	for i, l := range grid.Links {
		a, b := idx[l.Between[0]], idx[l.Between[1]]
		linkOf[[2]int{min(a, b), max(a, b)}] = i
	}
	edges := g.Edges()
	slices.SortStableFunc(edges, func(a, b graph.Edge) int {
		return cmp.Or(cmp.Compare(b.Mbps, a.Mbps), cmp.Compare(a.U, b.U), cmp.Compare(a.V, b.V))
	})
	n := g.Len()
	root := make([]int, n)
	for i := range root {
		root[i] = i
	}
	find := func(x int) int {
		for root[x] != x {
			root[x] = root[root[x]]
			x = root[x]
		}
		return x
	}
	t := &tree{adj: make([][]arc, n), parent: map[int][]arc{}}
	for _, e := range edges {
		a, b := find(e.U), find(e.V)
		if a == b {
			continue
		}
		root[a] = b
		l := linkOf[[2]int{e.U, e.V}]
		t.adj[e.U] = append(t.adj[e.U], arc{e.V, l})
		t.adj[e.V] = append(t.adj[e.V], arc{e.U, l})
	}
	return t
}

// path returns the links between c and m in the tree, from c. O(n) for
// the first path to m, then O(length).
func (t *tree) path(c, m int) []int {
	par, ok := t.parent[m]
	if !ok {
		par = make([]arc, len(t.adj))
		for i := range par {
			par[i] = arc{-1, -1}
		}
		seen := make([]bool, len(t.adj))
		seen[m] = true
		queue := []int{m}
		for len(queue) > 0 {
			v := queue[0]
			queue = queue[1:]
			for _, a := range t.adj[v] {
				if !seen[a.to] {
					seen[a.to] = true
					par[a.to] = arc{v, a.link}
					queue = append(queue, a.to)
				}
			}
		}
		t.parent[m] = par
	}
	var out []int
	for v := c; v != m && par[v].to >= 0; v = par[v].to {
		out = append(out, par[v].link)
	}
	return out
}

// tuner holds what one Tune call knows.
type tuner struct {
	s    *Service // a snapshot
	md   *model
	job  *selection.Job
	free map[string][]string
	caps map[hostKey]HostCapacity
	opt  TuneOptions
	// rates are the running jobs' rates now; before is the new job's run
	// time now.
	rates  [][]float64
	before float64
	// The links that hold the new job back (uplinks by cluster, links
	// by index) and the clusters where more free machines would help.
	upHeld, linkHeld, short map[int]bool
}

// plan plans the new job on a loaded grid.
func (t *tuner) plan(ctx context.Context, g *graph.Grid, free map[string][]string) (Placement, error) {
	return t.s.withGrid(g).Plan(ctx, t.job, free, selection.Options{Master: -1})
}

// pressure finds what holds the new job's plan back. tr is the loaded
// grid's tree, whose paths are the plan's.
func (t *tuner) pressure(p selection.Plan, tr *tree) {
	t.upHeld, t.linkHeld, t.short = map[int]bool{}, map[int]bool{}, map[int]bool{}
	m := p.MasterIndex
	for _, cp := range p.Clusters {
		switch cp.Limit {
		case selection.LimitUplink:
			t.upHeld[cp.Index] = true
		case selection.LimitPath:
			for _, l := range tr.path(cp.Index, m) {
				t.linkHeld[l] = true
			}
		case selection.LimitMasterShare:
			t.upHeld[m] = true
		case selection.LimitFree:
			t.short[cp.Index] = true
		}
	}
	for _, ex := range p.Excluded {
		cl := t.md.grid.Clusters[ex.Index]
		if cl.Cores < t.job.VM.VCPUs || cl.MemoryMiB < t.job.VM.MemoryMiB {
			continue
		}
		t.short[ex.Index] = true
		if ex.Index != m && len(t.free[cl.Name]) > 0 {
			t.upHeld[ex.Index], t.upHeld[m] = true, true
			for _, l := range tr.path(ex.Index, m) {
				t.linkHeld[l] = true
			}
		}
	}
}

// relevant says whether tuning job jm in cluster c could help: its
// traffic from c crosses a link that holds the new job back, or c is short
// of machines and jm's hosts are in the new job's pool.
func (t *tuner) relevant(jm *jobModel, c int) bool {
	if t.short[c] && jm.rj.Job.Type == t.job.Type {
		return true
	}
	if c == jm.m {
		return false
	}
	if t.upHeld[c] || t.upHeld[jm.m] {
		return true
	}
	for _, l := range t.md.tree.path(c, jm.m) {
		if t.linkHeld[l] {
			return true
		}
	}
	return false
}

// fitsNew says whether the new job's VM fits in what a host has free.
func (t *tuner) fitsNew(vcpus, mem int) bool {
	return vcpus >= t.job.VM.VCPUs && mem >= t.job.VM.MemoryMiB
}

// inFree says whether a host is among the new job's free hosts.
func (t *tuner) inFree(k hostKey) bool { return slices.Contains(t.free[k.site], k.host) }

// delta is a change of a host's free capacity.
type delta struct {
	k          hostKey
	vcpus, mem int
}

// outcome is what an action with k steps would do.
type outcome struct {
	k                  int
	moves              []Move
	shrinks            []Shrink
	feasible           bool // the new job still has a plan
	after, targetAfter float64
	gain, loss, mig    float64
	freedHosts         int
	freedMbps          float64
}

func (o *outcome) net() float64 { return o.gain - o.loss - o.mig }

// evaluate plans the new job after job j's VMs become vms and the hosts'
// free capacities change by deltas.
func (t *tuner) evaluate(ctx context.Context, j, part int, vms []TunableVM, deltas []delta) (outcome, error) {
	if err := ctx.Err(); err != nil {
		return outcome{}, err
	}
	md, jm := t.md, t.md.jobs[j]
	var o outcome
	// The new job's free hosts: a host it could not use and now can joins
	// them (when it is in its pool); one it could and now cannot leaves.
	free := make(map[string][]string, len(t.free))
	for site, hs := range t.free {
		free[site] = hs
	}
	var order []hostKey
	sum := map[hostKey]delta{}
	for _, d := range deltas {
		if _, ok := sum[d.k]; !ok {
			order = append(order, d.k)
		}
		s := sum[d.k]
		s.vcpus, s.mem = s.vcpus+d.vcpus, s.mem+d.mem
		sum[d.k] = s
	}
	sameType := jm.rj.Job.Type == t.job.Type
	for _, k := range order {
		h, known := t.caps[k]
		if !known {
			continue
		}
		d := sum[k]
		was, now := t.fitsNew(h.FreeVCPUs, h.FreeMemoryMiB), t.fitsNew(h.FreeVCPUs+d.vcpus, h.FreeMemoryMiB+d.mem)
		in := t.inFree(k)
		switch {
		case !was && now && !in && sameType:
			free[k.site] = append(slices.Clone(free[k.site]), k.host)
			o.freedHosts++
		case was && !now && in:
			free[k.site] = slices.DeleteFunc(slices.Clone(free[k.site]), func(x string) bool { return x == k.host })
			o.freedHosts--
		}
	}
	rates := slices.Clone(t.rates)
	rates[j] = md.rates(jm, vms)
	if c := jm.parts[part].c; c != jm.m {
		o.freedMbps = (t.rates[j][part] - rates[j][part]) * jm.rj.Job.TaskBytes / bytesPerMbit
	}
	up, links := md.load(rates)
	pl, err := t.plan(ctx, md.loadedGrid(up, links), free)
	if err != nil {
		return outcome{}, err
	}
	rBefore, rAfter := sum64(t.rates[j]), sum64(rates[j])
	if !pl.Plan.Feasible || !(rAfter > 0) {
		return o, nil
	}
	o.feasible = true
	o.after = pl.Plan.Runtime
	o.gain = t.before - o.after
	o.targetAfter = jm.rj.RemainingTasks / rAfter
	o.loss = o.targetAfter - jm.rj.RemainingTasks/rBefore
	return o, nil
}

func sum64(xs []float64) float64 {
	s := 0.0
	for _, x := range xs {
		s += x
	}
	return s
}

// start is a decision that changes nothing yet.
func (t *tuner) start(j, part int, action string) TuningDecision {
	jm := t.md.jobs[j]
	tb := 0.0
	if r := sum64(t.rates[j]); r > 0 {
		tb = jm.rj.RemainingTasks / r
	}
	return TuningDecision{NewJob: t.job.Name, Target: jm.rj.ID, Action: action, Cluster: t.md.grid.Clusters[jm.parts[part].c].Name,
		NewJobSecondsBefore: t.before, NewJobSecondsAfter: t.before, TargetSecondsBefore: tb, TargetSecondsAfter: tb}
}

// consolidate evaluates moving pairs of job j's workers in one cluster
// onto one host.
func (t *tuner) consolidate(ctx context.Context, j, part int) (TuningDecision, error) {
	jm := t.md.jobs[j]
	d := t.start(j, part, ActionConsolidate)
	c := jm.parts[part].c
	cl := t.md.grid.Clusters[c]
	inFlight := t.opt.InFlight[LANKey(cl.Name)]
	slots := t.opt.MaxPerLink - inFlight
	if slots <= 0 {
		d.Reason = fmt.Sprintf("no migration can start on %s's LAN: %d in flight, at most %d at a time", cl.Name, inFlight, t.opt.MaxPerLink)
		return d, nil
	}
	vms := jm.rj.VMs
	perHost := jm.perHost(vms)
	type cand struct {
		i       int
		k       hostKey
		capable bool // its host has room for another VM like it
		helps   bool // freeing its host frees it for the new job
		inFree  bool
	}
	var elig []cand
	full, busy := 0, 0
	for _, i := range jm.workers(vms, c) {
		v := vms[i]
		if jm.speed(v, perHost) < 1 {
			continue
		}
		full++
		k := hostKey{v.Site, v.Host}
		if t.opt.InFlight[v.Host]+1 > t.opt.MaxPerHost {
			busy++
			continue
		}
		h, known := t.caps[k]
		elig = append(elig, cand{i: i, k: k,
			capable: known && h.FreeVCPUs >= v.VCPUs && h.FreeMemoryMiB >= v.MemoryMiB,
			helps:   known && !t.fitsNew(h.FreeVCPUs, h.FreeMemoryMiB) && t.fitsNew(h.FreeVCPUs+v.VCPUs, h.FreeMemoryMiB+v.MemoryMiB),
			inFree:  t.inFree(k)})
	}
	byHost := func(a, b cand) int {
		return cmp.Or(cmp.Compare(a.k.host, b.k.host), cmp.Compare(vms[a.i].Name, vms[b.i].Name))
	}
	// Destinations: hosts with room, those the new job cannot use first.
	var dsts []cand
	for _, e := range elig {
		if e.capable {
			dsts = append(dsts, e)
		}
	}
	slices.SortStableFunc(dsts, func(a, b cand) int { return cmp.Or(boolFirst(!a.inFree, !b.inFree), byHost(a, b)) })
	// Sources: hosts without room first (they can only be sources), then
	// those whose freeing helps the new job.
	srcs := slices.Clone(elig)
	slices.SortStableFunc(srcs, func(a, b cand) int {
		return cmp.Or(boolFirst(!a.capable, !b.capable), boolFirst(a.helps, b.helps), byHost(a, b))
	})
	used := map[int]bool{}
	type pair struct{ src, dst cand }
	var pairs []pair
	for _, dst := range dsts {
		if used[dst.i] {
			continue
		}
		h := t.caps[dst.k]
		for _, src := range srcs {
			v := vms[src.i]
			if !used[src.i] && src.i != dst.i && h.FreeVCPUs >= v.VCPUs && h.FreeMemoryMiB >= v.MemoryMiB {
				used[src.i], used[dst.i] = true, true
				pairs = append(pairs, pair{src, dst})
				break
			}
		}
	}
	if len(pairs) == 0 {
		d.Reason = fmt.Sprintf("no two of %s's workers on %s can share a host: %d run at full speed, %d of them on hosts already migrating, %d with room for another",
			jm.rj.ID, cl.Name, full, busy, len(dsts))
		return d, nil
	}
	K := min(len(pairs), slots)
	lan := cl.LANMbps * bytesPerMbit
	var outs []outcome
	for k := 1; k <= K; k++ {
		after := slices.Clone(vms)
		var deltas []delta
		var moves []Move
		mig := 0.0
		for _, p := range pairs[:k] {
			v := vms[p.src.i]
			after[p.src.i].Host = p.dst.k.host
			deltas = append(deltas, delta{p.src.k, v.VCPUs, v.MemoryMiB}, delta{p.dst.k, -v.VCPUs, -v.MemoryMiB})
			moves = append(moves, Move{VM: v.Name, Site: v.Site, From: p.src.k.host, To: p.dst.k.host})
			mig += float64(v.MemoryMiB) * (1 << 20) / lan
		}
		o, err := t.evaluate(ctx, j, part, after, deltas)
		if err != nil {
			return d, err
		}
		o.k, o.moves, o.mig = k, moves, mig
		outs = append(outs, o)
	}
	t.decide(&d, outs, func(k int) string {
		return fmt.Sprintf("consolidating %d pair(s) of %s's workers on %s (best of 1 to %d)", k, jm.rj.ID, cl.Name, K)
	})
	return d, nil
}

// shrink evaluates halving the vCPUs of job j's workers in one cluster.
func (t *tuner) shrink(ctx context.Context, j, part int) (TuningDecision, error) {
	jm := t.md.jobs[j]
	d := t.start(j, part, ActionShrink)
	c := jm.parts[part].c
	cl := t.md.grid.Clusters[c]
	vms := jm.rj.VMs
	type cand struct {
		i     int
		helps bool
	}
	var cs []cand
	for _, i := range jm.workers(vms, c) {
		v := vms[i]
		if v.VCPUs < 2 {
			continue
		}
		h, known := t.caps[hostKey{v.Site, v.Host}]
		cs = append(cs, cand{i, known && !t.fitsNew(h.FreeVCPUs, h.FreeMemoryMiB) && t.fitsNew(h.FreeVCPUs+v.VCPUs-v.VCPUs/2, h.FreeMemoryMiB)})
	}
	if len(cs) == 0 {
		d.Reason = fmt.Sprintf("none of %s's workers on %s has 2 vCPUs or more to halve", jm.rj.ID, cl.Name)
		return d, nil
	}
	slices.SortStableFunc(cs, func(a, b cand) int {
		va, vb := vms[a.i], vms[b.i]
		return cmp.Or(boolFirst(a.helps, b.helps), cmp.Compare(va.Host, vb.Host), cmp.Compare(va.Name, vb.Name))
	})
	var outs []outcome
	for k := 1; k <= len(cs); k++ {
		after := slices.Clone(vms)
		var deltas []delta
		var shrinks []Shrink
		for _, x := range cs[:k] {
			v := vms[x.i]
			after[x.i].VCPUs = v.VCPUs / 2
			deltas = append(deltas, delta{hostKey{v.Site, v.Host}, v.VCPUs - v.VCPUs/2, 0})
			shrinks = append(shrinks, Shrink{VM: v.Name, Site: v.Site, Host: v.Host, VCPUs: v.VCPUs / 2})
		}
		o, err := t.evaluate(ctx, j, part, after, deltas)
		if err != nil {
			return d, err
		}
		o.k, o.shrinks = k, shrinks
		outs = append(outs, o)
	}
	t.decide(&d, outs, func(k int) string {
		return fmt.Sprintf("halving the vCPUs of %d of %s's workers on %s (best of 1 to %d)", k, jm.rj.ID, cl.Name, len(cs))
	})
	return d, nil
}

// boolFirst orders true before false.
func boolFirst(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return -1
	}
	return 1
}

// decide fills d from the best outcome: the largest net among those that
// leave the new job a plan, then the fewest steps. what describes the
// action with k steps.
func (t *tuner) decide(d *TuningDecision, outs []outcome, what func(k int) string) {
	best := -1
	for i := range outs {
		if outs[i].feasible && (best < 0 || outs[i].net() > outs[best].net()) {
			best = i
		}
	}
	if best < 0 {
		d.Reason = what(len(outs)) + ": " + t.job.Name + " would have no plan after it"
		return
	}
	o := outs[best]
	d.Moves, d.Shrinks = o.moves, o.shrinks
	d.GainSeconds, d.LossSeconds, d.MigrationSeconds = o.gain, o.loss, o.mig
	d.NewJobSecondsAfter, d.TargetSecondsAfter = o.after, o.targetAfter
	d.Accepted = d.GainSeconds > d.LossSeconds+d.MigrationSeconds
	var b strings.Builder
	b.WriteString(what(o.k))
	fmt.Fprintf(&b, " frees %d host(s) for %s and %.4g Mbit/s of %s's WAN traffic", o.freedHosts, t.job.Name, o.freedMbps, d.Target)
	verdict := "not more than"
	if d.Accepted {
		verdict = "more than"
	}
	fmt.Fprintf(&b, ": %s gains %.4g s (%.4g s to %.4g s), %s %s loses (%.4g s) plus the migrations (%.4g s)",
		t.job.Name, d.GainSeconds, d.NewJobSecondsBefore, d.NewJobSecondsAfter, verdict, d.Target, d.LossSeconds, d.MigrationSeconds)
	d.Reason = b.String()
}

// rank sorts the decisions, the one to carry out first, and says why the
// other accepted ones were not chosen.
func (t *tuner) rank(ds []TuningDecision) {
	action := map[string]int{ActionConsolidate: 0, ActionShrink: 1}
	slices.SortStableFunc(ds, func(a, b TuningDecision) int {
		if c := boolFirst(a.Accepted, b.Accepted); c != 0 {
			return c
		}
		if na, nb := a.net(), b.net(); math.Abs(na-nb) > relNetTie*max(math.Abs(na), math.Abs(nb)) {
			return cmp.Compare(nb, na)
		}
		return cmp.Or(cmp.Compare(a.Target, b.Target), cmp.Compare(action[a.Action], action[b.Action]),
			cmp.Compare(t.md.index[a.Cluster], t.md.index[b.Cluster]))
	})
	if len(ds) == 0 || !ds[0].Accepted {
		return
	}
	for i := 1; i < len(ds) && ds[i].Accepted; i++ {
		ds[i].Reason += fmt.Sprintf("; not chosen: to %s %s on %s nets %.4g s, this %.4g s",
			ds[0].Action, ds[0].Target, ds[0].Cluster, ds[0].net(), ds[i].net())
	}
}
