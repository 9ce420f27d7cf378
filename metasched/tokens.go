package metasched

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/metasched/metasched/metasched/api"
	"github.com/metasched/metasched/metasched/store"
)

// tokenBook is the daemon's API tokens in memory: the operator token it
// made at its first start, and the tokens the operator made since
// (their hashes, from the store), each with its name and role.
type tokenBook struct {
	byHash map[string]api.Principal // store.HashToken(token) → who
	hashOf map[string]string        // a token's name → its hash
}

// loadTokens reads the tokens the store keeps.
func (d *Daemon) loadTokens(ctx context.Context) error {
	recs, err := d.st.Tokens(ctx)
	if err != nil {
		return err
	}
	b := tokenBook{byHash: map[string]api.Principal{}, hashOf: map[string]string{}}
	for _, r := range recs {
		b.add(r)
	}
	d.tokMu.Lock()
	d.tokens = b
	d.tokMu.Unlock()
	d.credentialsChanged()
	return nil
}

// Authenticate returns who a bearer token belongs to: the operator token
// of DATA_DIR/token, or a token the operator made and has not revoked.
func (d *Daemon) Authenticate(token string) (api.Principal, bool) {
	if token == "" {
		return api.Principal{}, false
	}
	if subtle.ConstantTimeCompare([]byte(token), []byte(d.token)) == 1 {
		return api.Principal{Name: api.OperatorName, Role: api.RoleOperator}, true
	}
	h := store.HashToken(token) // a lookup by the hash of a secret reveals nothing of it
	d.tokMu.RLock()
	defer d.tokMu.RUnlock()
	p, ok := d.tokens.byHash[h]
	return p, ok
}

// Principal returns the principal of a token name as it is now and the
// key of the token that has the name now (SessionKey): ok false once the
// token is revoked. A session is bound to the key of the token it was
// opened with, so it ends with that token, and a new token of the same
// name, of whatever role, does not revive it.
func (d *Daemon) Principal(name string) (p api.Principal, key string, ok bool) {
	if name == api.OperatorName {
		return api.Principal{Name: api.OperatorName, Role: api.RoleOperator}, "", true
	}
	d.tokMu.RLock()
	defer d.tokMu.RUnlock()
	key = d.tokens.hashOf[name]
	p, ok = d.tokens.byHash[key]
	return p, key, ok
}

// SessionKey returns what binds a session to the token it is opened
// with: the hash the store keeps of a token the operator made, unique to
// that token ("" for the operator token, whose change ends every
// session, as it keys their MACs).
func (d *Daemon) SessionKey(token string) string {
	if subtle.ConstantTimeCompare([]byte(token), []byte(d.token)) == 1 {
		return ""
	}
	return store.HashToken(token)
}

// add puts a token the store keeps in the book.
func (b tokenBook) add(r store.TokenRecord) {
	b.byHash[r.Hash], b.hashOf[r.Name] = api.Principal{Name: r.Name, Role: r.Role}, r.Hash
}

var tokenNameRE = regexp.MustCompile(`^[a-z0-9]([a-z0-9._-]{0,62})$`)

// CreateToken makes a token of a role for a name (a person, or a
// program) and returns it: it is shown this once, the daemon keeps only
// its hash.
func (d *Daemon) CreateToken(ctx context.Context, r api.TokenRequest) (api.TokenCreated, error) {
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
	rec, secret, err := d.st.CreateToken(ctx, r.Name, r.Role)
	if errors.Is(err, store.ErrConflict) {
		return api.TokenCreated{}, &api.RequestError{Status: 409, Code: api.CodeConflict,
			Msg: fmt.Sprintf("a token named %q exists: revoke it first, or choose another name", r.Name)}
	}
	if err != nil {
		return api.TokenCreated{}, err
	}
	d.tokMu.Lock()
	d.tokens.add(rec)
	d.tokMu.Unlock()
	d.credentialsChanged()
	d.log.Info().Str("token", rec.Name).Str("role", rec.Role).Msg("api token created")
	return api.TokenCreated{Token: api.Token{Name: rec.Name, Role: rec.Role, Created: rec.Created}, Secret: secret}, nil
}

// Tokens lists the tokens (never the tokens themselves): the operator
// token first, then those the operator made, by name.
func (d *Daemon) Tokens(ctx context.Context) ([]api.Token, error) {
	recs, err := d.st.Tokens(ctx)
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
func (d *Daemon) RevokeToken(ctx context.Context, name string) error {
	if name == api.OperatorName {
		return &api.RequestError{Status: 409, Code: api.CodeConflict,
			Msg: "the operator token cannot be revoked: replace it by moving DATA_DIR away (a new store), or keep it safe"}
	}
	if err := d.st.RevokeToken(ctx, name); errors.Is(err, store.ErrNotFound) {
		return &api.RequestError{Status: 404, Code: api.CodeNotFound, Msg: fmt.Sprintf("no token %q", name)}
	} else if err != nil {
		return err
	}
	d.tokMu.Lock()
	delete(d.tokens.byHash, d.tokens.hashOf[name])
	delete(d.tokens.hashOf, name)
	d.tokMu.Unlock()
	d.credentialsChanged()
	d.log.Info().Str("token", name).Msg("api token revoked")
	return nil
}
