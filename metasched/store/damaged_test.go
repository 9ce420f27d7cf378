package store

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// storeWithJobs writes a store of n jobs and closes it.
func storeWithJobs(t *testing.T, n int) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "metasched.db")
	s, err := Open(path, Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Token(context.Background()); err != nil {
		t.Fatal(err)
	}
	for range n {
		if _, err := s.SubmitJob(context.Background(), "render", json.RawMessage(`{"pad":"`+strings.Repeat("x", 2000)+`"}`), "submitted"); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestOpenDamaged: Open refuses, with what happened and what to do, a
// file that is no metasched store or is damaged, and leaves it as it was
// (it never starts a new store over it).
func TestOpenDamaged(t *testing.T) {
	good := storeWithJobs(t, 200)
	data, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	foreign := filepath.Join(t.TempDir(), "other.db")
	db, err := bolt.Open(foreign, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(tx *bolt.Tx) error { _, err := tx.CreateBucket([]byte("widgets")); return err }); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		file func(t *testing.T) string
		want string
	}{
		{"empty", func(t *testing.T) string { return write(t, nil) }, "the file is empty (0 bytes)"},
		{"truncated to half", func(t *testing.T) string { return write(t, data[:len(data)/2]) }, "the file is truncated"},
		{"not a database", func(t *testing.T) string { return write(t, []byte(strings.Repeat("hello ", 2000))) }, "not a database this store can read"},
		{"another program's database", func(*testing.T) string { return foreign }, "not a metasched store: it holds widgets and no meta"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := tc.file(t)
			before, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			_, err = Open(path, Options{NoSync: true})
			if !errors.Is(err, ErrDamaged) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "restore the file from a backup") {
				t.Fatalf("open: %v, want ErrDamaged saying %q and what to do", err, tc.want)
			}
			after, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if string(after) != string(before) {
				t.Error("the refused file was changed")
			}
		})
	}
}

// write writes data to a new file and returns its path.
func write(t *testing.T, data []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "metasched.db")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestCorruptRecordSkipped: a job record that cannot be decoded is left out
// of the listings and reported; the other jobs are listed.
func TestCorruptRecordSkipped(t *testing.T) {
	path := storeWithJobs(t, 3)
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketJobs).Put([]byte(jobID(2)), []byte("{not json")) }); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var reported []string
	s, err := Open(path, Options{NoSync: true, OnCorrupt: func(id string, err error) {
		mu.Lock()
		defer mu.Unlock()
		if errors.Is(err, ErrCorrupt) {
			reported = append(reported, id)
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close() // every write is committed: closing loses nothing
	ctx := context.Background()
	for name, list := range map[string]func() ([]Job, error){
		"all":    func() ([]Job, error) { return s.Jobs(ctx, JobFilter{}) },
		"queued": func() ([]Job, error) { return s.Jobs(ctx, JobFilter{States: []JobState{Queued}}) },
		"render": func() ([]Job, error) { return s.Jobs(ctx, JobFilter{Type: "render"}) },
		"recent": func() ([]Job, error) { return s.Recent(ctx, 10) },
	} {
		js, err := list()
		if err != nil || len(js) != 2 {
			t.Errorf("%s: %d jobs, %v; want the 2 readable ones", name, len(js), err)
		}
	}
	if len(reported) != 4 || reported[0] != jobID(2) {
		t.Errorf("reported %v, want %s once per listing", reported, jobID(2))
	}
	if _, err := s.Job(ctx, jobID(2)); !errors.Is(err, ErrCorrupt) {
		t.Errorf("the corrupt job itself: %v, want ErrCorrupt", err)
	}
}
