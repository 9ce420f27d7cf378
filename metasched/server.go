package metasched

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/metasched/metasched/internal/httpx"
	"github.com/metasched/metasched/metasched/api"
	"github.com/metasched/metasched/metasched/store"
)

// Route is one route of the daemon's HTTP server: "METHOD PATTERN" as
// net/http's ServeMux reads it, and whether it is served without the token
// or a session.
type Route struct {
	Pattern string
	Public  bool
}

// Routes lists every route the daemon's server registers (Handler
// registers exactly these, and the OpenAPI document describes them).
var Routes = []Route{
	{"GET /healthz", true}, {"GET /metrics", true}, {"GET /v1/openapi.json", true},
	{"GET /{$}", true}, {"GET /assets/{file}", true}, {"POST /login", true}, {"POST /logout", true},
	{"POST /v1/jobs", false}, {"GET /v1/jobs", false}, {"GET /v1/jobs/{id}", false},
	{"POST /v1/jobs/{id}/cancel", false}, {"GET /v1/jobs/{id}/logs", false},
	{"POST /v1/plan", false}, {"GET /v1/pools", false}, {"GET /v1/hosts", false},
	{"POST /v1/hosts/{name}/clear", false}, {"GET /v1/vms", false},
	{"GET /v1/switches", false}, {"POST /v1/switches", false}, {"GET /v1/policy", false},
	{"GET /v1/links", false}, {"GET /v1/tuning", false}, {"GET /v1/dashboard", false}, {"GET /v1/events", false},
}

// handlers returns the handler of every route of Routes.
func (d *Daemon) handlers() map[string]http.HandlerFunc {
	return map[string]http.HandlerFunc{
		"GET /healthz": func(w http.ResponseWriter, r *http.Request) {
			httpx.WriteJSON(w, http.StatusOK, api.Health{Status: "ok", Version: d.opt.Version, Since: d.started})
		},
		"GET /metrics":         d.metrics.handler().ServeHTTP,
		"GET /v1/openapi.json": serveOpenAPI,
		"GET /{$}":             serveIndex,
		"GET /assets/{file}":   serveAsset,
		"POST /login":          d.serveLogin,
		"POST /logout":         serveLogout,
		"GET /v1/dashboard":    d.serveDashboard,
		"GET /v1/events":       d.serveEvents,
		"POST /v1/jobs": d.withJobBody(func(r *http.Request, body []byte) (any, int, error) {
			j, err := d.Submit(r.Context(), body)
			return j, http.StatusCreated, err
		}),
		"GET /v1/jobs": func(w http.ResponseWriter, r *http.Request) {
			f, err := jobFilter(r)
			if err != nil {
				replyErr(w, err)
				return
			}
			l, err := d.Jobs(r.Context(), f)
			reply(w, http.StatusOK, l, err)
		},
		"GET /v1/jobs/{id}": func(w http.ResponseWriter, r *http.Request) {
			j, err := d.Job(r.Context(), r.PathValue("id"))
			reply(w, http.StatusOK, j, err)
		},
		"POST /v1/jobs/{id}/cancel": func(w http.ResponseWriter, r *http.Request) {
			ctx, cancel := context.WithTimeout(r.Context(), time.Minute)
			defer cancel()
			j, err := d.Cancel(ctx, r.PathValue("id"))
			reply(w, http.StatusOK, j, err)
		},
		"GET /v1/jobs/{id}/logs": func(w http.ResponseWriter, r *http.Request) {
			id := r.PathValue("id")
			b, err := d.st.Logs(r.Context(), id)
			if err != nil {
				replyErr(w, notFoundJob(id, err))
				return
			}
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			_, _ = w.Write(b)
		},
		"POST /v1/plan": d.withJobBody(func(r *http.Request, body []byte) (any, int, error) {
			p, err := d.DryRun(r.Context(), body)
			return p, http.StatusOK, err
		}),
		"GET /v1/pools": func(w http.ResponseWriter, r *http.Request) {
			httpx.WriteJSON(w, http.StatusOK, d.Pools())
		},
		"GET /v1/hosts": func(w http.ResponseWriter, r *http.Request) {
			httpx.WriteJSON(w, http.StatusOK, d.Hosts())
		},
		"POST /v1/hosts/{name}/clear": func(w http.ResponseWriter, r *http.Request) {
			body, err := readBody(w, r)
			if err != nil {
				replyErr(w, err)
				return
			}
			var cr api.ClearRequest
			if len(strings.TrimSpace(string(body))) > 0 {
				if err := strictJSON(body, &cr); err != nil {
					replyErr(w, err)
					return
				}
			}
			h, err := d.ClearHost(r.Context(), r.PathValue("name"), cr.Pool)
			reply(w, http.StatusOK, h, err)
		},
		"GET /v1/vms": func(w http.ResponseWriter, r *http.Request) {
			httpx.WriteJSON(w, http.StatusOK, d.VMs())
		},
		"GET /v1/switches": func(w http.ResponseWriter, r *http.Request) {
			active := false
			if v := r.URL.Query().Get("active"); v != "" {
				b, err := strconv.ParseBool(v)
				if err != nil {
					replyErr(w, invalidField("active", fmt.Sprintf("must be true or false, not %q", v)))
					return
				}
				active = b
			}
			httpx.WriteJSON(w, http.StatusOK, d.Switches(active))
		},
		"POST /v1/switches": func(w http.ResponseWriter, r *http.Request) {
			body, err := readBody(w, r)
			if err != nil {
				replyErr(w, err)
				return
			}
			var sr api.SwitchRequest
			if err := strictJSON(body, &sr); err != nil {
				replyErr(w, err)
				return
			}
			sv, err := d.RequestSwitch(r.Context(), sr.From, sr.To)
			reply(w, http.StatusAccepted, sv, err)
		},
		"GET /v1/policy": func(w http.ResponseWriter, r *http.Request) {
			httpx.WriteJSON(w, http.StatusOK, d.Policy())
		},
		"GET /v1/links": func(w http.ResponseWriter, r *http.Request) {
			httpx.WriteJSON(w, http.StatusOK, d.planner.Links())
		},
		"GET /v1/tuning": func(w http.ResponseWriter, r *http.Request) {
			httpx.WriteJSON(w, http.StatusOK, d.Tuning())
		},
	}
}

// Handler returns the daemon's HTTP server: the API (see package api), the
// dashboard and the metrics.
func (d *Daemon) Handler() http.Handler {
	hs := d.handlers()
	if len(hs) != len(Routes) {
		panic(fmt.Sprintf("metasched: %d handlers for %d routes", len(hs), len(Routes)))
	}
	mux := http.NewServeMux()
	allow := map[string][]string{}
	for _, rt := range Routes {
		h, ok := hs[rt.Pattern]
		if !ok {
			panic("metasched: no handler for route " + rt.Pattern)
		}
		if rt.Public {
			mux.Handle(rt.Pattern, h)
		} else {
			mux.Handle(rt.Pattern, d.authenticate(h))
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
	mux.Handle("/", d.authenticate(func(w http.ResponseWriter, r *http.Request) {
		if _, pattern := paths.Handler(r); pattern != "" {
			w.Header().Set("Allow", strings.Join(allow[pattern], ", "))
			writeError(w, http.StatusMethodNotAllowed, api.APIError{Code: api.CodeMethod,
				Error: fmt.Sprintf("%s %s: method not allowed (%s)", r.Method, r.URL.Path, strings.Join(allow[pattern], ", "))})
			return
		}
		writeError(w, http.StatusNotFound, api.APIError{Code: api.CodeUnknownRoute, Error: fmt.Sprintf("no route %s %s", r.Method, r.URL.Path)})
	}))
	return httpx.LogRequests(d.log, d.metrics.instrument(mux))
}

// withJobBody reads a size-limited job file body and calls f.
func (d *Daemon) withJobBody(f func(r *http.Request, body []byte) (any, int, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if ct := r.Header.Get("Content-Type"); ct != "" && !acceptedType(ct) {
			writeError(w, http.StatusUnsupportedMediaType, api.APIError{Code: api.CodeUnsupported,
				Error: fmt.Sprintf("Content-Type %q: send the job file as application/json, application/yaml or text/plain", ct)})
			return
		}
		body, err := readBody(w, r)
		if err != nil {
			replyErr(w, err)
			return
		}
		out, status, err := f(r, body)
		reply(w, status, out, err)
	}
}

func acceptedType(ct string) bool {
	ct, _, _ = strings.Cut(ct, ";")
	switch strings.TrimSpace(strings.ToLower(ct)) {
	case "application/json", "application/yaml", "application/x-yaml", "text/yaml", "text/x-yaml", "text/plain", "application/octet-stream":
		return true
	}
	return false
}

// readBody reads a body of at most MaxBodyBytes.
func readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, api.MaxBodyBytes))
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return nil, &RequestError{Status: http.StatusRequestEntityTooLarge, Code: api.CodeTooLarge,
			Msg: fmt.Sprintf("the body is larger than %d bytes", api.MaxBodyBytes)}
	}
	if err != nil {
		return nil, &RequestError{Status: 400, Code: api.CodeInvalid, Msg: "cannot read the body: " + err.Error()}
	}
	return b, nil
}

// strictJSON decodes a JSON body with no unknown fields.
func strictJSON(body []byte, v any) error {
	dec := json.NewDecoder(strings.NewReader(string(body)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var ute *json.UnmarshalTypeError
		switch {
		case errors.As(err, &ute):
			return invalidField(ute.Field, fmt.Sprintf("must be %s, not a JSON %s", ute.Type, ute.Value))
		case strings.HasPrefix(err.Error(), "json: unknown field "):
			f := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
			return invalidField(f, "unknown field")
		}
		return &RequestError{Status: 400, Code: api.CodeInvalid, Msg: "the body is not valid JSON: " + err.Error()}
	}
	return nil
}

// jobFilter reads the query of GET /v1/jobs.
func jobFilter(r *http.Request) (store.JobFilter, error) {
	q := r.URL.Query()
	var f store.JobFilter
	var fields []api.FieldError
	for _, s := range strings.Split(q.Get("state"), ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		st := store.JobState(s)
		if !st.Valid() {
			fields = append(fields, api.FieldError{Field: "state", Problem: fmt.Sprintf("no state %q (queued, planned, provisioning, running, done, failed, cancelled)", s)})
			continue
		}
		f.States = append(f.States, st)
	}
	f.Type, f.After = q.Get("type"), q.Get("after")
	f.Limit = api.DefaultPageSize
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		switch {
		case err != nil || n < 0:
			fields = append(fields, api.FieldError{Field: "limit", Problem: fmt.Sprintf("must be a whole number >= 0, not %q", v)})
		case n > api.MaxPageSize:
			fields = append(fields, api.FieldError{Field: "limit", Problem: fmt.Sprintf("must be at most %d, not %d", api.MaxPageSize, n)})
		case n > 0:
			f.Limit = n
		}
	}
	if len(fields) > 0 {
		return f, &RequestError{Status: 400, Code: api.CodeInvalid, Msg: "invalid query", Fields: fields}
	}
	return f, nil
}

func reply(w http.ResponseWriter, status int, v any, err error) {
	if err != nil {
		replyErr(w, err)
		return
	}
	httpx.WriteJSON(w, status, v)
}

func replyErr(w http.ResponseWriter, err error) {
	var re *RequestError
	if errors.As(err, &re) {
		writeError(w, re.Status, api.APIError{Error: re.Msg, Code: re.Code, Fields: re.Fields})
		return
	}
	status, code := http.StatusInternalServerError, api.CodeInternal
	switch {
	case errors.Is(err, store.ErrNotFound):
		status, code = http.StatusNotFound, api.CodeNotFound
	case errors.Is(err, store.ErrConflict):
		status, code = http.StatusConflict, api.CodeConflict
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		status, code = http.StatusServiceUnavailable, api.CodeUnavailable
	}
	writeError(w, status, api.APIError{Error: err.Error(), Code: code})
}

func writeError(w http.ResponseWriter, status int, e api.APIError) {
	httpx.WriteJSON(w, status, e)
}
