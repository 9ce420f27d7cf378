package metasched

import (
	"context"
	"time"
)

// The dashboard's sessions that were logged out: the HTTP server refuses
// their cookies until they would have expired. The store keeps them, so a
// restart forgets none; memory holds a copy for the check on every request.

// RevokeSession ends the session id (its cookie expires at expires): once
// RevokeSession returns, its cookie authenticates nothing, on this daemon
// and after a restart.
func (d *Daemon) RevokeSession(ctx context.Context, id string, expires time.Time) error {
	if err := d.st.RevokeSession(context.WithoutCancel(ctx), id, expires); err != nil {
		return err
	}
	d.revokedMu.Lock()
	defer d.revokedMu.Unlock()
	now := d.now()
	for k, exp := range d.revoked {
		if !exp.After(now) {
			delete(d.revoked, k)
		}
	}
	d.revoked[id] = expires
	d.credentialsChanged()
	return nil
}

// CredentialsChanged returns a channel closed at the next change of the
// credentials: a token made or revoked, a session logged out. What a
// credential proved before may not hold after: an event stream opened
// with it checks it again then (and ends when it no longer proves who it
// did, with the role it had).
func (d *Daemon) CredentialsChanged() <-chan struct{} {
	d.credsMu.Lock()
	defer d.credsMu.Unlock()
	if d.credsChanged == nil {
		d.credsChanged = make(chan struct{})
	}
	return d.credsChanged
}

// credentialsChanged wakes those CredentialsChanged gave a channel.
func (d *Daemon) credentialsChanged() {
	d.credsMu.Lock()
	defer d.credsMu.Unlock()
	if d.credsChanged != nil {
		close(d.credsChanged)
		d.credsChanged = nil
	}
}

// SessionRevoked reports whether the session id was logged out.
func (d *Daemon) SessionRevoked(id string) bool {
	d.revokedMu.Lock()
	defer d.revokedMu.Unlock()
	_, ok := d.revoked[id]
	return ok
}

// restoreSessions reads the revoked sessions from the store.
func (d *Daemon) restoreSessions(ctx context.Context) error {
	r, err := d.st.RevokedSessions(ctx)
	if err != nil {
		return err
	}
	d.revokedMu.Lock()
	d.revoked = r
	d.revokedMu.Unlock()
	d.credentialsChanged()
	return nil
}
