package api

import "time"

// JobType is a pool: the jobs of one type and the hosts that serve them
// (the job_types of the daemon's configuration).
type JobType struct {
	Name        string  `json:"name"`
	VCPUs       int     `json:"vcpus"`
	MemoryMiB   int     `json:"memory_mib"`
	HoldingCost float64 `json:"holding_cost"`
	// Image is the image the pool's VMs boot (a name of the sites'
	// images); empty: they boot none.
	Image string `json:"image,omitempty"`
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
	Table     *PolicyTable `json:"table,omitempty"`
	TableView *PolicySlice `json:"table_view,omitempty"`
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

// PolicySlice is a 2-D view of the optimal table in force, like the
// papers' tables: the servers in place at each pool, the first two pools'
// queue lengths on the rows and columns, the other queues fixed.
type PolicySlice struct {
	// Spec is the view in the syntax of `metasched policy --view`.
	Spec string `json:"spec"`
	// Pools are the table's pools in order; Rows and Cols index them.
	Pools []string `json:"pools"`
	Rows  int      `json:"rows"`
	Cols  int      `json:"cols"`
	// Servers are the servers in place per pool, Fixed the queue lengths
	// of the pools on neither axis.
	Servers []int       `json:"servers"`
	Fixed   map[int]int `json:"fixed,omitempty"`
	// Actions[r][c] is the decision with r jobs at pool Rows and c at pool
	// Cols: "" does nothing, "a→b" switches a server from pool a to b.
	Actions [][]string `json:"actions"`
	// LiveRow and LiveCol mark the cell of the live queue lengths, -1 when
	// it is out of the view.
	LiveRow int `json:"live_row"`
	LiveCol int `json:"live_col"`
}
