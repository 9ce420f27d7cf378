package metasched

import (
	"time"

	"github.com/metasched/metasched/gramvm"
	hp "github.com/metasched/metasched/hypervisorproxy"
	"github.com/metasched/metasched/metasched/policy"
	"github.com/metasched/metasched/metasched/store"
	"github.com/metasched/metasched/selection"
)

// The daemon's HTTP server (Routes in server.go; the OpenAPI document
// openapi.json describes every route). JSON under /v1, with
// "Authorization: Bearer TOKEN" or the dashboard's session cookie (see
// session.go) on every route but the public ones:
//
//	GET    /healthz                    public: Health
//	GET    /metrics                    public: Prometheus metrics (metrics.go)
//	GET    /v1/openapi.json            public: the OpenAPI 3 document
//	GET    /, GET /assets/{file}       public: the dashboard's page and its files
//	POST   /login, POST /logout        public: LoginRequest → the session cookie; remove it
//	POST   /v1/jobs                    a job file (YAML or JSON) → 201 Job
//	GET    /v1/jobs                    ?state=S[,S]&type=T&after=ID&limit=N → JobList (pages of DefaultPageSize)
//	GET    /v1/jobs/{id}               Job
//	POST   /v1/jobs/{id}/cancel        → Job
//	GET    /v1/jobs/{id}/logs          the job's output, text/plain
//	POST   /v1/plan                    a job file → PlanResult (dry run)
//	GET    /v1/pools                   []Pool
//	GET    /v1/hosts                   []HostView
//	POST   /v1/hosts/{name}/clear      ClearRequest → HostView
//	GET    /v1/vms                     []hypervisorproxy.VM
//	GET    /v1/switches                ?active=true → []SwitchView
//	POST   /v1/switches                SwitchRequest → 202 SwitchView (an operator's switch)
//	GET    /v1/policy                  PolicyView
//	GET    /v1/links                   []gramvm.Link
//	GET    /v1/tuning                  []TuningRecord
//	GET    /v1/dashboard               ?history=true → Dashboard
//	GET    /v1/events                  server-sent events "state": a Dashboard every EventEvery
//
// Errors are APIError with a 4xx or 5xx status.

// MaxBodyBytes bounds a request body.
const MaxBodyBytes = 1 << 20

// Pages of GET /v1/jobs: limit 0 (or none) gives DefaultPageSize jobs; a
// larger limit than MaxPageSize is refused.
const (
	DefaultPageSize = 500
	MaxPageSize     = 5000
)

// APIError is the body of every error answer. Fields lists, for a rejected
// request body, each field and what is wrong with it.
type APIError struct {
	Error  string       `json:"error"`
	Code   string       `json:"code"`
	Fields []FieldError `json:"fields,omitempty"`
}

// FieldError is one problem of a request body.
type FieldError struct {
	Field   string `json:"field"`
	Problem string `json:"problem"`
}

// Error codes of APIError.
const (
	CodeInvalid      = "invalid"       // 400: a malformed request; see Fields
	CodeUnauthorized = "unauthorized"  // 401
	CodeNotFound     = "not_found"     // 404
	CodeConflict     = "conflict"      // 409: the job or host is not in a state that allows it
	CodeTooLarge     = "too_large"     // 413: the body is over MaxBodyBytes
	CodeUnavailable  = "unavailable"   // 503: shutting down, or no agent answers
	CodeInternal     = "internal"      // 500
	CodeUnsupported  = "unsupported"   // 415: a body that is not YAML or JSON
	CodeMethod       = "bad_method"    // 405
	CodeUnknownRoute = "unknown_route" // 404 for a path that is no route
)

// Health is the answer of /healthz.
type Health struct {
	Status  string    `json:"status"` // "ok"
	Version string    `json:"version"`
	Since   time.Time `json:"since"`
}

// Job is a job as the API shows it.
type Job struct {
	ID    string         `json:"id"`
	Name  string         `json:"name"`
	Type  string         `json:"type"`
	State store.JobState `json:"state"`
	// Reason is the reason of the last transition.
	Reason      string             `json:"reason"`
	Submitted   time.Time          `json:"submitted"`
	Updated     time.Time          `json:"updated"`
	Spec        selection.Job      `json:"spec"`
	Transitions []store.Transition `json:"transitions"`
	// Placement is the plan the job runs (or ran) on, once planned.
	Placement *gramvm.Placement `json:"placement,omitempty"`
	// VMs are the names of the job's VMs, once provisioning started.
	VMs []JobVM `json:"vms,omitempty"`
	// PredictedSeconds is the plan's run time scaled to this daemon
	// (emulated: the model's run time × time_scale); ActualSeconds the
	// measured one from running to the end.
	PredictedSeconds float64 `json:"predicted_seconds,omitempty"`
	ActualSeconds    float64 `json:"actual_seconds,omitempty"`
	ExitCode         *int    `json:"exit_code,omitempty"`
	// Attempts counts the times the job was started (requeued jobs run again).
	Attempts int `json:"attempts,omitempty"`
	// Explanation is the placement's explanation in text, once planned.
	Explanation string `json:"explanation,omitempty"`
}

// JobVM is one VM of a job.
type JobVM struct {
	Name   string `json:"name"`
	Site   string `json:"site"`
	Host   string `json:"host"`
	Master bool   `json:"master,omitempty"`
}

// JobList is a page of jobs. Next, when set, is the After of the next page.
type JobList struct {
	Jobs []Job  `json:"jobs"`
	Next string `json:"next,omitempty"`
}

// PlanResult is the answer of the dry run POST /v1/plan: the placement the
// job would get now, or why it would wait.
type PlanResult struct {
	Placement gramvm.Placement `json:"placement"`
	// FreeHosts counts, per cluster, the free hosts of the job's pool the
	// plan was made on.
	FreeHosts map[string]int `json:"free_hosts"`
	// Waits is true when the job would wait in its pool's queue.
	Waits bool `json:"waits"`
	// Explanation is the plan's explanation in text.
	Explanation string `json:"explanation"`
}

// Rates are a pool's current rate estimates, per second.
type Rates struct {
	Arrival float64 `json:"arrival_per_s"`      // λ
	Service float64 `json:"service_per_host_s"` // µ: completions per busy host-second
	Samples int     `json:"samples"`            // events the estimates rest on
	Prior   bool    `json:"prior,omitempty"`    // true: too few samples, a prior is used
}

// Pool is one job type and its servers.
type Pool struct {
	Name        string  `json:"name"`
	VCPUs       int     `json:"vcpus"`
	MemoryMiB   int     `json:"memory_mib"`
	HoldingCost float64 `json:"holding_cost"`
	// Queued counts the jobs waiting (queued), Active the jobs planned,
	// provisioning or running; Jobs (j_i of the policy) is both.
	Queued int `json:"queued"`
	Active int `json:"active"`
	Jobs   int `json:"jobs"`
	// Hosts in the pool (k_i: reachable, not held by a switch), of which
	// Busy run VMs of jobs and Idle none.
	Hosts []string `json:"hosts"`
	Busy  int      `json:"busy"`
	Idle  int      `json:"idle"`
	// SwitchingOut and SwitchingIn count the hosts in transit.
	SwitchingOut int   `json:"switching_out"`
	SwitchingIn  int   `json:"switching_in"`
	Rates        Rates `json:"rates"`
	Completed    int   `json:"completed"`
}

// Host states as the daemon shows them.
const (
	HostBusy        = "busy"
	HostIdle        = "idle"
	HostSwitching   = "switching"
	HostStranded    = "stranded"
	HostUnreachable = "unreachable"
)

// HostView is one host of the grid.
type HostView struct {
	Name  string `json:"name"`
	Site  string `json:"site"`
	Pool  string `json:"pool"`
	State string `json:"state"`
	// Switch is the switch holding the host, with its source and
	// destination pools, while switching or stranded.
	Switch        string  `json:"switch,omitempty"`
	From          string  `json:"from,omitempty"`
	To            string  `json:"to,omitempty"`
	Reason        string  `json:"reason,omitempty"`
	CPUs          int     `json:"cpus"`
	MemoryMiB     int     `json:"memory_mib"`
	FreeVCPUs     int     `json:"free_vcpus"`
	FreeMemoryMiB int     `json:"free_memory_mib"`
	VMs           []hp.VM `json:"vms"`
}

// ClearRequest returns a stranded host to a pool; an empty Pool means the
// source pool of the switch that stranded it.
type ClearRequest struct {
	Pool string `json:"pool,omitempty"`
}

// SwitchView is one switch of a host between pools.
type SwitchView struct {
	ID        string    `json:"id"`
	From      string    `json:"from"`
	To        string    `json:"to"`
	Host      string    `json:"host,omitempty"`
	Phase     string    `json:"phase"`
	Final     bool      `json:"final"`
	Requeued  []string  `json:"requeued,omitempty"`
	FailedIn  string    `json:"failed_in,omitempty"`
	Reason    string    `json:"reason,omitempty"`
	ClearedTo string    `json:"cleared_to,omitempty"`
	Started   time.Time `json:"started"`
	Updated   time.Time `json:"updated"`
	Seconds   float64   `json:"seconds"`
}

// PolicyView is the switching policy in force and its inputs.
type PolicyView struct {
	// Configured is the policy of the configuration file; InForce the one
	// deciding now (the heuristic stands in while an optimal table is being
	// solved, or when it could not be), with Note saying why.
	Configured string `json:"configured"`
	InForce    string `json:"in_force"`
	Note       string `json:"note,omitempty"`
	// Pools are the policy's pools in order, with the inputs of its last
	// decision.
	Pools []PolicyPool `json:"pools"`
	// SwitchRate is ζ, switches completed per second per host in transit
	// (1 / mean switch duration), with its sample count.
	SwitchRate    float64 `json:"switch_rate_per_s"`
	SwitchSamples int     `json:"switch_samples"`
	// Servers is N, the hosts the policy may move.
	Servers int `json:"servers"`
	// Decisions counts the decisions asked of the policy, Switches those
	// that started a switch; Last is the last switch decision.
	Decisions int       `json:"decisions"`
	Switches  int       `json:"switches"`
	Last      string    `json:"last,omitempty"`
	LastAt    time.Time `json:"last_at,omitzero"`
	// Table describes a loaded or solved optimal table: the rates it was
	// solved for, and when; TableView is a view of it at the live state,
	// like the papers' tables.
	Table     *PolicyTable  `json:"table,omitempty"`
	TableView *policy.Slice `json:"table_view,omitempty"`
}

// PolicyPool is one pool's inputs to the policy.
type PolicyPool struct {
	Name        string  `json:"name"`
	Jobs        int     `json:"jobs"`    // j_i
	Servers     int     `json:"servers"` // k_i
	Arrival     float64 `json:"arrival_per_s"`
	Service     float64 `json:"service_per_host_s"`
	HoldingCost float64 `json:"holding_cost"`
}

// PolicyTable is an optimal table in use.
type PolicyTable struct {
	Source     string    `json:"source"` // a file, or "solved"
	States     int       `json:"states"`
	SolvedAt   time.Time `json:"solved_at,omitzero"`
	Arrival    []float64 `json:"arrival_per_s"`
	Service    []float64 `json:"service_per_host_s"`
	SwitchRate float64   `json:"switch_rate_per_s"`
	Solving    bool      `json:"solving,omitempty"`
}
