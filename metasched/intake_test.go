package metasched_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/metasched/metasched/metasched"
	"github.com/metasched/metasched/metasched/api"
	"github.com/metasched/metasched/metasched/jobfile"
)

// TestNeverRunsFollowsFigures: a job that no plan on the whole grid could
// run is refused at submission, and so is its repeat (the answer is kept
// per shape); once the planner's figures change so that it could run (a
// measured perf of its pool's image), the same job is accepted: the kept
// answer does not outlive the figures it was made on.
func TestNeverRunsFollowsFigures(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		td := startDaemon(t, metasched.Options{}, nil)
		ctx := context.Background()
		job := "name: huge\ntype: render\ntasks: 10000000\ntask_ops: 1.0e18\ntask_bytes: 0\n"
		for range 2 {
			_, err := td.d.Submit(ctx, jobfile.Decode([]byte(job)))
			var re *api.RequestError
			if !errors.As(err, &re) || re.Status != 400 || !strings.Contains(re.Error(), "can never run on this grid") {
				t.Fatalf("submit: %v, want a 400 saying the job can never run", err)
			}
		}
		p := td.d.Planner()
		p.SetPoolImages(map[string]string{"render": "fast"})
		for _, c := range []string{"latam-a", "latam-b", "spain"} {
			if err := p.ObservePerf(c, "fast", 1e18, time.Now()); err != nil {
				t.Fatal(err)
			}
		}
		j, err := td.d.Submit(ctx, jobfile.Decode([]byte(job)))
		if err != nil {
			t.Fatalf("submit with the measured perf: %v", err)
		}
		if j.State != "queued" {
			t.Errorf("job state %s, want queued", j.State)
		}
	})
}

// TestSubmitAnswersInTheDaemonsOrder: the body is decoded at the edge, but
// a submission is answered in the order the daemon checks it, whatever
// the body: who may submit (a user on a daemon that runs commands on its
// own machine: 403), then an idempotency key sent before with another body
// (422, even when that body is no job), then the job (400).
func TestSubmitAnswersInTheDaemonsOrder(t *testing.T) {
	td := startDaemon(t, metasched.Options{}, func(c *metasched.Config) {
		hostCommand(t, c)
		c.Policy = metasched.PolicyConfig{Name: "none"}
	})
	status := func(err error) int {
		var re *api.RequestError
		if !errors.As(err, &re) {
			t.Fatalf("error %v, want a request error", err)
		}
		return re.Status
	}
	user := api.WithPrincipal(context.Background(), api.Principal{Name: "alice", Role: api.RoleUser})
	operator := context.Background()
	bad := jobfile.Decode([]byte("name: bad\ntasks: 0\n"))
	good := jobfile.Decode([]byte("name: ok\ntype: sim\ntasks: 10\ntask_ops: 1.0e9\ntask_bytes: 0\ncommand: [/bin/true]\n"))
	if _, err := td.d.Submit(user, bad); status(err) != 403 {
		t.Errorf("a user's bad job on a host-command daemon: %v, want 403", err)
	}
	if _, _, err := td.d.SubmitOnce(user, bad, "bearer:a", "k"); status(err) != 403 {
		t.Errorf("a user's bad job with a key on a host-command daemon: %v, want 403", err)
	}
	if _, created, err := td.d.SubmitOnce(operator, good, "bearer:a", "k"); err != nil || !created {
		t.Fatalf("the first submission with the key: created %t, %v", created, err)
	}
	if _, _, err := td.d.SubmitOnce(operator, bad, "bearer:a", "k"); status(err) != 422 {
		t.Errorf("the key again with a body that is no job: %v, want 422", err)
	}
	if _, _, err := td.d.SubmitOnce(operator, bad, "bearer:a", "another"); status(err) != 400 {
		t.Errorf("a new key with a body that is no job: %v, want 400", err)
	}
	if j, created, err := td.d.SubmitOnce(operator, good, "bearer:a", "k"); err != nil || created || j.Name != "ok" {
		t.Errorf("the repeat: %s, created %t, %v; want the first job, not created", j.Name, created, err)
	}
}
