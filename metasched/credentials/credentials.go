package credentials

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/metasched/metasched/metasched/api"
	"github.com/metasched/metasched/metasched/store"
)

// Store is what a Book keeps its credentials in: *store.Store.
type Store interface {
	Tokens(ctx context.Context) ([]store.TokenRecord, error)
	CreateToken(ctx context.Context, name, role string) (store.TokenRecord, string, error)
	RevokeToken(ctx context.Context, name string) error
	RevokeSession(ctx context.Context, id string, expires time.Time) error
	RevokedSessions(ctx context.Context) (map[string]time.Time, error)
}

var _ Store = (*store.Store)(nil)

// Book is the daemon's credentials. Its methods are safe for concurrent
// use.
type Book struct {
	st       Store
	operator string // the operator token
	log      zerolog.Logger
	now      func() time.Time

	mu      sync.RWMutex
	byHash  map[string]api.Principal // store.HashToken(token) → who
	hashOf  map[string]string        // a token's name → its hash
	revoked map[string]time.Time     // logged-out sessions → their expiry
	// changed is closed, and replaced, at every change (Changed).
	changed chan struct{}
}

// New is an empty book of the operator token and the credentials st
// keeps (Load reads them); now is the daemon's clock.
func New(st Store, operator string, now func() time.Time, log zerolog.Logger) *Book {
	return &Book{st: st, operator: operator, now: now, log: log,
		byHash: map[string]api.Principal{}, hashOf: map[string]string{}, revoked: map[string]time.Time{}}
}

// Load reads the tokens and the revoked sessions the store keeps.
func (b *Book) Load(ctx context.Context) error {
	recs, err := b.st.Tokens(ctx)
	if err != nil {
		return err
	}
	revoked, err := b.st.RevokedSessions(ctx)
	if err != nil {
		return err
	}
	byHash, hashOf := map[string]api.Principal{}, map[string]string{}
	for _, r := range recs {
		byHash[r.Hash], hashOf[r.Name] = api.Principal{Name: r.Name, Role: r.Role}, r.Hash
	}
	b.mu.Lock()
	b.byHash, b.hashOf, b.revoked = byHash, hashOf, revoked
	b.changedLocked()
	b.mu.Unlock()
	return nil
}

// Operator is the operator token.
func (b *Book) Operator() string { return b.operator }

// isOperator compares a token with the operator token in constant time.
func (b *Book) isOperator(token string) bool {
	return subtle.ConstantTimeCompare([]byte(token), []byte(b.operator)) == 1
}

// Authenticate returns who a bearer token belongs to: the operator token,
// or a token the operator made and has not revoked.
func (b *Book) Authenticate(token string) (api.Principal, bool) {
	if token == "" {
		return api.Principal{}, false
	}
	if b.isOperator(token) {
		return api.Principal{Name: api.OperatorName, Role: api.RoleOperator}, true
	}
	h := store.HashToken(token) // a lookup by the hash of a secret reveals nothing of it
	b.mu.RLock()
	defer b.mu.RUnlock()
	p, ok := b.byHash[h]
	return p, ok
}

// Principal returns the principal of a token name as it is now and the
// key of the token that has the name now (SessionKey): ok false once the
// token is revoked. A session is bound to the key of the token it was
// opened with, so it ends with that token, and a new token of the same
// name, of whatever role, does not revive it.
func (b *Book) Principal(name string) (p api.Principal, key string, ok bool) {
	if name == api.OperatorName {
		return api.Principal{Name: api.OperatorName, Role: api.RoleOperator}, "", true
	}
	b.mu.RLock()
	defer b.mu.RUnlock()
	key = b.hashOf[name]
	p, ok = b.byHash[key]
	return p, key, ok
}

// SessionKey returns what binds a session to the token it is opened
// with: the hash the store keeps of a token the operator made, unique to
// that token ("" for the operator token, whose change ends every
// session, as it keys their MACs).
func (b *Book) SessionKey(token string) string {
	if b.isOperator(token) {
		return ""
	}
	return store.HashToken(token)
}

var tokenNameRE = regexp.MustCompile(`^[a-z0-9]([a-z0-9._-]{0,62})$`)

// CreateToken makes a token of a role for a name (a person, or a
// program) and returns it: it is shown this once, the store keeps only
// its hash.
func (b *Book) CreateToken(ctx context.Context, r api.TokenRequest) (api.TokenCreated, error) {
	var fields []api.FieldError
	switch {
	case !tokenNameRE.MatchString(r.Name):
		fields = append(fields, api.FieldError{Field: "name", Problem: fmt.Sprintf("must be 1 to 63 of a-z, 0-9, '.', '_' and '-', starting with a letter or digit, not %q", r.Name)})
	case r.Name == api.OperatorName:
		fields = append(fields, api.FieldError{Field: "name", Problem: fmt.Sprintf("%q is the daemon's own operator token (DATA_DIR/token)", r.Name)})
	}
	if r.Role != api.RoleUser && r.Role != api.RoleOperator {
		fields = append(fields, api.FieldError{Field: "role", Problem: fmt.Sprintf("must be %s or %s, not %q", api.RoleUser, api.RoleOperator, r.Role)})
	}
	if len(fields) > 0 {
		return api.TokenCreated{}, &api.RequestError{Status: 400, Code: api.CodeInvalid, Msg: "invalid token request", Fields: fields}
	}
	rec, secret, err := b.st.CreateToken(ctx, r.Name, r.Role)
	if errors.Is(err, store.ErrConflict) {
		return api.TokenCreated{}, &api.RequestError{Status: 409, Code: api.CodeConflict,
			Msg: fmt.Sprintf("a token named %q exists: revoke it first, or choose another name", r.Name)}
	}
	if err != nil {
		return api.TokenCreated{}, err
	}
	b.mu.Lock()
	b.byHash[rec.Hash], b.hashOf[rec.Name] = api.Principal{Name: rec.Name, Role: rec.Role}, rec.Hash
	b.changedLocked()
	b.mu.Unlock()
	b.log.Info().Str("token", rec.Name).Str("role", rec.Role).Msg("api token created")
	return api.TokenCreated{Token: api.Token{Name: rec.Name, Role: rec.Role, Created: rec.Created}, Secret: secret}, nil
}

// Tokens lists the tokens (never the tokens themselves): the operator
// token first, then those the operator made, by name.
func (b *Book) Tokens(ctx context.Context) ([]api.Token, error) {
	recs, err := b.st.Tokens(ctx)
	if err != nil {
		return nil, err
	}
	out := []api.Token{{Name: api.OperatorName, Role: api.RoleOperator}}
	for _, r := range recs {
		out = append(out, api.Token{Name: r.Name, Role: r.Role, Created: r.Created})
	}
	slices.SortStableFunc(out[1:], func(a, b api.Token) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// RevokeToken revokes a token the operator made: it authenticates
// nothing from then on, and the sessions opened with it end.
func (b *Book) RevokeToken(ctx context.Context, name string) error {
	if name == api.OperatorName {
		return &api.RequestError{Status: 409, Code: api.CodeConflict,
			Msg: "the operator token cannot be revoked: replace it by moving DATA_DIR away (a new store), or keep it safe"}
	}
	if err := b.st.RevokeToken(ctx, name); errors.Is(err, store.ErrNotFound) {
		return &api.RequestError{Status: 404, Code: api.CodeNotFound, Msg: fmt.Sprintf("no token %q", name)}
	} else if err != nil {
		return err
	}
	b.mu.Lock()
	delete(b.byHash, b.hashOf[name])
	delete(b.hashOf, name)
	b.changedLocked()
	b.mu.Unlock()
	b.log.Info().Str("token", name).Msg("api token revoked")
	return nil
}

// RevokeSession ends the session id (its cookie expires at expires): once
// RevokeSession returns, its cookie authenticates nothing, on this daemon
// and after a restart. The sessions whose cookies expired are forgotten
// meanwhile.
func (b *Book) RevokeSession(ctx context.Context, id string, expires time.Time) error {
	if err := b.st.RevokeSession(context.WithoutCancel(ctx), id, expires); err != nil {
		return err
	}
	now := b.now()
	b.mu.Lock()
	defer b.mu.Unlock()
	maps.DeleteFunc(b.revoked, func(_ string, exp time.Time) bool { return !exp.After(now) })
	b.revoked[id] = expires
	b.changedLocked()
	return nil
}

// SessionRevoked reports whether the session id was logged out.
func (b *Book) SessionRevoked(id string) bool {
	b.mu.RLock()
	defer b.mu.RUnlock()
	_, ok := b.revoked[id]
	return ok
}

// Changed returns a channel closed at the next change of the
// credentials: a token made or revoked, a session logged out, the book
// loaded again. What a credential proved before may not hold after: an
// event stream opened with it checks it again then (and ends when it no
// longer proves who it did, with the role it had).
func (b *Book) Changed() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.changed == nil {
		b.changed = make(chan struct{})
	}
	return b.changed
}

// changedLocked wakes those Changed gave a channel.
func (b *Book) changedLocked() {
	if b.changed != nil {
		close(b.changed)
		b.changed = nil
	}
}
