package httpapi

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"strings"

	"github.com/metasched/metasched/metasched/api"
	"github.com/metasched/metasched/metasched/jobfile"
)

// idempotencyKey reads the request's key: "" when it sends none. A key is
// 1 to api.MaxIdempotencyKey characters among letters, digits and - _ . : ~ + / =
// (a UUID, a ULID or base64 fits); the quoted form of a structured header
// string ("...") is taken without its quotes.
func idempotencyKey(r *http.Request) (string, error) {
	vs := r.Header.Values(api.IdempotencyHeader)
	switch len(vs) {
	case 0:
		return "", nil
	case 1:
	default:
		return "", badKey("is sent more than once: send one key")
	}
	k := strings.TrimSpace(vs[0])
	if len(k) >= 2 && k[0] == '"' && k[len(k)-1] == '"' {
		k = k[1 : len(k)-1]
	}
	switch {
	case k == "":
		return "", badKey("is empty: send 1 to 255 characters, a UUID say, or no header")
	case len(k) > api.MaxIdempotencyKey:
		return "", badKey(fmt.Sprintf("is %d characters long: at most %d", len(k), api.MaxIdempotencyKey))
	}
	for i := range len(k) {
		if c := k[i]; !keyChar(c) {
			return "", badKey(fmt.Sprintf("has %q at position %d: use letters, digits and - _ . : ~ + / =", c, i+1))
		}
	}
	return k, nil
}

func keyChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("-_.:~+/=", c) >= 0
}

func badKey(problem string) error {
	return &api.RequestError{Status: http.StatusBadRequest, Code: api.CodeInvalid, Msg: "invalid " + api.IdempotencyHeader + " header",
		Fields: []api.FieldError{{Field: api.IdempotencyHeader, Problem: problem}}}
}

// callerKey is the context key of the caller's credentials.
type callerKey struct{}

// withCaller returns r with the caller that authenticate identified.
func withCaller(r *http.Request, caller string) *http.Request {
	return r.WithContext(context.WithValue(r.Context(), callerKey{}, caller))
}

// callerOf names the request's credentials: "bearer:" and a digest of the
// token, or "session:" and the session's ID ("" on a public route).
func callerOf(r *http.Request) string {
	c, _ := r.Context().Value(callerKey{}).(string)
	return c
}

// bearerCaller names the bearer token without holding it.
func bearerCaller(token string) string {
	sum := sha256.Sum256([]byte("metasched caller " + token))
	return "bearer:" + hex.EncodeToString(sum[:16])
}

// submit serves POST /v1/jobs: 201 and the new job, or 200 and the job an
// earlier request with the same idempotency key made.
func submit(d Jobs, r *http.Request, job jobfile.Request) (any, int, error) {
	key, err := idempotencyKey(r)
	if err != nil {
		return nil, 0, err
	}
	if key == "" {
		j, err := d.Submit(r.Context(), job)
		return j, http.StatusCreated, err
	}
	j, created, err := d.SubmitOnce(r.Context(), job, callerOf(r), key)
	if !created {
		return j, http.StatusOK, err
	}
	return j, http.StatusCreated, err
}
