package api

import (
	"time"
)

// JobHead opens every view of a job (Job, and JobSummary in the dashboard's
// list): which job it is and where it stands.
type JobHead struct {
	ID    string `json:"id"`
	Name  string `json:"name"`
	Type  string `json:"type"`
	State State  `json:"state"`
	// Owner is who submitted the job: the name of the token (or client
	// certificate) it came with; absent for the daemon's own.
	Owner string `json:"owner,omitempty"`
	// Reason is the reason of the last transition.
	Reason    string    `json:"reason"`
	Submitted time.Time `json:"submitted"`
	Updated   time.Time `json:"updated"`
}

// RunTimes are a job's run times: PredictedS is its plan's run time, T/R
// seconds (for the emulated executor × time_scale) plus StartEndS, kept
// when it was planned; MeasuredS the measured one, from running to its
// end; Ratio is MeasuredS/PredictedS once both are known.
type RunTimes struct {
	PredictedS float64 `json:"predicted_s,omitempty"`
	// StartEndS is the part of PredictedS for the job's start and end
	// (its VMs' contextualization, the program's start, its end seen):
	// the median of MeasuredS − ProgramS over the pool's last jobs done
	// (absent: none yet).
	StartEndS float64 `json:"start_end_s,omitempty"`
	MeasuredS float64 `json:"measured_s,omitempty"`
	Ratio     float64 `json:"ratio,omitempty"`
	// ProgramS is the program's own run time, when it reports one (a
	// task farm's summary: its master's start to its last result):
	// MeasuredS less the VMs' contextualization, the program's start and
	// its end.
	ProgramS float64 `json:"program_s,omitempty"`
}

// TaskS is the plan's T/R: PredictedS less its start and end.
func (r RunTimes) TaskS() float64 { return r.PredictedS - r.StartEndS }

// ProgramRatio is the program's own run time over the plan's T/R (0: not
// both known).
func (r RunTimes) ProgramRatio() float64 {
	if r.ProgramS <= 0 || r.TaskS() <= 0 {
		return 0
	}
	return r.ProgramS / r.TaskS()
}

// ClusterTasks is one cluster's share of a job's tasks: predicted by its
// plan (T·rate_c/R), and done as the task-farm summary its master wrote
// says (absent: no summary).
type ClusterTasks struct {
	Name           string  `json:"name"`
	TasksPredicted float64 `json:"tasks_predicted"`
	TasksDone      *int    `json:"tasks_done,omitempty"`
}

// Job is a job as the API shows it.
type Job struct {
	JobHead
	Spec        JobSpec      `json:"spec"`
	Transitions []Transition `json:"transitions"`
	// Placement is the plan the job runs (or ran) on, once planned.
	Placement *Placement `json:"placement,omitempty"`
	// VMs are the names of the job's VMs, once provisioning started.
	VMs []JobVM `json:"vms,omitempty"`
	// LostWorkers are the worker VMs the job's attempt lost and went on
	// without (an elastic job): which, where, when and why. VMs holds the
	// workers that remain; Placement still what was planned.
	LostWorkers []JobLostVM `json:"lost_workers,omitempty"`
	RunTimes
	// Clusters are the job's tasks per cluster of its plan, predicted and
	// done, once planned.
	Clusters []ClusterTasks `json:"clusters,omitempty"`
	ExitCode *int           `json:"exit_code,omitempty"`
	// Attempts counts the times the job was started (requeued jobs run again).
	Attempts int `json:"attempts,omitempty"`
	// Explanation is the placement's explanation in text, once planned.
	Explanation string `json:"explanation,omitempty"`
}

// JobList is a page of jobs. Next, when set, is the After of the next page.
type JobList struct {
	Jobs []Job  `json:"jobs"`
	Next string `json:"next,omitempty"`
}

// PlanResult is the answer of the dry run POST /v1/plan: the placement the
// job would get now, or why it would wait.
type PlanResult struct {
	Placement Placement `json:"placement"`
	// FreeHosts counts, per cluster, the free hosts of the job's pool the
	// plan was made on.
	FreeHosts map[string]int `json:"free_hosts"`
	// Waits is true when the job would wait in its pool's queue.
	Waits bool `json:"waits"`
	// Explanation is the plan's explanation in text.
	Explanation string `json:"explanation"`
}

// JobFilter selects the jobs of a list (GET /v1/jobs): those in any of
// States (none: all), of Type and Owner ("" : any), whose ID sorts after
// After, at most Limit of them (0: no limit).
type JobFilter struct {
	States []State
	Type   string
	Owner  string
	After  string
	Limit  int
}
