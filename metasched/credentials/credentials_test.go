package credentials_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/rs/zerolog"

	"github.com/metasched/metasched/metasched/api"
	"github.com/metasched/metasched/metasched/credentials"
	"github.com/metasched/metasched/metasched/store"
)

// open is a book on a real store in a temporary directory, with a clock
// the test moves; reopen opens a new book on the same store (a restart).
func open(t *testing.T) (b *credentials.Book, st *store.Store, clock *time.Time) {
	t.Helper()
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	clock = &now
	st, err := store.Open(filepath.Join(t.TempDir(), "metasched.db"), store.Options{NoSync: true, Now: func() time.Time { return *clock }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := st.Close(); err != nil {
			t.Error(err)
		}
	})
	return reopen(t, st, clock), st, clock
}

func reopen(t *testing.T, st *store.Store, clock *time.Time) *credentials.Book {
	t.Helper()
	b := credentials.New(st, "operator-secret", func() time.Time { return *clock }, zerolog.Nop())
	if err := b.Load(context.Background()); err != nil {
		t.Fatal(err)
	}
	return b
}

func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// TestTokens: a token made authenticates its name and role, on this book
// and on one loaded after a restart; revoked, it authenticates nothing,
// and a new token of the same name has another session key. Each change
// closes the channel Changed gave before it.
func TestTokens(t *testing.T) {
	ctx := context.Background()
	b, st, clock := open(t)
	if p, ok := b.Authenticate("operator-secret"); !ok || p != (api.Principal{Name: api.OperatorName, Role: api.RoleOperator}) {
		t.Errorf("the operator token authenticates %+v, %t", p, ok)
	}
	if b.SessionKey("operator-secret") != "" {
		t.Error("the operator token's session key is not empty")
	}
	for _, tok := range []string{"", "operator-secre", "nobody"} {
		if p, ok := b.Authenticate(tok); ok {
			t.Errorf("token %q authenticates %+v", tok, p)
		}
	}
	changed := b.Changed()
	made, err := b.CreateToken(ctx, api.TokenRequest{Name: "alice", Role: api.RoleUser})
	if err != nil {
		t.Fatal(err)
	}
	if !closed(changed) {
		t.Error("making a token did not close the Changed channel")
	}
	alice := api.Principal{Name: "alice", Role: api.RoleUser}
	for i, bk := range []*credentials.Book{b, reopen(t, st, clock)} {
		if p, ok := bk.Authenticate(made.Secret); !ok || p != alice {
			t.Errorf("book %d: alice's token authenticates %+v, %t", i, p, ok)
		}
		p, key, ok := bk.Principal("alice")
		if !ok || p != alice || key != bk.SessionKey(made.Secret) || key == "" {
			t.Errorf("book %d: Principal(alice) = %+v, %q, %t; want alice, her token's session key", i, p, key, ok)
		}
	}
	list, err := b.Tokens(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := []api.Token{{Name: api.OperatorName, Role: api.RoleOperator}, {Name: "alice", Role: api.RoleUser, Created: made.Created}}
	if diff := cmp.Diff(want, list); diff != "" {
		t.Errorf("tokens (-want +got):\n%s", diff)
	}

	changed = b.Changed()
	if err := b.RevokeToken(ctx, "alice"); err != nil {
		t.Fatal(err)
	}
	if !closed(changed) {
		t.Error("revoking a token did not close the Changed channel")
	}
	if p, ok := b.Authenticate(made.Secret); ok {
		t.Errorf("a revoked token authenticates %+v", p)
	}
	if _, _, ok := b.Principal("alice"); ok {
		t.Error("Principal(alice) is ok after her token was revoked")
	}
	again, err := b.CreateToken(ctx, api.TokenRequest{Name: "alice", Role: api.RoleOperator})
	if err != nil {
		t.Fatal(err)
	}
	if _, key, _ := b.Principal("alice"); key == b.SessionKey(made.Secret) {
		t.Error("a new token of the same name has the revoked one's session key: old sessions would live again")
	}
	if p, ok := reopen(t, st, clock).Authenticate(again.Secret); !ok || p.Role != api.RoleOperator {
		t.Errorf("after a restart the new token authenticates %+v, %t", p, ok)
	}
}

// TestTokenErrors: every bad request is refused with the field and the
// problem, and changes nothing.
func TestTokenErrors(t *testing.T) {
	ctx := context.Background()
	b, _, _ := open(t)
	if _, err := b.CreateToken(ctx, api.TokenRequest{Name: "bob", Role: api.RoleUser}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		req    api.TokenRequest
		status int
		fields []string
	}{
		{"bad name and role", api.TokenRequest{Name: "Bob Smith", Role: "admin"}, 400, []string{"name", "role"}},
		{"the operator's name", api.TokenRequest{Name: api.OperatorName, Role: api.RoleUser}, 400, []string{"name"}},
		{"a name taken", api.TokenRequest{Name: "bob", Role: api.RoleOperator}, 409, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := b.CreateToken(ctx, tc.req)
			var re *api.RequestError
			if !errors.As(err, &re) || re.Status != tc.status {
				t.Fatalf("got %v, want a request error of status %d", err, tc.status)
			}
			var fields []string
			for _, f := range re.Fields {
				if f.Problem == "" {
					t.Errorf("field %s has no problem", f.Field)
				}
				fields = append(fields, f.Field)
			}
			if diff := cmp.Diff(tc.fields, fields); diff != "" {
				t.Errorf("fields (-want +got):\n%s", diff)
			}
		})
	}
	for name, status := range map[string]int{api.OperatorName: 409, "nobody": 404} {
		var re *api.RequestError
		if err := b.RevokeToken(ctx, name); !errors.As(err, &re) || re.Status != status {
			t.Errorf("revoke %s: %v, want status %d", name, err, status)
		}
	}
	list, err := b.Tokens(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 || list[1].Name != "bob" || list[1].Role != api.RoleUser {
		t.Errorf("after the refused requests the tokens are %+v, want the operator's and bob's (user)", list)
	}
}

// TestSessions: a session logged out stays refused after a restart until
// its cookie would have expired; the expired ones are forgotten as others
// are logged out.
func TestSessions(t *testing.T) {
	ctx := context.Background()
	b, st, clock := open(t)
	changed := b.Changed()
	if err := b.RevokeSession(ctx, "s1", clock.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if !closed(changed) {
		t.Error("a logout did not close the Changed channel")
	}
	if !b.SessionRevoked("s1") || b.SessionRevoked("s2") {
		t.Errorf("revoked: s1 %t, s2 %t; want true, false", b.SessionRevoked("s1"), b.SessionRevoked("s2"))
	}
	if !reopen(t, st, clock).SessionRevoked("s1") {
		t.Error("after a restart a logged-out session is accepted again")
	}
	*clock = clock.Add(2 * time.Hour)
	if err := b.RevokeSession(ctx, "s2", clock.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if b.SessionRevoked("s1") || !b.SessionRevoked("s2") {
		t.Errorf("after s1's cookie expired: s1 %t, s2 %t; want false (forgotten), true", b.SessionRevoked("s1"), b.SessionRevoked("s2"))
	}
}
