package hypervisorproxy

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/metasched/metasched/internal/httpsrv"
	"github.com/metasched/metasched/internal/httpx"
	"github.com/metasched/metasched/internal/tlsx"
)

// Handler returns the agent's HTTP API. Every route but /healthz needs
// the daemon's (or an operator's) client certificate over TLS, or over
// plain HTTP "Authorization: Bearer TOKEN"; the probe sink also takes
// another agent's certificate (authenticate). Bodies are JSON; unknown fields are
// errors. Errors are {"error": MESSAGE, "code": CODE} with a 4xx status for
// bad requests (see Status).
//
//	GET    /healthz                      no auth: {"site": NAME}
//	GET    /v1/inventory                 Inventory
//	GET    /v1/vms/{name}                VM
//	POST   /v1/vms                       VMSpec → 201 VM
//	POST   /v1/vms/{name}/resize         Resize → VM
//	POST   /v1/vms/{name}/migrate        MigrateRequest → Migration
//	DELETE /v1/vms/{name}                → 204
//	POST   /v1/hosts/{name}/reconfigure  Reconfigure → Reconfigured
//	POST   /v1/probe                     ProbeRequest → Probe
//	PUT    /v1/probe/sink                a probe stream → SinkResult
//	POST   /v1/vms/{name}/guest/exec     GuestExec → GuestProcess
//	GET    /v1/vms/{name}/guest/exec/{pid}  → GuestExecStatus
//	PUT    /v1/vms/{name}/guest/file?path=P&mode=0644  the file's bytes → 204
//	GET    /v1/vms/{name}/guest/file?path=P&offset=N&max=M  → GuestFileChunk
func (a *Agent) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		httpx.WriteJSON(w, http.StatusOK, map[string]string{"site": a.site.Site})
	})
	api := http.NewServeMux()
	api.HandleFunc("GET /v1/inventory", func(w http.ResponseWriter, r *http.Request) {
		inv, err := a.Inventory(r.Context())
		reply(w, http.StatusOK, inv, err)
	})
	api.HandleFunc("GET /v1/vms/{name}", func(w http.ResponseWriter, r *http.Request) {
		v, err := a.VM(r.Context(), r.PathValue("name"))
		reply(w, http.StatusOK, v, err)
	})
	api.HandleFunc("POST /v1/vms", withBody(http.StatusCreated, func(r *http.Request, s VMSpec) (VM, error) {
		return a.CreateVM(r.Context(), s)
	}))
	api.HandleFunc("POST /v1/vms/{name}/resize", withBody(http.StatusOK, func(r *http.Request, rs Resize) (VM, error) {
		return a.ResizeVM(r.Context(), r.PathValue("name"), rs)
	}))
	api.HandleFunc("POST /v1/vms/{name}/migrate", withBody(http.StatusOK, func(r *http.Request, m MigrateRequest) (Migration, error) {
		return a.MigrateVM(r.Context(), r.PathValue("name"), m)
	}))
	api.HandleFunc("DELETE /v1/vms/{name}", func(w http.ResponseWriter, r *http.Request) {
		err := a.DestroyVM(r.Context(), r.PathValue("name"))
		reply(w, http.StatusNoContent, nil, err)
	})
	api.HandleFunc("POST /v1/hosts/{name}/reconfigure", withBody(http.StatusOK, func(r *http.Request, rc Reconfigure) (Reconfigured, error) {
		return a.ReconfigureHost(r.Context(), r.PathValue("name"), rc)
	}))
	api.HandleFunc("POST /v1/probe", withBody(http.StatusOK, func(r *http.Request, p ProbeRequest) (Probe, error) {
		return a.Probe(r.Context(), p)
	}))
	api.HandleFunc("PUT /v1/probe/sink", func(w http.ResponseWriter, r *http.Request) {
		// A probe's stream may take as long as the longest probe, beyond
		// the server's read timeout (the token has been checked).
		_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(MaxProbeTimeout + time.Minute))
		res, err := sink(r.Body, MaxProbeBytes)
		reply(w, http.StatusOK, res, err)
	})
	a.guestRoutes(api)
	api.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "not_found", fmt.Sprintf("no route %s %s", r.Method, r.URL.Path))
	})
	mux.Handle("/", a.authenticate(a.followLeader(api)))
	return httpx.LogRequests(a.log, mux)
}

// authenticate serves next for the parties allowed. Over TLS the
// client's verified certificate says who calls: the daemon and an
// operator's client may make every call, another agent only send a
// probe to the sink, and no one else anything (403). Over plain HTTP,
// the bearer token.
func (a *Agent) authenticate(next http.Handler) http.Handler {
	if a.tls == nil {
		return httpx.Bearer(a.token, func(w http.ResponseWriter, msg string) {
			writeError(w, http.StatusUnauthorized, "unauthorized", msg)
		}, next)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, ok := tlsx.PeerIdentity(r.TLS)
		if !ok {
			writeError(w, http.StatusUnauthorized, "unauthorized", "no client certificate of the grid's CA naming a metasched identity")
			return
		}
		switch {
		case id.Kind == tlsx.KindDaemon, id.Kind == tlsx.KindClient && id.Role == tlsx.RoleOperator:
		case id.Kind == tlsx.KindAgent && r.Method == http.MethodPut && r.URL.Path == "/v1/probe/sink":
		default:
			writeError(w, http.StatusForbidden, "forbidden", fmt.Sprintf("%s may not call %s %s", id, r.Method, r.URL.Path))
			return
		}
		httpsrv.Prove(r.Context())
		next.ServeHTTP(w, r)
	})
}

// withBody makes a handler that decodes a strict JSON body of type T, calls
// f and replies with its result (status on success).
func withBody[T, R any](status int, f func(r *http.Request, in T) (R, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var in T
		if !decode(w, r, &in) {
			return
		}
		out, err := f(r, in)
		reply(w, status, out, err)
	}
}

// maxBody bounds JSON request bodies.
const maxBody = 1 << 20

// decode reads a strict JSON body into v, or writes a 400 and returns false.
func decode(w http.ResponseWriter, r *http.Request, v any) bool {
	return decodeLimited(w, r, v, maxBody)
}

// decodeLimited is decode with a body of at most limit bytes.
func decodeLimited(w http.ResponseWriter, r *http.Request, v any, limit int64) bool {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, limit))
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if err == nil && dec.More() {
		err = errors.New("more than one JSON value")
	}
	if err == nil {
		return true
	}
	var te *json.UnmarshalTypeError
	var se *json.SyntaxError
	var me *http.MaxBytesError
	msg := err.Error()
	switch {
	case errors.As(err, &te):
		msg = fmt.Sprintf("%s: must be a %s, not a JSON %s", te.Field, te.Type, te.Value)
	case errors.As(err, &se):
		msg = fmt.Sprintf("not valid JSON at byte %d: %v", se.Offset, se)
	case errors.As(err, &me):
		msg = fmt.Sprintf("the body exceeds %d bytes", me.Limit)
	case errors.Is(err, os.ErrDeadlineExceeded):
		msg = "the body did not arrive within the server's read timeout: the request is dropped"
	case errors.Is(err, io.EOF):
		msg = "the body is empty: a JSON object is required"
	case strings.HasPrefix(msg, "json: unknown field "):
		msg = strings.TrimPrefix(msg, "json: ") + " (not a field of this request)"
	}
	writeError(w, http.StatusBadRequest, "invalid", "invalid request: "+msg)
	return false
}

func reply(w http.ResponseWriter, status int, v any, err error) {
	if err != nil {
		code, name := Status(err)
		writeError(w, code, name, err.Error())
		return
	}
	if status == http.StatusNoContent {
		w.WriteHeader(status)
		return
	}
	httpx.WriteJSON(w, status, v)
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	httpx.WriteJSON(w, status, APIError{Error: msg, Code: code})
}
