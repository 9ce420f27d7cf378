package api

import "time"

// Placement is a job's plan and the hosts that carry it out: one VM per
// machine of the plan.
type Placement struct {
	Plan    Plan      `json:"plan"`
	Master  HostRef   `json:"master"`
	Workers []HostRef `json:"workers"`
	// Measured lists the links whose bandwidth in the plan is a measured
	// one, with when and how.
	Measured []string `json:"measured,omitempty"`
	// Calibrated lists the clusters' figures in the plan that the
	// calibration measured in place of the grid file's.
	Calibrated []string `json:"calibrated,omitempty"`
}

// HostRef is one host of a placement.
type HostRef struct {
	Site string `json:"site"`
	Host string `json:"host"`
}

// Plan is a job's cluster selection: the master cluster, the machines used
// in each cluster, the predicted rate and run time, and why each cluster
// was used or left out (docs/research/selection.md, "Planning a job").
type Plan struct {
	Algorithm string `json:"algorithm"`
	Job       string `json:"job"`
	Tasks     int    `json:"tasks"`
	// Feasible is false when no plan gives the job a single worker; Reason
	// says why and the other fields are empty.
	Feasible bool   `json:"feasible"`
	Reason   string `json:"reason,omitempty"`
	Master   string `json:"master"`
	// MasterForced says the master's cluster was given, not chosen.
	MasterForced bool `json:"master_forced,omitempty"`
	// Rate is the fluid rate of the plan's workers in tasks per second.
	Rate float64 `json:"rate_tasks_per_s"`
	// Runtime is when the last of the job's tasks ends, every task whole.
	Runtime float64 `json:"runtime_s"`
	// Machines counts every machine of the plan, the master's included.
	Machines    int     `json:"machines"`
	CostPerHour float64 `json:"cost_per_hour"`
	// Start is when the chosen cluster is ready, for a baseline waiting
	// for its cluster (0 = now).
	Start float64 `json:"start_s,omitempty"`
	// Clusters lists the clusters that run part of the job, the master's
	// first, then in grid order.
	Clusters []ClusterPlan `json:"clusters"`
	Excluded []Excluded    `json:"excluded"`
	// ExcludedMore counts the clusters left out beyond those Excluded
	// lists: a plan kept in a job's record lists the first few only.
	ExcludedMore int `json:"excluded_more,omitempty"`
	// Zones are the Kruskal zones the hill climbing restarted from.
	Zones [][]string `json:"zones,omitempty"`
	// Evaluations counts the plans the algorithm evaluated.
	Evaluations int `json:"evaluations"`
}

// ClusterPlan is one cluster's part of a plan and why.
type ClusterPlan struct {
	Name   string `json:"name"`
	Master bool   `json:"master,omitempty"`
	// Machines counts the workers (the master's machine is not among
	// them); Allowed is the workers the caps allow, Free the cluster's
	// free machines.
	Machines int `json:"machines"`
	Allowed  int `json:"allowed"`
	Free     int `json:"free"`
	// Tasks is the tasks the cluster's workers finish by the plan's run
	// time.
	Tasks int `json:"tasks"`
	// BandwidthMbps is the bandwidth the cluster's workers share with the
	// master.
	BandwidthMbps float64 `json:"bandwidth_mbps"`
	Rate          float64 `json:"rate_tasks_per_s"`
	// Limit names what bounds the cluster's workers: free, uplink, path,
	// master-share, efficiency or tasks.
	Limit string `json:"limit"`
	Why   string `json:"why"`
}

// Excluded is a cluster left out of a plan and why.
type Excluded struct {
	Name   string `json:"name"`
	Reason string `json:"reason"`
}

// Where a link's measured bandwidth came from (Link.Via).
const (
	ViaAgents = "agents" // a probe between the two sites' agents
	ViaVMs    = "vms"    // a stream between a VM at each site (calibration)
)

// Link is a grid link with its configured and measured bandwidth.
type Link struct {
	Between        [2]string `json:"between"`
	ConfiguredMbps float64   `json:"configured_mbps"`
	MeasuredMbps   float64   `json:"measured_mbps,omitempty"` // 0: never measured
	MeasuredAt     time.Time `json:"measured_at,omitzero"`
	Samples        int       `json:"samples,omitempty"`
	// Via says where the figure plans use came from (ViaAgents or ViaVMs);
	// once a link has a VM-to-VM figure, the agents' average is
	// AgentsMbps.
	Via        string  `json:"via,omitempty"`
	AgentsMbps float64 `json:"agents_mbps,omitempty"`
}
