package gramvm

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/metasched/metasched/graph"
	"github.com/metasched/metasched/selection"
)

// DefaultAlpha is the weight of a new bandwidth measurement in a link's
// exponentially weighted average.
const DefaultAlpha = 0.5

// Service plans jobs on the live grid: the grid file's clusters with the
// free hosts the agents report, and its links with the bandwidths the
// agents' probes measure. It is safe for concurrent use.
type Service struct {
	alpha float64

	mu       sync.Mutex
	grid     graph.Grid
	measured map[[2]string]*Link
	// The calibration's figures (calibration.go): perf by cluster and
	// image, LAN by cluster, and the image of each pool.
	perf   map[[2]string]Perf
	lan    map[string]LAN
	images map[string]string
	// version counts the changes of the grid's figures and images.
	version uint64
}

// Link is a grid link with its configured and measured bandwidth.
type Link struct {
	Between        [2]string `json:"between"`
	ConfiguredMbps float64   `json:"configured_mbps"`
	MeasuredMbps   float64   `json:"measured_mbps,omitempty"` // 0: never measured
	MeasuredAt     time.Time `json:"measured_at,omitzero"`
	Samples        int       `json:"samples,omitempty"`
	// Via says where the figure plans use came from: ViaAgents (the
	// average of the probes between the sites' agents) or ViaVMs (streams
	// between VMs of the two sites, by the calibration). Once a link has a
	// VM-to-VM figure, the agents' probes no longer move it: a stream
	// between VMs is what the jobs get, while the agents' hosts may reach
	// each other another way (in a lab on one machine, over the loopback).
	// Their average is then AgentsMbps.
	Via        string  `json:"via,omitempty"`
	AgentsMbps float64 `json:"agents_mbps,omitempty"`
}

// New returns a service over a valid grid; alpha (0: DefaultAlpha) weighs
// new measurements.
func New(g *graph.Grid, alpha float64) (*Service, error) {
	if err := g.Validate(); err != nil {
		return nil, fmt.Errorf("gramvm: %w", err)
	}
	if alpha == 0 {
		alpha = DefaultAlpha
	}
	if !(alpha > 0 && alpha <= 1) {
		return nil, fmt.Errorf("gramvm: alpha must be in (0, 1], not %g", alpha)
	}
	s := &Service{alpha: alpha, grid: graph.Grid{Clusters: slices.Clone(g.Clusters), Links: slices.Clone(g.Links)},
		measured: map[[2]string]*Link{}, perf: map[[2]string]Perf{}, lan: map[string]LAN{}, images: map[string]string{}}
	return s, nil
}

func key(a, b string) [2]string {
	if a > b {
		a, b = b, a
	}
	return [2]string{a, b}
}

// Observe records a measured bandwidth between two clusters (a probe from
// one site's agent to the other's) into the link's weighted average.
func (s *Service) Observe(a, b string, mbps float64, at time.Time) error {
	return s.observe(a, b, mbps, at, ViaAgents)
}

func (s *Service) observe(a, b string, mbps float64, at time.Time, via string) error {
	if !(mbps >= graph.MinMbps && mbps <= graph.MaxMbps) || math.IsNaN(mbps) {
		return fmt.Errorf("observe %s-%s: %w: mbps must be within %g and %g, not %g", a, b, ErrInvalid, graph.MinMbps, graph.MaxMbps, mbps)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.version++
	i := slices.IndexFunc(s.grid.Links, func(l graph.Link) bool { return key(l.Between[0], l.Between[1]) == key(a, b) })
	if i < 0 {
		return fmt.Errorf("observe %s-%s: %w: the grid has no such link", a, b, ErrNotFound)
	}
	k := key(a, b)
	m := s.measured[k]
	switch {
	case m == nil:
		m = &Link{Between: k, ConfiguredMbps: s.grid.Links[i].Mbps, MeasuredMbps: mbps}
		s.measured[k] = m
	case via == ViaAgents && m.Via == ViaVMs: // the VM-to-VM figure stays
		m.AgentsMbps = s.alpha*mbps + (1-s.alpha)*cmp.Or(m.AgentsMbps, mbps)
		return nil
	case via == ViaVMs && m.Via != ViaVMs: // the first VM-to-VM figure replaces the agents'
		m.AgentsMbps, m.MeasuredMbps, m.Samples = m.MeasuredMbps, mbps, 0
	default:
		m.MeasuredMbps = s.alpha*mbps + (1-s.alpha)*m.MeasuredMbps
	}
	m.MeasuredAt, m.Samples, m.Via = at, m.Samples+1, via
	s.grid.Links[i].Mbps = m.MeasuredMbps
	return nil
}

// Version counts the changes of what plans use besides the hosts and the
// running jobs: the measured bandwidths, perf and LANs, and the pools'
// images. A plan made at one version is made again the same at it.
func (s *Service) Version() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.version
}

// Links reports every link in grid order, with its measurements.
func (s *Service) Links() []Link {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Link, len(s.grid.Links))
	for i, l := range s.grid.Links {
		if m := s.measured[key(l.Between[0], l.Between[1])]; m != nil {
			out[i] = *m
			out[i].Between = l.Between
			continue
		}
		out[i] = Link{Between: l.Between, ConfiguredMbps: l.Mbps}
	}
	return out
}

// HostRef is one host of a placement.
type HostRef struct {
	Site string `json:"site"`
	Host string `json:"host"`
}

// Placement is a plan and the hosts that carry it out: one VM per machine
// of the plan.
type Placement struct {
	Plan    selection.Plan `json:"plan"`
	Master  HostRef        `json:"master"`
	Workers []HostRef      `json:"workers"`
	// Measured lists the links whose bandwidth in the plan is a measured
	// one, with when and how ("a-b: 18.7 Mbit/s measured (3 samples, the
	// newest 2026-11-21T12:00:00Z agent to agent), 20 configured").
	Measured []string `json:"measured,omitempty"`
	// Calibrated lists the clusters' figures in the plan that the
	// calibration measured in place of the grid file's: each cluster's
	// perf for the job's VMs ("spain perf: 4.2e+08 ops/s (2.1e+08 per
	// vCPU × 2 vCPUs, image debian) measured 2026-11-21T12:00:00Z, 2e+09
	// configured"), then its LAN.
	Calibrated []string `json:"calibrated,omitempty"`
}

// Plan chooses the clusters of a job among the free hosts (FreeHosts) on
// the grid with the measured bandwidths, and the hosts of each cluster in
// the order given, by the job's placement: GramVM's hill climbing with the
// master the job forces (job.Master, when opt.Master is -1), or one of the
// single-cluster baselines with every cluster ready now (PlanAvailable
// gives them the time each cluster is ready). An infeasible plan is a
// result (Plan.Feasible false), not an error; so is a forced master's
// cluster without a free host now.
func (s *Service) Plan(ctx context.Context, job *selection.Job, free map[string][]string, opt selection.Options) (Placement, error) {
	return s.placeFree(ctx, job, free, opt, nil)
}

// placeClimb plans a job by hill climbing on the hosts free now, with its
// forced master when it gives one. With memo, a job of the same shape
// planned on the same free host counts per cluster gets the search's
// answer again: the search sees only the counts, and the hosts are then
// the first free ones of each cluster, as for any plan.
func (s *Service) placeClimb(ctx context.Context, pg *planGraph, job *selection.Job, free map[string][]string, opt selection.Options, memo *Prepared) (Placement, error) {
	g, measured, calibrated := pg.g, pg.measured, pg.calibrated
	counts := make([]int, g.Len())
	for i := range counts {
		c := g.Cluster(i)
		counts[i] = min(len(free[c.Name]), c.Machines)
	}
	var mk string
	if memo != nil {
		mk = memo.shapeKey(job, opt, counts)
		if p, ok := memo.plans[mk]; ok {
			memo.Reused++
			return s.assign(job, reused(p, job), free, measured, calibrated)
		}
	}
	prob := selection.Problem{Graph: g, Job: job, Free: counts}
	if memo != nil {
		prob.Scratch = &memo.scratch
	}
	pl, err := selection.NewPlanner(prob)
	if err != nil {
		return Placement{}, fmt.Errorf("plan %s: %w", job.Name, err)
	}
	if opt.Master == -1 && job.Master != "" {
		m, ok := g.Grid().Index(job.Master)
		if !ok {
			return Placement{}, fmt.Errorf("plan %s: master: %w: the grid has no cluster %q", job.Name, ErrInvalid, job.Master)
		}
		c := g.Cluster(m)
		var why string
		switch {
		case job.VM.VCPUs > c.Cores || job.VM.MemoryMiB > c.MemoryMiB:
			why = fmt.Sprintf("the master is forced on %s, whose machines cannot hold the job's VM (%d vCPUs, %d MiB)", c.Name, job.VM.VCPUs, job.VM.MemoryMiB)
		case counts[m] == 0:
			why = fmt.Sprintf("the master is forced on %s, which has no free host for the job's VM now", c.Name)
		}
		if why != "" {
			p := pl.Infeasible(selection.HillClimb, why)
			p.MasterForced = true
			return Placement{Plan: p, Measured: measured, Calibrated: calibrated, Workers: []HostRef{}}, nil
		}
		opt.Master = m
	}
	p, err := pl.HillClimb(ctx, opt)
	if err != nil {
		return Placement{}, fmt.Errorf("plan %s: %w", job.Name, err)
	}
	if memo != nil {
		memo.plans[mk] = p
	}
	return s.assign(job, p, free, measured, calibrated)
}

// assign gives a plan's clusters their hosts: the first free ones of each,
// the master's first.
func (s *Service) assign(job *selection.Job, p selection.Plan, free map[string][]string, measured, calibrated []string) (Placement, error) {
	out := Placement{Plan: p, Measured: measured, Calibrated: calibrated, Workers: []HostRef{}}
	if !p.Feasible {
		return out, nil
	}
	for _, cp := range p.Clusters {
		hosts := free[cp.Name]
		n := cp.Machines
		if cp.Master {
			out.Master = HostRef{Site: cp.Name, Host: hosts[0]}
			hosts = hosts[1:]
		}
		if n > len(hosts) {
			return Placement{}, fmt.Errorf("plan %s: cluster %s: %d workers planned on %d free hosts", job.Name, cp.Name, n, len(hosts))
		}
		for _, h := range hosts[:n] {
			out.Workers = append(out.Workers, HostRef{Site: cp.Name, Host: h})
		}
	}
	if out.Master.Host == "" { // the master's cluster runs no worker
		hosts := free[p.Master]
		if len(hosts) == 0 {
			return Placement{}, fmt.Errorf("plan %s: master cluster %s has no free host", job.Name, p.Master)
		}
		out.Master = HostRef{Site: p.Master, Host: hosts[0]}
	}
	return out, nil
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
	return &Service{alpha: s.alpha, grid: graph.Grid{Clusters: slices.Clone(s.grid.Clusters), Links: slices.Clone(s.grid.Links)}, measured: m,
		perf: maps.Clone(s.perf), lan: maps.Clone(s.lan), images: maps.Clone(s.images)}
}

// withGrid is a service like s on another grid with the same clusters and
// links, sharing s's measurements (read only).
func (s *Service) withGrid(g *graph.Grid) *Service {
	return &Service{alpha: s.alpha, grid: *g, measured: s.measured, perf: s.perf, lan: s.lan, images: s.images}
}

// how says how a link was measured: its samples and the newest one.
func (l *Link) how() string {
	via := "agent to agent"
	if l.Via == ViaVMs {
		via = "VM to VM"
	}
	n := "1 sample"
	if l.Samples != 1 {
		n = fmt.Sprintf("%d samples", l.Samples)
	}
	return fmt.Sprintf("%s, the newest %s %s", n, stampOf(l.MeasuredAt), via)
}
