package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http/httptest"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/rs/zerolog"

	"github.com/metasched/metasched/metasched/api"
)

// The server answers the daemon's kinds of errors, marked on whatever
// cause, with their status, code and Retry-After, and the cause's own
// words; a request error with its fields; anything else 500.
func TestReplyErr(t *testing.T) {
	cause := errors.New(`job "j-9": not found`)
	for _, tc := range []struct {
		name       string
		err        error
		status     int
		retryAfter string
		want       api.APIError
	}{
		{"not found", api.Mark(cause, api.ErrNotFound), 404, "", api.APIError{Error: `job "j-9": not found`, Code: api.CodeNotFound}},
		{"conflict", api.Mark(fmt.Errorf("commit j-9: %w", errors.New("conflict")), api.ErrConflict), 409, "",
			api.APIError{Error: "commit j-9: conflict", Code: api.CodeConflict}},
		{"unavailable", fmt.Errorf("submit: %w", api.Mark(errors.New("etcd does not answer"), api.ErrUnavailable)), 503, "1",
			api.APIError{Error: "submit: etcd does not answer", Code: api.CodeUnavailable}},
		{"ended context", fmt.Errorf("cancel: %w", context.DeadlineExceeded), 503, "",
			api.APIError{Error: "cancel: context deadline exceeded", Code: api.CodeUnavailable}},
		{"request error", &api.RequestError{Status: 400, Code: api.CodeInvalid, Msg: "the job is not valid",
			Fields: []api.FieldError{{Field: "tasks", Problem: "must be an integer >= 1, got 0"}}}, 400, "",
			api.APIError{Error: "the job is not valid", Code: api.CodeInvalid, Fields: []api.FieldError{{Field: "tasks", Problem: "must be an integer >= 1, got 0"}}}},
		{"anything else", cause, 500, "", api.APIError{Error: `job "j-9": not found`, Code: api.CodeInternal}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := httptest.NewRecorder()
			replyErr(w, tc.err)
			if w.Code != tc.status || w.Header().Get("Retry-After") != tc.retryAfter {
				t.Errorf("status %d, Retry-After %q; want %d and %q", w.Code, w.Header().Get("Retry-After"), tc.status, tc.retryAfter)
			}
			var got api.APIError
			if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("body (-want +got):\n%s", diff)
			}
		})
	}
}

// A server without one of its parts is refused when it is built, naming
// the part.
func TestNewWantsEveryPart(t *testing.T) {
	d := bareDaemon{token: "t"}
	p := All(d)
	p.Outputs = nil
	defer func() {
		if r := recover(); r == nil || fmt.Sprint(r) != "httpapi: no Outputs in the server's parts" {
			t.Errorf("New without Outputs: panic %v, want one naming Outputs", r)
		}
	}()
	New(p, zerolog.Nop())
}
