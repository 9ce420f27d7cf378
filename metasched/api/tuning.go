package api

import "time"

// TuningRecord is one evaluated bandwidth tuning candidate and what became
// of it (GET /v1/tuning). The chosen candidate also says how its carrying
// out went (Started, Ended, Migrations, Resizes, MigrationS) and, once the
// jobs involved have ended, what it measured against what it predicted
// (Measured).
type TuningRecord struct {
	Seq int `json:"seq"`
	TuningDecision
	// NewJobID is the ID of the queued job the candidate was evaluated
	// for (NewJob is its name).
	NewJobID string    `json:"new_job_id"`
	At       time.Time `json:"at"`
	// Outcome: "rejected", "not chosen", "carrying out", "carried out",
	// or "failed: ...".
	Outcome string `json:"outcome"`
	// Started and Ended bound the carrying out of a chosen candidate:
	// its migrations and resizes, which start together.
	Started time.Time `json:"started,omitzero"`
	Ended   time.Time `json:"ended,omitzero"`
	// Migrations and Resizes are what the agents did, one by one.
	Migrations []TuningMigration `json:"migrations,omitempty"`
	Resizes    []TuningResize    `json:"resizes,omitempty"`
	// MigrationS is the measured time of the migrations in all: from the
	// start of the carrying out to the end of its last migration (they
	// run at once and share the cluster's LAN, as MigrationSeconds
	// predicts them).
	MigrationS float64 `json:"migration_s,omitempty"`
	// Measured holds the run times of the two jobs against their
	// predictions, filled in as each job ends.
	Measured *TuningMeasured `json:"measured,omitempty"`
}

// TuningMigration is one live migration of a tuning carried out.
type TuningMigration struct {
	VM   string `json:"vm"`
	From string `json:"from"`
	To   string `json:"to"`
	// Seconds is the migration's time as its agent measured it, Live
	// whether the VM ran meanwhile, DowntimeMs its pause when the
	// hypervisor says.
	Seconds    float64 `json:"seconds"`
	Live       bool    `json:"live"`
	DowntimeMs float64 `json:"downtime_ms,omitempty"`
	Error      string  `json:"error,omitempty"`
}

// TuningResize is one vCPU resize (a shrink) of a tuning carried out.
type TuningResize struct {
	VM      string  `json:"vm"`
	Host    string  `json:"host"`
	VCPUs   int     `json:"vcpus"`
	Seconds float64 `json:"seconds"`
	Error   string  `json:"error,omitempty"`
}

// TuningMeasured sets what a tuning carried out predicted against what
// the two jobs measured. Times are in the jobs' own seconds: the plan's
// seconds scaled by time_scale under the emulated executor, as a job's
// predicted run time is. Each job's measured figures are filled in when
// it ends done (its state says so); until then, or when it ended failed
// or cancelled, they are 0.
type TuningMeasured struct {
	// TargetPredictedS is the running job's predicted run time before
	// the tuning (its plan's), PredictedLossS how much longer the tuning
	// was to make it.
	TargetPredictedS float64 `json:"target_predicted_s"`
	PredictedLossS   float64 `json:"predicted_loss_s"`
	// TargetMeasuredS is its measured run time (start to end of its last
	// attempt) and TargetSlowdownS that less TargetPredictedS: the
	// measured loss.
	TargetMeasuredS float64 `json:"target_measured_s"`
	TargetSlowdownS float64 `json:"target_slowdown_s"`
	// TargetState is the state the target ended in ("" while it runs).
	TargetState string `json:"target_state,omitempty"`
	// NewJobPredictedS is the new job's predicted run time on the plan
	// it had before the tuning, PredictedGainS how much sooner the tuning
	// was to make it end.
	NewJobPredictedS float64 `json:"new_job_predicted_s"`
	PredictedGainS   float64 `json:"predicted_gain_s"`
	// NewJobMeasuredS is its measured run time and NewJobGainS
	// NewJobPredictedS less that: the measured gain.
	NewJobMeasuredS float64 `json:"new_job_measured_s"`
	NewJobGainS     float64 `json:"new_job_gain_s"`
	NewJobState     string  `json:"new_job_state,omitempty"`
}

// The actions of a TuningDecision.
const (
	ActionConsolidate = "consolidate"
	ActionShrink      = "shrink"
)

// TuningDecision is one candidate action on a running job (the target) in
// one cluster, with what it would do to the new job and to the target
// (docs/research/selection.md, "Bandwidth tuning's model").
type TuningDecision struct {
	NewJob string `json:"new_job"`
	Target string `json:"target"`
	// Action is ActionConsolidate or ActionShrink.
	Action  string         `json:"action"`
	Cluster string         `json:"cluster"`
	Moves   []TuningMove   `json:"moves,omitempty"`
	Shrinks []TuningShrink `json:"shrinks,omitempty"`
	// GainSeconds is how much sooner the new job ends, LossSeconds how
	// much later the target ends, MigrationSeconds the moved memory over
	// the cluster's LAN.
	GainSeconds         float64 `json:"gain_seconds"`
	LossSeconds         float64 `json:"loss_seconds"`
	MigrationSeconds    float64 `json:"migration_seconds"`
	NewJobSecondsBefore float64 `json:"new_job_seconds_before"`
	NewJobSecondsAfter  float64 `json:"new_job_seconds_after"`
	TargetSecondsBefore float64 `json:"target_seconds_before"`
	TargetSecondsAfter  float64 `json:"target_seconds_after"`
	// Accepted is GainSeconds > LossSeconds + MigrationSeconds.
	Accepted bool   `json:"accepted"`
	Reason   string `json:"reason"`
}

// TuningMove is one live migration of a decision.
type TuningMove struct {
	VM   string `json:"vm"`
	Site string `json:"site"`
	From string `json:"from"`
	To   string `json:"to"`
}

// TuningShrink is one vCPU hot-unplug of a decision.
type TuningShrink struct {
	VM    string `json:"vm"`
	Site  string `json:"site"`
	Host  string `json:"host"`
	VCPUs int    `json:"vcpus"` // after the shrink
}
