package store

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/metasched/metasched/metasched/store/kv"
)

// fixedClock is a clock the test moves.
type fixedClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fixedClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fixedClock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func idemKey(key, body string) IdempotencyKey {
	return IdempotencyKey{Key: []byte(key), Body: sha256.Sum256([]byte(body))}
}

// TestSubmitJobOnce: the first submission with a key makes the job; a
// repeat with the same body returns it; another body is refused with that
// job named; another key makes another job; keys survive a reopen.
func TestSubmitJobOnce(t *testing.T) {
	ctx := context.Background()
	clk := &fixedClock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	path := filepath.Join(t.TempDir(), "metasched.db")
	s, err := Open(path, Options{NoSync: true, Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	spec := json.RawMessage(`{"name":"a"}`)
	first, made, err := s.SubmitJobOnce(ctx, "", "sim", spec, "submitted", idemKey("k1", "body a"))
	if err != nil || !made {
		t.Fatalf("first: %v, made %v", err, made)
	}
	again, made, err := s.SubmitJobOnce(ctx, "", "sim", spec, "submitted", idemKey("k1", "body a"))
	if err != nil || made || again.ID != first.ID {
		t.Fatalf("repeat: job %s, made %v, %v; want %s, not made", again.ID, made, err, first.ID)
	}
	other, made, err := s.SubmitJobOnce(ctx, "", "sim", spec, "submitted", idemKey("k1", "body b"))
	if !errors.Is(err, ErrKeyReused) || made || other.ID != first.ID {
		t.Fatalf("another body: job %q, made %v, %v; want ErrKeyReused naming %s", other.ID, made, err, first.ID)
	}
	if !strings.Contains(err.Error(), first.ID) {
		t.Errorf("error %q does not name the job the key made", err)
	}
	second, made, err := s.SubmitJobOnce(ctx, "", "sim", spec, "submitted", idemKey("k2", "body a"))
	if err != nil || !made || second.ID == first.ID {
		t.Fatalf("another key: job %s, made %v, %v", second.ID, made, err)
	}
	if n := s.Counts()[Queued]; n != 2 {
		t.Errorf("%d queued jobs, want 2", n)
	}
	for _, bad := range []IdempotencyKey{{}, {Key: make([]byte, MaxKeyBytes+1)}} {
		if _, _, err := s.SubmitJobOnce(ctx, "", "sim", spec, "", bad); !errors.Is(err, ErrInvalid) {
			t.Errorf("key of %d bytes: %v, want ErrInvalid", len(bad.Key), err)
		}
		if _, _, err := s.LookupKey(ctx, bad); !errors.Is(err, ErrInvalid) {
			t.Errorf("lookup of a key of %d bytes: %v, want ErrInvalid", len(bad.Key), err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	if s, err = Open(path, Options{NoSync: true, Now: clk.Now}); err != nil {
		t.Fatal(err)
	}
	defer s.Close() // every write is committed: closing loses nothing
	j, found, err := s.LookupKey(ctx, idemKey("k1", "body a"))
	if err != nil || !found || j.ID != first.ID {
		t.Fatalf("after a reopen: %s, %v, %v; want %s", j.ID, found, err, first.ID)
	}
	if _, _, err := s.LookupKey(ctx, idemKey("k1", "body c")); !errors.Is(err, ErrKeyReused) {
		t.Errorf("lookup with another body after a reopen: %v, want ErrKeyReused", err)
	}
	if _, found, err := s.LookupKey(ctx, idemKey("k3", "body a")); err != nil || found {
		t.Errorf("unknown key: found %v, %v", found, err)
	}
}

// TestSubmitJobOnceConcurrent: many concurrent submissions with one key
// make one job, and every caller gets it.
func TestSubmitJobOnceConcurrent(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, Options{NoSync: true})
	const n = 64
	got := make([]string, n)
	made := make([]bool, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			j, m, err := s.SubmitJobOnce(ctx, "", "sim", json.RawMessage(`{}`), "submitted", idemKey("same", "body"))
			if err != nil {
				t.Error(err)
			}
			got[i], made[i] = j.ID, m
		})
	}
	wg.Wait()
	makers := 0
	for i := range n {
		if got[i] != got[0] {
			t.Errorf("caller %d got job %s, caller 0 %s", i, got[i], got[0])
		}
		if made[i] {
			makers++
		}
	}
	if makers != 1 {
		t.Errorf("%d callers made a job, want 1", makers)
	}
	jobs, err := s.Jobs(ctx, JobFilter{})
	if err != nil || len(jobs) != 1 {
		t.Fatalf("%d jobs on file (%v), want 1", len(jobs), err)
	}
	if n := s.Counts()[Queued]; n != 1 {
		t.Errorf("counts: %d queued, want 1", n)
	}
}

// TestKeyRetention: a key is kept for the retention on the store's clock,
// then it is forgotten (a submission with it makes a new job) and the
// store's housekeeping drops it: a few at every submission with a key,
// all with DropExpiredKeys.
func TestKeyRetention(t *testing.T) {
	ctx := context.Background()
	clk := &fixedClock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	s := openTest(t, Options{NoSync: true, Now: clk.Now})
	first, _, err := s.SubmitJobOnce(ctx, "", "sim", json.RawMessage(`{}`), "", idemKey("k", "b"))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		if _, _, err := s.SubmitJobOnce(ctx, "", "sim", json.RawMessage(`{}`), "", idemKey("old-"+string(rune('a'+i)), "b")); err != nil {
			t.Fatal(err)
		}
	}
	clk.add(DefaultKeyRetention - time.Second)
	if j, found, err := s.LookupKey(ctx, idemKey("k", "b")); err != nil || !found || j.ID != first.ID {
		t.Fatalf("a second before the retention ends: %s, %v, %v", j.ID, found, err)
	}
	clk.add(time.Second)
	if _, found, err := s.LookupKey(ctx, idemKey("k", "b")); err != nil || found {
		t.Fatalf("at the end of the retention: found %v, %v; want forgotten", found, err)
	}
	// Forgotten: the key makes a new job (and drops a few expired keys).
	second, made, err := s.SubmitJobOnce(ctx, "", "sim", json.RawMessage(`{}`), "", idemKey("k", "another body"))
	if err != nil || !made || second.ID == first.ID {
		t.Fatalf("an expired key: job %s, made %v, %v; want a new job", second.ID, made, err)
	}
	n, err := s.Keys(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n != 22-dropPerSubmit {
		t.Errorf("%d keys after one submission past the retention, want %d (21 expired, %d of them dropped, and the new one)", n, 22-dropPerSubmit, dropPerSubmit)
	}
	dropped, err := s.DropExpiredKeys(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if dropped != 20-(dropPerSubmit-1) {
		t.Errorf("DropExpiredKeys dropped %d, want %d", dropped, 20-(dropPerSubmit-1))
	}
	n, err = s.Keys(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Errorf("%d keys left, want 1 (the one made again)", n)
	}
	if j, found, err := s.LookupKey(ctx, idemKey("k", "another body")); err != nil || !found || j.ID != second.ID {
		t.Errorf("the key made again: %s, %v, %v; want %s", j.ID, found, err, second.ID)
	}

	// A retention set longer than the default is kept.
	clk2 := &fixedClock{t: clk.Now()}
	s2 := openTest(t, Options{NoSync: true, Now: clk2.Now, KeyRetention: 48 * time.Hour})
	if _, _, err := s2.SubmitJobOnce(ctx, "", "sim", json.RawMessage(`{}`), "", idemKey("k", "b")); err != nil {
		t.Fatal(err)
	}
	clk2.add(47 * time.Hour)
	_, found, err := s2.LookupKey(ctx, idemKey("k", "b"))
	if err != nil {
		t.Fatal(err)
	}
	if !found {
		t.Error("a key 47 h old with a retention of 48 h was forgotten")
	}
}

// TestNewBucketsOnOldStore: a store of this layout written before the
// idempotency keys and the output positions (the buckets missing) gains
// them on open, at the same layout, and keeps its jobs: no migration is
// needed, and older code ignores the buckets.
func TestNewBucketsOnOldStore(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "metasched.db")
	s, err := Open(path, Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	old, err := s.SubmitJob(ctx, "sim", json.RawMessage(`{}`), "")
	if err != nil {
		t.Fatal(err)
	}
	err = s.update(ctx, func(tx kv.Tx) error {
		return errors.Join(tx.DeleteBucket(bucketIdem), tx.DeleteBucket(bucketOutputs))
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if s, err = Open(path, Options{NoSync: true}); err != nil {
		t.Fatal(err)
	}
	defer s.Close() // every write is committed: closing loses nothing
	if v, err := s.Layout(); err != nil || v != Layout {
		t.Errorf("layout %d %v, want %d", v, err, Layout)
	}
	if _, err := s.Job(ctx, old.ID); err != nil {
		t.Errorf("the job written before: %v", err)
	}
	if _, made, err := s.SubmitJobOnce(ctx, "", "sim", json.RawMessage(`{}`), "", idemKey("k", "b")); err != nil || !made {
		t.Errorf("a keyed submission: made %v, %v", made, err)
	}
	if err := s.AppendLogAt(ctx, old.ID, 1, 0, []byte("out\n")); err != nil {
		t.Errorf("an output position: %v", err)
	}
}
