package store

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/metasched/metasched/internal/etcdtest"
)

// TestMigrate moves a stopped daemon's store into etcd: every job, its
// log, the hosts and switches are there, and the store opens on etcd; a
// store in use, and a prefix that holds keys, are refused.
func TestMigrate(t *testing.T) {
	ctx := context.Background()
	path := storeWithJobs(t, 30)
	s, err := Open(path, Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SetHost(ctx, "spain-0", []byte(`{"site":"spain","pool":"render"}`)); err != nil {
		t.Fatal(err)
	}
	if err := s.PutSwitch(ctx, closedAt(7, "spain-1", t0)); err != nil {
		t.Fatal(err)
	}
	if err := s.AppendLog(ctx, jobID(3), []byte("hello\n")); err != nil {
		t.Fatal(err)
	}
	c := etcdtest.Start(t, 1)
	cl := c.Client(t)
	if _, err := Migrate(ctx, path, cl, "/grid-a/"); !errors.Is(err, ErrInUse) {
		t.Fatalf("migrate of a store in use: %v, want ErrInUse", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	sum, err := Migrate(ctx, path, cl, "/grid-a")
	if err != nil {
		t.Fatal(err)
	}
	if sum.Total() != 30 || sum.Hosts != 1 || sum.Switches != 7 {
		t.Errorf("migrated %+v", sum)
	}
	e, err := OpenEtcd(cl, EtcdOptions{Prefix: "/grid-a/"}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if j, err := e.Job(ctx, jobID(30)); err != nil || j.State != Queued {
		t.Errorf("job 30 on etcd: %+v, %v", j, err)
	}
	if log, err := e.Logs(ctx, jobID(3)); err != nil || string(log) != "hello\n" {
		t.Errorf("job 3's log on etcd: %q, %v", log, err)
	}
	if rs, err := e.Switches(ctx, 0, 0); err != nil || len(rs) != 1 || rs[0].Host != "spain-1" {
		t.Errorf("the switches on etcd: %+v, %v", rs, err)
	}
	next, err := e.SubmitJob(ctx, "sim", []byte(`{}`), "submitted")
	if err != nil || next.ID != jobID(31) {
		t.Errorf("the next job on etcd: %v, %v, want %s", next.ID, err, jobID(31))
	}
	if _, err := Migrate(ctx, path, cl, "/grid-a/"); err == nil || !strings.Contains(err.Error(), "holds") {
		t.Errorf("a migration into a prefix that holds keys: %v", err)
	}
}
