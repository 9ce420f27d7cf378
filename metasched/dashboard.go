package metasched

import (
	"context"
	"crypto/rand"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/metasched/metasched/metasched/dashboard"
	"github.com/metasched/metasched/metasched/store"
)

// Dashboard is the state the dashboard shows: GET /v1/dashboard answers it
// and GET /v1/events sends it every EventEvery as a server-sent event
// "state". Every event is whole, so a page that reconnects (after a
// restart of the daemon, say) holds no stale state.
type Dashboard struct {
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

// JobsOverview counts the jobs by state and lists the newest.
type JobsOverview struct {
	Counts map[store.JobState]int `json:"counts"`
	Recent []JobSummary           `json:"recent"`
}

// JobSummary is a job as the dashboard lists it (GET /v1/jobs/{id} has
// the rest: the transitions and the plan's explanation).
type JobSummary struct {
	ID        string         `json:"id"`
	Name      string         `json:"name"`
	Type      string         `json:"type"`
	State     store.JobState `json:"state"`
	Reason    string         `json:"reason"`
	Submitted time.Time      `json:"submitted"`
	Updated   time.Time      `json:"updated"`
	// Master is the master's cluster, Clusters the machines per cluster.
	Master           string         `json:"master,omitempty"`
	Clusters         []ClusterShare `json:"clusters,omitempty"`
	Machines         int            `json:"machines,omitempty"`
	PredictedSeconds float64        `json:"predicted_seconds,omitempty"`
	ActualSeconds    float64        `json:"actual_seconds,omitempty"`
	Attempts         int            `json:"attempts,omitempty"`
}

// ClusterShare is the workers a plan puts in one cluster (the master is
// on top, in the plan's master cluster).
type ClusterShare struct {
	Name     string `json:"name"`
	Machines int    `json:"machines"`
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

// How much the dashboard lists and keeps.
const (
	DashboardJobs     = 40
	DashboardSwitches = 20
	DashboardTuning   = 20
	// HistorySamples samples, one a second: the charts' last ten minutes.
	HistorySamples = 600
)

// history is the ring of chart samples.
type history struct {
	mu      sync.Mutex
	samples []Sample
}

func (h *history) add(s Sample) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.samples) == HistorySamples {
		h.samples = slices.Delete(h.samples, 0, 1)
	}
	h.samples = append(h.samples, s)
}

// last returns the newest sample.
func (h *history) last() (Sample, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.samples) == 0 {
		return Sample{}, false
	}
	return h.samples[len(h.samples)-1], true
}

func (h *history) all() []Sample {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.samples)
}

func newInstance() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// sample reads one chart point from the pools.
func sample(now time.Time, pools []Pool) Sample {
	s := Sample{At: now, Queue: map[string]int{}, Jobs: map[string]int{}, Servers: map[string]int{}}
	for _, p := range pools {
		s.Queue[p.Name], s.Jobs[p.Name], s.Servers[p.Name] = p.Queued, p.Jobs, len(p.Hosts)
	}
	s.CostRate = holdingCostRate(pools)
	return s
}

// holdingCostRate is Σ c_i j_i over the pools.
func holdingCostRate(pools []Pool) float64 {
	r := 0.0
	for _, p := range pools {
		r += p.HoldingCost * float64(p.Jobs)
	}
	return r
}

// sampleLoop records a chart sample every second.
func (d *Daemon) sampleLoop(ctx context.Context) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		d.hist.add(sample(d.now(), d.Pools()))
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Dashboard returns the dashboard's state, with the charts' history when
// asked.
func (d *Daemon) Dashboard(ctx context.Context, withHistory bool) (Dashboard, error) {
	recent, err := d.st.Recent(ctx, DashboardJobs)
	if err != nil {
		return Dashboard{}, err
	}
	now := d.now()
	pools := d.Pools()
	db := Dashboard{Instance: d.instance, Version: d.opt.Version, Started: d.started, Now: now,
		Types: d.types, Pools: pools, Hosts: d.Hosts(), Policy: d.Policy(),
		Jobs: JobsOverview{Counts: d.st.Counts(), Recent: make([]JobSummary, 0, len(recent))}}
	var ok bool
	if db.Sample, ok = d.hist.last(); !ok {
		db.Sample = sample(now, pools)
	}
	d.mu.Lock()
	for _, sj := range recent {
		db.Jobs.Recent = append(db.Jobs.Recent, jobSummary(d.jobViewLocked(d.jobs[sj.ID], sj)))
	}
	d.mu.Unlock()
	db.Switches = d.switchViews(DashboardSwitches)
	db.Tuning = d.Tuning()
	db.Tuning = db.Tuning[:min(len(db.Tuning), DashboardTuning)]
	if withHistory {
		db.History = d.hist.all()
	}
	return db, nil
}

func jobSummary(j Job) JobSummary {
	s := JobSummary{ID: j.ID, Name: j.Name, Type: j.Type, State: j.State, Reason: j.Reason, Submitted: j.Submitted,
		Updated: j.Updated, PredictedSeconds: j.PredictedSeconds, ActualSeconds: j.ActualSeconds, Attempts: j.Attempts}
	if pl := j.Placement; pl != nil && pl.Plan.Feasible {
		s.Master, s.Machines = pl.Plan.Master, pl.Plan.Machines
		for _, c := range pl.Plan.Clusters {
			s.Clusters = append(s.Clusters, ClusterShare{Name: c.Name, Machines: c.Machines})
		}
	}
	return s
}

// serveDashboard answers GET /v1/dashboard[?history=true].
func (d *Daemon) serveDashboard(w http.ResponseWriter, r *http.Request) {
	withHistory := false
	if v := r.URL.Query().Get("history"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			replyErr(w, invalidField("history", fmt.Sprintf("must be true or false, not %q", v)))
			return
		}
		withHistory = b
	}
	db, err := d.Dashboard(r.Context(), withHistory)
	reply(w, http.StatusOK, db, err)
}

// EventEvery is the period of GET /v1/events: twice a second, so that a
// host switching for the demo's one second shows in at least one event.
const EventEvery = 500 * time.Millisecond

// serveEvents streams the dashboard's state as server-sent events: one
// "state" event at once (with the history) and then one every EventEvery,
// until the client goes or the daemon stops. The browser's EventSource
// reconnects by itself after retry milliseconds.
func (d *Daemon) serveEvents(w http.ResponseWriter, r *http.Request) {
	rc := http.NewResponseController(w)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	if _, err := fmt.Fprintf(w, "retry: %d\n\n", EventEvery.Milliseconds()); err != nil {
		return
	}
	t := time.NewTicker(EventEvery)
	defer t.Stop()
	for first := true; ; first = false {
		db, err := d.Dashboard(r.Context(), first)
		if err != nil {
			return // the store is closing: the client reconnects
		}
		b, err := json.Marshal(db)
		if err != nil {
			return
		}
		if _, err := fmt.Fprintf(w, "event: state\ndata: %s\n\n", b); err != nil {
			return
		}
		if err := rc.Flush(); err != nil {
			return
		}
		select {
		case <-r.Context().Done():
			return
		case <-t.C:
		}
	}
}

// serveIndex serves the dashboard's page; it logs in or shows the daemon.
func serveIndex(w http.ResponseWriter, r *http.Request) {
	serveStatic(w, "index.html")
}

// serveAsset serves the page's scripts, styles and icons.
func serveAsset(w http.ResponseWriter, r *http.Request) {
	serveStatic(w, r.PathValue("file"))
}

func serveStatic(w http.ResponseWriter, name string) {
	b, ctype, ok := dashboard.File(name)
	if !ok {
		writeError(w, http.StatusNotFound, APIError{Code: CodeNotFound, Error: fmt.Sprintf("no asset %q", name)})
		return
	}
	h := w.Header()
	h.Set("Content-Type", ctype)
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Content-Type-Options", "nosniff")
	// Inline style attributes carry the pools' and the heat map's colours.
	h.Set("Content-Security-Policy", "default-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'; form-action 'self'")
	_, _ = w.Write(b)
}

// OpenAPI is the OpenAPI 3 document of the daemon's server (every route
// of Routes), served at GET /v1/openapi.json.
//
//go:embed openapi.json
var OpenAPI []byte

func serveOpenAPI(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(OpenAPI)
}
