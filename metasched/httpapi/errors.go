package httpapi

import (
	"context"
	"errors"
	"net/http"

	"github.com/metasched/metasched/internal/httpx"
	"github.com/metasched/metasched/metasched/api"
	"github.com/metasched/metasched/metasched/store"
	"github.com/metasched/metasched/metasched/store/kv"
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
// and fields; the store's not found and conflict 404 and 409; an ended
// context, a store that does not answer and a write fenced off (this
// daemon no longer leads) 503; anything else 500.
func replyErr(w http.ResponseWriter, err error) {
	var re *api.RequestError
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
	case errors.Is(err, kv.ErrNoAnswer), errors.Is(err, kv.ErrFenced):
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
