package main

import (
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/metasched/metasched/metasched/api"
)

func TestJobCommands(t *testing.T) {
	job := writeFile(t, "job.yaml", jobFileText)
	jsonJob := writeFile(t, "job.json", `{"name": "render-42", "type": "render", "tasks": 300, "task_ops": 2e11, "task_bytes": 5e7}`)
	queued := jobRunning
	queued.State, queued.Reason, queued.Placement, queued.VMs = api.Queued, "submitted", nil, nil
	queued.Transitions = queued.Transitions[:1]
	queued.PredictedS, queued.Attempts = 0, 0
	cancelled := jobRunning
	cancelled.State, cancelled.Reason = api.Cancelled, "cancelled by the user"
	// An elastic job that lost a worker to a switch and went on.
	elastic := jobRunning
	elastic.Spec.Elastic = true
	elastic.VMs = jobRunning.VMs[:4]
	lostAt := t0.Add(6 * time.Second)
	why := "host la-1 switched from pool render by s-000003"
	elastic.LostWorkers = []api.JobLostVM{{JobVM: jobRunning.VMs[4], At: lostAt, Reason: why}}
	elastic.Reason = "worker VM j-000000000007-4 on la-1 lost (" + why + "): the job goes on with 3 workers"
	elastic.Transitions = append(slices.Clone(jobRunning.Transitions), api.Transition{From: api.Running, To: api.Running, At: lostAt, Reason: elastic.Reason})
	list := api.JobList{Jobs: []api.Job{jobFailed, jobDone, jobRunning, jobQueued}}
	page := api.JobList{Jobs: []api.Job{jobDone, jobRunning}, Next: "j-000000000007"}
	submit := daemonRoute{Method: "POST", Path: "/v1/jobs", Body: ptr(jobFileText), Status: 201, Answer: queued}
	jobsAll := daemonRoute{Method: "GET", Path: "/v1/jobs", Answer: list}
	runDaemonCases(t, []daemonCase{
		{name: "submit", args: []string{"submit", job}, routes: []daemonRoute{submit}},
		{name: "submit-json", args: []string{"submit", job, "--output", "json"}, routes: []daemonRoute{submit}, want: queued},
		{name: "submit-json-file", args: []string{"submit", jsonJob}, routes: []daemonRoute{{Method: "POST", Path: "/v1/jobs",
			Body: ptr(`{"name": "render-42", "type": "render", "tasks": 300, "task_ops": 2e11, "task_bytes": 5e7}`), Status: 201, Answer: queued}}},
		{name: "jobs", args: []string{"jobs"}, routes: []daemonRoute{jobsAll}},
		{name: "jobs-json", args: []string{"jobs", "--output", "json"}, routes: []daemonRoute{jobsAll}, want: list},
		{name: "jobs-page", args: []string{"jobs", "--state", "running,done", "--type", "render", "--limit", "2", "--after", "j-000000000005"},
			routes: []daemonRoute{{Method: "GET", Path: "/v1/jobs", Answer: page,
				Query: url.Values{"state": {"running,done"}, "type": {"render"}, "limit": {"2"}, "after": {"j-000000000005"}}}}},
		{name: "jobs-empty", args: []string{"jobs", "--state", "provisioning"},
			routes: []daemonRoute{{Method: "GET", Path: "/v1/jobs", Query: url.Values{"state": {"provisioning"}}, Answer: api.JobList{Jobs: []api.Job{}}}}},
		{name: "status-job", args: []string{"status", "j-000000000006"},
			routes: []daemonRoute{{Method: "GET", Path: "/v1/jobs/j-000000000006", Answer: jobDone}}},
		{name: "status-job-queued", args: []string{"status", "j-000000000008"},
			routes: []daemonRoute{{Method: "GET", Path: "/v1/jobs/j-000000000008", Answer: jobQueued}}},
		{name: "status-job-failed", args: []string{"status", "j-000000000005"},
			routes: []daemonRoute{{Method: "GET", Path: "/v1/jobs/j-000000000005", Answer: jobFailed}}},
		{name: "status-job-lost", args: []string{"status", "j-000000000007"},
			routes: []daemonRoute{{Method: "GET", Path: "/v1/jobs/j-000000000007", Answer: elastic}}},
		{name: "status-job-json", args: []string{"status", "j-000000000006", "--output", "json"},
			routes: []daemonRoute{{Method: "GET", Path: "/v1/jobs/j-000000000006", Answer: jobDone}}, want: jobDone},
		{name: "cancel", args: []string{"cancel", "j-000000000007"},
			routes: []daemonRoute{{Method: "POST", Path: "/v1/jobs/j-000000000007/cancel", Answer: cancelled}}},
		{name: "cancel-json", args: []string{"cancel", "j-000000000007", "--output", "json"},
			routes: []daemonRoute{{Method: "POST", Path: "/v1/jobs/j-000000000007/cancel", Answer: cancelled}}, want: cancelled},
		{name: "logs", args: []string{"logs", "j-000000000007"},
			routes: []daemonRoute{{Method: "GET", Path: "/v1/jobs/j-000000000007/logs", Answer: "frame 1 of 300 rendered on spain/es-1\nframe 2 of 300 rendered on latam-a/la-1\n"}}},
		{name: "logs-queued", args: []string{"logs", "j-000000000008"},
			routes: []daemonRoute{{Method: "GET", Path: "/v1/jobs/j-000000000008/logs", Answer: ""},
				{Method: "GET", Path: "/v1/jobs/j-000000000008", Answer: jobQueued}},
			stderr: "j-000000000008 has not started: it is queued (no output yet)\n"},
		{name: "plan-daemon", args: []string{"plan", "--job", job},
			routes: []daemonRoute{{Method: "POST", Path: "/v1/plan", Body: ptr(jobFileText), Answer: fixturePlanResult}}},
		{name: "plan-daemon-json", args: []string{"plan", "--job", job, "--output", "json"},
			routes: []daemonRoute{{Method: "POST", Path: "/v1/plan", Body: ptr(jobFileText), Answer: fixturePlanResult}}, want: fixturePlanResult},
	})
}

// A plan that is infeasible now: the job would wait (exit 0), or it never
// fits (exit 1, as offline).
func TestPlanDaemonInfeasible(t *testing.T) {
	job := writeFile(t, "job.yaml", jobFileText)
	none := fixturePlanResult
	none.Placement.Plan.Feasible, none.Placement.Plan.Reason = false, "no cluster can take part: each one's machines cannot hold the job's VM or none is free"
	none.Placement.Plan.Master, none.Placement.Plan.Clusters = "", nil
	none.Placement.Measured, none.Placement.Calibrated = nil, nil
	none.FreeHosts = map[string]int{}
	waits := none
	waits.Waits = true
	for _, tc := range []struct {
		name   string
		answer api.PlanResult
		code   int
	}{
		{"plan-daemon-waits", waits, 0},
		{"plan-daemon-infeasible", none, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeDaemon(t, daemonToken, daemonRoute{Method: "POST", Path: "/v1/plan", Body: ptr(jobFileText), Answer: tc.answer})
			code, out, errOut := runDaemonCmd(t, f.URL, daemonToken, "plan", "--job", job)
			if code != tc.code {
				t.Errorf("exit %d, want %d: %s", code, tc.code, errOut)
			}
			if tc.code == 1 && errOut != "metasched: no plan: "+none.Placement.Plan.Reason+"\n" {
				t.Errorf("stderr %q", errOut)
			}
			golden(t, tc.name, out)
		})
	}
}

// The offline layout is kept: the daemon's plan prints the lines an
// offline plan prints.
func TestPlanDaemonLikeOffline(t *testing.T) {
	code, offline, errOut := runCmd(t, "plan", "--job", renderJob, "--grid", paperGrid)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	f := newFakeDaemon(t, daemonToken, daemonRoute{Method: "POST", Path: "/v1/plan", Body: ptr(readFile(t, renderJob)), Answer: fixturePlanResult})
	code, online, errOut := runDaemonCmd(t, f.URL, daemonToken, "plan", "--job", renderJob)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	first := func(s string) string { return strings.SplitN(s, "\n", 2)[0] }
	if first(offline) != first(online) {
		t.Errorf("job line: offline %q, daemon %q", first(offline), first(online))
	}
	for _, want := range []string{"Algorithm: hillclimb, 3 restarts from the Kruskal zones", "Zones: {latam-a} {latam-b} {spain}",
		"Master on spain. ", "CLUSTER         WORKERS  FREE  TASKS  MBIT/S  TASKS/S  LIMIT  WHY\nspain (master)  "} {
		if !strings.Contains(offline, want) || !strings.Contains(online, want) {
			t.Errorf("%q not in both:\noffline:\n%s\ndaemon:\n%s", want, offline, online)
		}
	}
}

// submit sends an idempotency key: --idempotency-key's, else a random one;
// a lost answer (503 here) is sent again with the same key.
func TestSubmitIdempotencyKey(t *testing.T) {
	job := writeFile(t, "job.yaml", jobFileText)
	queued := jobQueued
	f := newFakeDaemon(t, daemonToken, daemonRoute{Method: "POST", Path: "/v1/jobs", Body: ptr(jobFileText), Status: 201, Answer: queued})
	if code, _, errOut := runDaemonCmd(t, f.URL, daemonToken, "submit", job, "--idempotency-key", "nightly-render-2026-03-01"); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if code, _, errOut := runDaemonCmd(t, f.URL, daemonToken, "submit", job); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	reqs := f.requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests, want 2", len(reqs))
	}
	if k := reqs[0].Key; len(k) != 1 || k[0] != "nightly-render-2026-03-01" {
		t.Errorf("with --idempotency-key: keys %q", k)
	}
	if k := reqs[1].Key; len(k) != 1 || len(k[0]) != 36 {
		t.Errorf("without: keys %q, want one random UUID", k)
	}

	busy := newFakeDaemon(t, daemonToken, daemonRoute{Method: "POST", Path: "/v1/jobs", Body: ptr(jobFileText), Status: 503, Answer: "restarting\n"})
	code, _, errOut := runDaemonCmd(t, busy.URL, daemonToken, "submit", job, "--idempotency-key", "k")
	if code != 1 || !strings.Contains(errOut, "503") {
		t.Errorf("exit %d, stderr %q; want 1 and the 503", code, errOut)
	}
	if reqs := busy.requests(); len(reqs) != 3 || reqs[2].Key[0] != "k" {
		t.Errorf("%d requests to a daemon answering 503, want 3 with the key", len(reqs))
	}
}
