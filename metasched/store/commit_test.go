package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	bolt "go.etcd.io/bbolt"
)

// TestCommit: a transition, the job's data and its exit code go to disk in
// one commit; a refused commit changes nothing.
func TestCommit(t *testing.T) {
	ctx := context.Background()
	s, err := Open(filepath.Join(t.TempDir(), "metasched.db"), Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close() // every write is committed: closing loses nothing
	j, err := s.SubmitJob(ctx, "render", json.RawMessage(`{}`), "submitted")
	if err != nil {
		t.Fatal(err)
	}
	zero := 0
	steps := []Change{
		{From: Queued, To: Planned, Reason: "planned", Data: json.RawMessage(`{"attempts":1}`)},
		{From: Planned, To: Provisioning, Reason: "creating 1 VMs"},
		{From: Provisioning, To: Provisioning, Data: json.RawMessage(`{"attempts":1,"vms":[{"name":"v"}]}`)},
		{From: Provisioning, To: Running, Reason: "1 VMs up"},
		{From: Running, To: Running, Data: json.RawMessage(`{"attempts":1,"vms":[{"name":"v"}]}`)},
		{From: Running, To: Running, Reason: "worker VM w lost", Data: json.RawMessage(`{"attempts":1,"vms":[{"name":"v"}],"lost_workers":[{"name":"w"}]}`)},
		{From: Running, To: Done, Reason: "exit code 0", Data: json.RawMessage(`{"attempts":1,"finished":"x"}`), ExitCode: &zero},
	}
	for _, c := range steps {
		if j, err = s.Commit(ctx, j.ID, c); err != nil {
			t.Fatalf("%+v: %v", c, err)
		}
	}
	got, err := s.Job(ctx, j.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.State != Done || string(got.Data) != `{"attempts":1,"finished":"x"}` || got.ExitCode == nil || *got.ExitCode != 0 {
		t.Errorf("after the commits: state %s, data %s, exit code %v", got.State, got.Data, got.ExitCode)
	}
	// A change that keeps the state is in the history only with a reason
	// (an event of the state: a running job lost a worker).
	var path []string
	for _, tr := range got.Transitions {
		path = append(path, fmt.Sprintf("%s>%s", tr.From, tr.To))
	}
	if diff := cmp.Diff([]string{">queued", "queued>planned", "planned>provisioning", "provisioning>running", "running>running", "running>done"}, path); diff != "" {
		t.Errorf("transitions (-want +got):\n%s", diff)
	}
	if r := got.Transitions[4].Reason; r != "worker VM w lost" {
		t.Errorf("the reason of the event within running: %q", r)
	}
	if c := s.Counts(); c[Done] != 1 || c[Running] != 0 || c[Queued] != 0 {
		t.Errorf("counts %v", c)
	}
	// Refusals: nothing changes.
	for _, tc := range []struct {
		c    Change
		want error
	}{
		{Change{From: Running, To: Failed, Reason: "late", Data: json.RawMessage(`{"x":1}`)}, ErrConflict},
		{Change{From: Done, To: Queued}, ErrInvalid},
		{Change{From: Done, To: Done, Data: json.RawMessage(`{bad`)}, ErrInvalid},
		{Change{From: "nope", To: "nope"}, ErrInvalid},
	} {
		if _, err := s.Commit(ctx, j.ID, tc.c); !errors.Is(err, tc.want) {
			t.Errorf("%+v: %v, want %v", tc.c, err, tc.want)
		}
	}
	if _, err := s.Commit(ctx, "j-999", Change{From: Queued, To: Planned}); !errors.Is(err, ErrNotFound) {
		t.Errorf("unknown job: %v", err)
	}
	after, err := s.Job(ctx, j.ID)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(got, after); diff != "" {
		t.Errorf("a refused commit changed the job (-before +after):\n%s", diff)
	}
}

// copyFile copies a store from testdata so that opening it changes no
// file of the repository.
func copyFile(t *testing.T, from string) string {
	t.Helper()
	src, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close() // read-only
	to := filepath.Join(t.TempDir(), "metasched.db")
	dst, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
	return to
}

// TestMigrateLayout1 opens a store written by the code before the store
// recorded its layout (testdata/layout1.db: six jobs of three types, one
// done with data, exit code and output, one running, one cancelled, a
// journal record, a host and the token) and finds everything, now indexed
// by type and by state and type, at the current layout.
func TestMigrateLayout1(t *testing.T) {
	ctx := context.Background()
	path := copyFile(t, filepath.Join("testdata", "layout1.db"))
	s, err := Open(path, Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	if v, err := s.Layout(); err != nil || v != Layout {
		t.Errorf("layout after the migration: %d %v, want %d", v, err, Layout)
	}
	all, err := s.Jobs(ctx, JobFilter{})
	if err != nil || len(all) != 6 {
		t.Fatalf("jobs: %d %v, want 6", len(all), err)
	}
	first := all[0]
	if first.State != Done || first.ExitCode == nil || *first.ExitCode != 0 || len(first.Data) == 0 {
		t.Errorf("the done job: %+v", first)
	}
	if logs, err := s.Logs(ctx, first.ID); err != nil || string(logs) != "hello\n" {
		t.Errorf("its output: %q %v", logs, err)
	}
	if c := s.Counts(); c[Done] != 1 || c[Running] != 1 || c[Cancelled] != 1 || c[Queued] != 3 {
		t.Errorf("counts %v", c)
	}
	for typ, want := range map[string]int{"render": 3, "sim": 2, "etl": 1, "none": 0} {
		js, err := s.Jobs(ctx, JobFilter{Type: typ})
		if err != nil || len(js) != want {
			t.Errorf("type %s: %d jobs %v, want %d", typ, len(js), err, want)
		}
		for _, j := range js {
			if j.Type != typ {
				t.Errorf("type %s lists %s of type %s", typ, j.ID, j.Type)
			}
		}
	}
	page, err := s.Jobs(ctx, JobFilter{Type: "render", After: all[0].ID, Limit: 1})
	if err != nil || len(page) != 1 || page[0].ID != all[2].ID {
		t.Errorf("render after %s, one: %v %v, want %s", all[0].ID, page, err, all[2].ID)
	}
	if rec, err := s.Journal(ctx); err != nil || len(rec) != 1 {
		t.Errorf("journal: %v %v", rec, err)
	}
	if hosts, err := s.Hosts(ctx); err != nil || string(hosts["spain-0"]) != `{"pool":"render"}` {
		t.Errorf("hosts: %v %v", hosts, err)
	}
	// A job submitted now is in the type index too, and the store opens
	// again without migrating.
	if _, err := s.SubmitJob(ctx, "etl", json.RawMessage(`{}`), "submitted"); err != nil {
		t.Fatal(err)
	}
	s = reopen(t, s, path)
	defer s.Close() // every write is committed: closing loses nothing
	js, err := s.Jobs(ctx, JobFilter{Type: "etl"})
	if err != nil {
		t.Fatal(err)
	}
	if len(js) != 2 {
		t.Errorf("etl jobs after a reopen: %d, want 2", len(js))
	}
	js, err = s.Jobs(ctx, JobFilter{States: []JobState{Queued}, Type: "render"})
	if err != nil {
		t.Fatal(err)
	}
	if len(js) != 1 {
		t.Errorf("queued render jobs: %d, want 1", len(js))
	}
}

// TestNewerLayoutRefused: a store of a later layout is refused with what
// to do, and left as it was.
func TestNewerLayoutRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "metasched.db")
	s, err := Open(path, Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	v, err := s.Layout()
	if err != nil {
		t.Fatal(err)
	}
	if v != Layout {
		t.Errorf("a new store's layout: %d, want %d", v, Layout)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketMeta).Put(keyLayout, u64(Layout+1)) }); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	_, err = Open(path, Options{NoSync: true})
	if !errors.Is(err, ErrNewerLayout) {
		t.Fatalf("open a newer layout: %v, want ErrNewerLayout", err)
	}
	want := fmt.Sprintf("the store has layout %d, newer than this metasched's %d", Layout+1, Layout)
	if got := err.Error(); !contains(got, want) || !contains(got, path) {
		t.Errorf("message %q: want the path and %q", got, want)
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }

// reopen closes the store and opens its file again.
func reopen(t *testing.T, s *Store, path string) *Store {
	t.Helper()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err := Open(path, Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	return s
}
