package api

import (
	"strings"
	"time"
)

// MaxBodyBytes bounds a request body.
const MaxBodyBytes = 1 << 20

// Pages of GET /v1/jobs and GET /v1/switches: limit 0 (or none) gives
// DefaultPageSize of them; a larger limit than MaxPageSize is refused.
const (
	DefaultPageSize = 500
	MaxPageSize     = 5000
)

// IdempotencyHeader carries the idempotency key of a submission (POST
// /v1/jobs): a client that sends a job again with the same key and body,
// after a timeout say, gets the job its first request made (200) instead
// of a second one; the same key with another body is refused (422,
// CodeKeyReused). A key is 1 to MaxIdempotencyKey characters among
// letters, digits and - _ . : ~ + / = (a UUID fits); the daemon keeps it at
// least 24 hours. Keys are the caller's: those of the bearer token and of
// each dashboard session never meet.
const IdempotencyHeader = "Idempotency-Key"

// MaxIdempotencyKey bounds the length of an idempotency key.
const MaxIdempotencyKey = 255

// APIError is the body of every error answer. Fields lists, for a rejected
// request body, each field and what is wrong with it.
type APIError struct {
	Error  string       `json:"error"`
	Code   string       `json:"code"`
	Fields []FieldError `json:"fields,omitempty"`
}

// FieldError is one problem of a request body.
type FieldError struct {
	Field   string `json:"field"`
	Problem string `json:"problem"`
}

// Error codes of APIError.
const (
	CodeInvalid      = "invalid"       // 400: a malformed request; see Fields
	CodeUnauthorized = "unauthorized"  // 401
	CodeForbidden    = "forbidden"     // 403: a role that may not make the call, or a session request without the CSRF header
	CodeNotFound     = "not_found"     // 404
	CodeConflict     = "conflict"      // 409: the job or host is not in a state that allows it
	CodeTooLarge     = "too_large"     // 413: the body is over MaxBodyBytes
	CodeUnavailable  = "unavailable"   // 503: shutting down, or no agent answers
	CodeInternal     = "internal"      // 500
	CodeUnsupported  = "unsupported"   // 415: a body that is not YAML or JSON
	CodeMethod       = "bad_method"    // 405
	CodeUnknownRoute = "unknown_route" // 404 for a path that is no route
	CodeKeyReused    = "key_reused"    // 422: an Idempotency-Key sent before with another body
)

// Health is the answer of /healthz.
type Health struct {
	Status  string    `json:"status"` // "ok"
	Version string    `json:"version"`
	Since   time.Time `json:"since"`
}

// LoginRequest is the body of POST /login.
type LoginRequest struct {
	Token string `json:"token"`
}

// LoginResult is the answer of a successful POST /login.
type LoginResult struct {
	Expires time.Time `json:"expires"`
}

// RequestError is a rejected request: a 4xx status with field problems.
// The daemon returns it; the HTTP server answers Status with an APIError
// of Code, Msg and Fields.
type RequestError struct {
	Status int
	Code   string
	Msg    string
	Fields []FieldError
}

func (e *RequestError) Error() string {
	if len(e.Fields) == 0 {
		return e.Msg
	}
	lines := make([]string, len(e.Fields))
	for i, f := range e.Fields {
		lines[i] = f.Field + ": " + f.Problem
		if f.Field == "" {
			lines[i] = f.Problem
		}
	}
	return e.Msg + ":\n" + strings.Join(lines, "\n")
}
