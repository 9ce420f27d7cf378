package httpapi

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/metasched/metasched/internal/httpsrv"
	"github.com/metasched/metasched/internal/httpx"
	"github.com/metasched/metasched/metasched/api"
	"github.com/metasched/metasched/metasched/dashboard"
	"github.com/metasched/metasched/metasched/jobfile"
)

// Route is one route of the server: "METHOD PATTERN" as net/http's
// ServeMux reads it, and who may call it.
type Route struct {
	Pattern string
	Access  Access
}

// Access is who may call a route.
type Access int

const (
	// Public routes need no credential.
	Public Access = iota
	// User routes take any token, session or client certificate: a user
	// sees and acts on its own jobs only (Owned), an operator on all.
	User
	// Operator routes take an operator's only (403 for a user).
	Operator
)

func (a Access) String() string {
	return [...]string{"public", "user", "operator"}[a]
}

// Owned says whether a route acts on one job ({id}), which a user may
// reach only when it submitted it (404 otherwise, as for no job).
func (r Route) Owned() bool { return strings.Contains(r.Pattern, "/v1/jobs/{id}") }

// Routes lists every route the server registers (New registers exactly
// these, and the OpenAPI document describes them), with who may call it
// (docs/reference/http.md, "Roles").
var Routes = []Route{
	{"GET /healthz", Public}, {"GET /metrics", Public}, {"GET /v1/openapi.json", Public},
	{"GET /{$}", Public}, {"GET /assets/{file}", Public}, {"POST /login", Public}, {"POST /logout", Public},
	{"POST /v1/jobs", User}, {"GET /v1/jobs", User}, {"GET /v1/jobs/{id}", User},
	{"POST /v1/jobs/{id}/cancel", User}, {"GET /v1/jobs/{id}/logs", User}, {"POST /v1/jobs/{id}/vms/{vm}/resize", User},
	{"GET /v1/jobs/{id}/outputs", User}, {"GET /v1/jobs/{id}/outputs/{name...}", User},
	{"POST /v1/plan", User}, {"GET /v1/pools", User}, {"GET /v1/hosts", Operator},
	{"POST /v1/hosts/{name}/clear", Operator}, {"POST /v1/hosts/{name}/drain", Operator},
	{"POST /v1/hosts/{name}/undrain", Operator}, {"GET /v1/vms", Operator},
	{"GET /v1/switches", Operator}, {"POST /v1/switches", Operator}, {"GET /v1/policy", User},
	{"GET /v1/links", User}, {"GET /v1/tuning", Operator}, {"GET /v1/dashboard", User}, {"GET /v1/events", User},
	{"GET /v1/calibration", User}, {"POST /v1/calibrate", Operator},
	{"GET /v1/tokens", Operator}, {"POST /v1/tokens", Operator}, {"DELETE /v1/tokens/{name}", Operator},
	{"GET /v1/backup", Operator},
}

// Server is the HTTP server of one daemon.
type Server struct {
	p     Parts
	token string
	board *dashboard.Board
	h     http.Handler
}

// New returns the server of the daemon's parts (All of a daemon gives
// them all); log gets a line for every request. It panics on a part left
// out.
func New(p Parts, log zerolog.Logger) *Server {
	p.check()
	s := &Server{p: p, token: p.Auth.Token()}
	s.board = dashboard.New(p.Board, replyErr)
	hs := s.handlers()
	if len(hs) != len(Routes) {
		panic(fmt.Sprintf("httpapi: %d handlers for %d routes", len(hs), len(Routes)))
	}
	mux := http.NewServeMux()
	allow := map[string][]string{}
	for _, rt := range Routes {
		h, ok := hs[rt.Pattern]
		if !ok {
			panic("httpapi: no handler for route " + rt.Pattern)
		}
		switch {
		case rt.Access == Public:
			mux.Handle(rt.Pattern, h)
		case rt.Owned():
			mux.Handle(rt.Pattern, s.authenticate(rt.Access, s.owned(h)))
		default:
			mux.Handle(rt.Pattern, s.authenticate(rt.Access, h))
		}
		method, pattern, _ := strings.Cut(rt.Pattern, " ")
		allow[pattern] = append(allow[pattern], method)
	}
	// A known path with another method is 405 with Allow; anything else 404
	// (both after authentication, like the routes).
	paths := http.NewServeMux()
	for pattern := range allow {
		paths.HandleFunc(pattern, func(http.ResponseWriter, *http.Request) {})
	}
	mux.Handle("/", s.authenticate(User, func(w http.ResponseWriter, r *http.Request) {
		if _, pattern := paths.Handler(r); pattern != "" {
			w.Header().Set("Allow", strings.Join(allow[pattern], ", "))
			writeError(w, http.StatusMethodNotAllowed, api.APIError{Code: api.CodeMethod,
				Error: fmt.Sprintf("%s %s: method not allowed (%s)", r.Method, r.URL.Path, strings.Join(allow[pattern], ", "))})
			return
		}
		writeError(w, http.StatusNotFound, api.APIError{Code: api.CodeUnknownRoute, Error: fmt.Sprintf("no route %s %s", r.Method, r.URL.Path)})
	}))
	s.h = httpx.LogRequests(log, instrument(requestDurations(p.Health.Registry()), mux))
	return s
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.h.ServeHTTP(w, r) }

// handlers returns the handler of every route of Routes.
func (s *Server) handlers() map[string]http.HandlerFunc {
	health, jobs, outputs, hosts, pools, grid, tokens, backups := s.p.Health, s.p.Jobs, s.p.Outputs, s.p.Hosts, s.p.Pools, s.p.Grid, s.p.Tokens, s.p.Backups
	return map[string]http.HandlerFunc{
		"GET /healthz": func(w http.ResponseWriter, r *http.Request) {
			httpx.WriteJSON(w, http.StatusOK, api.Health{Status: "ok", Version: health.Version(), Since: health.Started()})
		},
		"GET /metrics":         metricsHandler(health.Registry()).ServeHTTP,
		"GET /v1/openapi.json": serveOpenAPI,
		"GET /{$}":             dashboard.ServeIndex,
		"GET /assets/{file}":   dashboard.ServeAsset,
		"POST /login":          s.serveLogin,
		"POST /logout":         s.serveLogout,
		"GET /v1/dashboard":    s.board.ServeState,
		"GET /v1/events": func(w http.ResponseWriter, r *http.Request) {
			httpsrv.Stream(r) // each event gets the write timeout, not the whole stream
			ctx, cancel := context.WithCancel(r.Context())
			defer cancel()
			go s.endWithCredential(ctx, cancel, r)
			s.board.ServeEvents(w, r.WithContext(ctx))
		},
		"POST /v1/jobs": withJobBody(func(r *http.Request, job jobfile.Request) (any, int, error) {
			return submit(jobs, r, job)
		}),
		"GET /v1/jobs": func(w http.ResponseWriter, r *http.Request) {
			f, err := jobFilter(r)
			if err != nil {
				replyErr(w, err)
				return
			}
			if p := principalOf(r); !p.Operator() {
				f.Owner = p.Name // a user lists its own jobs
			}
			l, err := jobs.Jobs(r.Context(), f)
			reply(w, http.StatusOK, l, err)
		},
		"GET /v1/jobs/{id}": func(w http.ResponseWriter, r *http.Request) {
			j, err := jobs.Job(r.Context(), r.PathValue("id"))
			reply(w, http.StatusOK, j, err)
		},
		"POST /v1/jobs/{id}/cancel": func(w http.ResponseWriter, r *http.Request) {
			ctx, cancel := context.WithTimeout(r.Context(), time.Minute)
			defer cancel()
			j, err := jobs.Cancel(ctx, r.PathValue("id"))
			reply(w, http.StatusOK, j, err)
		},
		"POST /v1/jobs/{id}/vms/{vm}/resize": func(w http.ResponseWriter, r *http.Request) {
			rr, ok := jsonBody[api.ResizeRequest](w, r, false)
			if !ok {
				return
			}
			ctx, cancel := context.WithTimeout(r.Context(), 2*time.Minute)
			defer cancel()
			vm, err := jobs.ResizeVM(ctx, r.PathValue("id"), r.PathValue("vm"), rr)
			reply(w, http.StatusOK, vm, err)
		},
		"GET /v1/jobs/{id}/logs": func(w http.ResponseWriter, r *http.Request) {
			b, err := jobs.Logs(r.Context(), r.PathValue("id"))
			if err != nil {
				replyErr(w, err)
				return
			}
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			_, _ = w.Write(b)
		},
		"GET /v1/jobs/{id}/outputs": func(w http.ResponseWriter, r *http.Request) {
			l, err := outputs.Outputs(r.Context(), r.PathValue("id"))
			reply(w, http.StatusOK, l, err)
		},
		"GET /v1/jobs/{id}/outputs/{name...}": func(w http.ResponseWriter, r *http.Request) {
			f, err := outputs.Output(r.Context(), r.PathValue("id"), r.PathValue("name"))
			if err != nil {
				replyErr(w, err)
				return
			}
			defer f.Close()
			st, err := f.Stat()
			if err != nil {
				replyErr(w, err)
				return
			}
			w.Header().Set("Content-Type", "application/octet-stream")
			w.Header().Set("Content-Length", strconv.FormatInt(st.Size(), 10))
			_, _ = io.Copy(w, f)
		},
		"POST /v1/plan": withJobBody(func(r *http.Request, job jobfile.Request) (any, int, error) {
			p, err := jobs.DryRun(r.Context(), job)
			return p, http.StatusOK, err
		}),
		"GET /v1/pools": func(w http.ResponseWriter, r *http.Request) {
			httpx.WriteJSON(w, http.StatusOK, pools.Pools())
		},
		"GET /v1/hosts": func(w http.ResponseWriter, r *http.Request) {
			httpx.WriteJSON(w, http.StatusOK, hosts.Hosts())
		},
		"POST /v1/hosts/{name}/clear": func(w http.ResponseWriter, r *http.Request) {
			cr, ok := jsonBody[api.ClearRequest](w, r, true)
			if !ok {
				return
			}
			h, err := hosts.ClearHost(r.Context(), r.PathValue("name"), cr.Pool)
			reply(w, http.StatusOK, h, err)
		},
		"POST /v1/hosts/{name}/drain": func(w http.ResponseWriter, r *http.Request) {
			dr, ok := jsonBody[api.DrainRequest](w, r, true)
			if !ok {
				return
			}
			h, err := hosts.DrainHost(r.Context(), r.PathValue("name"), dr)
			reply(w, http.StatusOK, h, err)
		},
		"POST /v1/hosts/{name}/undrain": func(w http.ResponseWriter, r *http.Request) {
			h, err := hosts.UndrainHost(r.Context(), r.PathValue("name"))
			reply(w, http.StatusOK, h, err)
		},
		"GET /v1/backup": func(w http.ResponseWriter, r *http.Request) {
			started := false
			err := backups.Backup(r.Context(), func(n int64) {
				started = true
				w.Header().Set("Content-Type", "application/octet-stream")
				w.Header().Set("Content-Length", strconv.FormatInt(n, 10))
				w.Header().Set("Content-Disposition", `attachment; filename="metasched.db"`)
				w.WriteHeader(http.StatusOK)
			}, w)
			switch {
			case err == nil:
			case !started:
				replyErr(w, err)
			default:
				// The copy broke off after its header: the client sees a
				// body shorter than its Content-Length.
				panic(http.ErrAbortHandler)
			}
		},
		"GET /v1/vms": func(w http.ResponseWriter, r *http.Request) {
			httpx.WriteJSON(w, http.StatusOK, hosts.VMs())
		},
		"GET /v1/switches": func(w http.ResponseWriter, r *http.Request) {
			f, err := switchFilter(r)
			if err != nil {
				replyErr(w, err)
				return
			}
			l, err := pools.Switches(r.Context(), f)
			reply(w, http.StatusOK, l, err)
		},
		"POST /v1/switches": func(w http.ResponseWriter, r *http.Request) {
			sr, ok := jsonBody[api.SwitchRequest](w, r, false)
			if !ok {
				return
			}
			sv, err := pools.RequestSwitch(r.Context(), sr.From, sr.To)
			reply(w, http.StatusAccepted, sv, err)
		},
		"GET /v1/policy": func(w http.ResponseWriter, r *http.Request) {
			httpx.WriteJSON(w, http.StatusOK, pools.Policy())
		},
		"GET /v1/links": func(w http.ResponseWriter, r *http.Request) {
			httpx.WriteJSON(w, http.StatusOK, grid.Links())
		},
		"GET /v1/tuning": func(w http.ResponseWriter, r *http.Request) {
			httpx.WriteJSON(w, http.StatusOK, grid.Tuning())
		},
		"GET /v1/calibration": func(w http.ResponseWriter, r *http.Request) {
			httpx.WriteJSON(w, http.StatusOK, grid.Calibration())
		},
		"GET /v1/tokens": func(w http.ResponseWriter, r *http.Request) {
			l, err := tokens.Tokens(r.Context())
			reply(w, http.StatusOK, l, err)
		},
		"POST /v1/tokens": func(w http.ResponseWriter, r *http.Request) {
			tr, ok := jsonBody[api.TokenRequest](w, r, false)
			if !ok {
				return
			}
			tc, err := tokens.CreateToken(r.Context(), tr)
			reply(w, http.StatusCreated, tc, err)
		},
		"DELETE /v1/tokens/{name}": func(w http.ResponseWriter, r *http.Request) {
			if err := tokens.RevokeToken(r.Context(), r.PathValue("name")); err != nil {
				replyErr(w, err)
				return
			}
			w.WriteHeader(http.StatusNoContent)
		},
		"POST /v1/calibrate": func(w http.ResponseWriter, r *http.Request) {
			cr, ok := jsonBody[api.CalibrateRequest](w, r, true)
			if !ok {
				return
			}
			c, err := grid.Calibrate(r.Context(), cr.Site)
			reply(w, http.StatusAccepted, c, err)
		},
	}
}

// jsonBody reads the request's body as a strict JSON T, or answers the
// error and returns false; an optional body may be empty (the zero T).
func jsonBody[T any](w http.ResponseWriter, r *http.Request, optional bool) (T, bool) {
	var v T
	body, err := readBody(w, r)
	if err == nil && (!optional || len(strings.TrimSpace(string(body))) > 0) {
		err = strictJSON(body, &v)
	}
	if err != nil {
		replyErr(w, err)
		return v, false
	}
	return v, true
}

// jobFilter reads the query of GET /v1/jobs.
func jobFilter(r *http.Request) (api.JobFilter, error) {
	q := r.URL.Query()
	var f api.JobFilter
	var fields []api.FieldError
	for _, s := range strings.Split(q.Get("state"), ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		st := api.State(s)
		if !st.Valid() {
			fields = append(fields, api.FieldError{Field: "state", Problem: fmt.Sprintf("no state %q (queued, planned, provisioning, running, done, failed, cancelled)", s)})
			continue
		}
		f.States = append(f.States, st)
	}
	f.Type, f.After = q.Get("type"), q.Get("after")
	f.Limit, fields = pageLimit(q.Get("limit"), fields)
	if len(fields) > 0 {
		return f, &api.RequestError{Status: 400, Code: api.CodeInvalid, Msg: "invalid query", Fields: fields}
	}
	return f, nil
}

// pageLimit reads the limit of a page: api.DefaultPageSize when it is
// absent or 0, at most api.MaxPageSize.
func pageLimit(v string, fields []api.FieldError) (int, []api.FieldError) {
	if v == "" {
		return api.DefaultPageSize, fields
	}
	n, err := strconv.Atoi(v)
	switch {
	case err != nil || n < 0:
		fields = append(fields, api.FieldError{Field: "limit", Problem: fmt.Sprintf("must be a whole number >= 0, not %q", v)})
	case n > api.MaxPageSize:
		fields = append(fields, api.FieldError{Field: "limit", Problem: fmt.Sprintf("must be at most %d, not %d", api.MaxPageSize, n)})
	case n > 0:
		return n, fields
	}
	return api.DefaultPageSize, fields
}

// switchFilter reads the query of GET /v1/switches.
func switchFilter(r *http.Request) (api.SwitchFilter, error) {
	q := r.URL.Query()
	var f api.SwitchFilter
	var fields []api.FieldError
	if v := q.Get("active"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			fields = append(fields, api.FieldError{Field: "active", Problem: fmt.Sprintf("must be true or false, not %q", v)})
		}
		f.Active = b
	}
	f.Before = q.Get("before")
	f.Limit, fields = pageLimit(q.Get("limit"), fields)
	if len(fields) > 0 {
		return f, &api.RequestError{Status: 400, Code: api.CodeInvalid, Msg: "invalid query", Fields: fields}
	}
	return f, nil
}
