package dashboard

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/metasched/metasched/internal/httpx"
	"github.com/metasched/metasched/metasched/api"
)

// Daemon is what the dashboard reads of the daemon. *metasched.Daemon
// implements it.
type Daemon interface {
	// Instance changes at every start of the daemon.
	Instance() string
	Version() string
	Started() time.Time
	// Now is the daemon's time.
	Now() time.Time
	Types() []api.JobType
	Pools() []api.Pool
	Hosts() []api.HostView
	Policy() api.PolicyView
	JobCounts() map[api.State]int
	// RecentJobs returns the newest n jobs, newest first.
	RecentJobs(ctx context.Context, n int) ([]api.Job, error)
	// RecentSwitches lists the switches in flight and the stranded ones
	// not cleared, then at most final others, newest first.
	RecentSwitches(ctx context.Context, final int) ([]api.SwitchView, error)
	Tuning() []api.TuningRecord
	// Sample is the newest chart sample, History the last
	// api.HistorySamples of them, oldest first.
	Sample() api.Sample
	History() []api.Sample
}

// Board is the dashboard of one daemon: it builds the state the page shows
// and serves it. Its methods are safe for concurrent use.
type Board struct {
	d    Daemon
	fail func(http.ResponseWriter, error)

	mu sync.Mutex
	// subs are the event streams being served; stop ends the broadcast
	// that feeds them (nil: none runs); builds counts the broadcast's
	// builds of the state.
	subs   map[*subscriber]struct{}
	stop   context.CancelFunc
	builds uint64
}

// New returns the dashboard of d. fail answers a request that failed: the
// HTTP server's error answers (a bad query comes as an *api.RequestError).
func New(d Daemon, fail func(w http.ResponseWriter, err error)) *Board {
	return &Board{d: d, fail: fail, subs: map[*subscriber]struct{}{}}
}

// State returns the dashboard's state, with the charts' history when
// asked.
func (b *Board) State(ctx context.Context, withHistory bool) (api.Dashboard, error) {
	d := b.d
	recent, err := d.RecentJobs(ctx, api.DashboardJobs)
	if err != nil {
		return api.Dashboard{}, err
	}
	db := api.Dashboard{Instance: d.Instance(), Version: d.Version(), Started: d.Started(), Now: d.Now(),
		Types: d.Types(), Pools: d.Pools(), Hosts: d.Hosts(), Policy: d.Policy(),
		Jobs: api.JobsOverview{Counts: d.JobCounts(), Recent: make([]api.JobSummary, 0, len(recent))}}
	db.Sample = d.Sample()
	for _, j := range recent {
		db.Jobs.Recent = append(db.Jobs.Recent, j.Summary())
	}
	if db.Switches, err = d.RecentSwitches(ctx, api.DashboardSwitches); err != nil {
		return api.Dashboard{}, err
	}
	db.Tuning = d.Tuning()
	db.Tuning = db.Tuning[:min(len(db.Tuning), api.DashboardTuning)]
	if withHistory {
		db.History = d.History()
	}
	return db, nil
}

// ViewFor is what the principal of ctx may see of db (no principal: the
// daemon's own view, everything): an operator everything; a user the job
// types, pools, policy, charts and job counts, and of the recent jobs its
// own, but no hosts, switches or tuning.
func ViewFor(ctx context.Context, db api.Dashboard) api.Dashboard {
	p, ok := api.PrincipalFrom(ctx)
	if !ok {
		p = api.Principal{Name: api.OperatorName, Role: api.RoleOperator}
	}
	db.Viewer = p
	if p.Operator() {
		return db
	}
	db.Hosts, db.Switches, db.Tuning = []api.HostView{}, []api.SwitchView{}, []api.TuningRecord{}
	own := make([]api.JobSummary, 0, len(db.Jobs.Recent))
	for _, j := range db.Jobs.Recent {
		if j.Owner == p.Name {
			own = append(own, j)
		}
	}
	db.Jobs.Recent = own
	return db
}

// ServeState answers GET /v1/dashboard[?history=true] with what the
// request's principal may see (ViewFor).
func (b *Board) ServeState(w http.ResponseWriter, r *http.Request) {
	withHistory := false
	if v := r.URL.Query().Get("history"); v != "" {
		h, err := strconv.ParseBool(v)
		if err != nil {
			b.fail(w, &api.RequestError{Status: http.StatusBadRequest, Code: api.CodeInvalid, Msg: "invalid request",
				Fields: []api.FieldError{{Field: "history", Problem: fmt.Sprintf("must be true or false, not %q", v)}}})
			return
		}
		withHistory = h
	}
	db, err := b.State(r.Context(), withHistory)
	if err != nil {
		b.fail(w, err)
		return
	}
	httpx.WriteJSON(w, http.StatusOK, ViewFor(r.Context(), db))
}
