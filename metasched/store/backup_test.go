package store

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// TestBackupWhileWriting: a backup taken while submissions go on is a
// store that Open reads, with every job acknowledged before the backup
// began and none half-written; its size is what Backup announced.
func TestBackupWhileWriting(t *testing.T) {
	if *engine != "bbolt" {
		t.Skip("a backup is a copy of the store's file: etcd keeps its own snapshots")
	}
	ctx := context.Background()
	s := openTest(t, Options{NoSync: true})
	for range 50 {
		if _, err := s.SubmitJob(ctx, "render", json.RawMessage(`{}`), "submitted"); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.SetHost(ctx, "spain-0", []byte(`{"site":"spain","pool":"render"}`)); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := s.SubmitJob(ctx, "sim", json.RawMessage(`{}`), "submitted"); err != nil {
				t.Error(err)
				return
			}
		}
	})
	var buf bytes.Buffer
	var announced int64
	err := s.Backup(ctx, func(n int64) { announced = n }, &buf)
	close(stop)
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if int64(buf.Len()) != announced {
		t.Errorf("backup wrote %d bytes, announced %d", buf.Len(), announced)
	}
	path := filepath.Join(t.TempDir(), "backup.db")
	if err := os.WriteFile(path, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	sum, err := Inspect(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Jobs[Queued] < 50 || sum.Hosts != 1 || sum.Layout != Layout {
		t.Errorf("backup holds %+v: want at least the 50 jobs before it, the host, layout %d", sum, Layout)
	}
	b, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close() // every write is committed: closing loses nothing
	for i := 1; i <= 50; i++ {
		if _, err := b.Job(ctx, jobID(uint64(i))); err != nil {
			t.Errorf("job %d of before the backup: %v", i, err)
		}
	}
}

// TestRestore: a restore refuses a store in use and a damaged backup,
// leaving the store as it was; otherwise it puts the backup in place and
// keeps the store it replaced.
func TestRestore(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 11, 25, 3, 0, 0, 0, time.UTC)
	backup := storeWithJobs(t, 7)
	dir := t.TempDir()
	path := filepath.Join(dir, "metasched.db")
	live, err := Open(path, Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := live.SubmitJob(ctx, "render", json.RawMessage(`{}`), "submitted"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := Restore(ctx, backup, path, now); !errors.Is(err, ErrInUse) {
		t.Fatalf("restore over an open store: %v, want ErrInUse", err)
	}
	if err := live.Close(); err != nil {
		t.Fatal(err)
	}
	before, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(t.TempDir(), "bad.db")
	if err := os.WriteFile(bad, []byte("not a database at all, but long enough to look like one? no"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := Restore(ctx, bad, path, now); !errors.Is(err, ErrDamaged) {
		t.Errorf("restore of a damaged backup: %v, want ErrDamaged", err)
	}
	if _, _, err := Restore(ctx, filepath.Join(dir, "missing.db"), path, now); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("restore of a missing backup: %v, want not found", err)
	}
	after, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(before, after) {
		t.Fatal("a refused restore changed the store")
	}
	if _, err := os.Stat(path + ".restoring"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a refused restore left its copy: %v", err)
	}
	sum, replaced, err := Restore(ctx, backup, path, now)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Total() != 7 || replaced != path+".replaced-20261125T030000Z" {
		t.Errorf("restored %+v, replaced %q", sum, replaced)
	}
	if got, err := Inspect(ctx, path); err != nil || got.Total() != 7 {
		t.Errorf("the restored store: %+v, %v: want the backup's 7 jobs", got, err)
	}
	if old, err := os.ReadFile(replaced); err != nil || !bytes.Equal(old, before) {
		t.Errorf("the replaced store is not kept as it was: %v", err)
	}
	// Into a data directory with no store yet.
	fresh := filepath.Join(t.TempDir(), "metasched.db")
	if sum, replaced, err := Restore(ctx, backup, fresh, now); err != nil || replaced != "" || sum.Total() != 7 {
		t.Errorf("restore into an empty directory: %+v, %q, %v", sum, replaced, err)
	}
}
