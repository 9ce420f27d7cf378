package httpapi

import (
	"context"
	"errors"
	"net/http"

	"github.com/metasched/metasched/internal/httpx"
	"github.com/metasched/metasched/metasched/api"
)

// reply answers v with status, or the error.
func reply(w http.ResponseWriter, status int, v any, err error) {
	if err != nil {
		replyErr(w, err)
		return
	}
	httpx.WriteJSON(w, status, v)
}

// replyErr answers an error: an *api.RequestError with its status, code
// and fields; the daemon's api.ErrNotFound and api.ErrConflict 404 and
// 409; an ended context 503; api.ErrUnavailable (a store that does not
// answer, a write fenced off because this daemon no longer leads) 503 with
// Retry-After; anything else 500. The server maps the daemon's errors
// only: the daemon marks its store's (api.Mark).
func replyErr(w http.ResponseWriter, err error) {
	var re *api.RequestError
	if errors.As(err, &re) {
		writeError(w, re.Status, api.APIError{Error: re.Msg, Code: re.Code, Fields: re.Fields})
		return
	}
	status, code := http.StatusInternalServerError, api.CodeInternal
	switch {
	case errors.Is(err, api.ErrNotFound):
		status, code = http.StatusNotFound, api.CodeNotFound
	case errors.Is(err, api.ErrConflict):
		status, code = http.StatusConflict, api.CodeConflict
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		status, code = http.StatusServiceUnavailable, api.CodeUnavailable
	case errors.Is(err, api.ErrUnavailable):
		// etcd without its quorum, or this daemon no longer leads: another
		// daemon (or this one, later) takes the request.
		status, code = http.StatusServiceUnavailable, api.CodeUnavailable
		w.Header().Set("Retry-After", "1")
	}
	writeError(w, status, api.APIError{Error: err.Error(), Code: code})
}

func writeError(w http.ResponseWriter, status int, e api.APIError) {
	httpx.WriteJSON(w, status, e)
}
