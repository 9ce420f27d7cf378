package metasched

import (
	"context"
	"time"

	"github.com/metasched/metasched/metasched/api"
)

// The API's credentials are a subsystem of their own (d.creds,
// metasched/credentials), with its own lock: the daemon hands the
// server's authentication on to it.

// Authenticate returns who a bearer token belongs to (credentials.Book).
func (d *Daemon) Authenticate(token string) (api.Principal, bool) { return d.creds.Authenticate(token) }

// Principal returns the principal of a token name as it is now and the
// key of its token (credentials.Book).
func (d *Daemon) Principal(name string) (api.Principal, string, bool) { return d.creds.Principal(name) }

// SessionKey returns what binds a session to the token it is opened with
// (credentials.Book).
func (d *Daemon) SessionKey(token string) string { return d.creds.SessionKey(token) }

// CreateToken makes a token of a role for a name (credentials.Book).
func (d *Daemon) CreateToken(ctx context.Context, r api.TokenRequest) (_ api.TokenCreated, err error) {
	defer apiError(&err)
	return d.creds.CreateToken(ctx, r)
}

// Tokens lists the tokens (credentials.Book).
func (d *Daemon) Tokens(ctx context.Context) (_ []api.Token, err error) {
	defer apiError(&err)
	return d.creds.Tokens(ctx)
}

// RevokeToken revokes a token the operator made (credentials.Book).
func (d *Daemon) RevokeToken(ctx context.Context, name string) (err error) {
	defer apiError(&err)
	return d.creds.RevokeToken(ctx, name)
}

// RevokeSession ends a dashboard session (credentials.Book).
func (d *Daemon) RevokeSession(ctx context.Context, id string, expires time.Time) (err error) {
	defer apiError(&err)
	return d.creds.RevokeSession(ctx, id, expires)
}

// SessionRevoked reports whether a session was logged out
// (credentials.Book).
func (d *Daemon) SessionRevoked(id string) bool { return d.creds.SessionRevoked(id) }

// CredentialsChanged returns a channel closed at the next change of the
// credentials (credentials.Book).
func (d *Daemon) CredentialsChanged() <-chan struct{} { return d.creds.Changed() }
