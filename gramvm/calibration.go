package gramvm

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/metasched/metasched/graph"
	"github.com/metasched/metasched/selection"
)

// Calibration (Bertogna et al. §3: "each time a cluster is added, virtual
// images are characterized and a performance benchmark is done; the network
// links are monitored"). The caller measures, in VMs on the grid's hosts,
// how fast a cluster's machines run the task farm's kernel in a VM that
// boots a given image (operations per second per vCPU) and how fast two
// VMs of one cluster talk over its LAN, and gives the figures here with
// the time they were taken. A plan then uses them in place of the grid
// file's perf and lan_mbps, and says so in Placement.Calibrated. The
// figures are kept as given (the newest replaces the one before): a
// benchmark is a deliberate measurement, not a stream of probes.

// Where a link's newest measurement came from (Link.Via).
const (
	// ViaAgents: a probe between the two sites' agents.
	ViaAgents = "agents"
	// ViaVMs: a stream between a VM at each site (calibration).
	ViaVMs = "vms"
)

// Perf is a cluster's measured speed for the VMs of one image: the task
// farm kernel's operations per second per vCPU, in a VM that boots the
// image on one of the cluster's machines, under that machine's CPU quota
// and load.
type Perf struct {
	Cluster    string    `json:"cluster"`
	Image      string    `json:"image"`
	OpsPerVCPU float64   `json:"ops_per_vcpu"`
	MeasuredAt time.Time `json:"measured_at"`
	// ConfiguredPerf is the grid file's perf of one of the cluster's
	// machines (operations per second per machine).
	ConfiguredPerf float64 `json:"configured_perf"`
}

// LAN is a cluster's measured LAN bandwidth: a stream between two VMs on
// two of its machines.
type LAN struct {
	Cluster        string    `json:"cluster"`
	MeasuredMbps   float64   `json:"measured_mbps"`
	MeasuredAt     time.Time `json:"measured_at"`
	ConfiguredMbps float64   `json:"configured_mbps"`
}

// SetPoolImages says which image the VMs of each pool (job type) boot: a
// job's plan uses the measured perf of its pool's image. A pool absent or
// with no image has no measured perf.
func (s *Service) SetPoolImages(images map[string]string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.version++
	s.images = map[string]string{}
	for p, img := range images {
		if img != "" {
			s.images[p] = img
		}
	}
}

// ObservePerf records a cluster's measured operations per second per vCPU
// for the VMs of an image, taken at the time given; it replaces the figure
// measured before for that cluster and image.
func (s *Service) ObservePerf(cluster, image string, opsPerVCPU float64, at time.Time) error {
	if image == "" {
		return fmt.Errorf("observe perf of %s: %w: image: must not be empty", cluster, ErrInvalid)
	}
	if !(opsPerVCPU > 0) || math.IsInf(opsPerVCPU, 0) {
		return fmt.Errorf("observe perf of %s (image %s): %w: ops_per_vcpu must be a number > 0, not %g", cluster, image, ErrInvalid, opsPerVCPU)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.version++
	i := s.clusterLocked(cluster)
	if i < 0 {
		return fmt.Errorf("observe perf of %s: %w: the grid has no such cluster", cluster, ErrNotFound)
	}
	s.perf[[2]string{cluster, image}] = Perf{Cluster: cluster, Image: image, OpsPerVCPU: opsPerVCPU, MeasuredAt: at,
		ConfiguredPerf: s.grid.Clusters[i].Perf}
	return nil
}

// ObserveLAN records a cluster's measured LAN bandwidth, taken at the time
// given; it replaces the grid file's lan_mbps in plans (and the figure
// measured before).
func (s *Service) ObserveLAN(cluster string, mbps float64, at time.Time) error {
	if !(mbps >= graph.MinMbps && mbps <= graph.MaxMbps) {
		return fmt.Errorf("observe lan of %s: %w: mbps must be within %g and %g, not %g", cluster, ErrInvalid, graph.MinMbps, graph.MaxMbps, mbps)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.version++
	i := s.clusterLocked(cluster)
	if i < 0 {
		return fmt.Errorf("observe lan of %s: %w: the grid has no such cluster", cluster, ErrNotFound)
	}
	conf := s.grid.Clusters[i].LANMbps
	if old, ok := s.lan[cluster]; ok {
		conf = old.ConfiguredMbps
	}
	s.lan[cluster] = LAN{Cluster: cluster, MeasuredMbps: mbps, MeasuredAt: at, ConfiguredMbps: conf}
	s.grid.Clusters[i].LANMbps = mbps
	return nil
}

// ObserveVMs records a bandwidth between two clusters measured from a VM
// at one to a VM at the other: it enters the link's weighted average as an
// agents' probe does (Observe), and the link says its newest measurement
// was VM to VM.
func (s *Service) ObserveVMs(a, b string, mbps float64, at time.Time) error {
	return s.observe(a, b, mbps, at, ViaVMs)
}

// Perfs lists the measured perf figures by cluster (grid order), then
// image.
func (s *Service) Perfs() []Perf {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Perf, 0, len(s.perf))
	for _, p := range s.perf {
		out = append(out, p)
	}
	slices.SortFunc(out, func(x, y Perf) int {
		if c := s.clusterLocked(x.Cluster) - s.clusterLocked(y.Cluster); c != 0 {
			return c
		}
		return strings.Compare(x.Image, y.Image)
	})
	return out
}

// LANs lists the measured LAN figures in grid order.
func (s *Service) LANs() []LAN {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []LAN
	for _, c := range s.grid.Clusters {
		if l, ok := s.lan[c.Name]; ok {
			out = append(out, l)
		}
	}
	return out
}

func (s *Service) clusterLocked(name string) int {
	return slices.IndexFunc(s.grid.Clusters, func(c graph.Cluster) bool { return c.Name == name })
}

// jobPerf returns the perf of one of the job's VMs on cluster c of the
// grid: the measured ops/s per vCPU of its pool's image × its vCPUs, or
// the grid's perf when none was measured; and the measured figure used.
func (s *Service) jobPerf(grid *graph.Grid, c int, job *selection.Job) (float64, *Perf) {
	if job != nil {
		if img, ok := s.images[job.Type]; ok {
			if p, ok := s.perf[[2]string{grid.Clusters[c].Name, img}]; ok {
				return p.OpsPerVCPU * float64(max(1, job.VM.VCPUs)), &p
			}
		}
	}
	return grid.Clusters[c].Perf, nil
}

// calibrateLocked puts into grid (a copy of the service's) the measured
// perf of the job's VMs, and returns what it used, one line per figure:
// each cluster's perf, then each cluster's LAN (already in the service's
// grid), in grid order.
func (s *Service) calibrateLocked(grid *graph.Grid, job *selection.Job) []string {
	var out []string
	for i := range grid.Clusters {
		perf, p := s.jobPerf(grid, i, job)
		if p == nil {
			continue
		}
		grid.Clusters[i].Perf = perf
		out = append(out, fmt.Sprintf("%s perf: %.4g ops/s (%.4g per vCPU × %d vCPUs, image %s) measured %s, %.4g configured",
			p.Cluster, perf, p.OpsPerVCPU, max(1, job.VM.VCPUs), p.Image, stampOf(p.MeasuredAt), p.ConfiguredPerf))
	}
	for _, c := range grid.Clusters {
		if l, ok := s.lan[c.Name]; ok {
			out = append(out, fmt.Sprintf("%s lan: %.4g Mbit/s measured %s, %.4g configured", l.Cluster, l.MeasuredMbps, stampOf(l.MeasuredAt), l.ConfiguredMbps))
		}
	}
	return out
}

// stampOf writes a time of a measurement in explanations.
func stampOf(t time.Time) string { return t.UTC().Format(time.RFC3339) }
