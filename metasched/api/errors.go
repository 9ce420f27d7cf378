package api

import "errors"

// The daemon's errors that are not a RequestError, by kind: a method of
// the daemon returns an error for which errors.Is holds with one of these
// when the server should answer it with a status of its own. The daemon
// marks the errors of its store at its boundary (Mark), so that the
// server maps the daemon's errors, never the store's.
var (
	// ErrNotFound: no such job, host, token or file (404 not_found).
	ErrNotFound = errors.New("not found")
	// ErrConflict: the job or host is not in a state that allows the
	// request (409 conflict).
	ErrConflict = errors.New("conflict")
	// ErrUnavailable: the store does not answer (etcd without its quorum)
	// or this daemon no longer leads; another daemon, or this one later,
	// takes the request (503 unavailable, with Retry-After).
	ErrUnavailable = errors.New("unavailable")
)

// Mark returns err marked as of kind (ErrNotFound, ErrConflict or
// ErrUnavailable): errors.Is holds for kind and for err and its causes,
// and the message is err's own, so that an answer reads as the cause
// says. Mark of nil is nil.
func Mark(err, kind error) error {
	if err == nil {
		return nil
	}
	return &marked{err: err, kind: kind}
}

type marked struct{ err, kind error }

func (m *marked) Error() string   { return m.err.Error() }
func (m *marked) Unwrap() []error { return []error{m.err, m.kind} }
