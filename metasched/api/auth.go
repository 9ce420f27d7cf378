package api

import (
	"context"
	"time"
)

// The roles of the daemon's API (docs/reference/http.md, "Roles"):
// a user submits, plans, lists, cancels and reads its own jobs and sees
// the grid's pools, policy, links and calibration; an operator also sees
// every job, the hosts, VMs, switches and tuning, starts switches, clears
// hosts, calibrates and manages the tokens.
const (
	RoleUser     = "user"
	RoleOperator = "operator"
)

// OperatorName is the name of the operator token the daemon makes at its
// first start (DATA_DIR/token).
const OperatorName = "operator"

// CertOwnerPrefix starts the name of a principal a client certificate
// proves: "cert:alice" for the certificate of client alice. An owner names
// its kind, so that a certificate cannot own a token's jobs (a client
// certificate named operator is not the operator token), nor a token a
// certificate's: token names hold no ':'.
const CertOwnerPrefix = "cert:"

// Principal is who a request comes from: the name of its token (or of the
// token its session was opened with; CertOwnerPrefix and the client's
// name for a client certificate) and its role.
type Principal struct {
	Name string `json:"name"`
	Role string `json:"role"`
}

// Operator reports whether p has the operator role.
func (p Principal) Operator() bool { return p.Role == RoleOperator }

type principalKey struct{}

// WithPrincipal returns ctx carrying p: the daemon records a job
// submitted with it as p's.
func WithPrincipal(ctx context.Context, p Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// PrincipalFrom returns the principal ctx carries (ok false: none, the
// daemon's own call).
func PrincipalFrom(ctx context.Context) (Principal, bool) {
	p, ok := ctx.Value(principalKey{}).(Principal)
	return p, ok
}

// TokenRequest is the body of POST /v1/tokens.
type TokenRequest struct {
	Name string `json:"name"`
	Role string `json:"role"`
}

// Token is an API token as the daemon lists it (GET /v1/tokens): never
// the token itself.
type Token struct {
	Name string `json:"name"`
	Role string `json:"role"`
	// Created is when the operator made it (absent for the operator
	// token of DATA_DIR/token).
	Created time.Time `json:"created,omitzero"`
}

// TokenCreated is the answer of POST /v1/tokens: the token, shown once
// (the daemon keeps only its hash).
type TokenCreated struct {
	Token
	Secret string `json:"token"`
}

// ForwardedClientHeader names, on a request a standby daemon forwards to
// the leader, the identity of the client certificate the client presented
// to the standby (tlsx.Identity.URI). The leader takes it only from a
// peer whose own certificate names the daemon; a client cannot forward.
const ForwardedClientHeader = "Metasched-Forwarded-Client"
