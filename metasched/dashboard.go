package metasched

import (
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/metasched/metasched/metasched/api"
	"github.com/metasched/metasched/metasched/dashboard"
)

// Dashboard returns the dashboard's state, with the charts' history when
// asked.
func (d *Daemon) Dashboard(ctx context.Context, withHistory bool) (api.Dashboard, error) {
	recent, err := d.st.Recent(ctx, api.DashboardJobs)
	if err != nil {
		return api.Dashboard{}, err
	}
	now := d.now()
	pools := d.Pools()
	db := api.Dashboard{Instance: d.instance, Version: d.opt.Version, Started: d.started, Now: now,
		Types: d.types, Pools: pools, Hosts: d.Hosts(), Policy: d.Policy(),
		Jobs: api.JobsOverview{Counts: d.st.Counts(), Recent: make([]api.JobSummary, 0, len(recent))}}
	var ok bool
	if db.Sample, ok = d.hist.last(); !ok {
		db.Sample = sample(now, pools)
	}
	d.mu.Lock()
	for _, sj := range recent {
		db.Jobs.Recent = append(db.Jobs.Recent, d.jobViewLocked(d.jobs[sj.ID], sj).Summary())
	}
	d.mu.Unlock()
	db.Switches = d.switchViews(api.DashboardSwitches)
	db.Tuning = d.Tuning()
	db.Tuning = db.Tuning[:min(len(db.Tuning), api.DashboardTuning)]
	if withHistory {
		db.History = d.hist.all()
	}
	return db, nil
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

// serveEvents streams the dashboard's state as server-sent events: one
// "state" event at once (with the history) and then one every api.EventEvery,
// until the client goes or the daemon stops. The browser's EventSource
// reconnects by itself after retry milliseconds.
func (d *Daemon) serveEvents(w http.ResponseWriter, r *http.Request) {
	rc := http.NewResponseController(w)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	if _, err := fmt.Fprintf(w, "retry: %d\n\n", api.EventEvery.Milliseconds()); err != nil {
		return
	}
	t := time.NewTicker(api.EventEvery)
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
		writeError(w, http.StatusNotFound, api.APIError{Code: api.CodeNotFound, Error: fmt.Sprintf("no asset %q", name)})
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
