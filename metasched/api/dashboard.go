package api

import (
	"time"
)

// Dashboard is the state the dashboard shows: GET /v1/dashboard answers it
// and GET /v1/events sends it every EventEvery as a server-sent event
// "state". Every event is whole, so a page that reconnects (after a
// restart of the daemon, say) holds no stale state.
type Dashboard struct {
	// Viewer is who the state is for: an operator sees everything; a
	// user its own jobs among the recent ones and no hosts, switches or
	// tuning (they are left empty).
	Viewer Principal `json:"viewer"`
	// Instance changes at every start of the daemon.
	Instance string    `json:"instance"`
	Version  string    `json:"version"`
	Started  time.Time `json:"started"`
	Now      time.Time `json:"now"`
	// Types are the job types (the pools), for the submit form.
	Types []JobType    `json:"types"`
	Pools []Pool       `json:"pools"`
	Hosts []HostView   `json:"hosts"`
	Jobs  JobsOverview `json:"jobs"`
	// Switches are the switches in flight and the stranded ones not
	// cleared, then the last DashboardSwitches final ones, newest first.
	Switches []SwitchView `json:"switches"`
	// Tuning are the last DashboardTuning bandwidth tuning records.
	Tuning []TuningRecord `json:"tuning"`
	Policy PolicyView     `json:"policy"`
	// Sample is the newest sample of the charts (one a second); History the
	// samples of the last HistorySamples seconds, oldest first, sent in the first event of
	// a stream (and by GET /v1/dashboard?history=true).
	Sample  Sample   `json:"sample"`
	History []Sample `json:"history,omitempty"`
}

// How much the dashboard lists and keeps.
const (
	DashboardJobs     = 40
	DashboardSwitches = 20
	DashboardTuning   = 20
	// HistorySamples samples, one a second: the charts' last ten minutes.
	HistorySamples = 600
)

// EventEvery is the period of GET /v1/events: twice a second, so that a
// host switching for the demo's one second shows in at least one event.
const EventEvery = 500 * time.Millisecond

// JobsOverview counts the jobs by state and lists the newest
// DashboardJobs.
type JobsOverview struct {
	Counts map[State]int `json:"counts"`
	Recent []JobSummary  `json:"recent"`
}

// JobSummary is a job as the dashboard lists it: the JobHead and RunTimes
// of its Job, with the plan in short (GET /v1/jobs/{id} has the rest: the
// transitions and the plan's explanation).
type JobSummary struct {
	JobHead
	// Master is the master's cluster, Clusters the machines per cluster.
	Master   string         `json:"master,omitempty"`
	Clusters []ClusterShare `json:"clusters,omitempty"`
	Machines int            `json:"machines,omitempty"`
	RunTimes
	Attempts int `json:"attempts,omitempty"`
}

// Summary returns the job as the dashboard lists it.
func (j Job) Summary() JobSummary {
	s := JobSummary{JobHead: j.JobHead, RunTimes: j.RunTimes, Attempts: j.Attempts}
	if pl := j.Placement; pl != nil && pl.Plan.Feasible {
		s.Master, s.Machines = pl.Plan.Master, pl.Plan.Machines
		for _, c := range pl.Plan.Clusters {
			cs := ClusterShare{Name: c.Name, Machines: c.Machines}
			for _, t := range j.Clusters {
				if t.Name == c.Name {
					cs.TasksPredicted, cs.TasksDone = t.TasksPredicted, t.TasksDone
				}
			}
			s.Clusters = append(s.Clusters, cs)
		}
	}
	return s
}

// ClusterShare is the workers a plan puts in one cluster (the master is
// on top, in the plan's master cluster), and the tasks it was predicted
// to do and did (Job.Clusters).
type ClusterShare struct {
	Name           string  `json:"name"`
	Machines       int     `json:"machines"`
	TasksPredicted float64 `json:"tasks_predicted,omitempty"`
	TasksDone      *int    `json:"tasks_done,omitempty"`
}

// Sample is one point of the dashboard's charts.
type Sample struct {
	At time.Time `json:"at"`
	// Queue counts the jobs waiting per pool, Jobs the jobs waiting or
	// served (j_i), Servers the hosts serving each pool (k_i).
	Queue   map[string]int `json:"queue"`
	Jobs    map[string]int `json:"jobs"`
	Servers map[string]int `json:"servers"`
	// CostRate is the holding-cost rate Σ c_i j_i.
	CostRate float64 `json:"cost_rate"`
}
