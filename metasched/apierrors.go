package metasched

import (
	"errors"

	"github.com/metasched/metasched/metasched/api"
	"github.com/metasched/metasched/metasched/store"
	"github.com/metasched/metasched/metasched/store/kv"
)

// apiError marks an error a method of the daemon's API returns with the
// API's kind of it, so that the server maps the daemon's errors and
// imports neither the store nor its engines: a job, host or token the
// store does not have is api.ErrNotFound, a change the store refuses for
// the job's state api.ErrConflict, a store without its quorum or a write
// of a daemon that no longer leads api.ErrUnavailable. The error keeps its
// text and its cause (api.Mark), for the answer and the logs. A method
// calls it deferred, on its named result: defer apiError(&err).
func apiError(err *error) {
	switch e := *err; {
	case e == nil:
	case errors.Is(e, store.ErrNotFound):
		*err = api.Mark(e, api.ErrNotFound)
	case errors.Is(e, store.ErrConflict):
		*err = api.Mark(e, api.ErrConflict)
	case errors.Is(e, kv.ErrNoAnswer), errors.Is(e, kv.ErrFenced):
		*err = api.Mark(e, api.ErrUnavailable)
	}
}
