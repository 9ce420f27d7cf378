package store

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// Tokens are kept by name with their hash only, survive a reopening and
// can be revoked; a name is taken once.
func TestTokens(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "s.db")
	s, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	r, tok, err := s.CreateToken(ctx, "alice", "user")
	if err != nil {
		t.Fatal(err)
	}
	if len(tok) < 40 || r.Hash != HashToken(tok) || r.Hash == tok || r.Role != "user" {
		t.Fatalf("token %q, record %+v", tok, r)
	}
	if _, _, err := s.CreateToken(ctx, "alice", "operator"); !errors.Is(err, ErrConflict) {
		t.Errorf("a second alice: %v, want ErrConflict", err)
	}
	if _, _, err := s.CreateToken(ctx, "bob", "operator"); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if s, err = Open(path, Options{}); err != nil {
		t.Fatal(err)
	}
	defer s.Close() // every write is committed: closing loses nothing
	got, err := s.Tokens(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if names := []string{got[0].Name, got[1].Name}; len(got) != 2 || !cmp.Equal(names, []string{"alice", "bob"}) || got[0].Hash != r.Hash {
		t.Fatalf("tokens after reopening: %+v", got)
	}
	if err := s.RevokeToken(ctx, "alice"); err != nil {
		t.Fatal(err)
	}
	if err := s.RevokeToken(ctx, "alice"); !errors.Is(err, ErrNotFound) {
		t.Errorf("revoking alice twice: %v, want ErrNotFound", err)
	}
	got, err = s.Tokens(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Name != "bob" {
		t.Errorf("tokens after the revocation: %+v", got)
	}
}

// A job records its owner, and a listing by owner gives that owner's jobs
// only, with the other filters and paging.
func TestJobsByOwner(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, Options{})
	var alice []string
	for i, owner := range []string{"alice", "bob", "", "alice", "alice"} {
		typ := []string{"sim", "render"}[i%2]
		j, err := s.SubmitJobBy(ctx, owner, typ, []byte(`{}`), "submitted")
		if err != nil {
			t.Fatal(err)
		}
		if j.Owner != owner {
			t.Fatalf("job %s owner %q, want %q", j.ID, j.Owner, owner)
		}
		if owner == "alice" {
			alice = append(alice, j.ID)
		}
	}
	ids := func(f JobFilter) []string {
		t.Helper()
		js, err := s.Jobs(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, j := range js {
			out = append(out, j.ID)
		}
		return out
	}
	if diff := cmp.Diff(alice, ids(JobFilter{Owner: "alice"})); diff != "" {
		t.Errorf("alice's jobs (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{alice[0], alice[2]}, ids(JobFilter{Owner: "alice", Type: "sim"})); diff != "" {
		t.Errorf("alice's sim jobs (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(alice[1:2], ids(JobFilter{Owner: "alice", After: alice[0], Limit: 1})); diff != "" {
		t.Errorf("alice's second page (-want +got):\n%s", diff)
	}
	if got := ids(JobFilter{Owner: "carol"}); len(got) != 0 {
		t.Errorf("carol's jobs: %v", got)
	}
	if got := ids(JobFilter{Owner: "alice", States: []JobState{Running}}); len(got) != 0 {
		t.Errorf("alice's running jobs: %v", got)
	}
}
