package store

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/metasched/metasched/metasched/store/kv"
)

// TestRevokedSessions: revoked sessions are kept until they expire, across
// a reopen, and the expired ones are dropped at the next revocation.
func TestRevokedSessions(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	path := filepath.Join(t.TempDir(), "metasched.db")
	s, err := Open(path, Options{NoSync: true, Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.RevokeSession(ctx, "a", now.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := s.RevokeSession(ctx, "b", now.Add(2*time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := s.RevokeSession(ctx, "", now.Add(time.Hour)); !errors.Is(err, ErrInvalid) {
		t.Errorf("empty id: %v, want ErrInvalid", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if s, err = Open(path, Options{NoSync: true, Now: clock}); err != nil {
		t.Fatal(err)
	}
	defer s.Close() // every write is committed: closing loses nothing
	got, err := s.RevokedSessions(ctx)
	if err != nil || len(got) != 2 || !got["a"].Equal(now.Add(time.Hour)) {
		t.Fatalf("after a reopen: %v %v", got, err)
	}
	// Ninety minutes later a has expired: it is no longer listed, and the
	// next revocation drops it from the file.
	now = now.Add(90 * time.Minute)
	got, err = s.RevokedSessions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got["b"].IsZero() {
		t.Errorf("after a expired: %v", got)
	}
	if err := s.RevokeSession(ctx, "c", now.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	n := 0
	if err := s.view(ctx, func(tx kv.Tx) error {
		return tx.Bucket(bucketRevoked).ForEach(func(_, _ []byte) error { n++; return nil })
	}); err != nil {
		t.Fatal(err)
	}
	if n != 2 {
		t.Errorf("%d revocations on file, want 2 (b and c)", n)
	}
}
