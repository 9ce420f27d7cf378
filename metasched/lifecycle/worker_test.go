package lifecycle

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/metasched/metasched/gramvm"
)

// TestWorkerLostTable is the transition table of WorkerLost: for every
// state and every kind of VM named, the state the job goes to and the
// actions that carry it out. Only a running job loses a worker and goes
// on; its master, or its last worker, requeues it; a stale or repeated
// loss changes nothing; the rest is refused.
func TestWorkerLostTable(t *testing.T) {
	at := time.Date(2026, 1, 1, 0, 0, 10, 0, time.UTC)
	vms := []VM{
		{Name: "j-1-a2-m", Site: "spain", Host: "spain-0", Master: true},
		{Name: "j-1-a2-w1", Site: "spain", Host: "spain-1"},
		{Name: "j-1-a2-w2", Site: "latam", Host: "latam-0"},
	}
	job := func(s State, vms ...VM) Job {
		j := Job{ID: "j-1", Type: "render", State: s, Reason: "before",
			Record: Record{Placement: &gramvm.Placement{}, VMs: vms, Attempts: 2, Started: at.Add(-time.Second)}}
		if s == Queued {
			j.Record.VMs, j.Record.Placement, j.Record.Started = nil, nil, time.Time{}
		}
		return j
	}
	lost := LostVM{VM: VM{Name: "j-1-a2-w2", Site: "latam", Host: "latam-0"}, At: at.Add(-time.Second), Reason: "earlier"}
	withLost := job(Running, vms[0], vms[1])
	withLost.Record.LostWorkers = []LostVM{lost}

	type want struct {
		state   State
		actions string // the actions' types, in order
		lost    []string
		vms     int
		err     bool
	}
	cases := []struct {
		name string
		job  Job
		ev   WorkerLost
		want want
	}{
		{"running, a worker of two", job(Running, vms...), WorkerLost{VM: "j-1-a2-w1", Reason: "host switched"},
			want{Running, "Commit DestroyVMs", []string{"j-1-a2-w1"}, 2, false}},
		{"running, for this attempt", job(Running, vms...), WorkerLost{VM: "j-1-a2-w2", Attempt: 2, Reason: "gone"},
			want{Running, "Commit DestroyVMs", []string{"j-1-a2-w2"}, 2, false}},
		{"running, the last worker", job(Running, vms[0], vms[1]), WorkerLost{VM: "j-1-a2-w1", Reason: "host switched"},
			want{Queued, "Commit StopRun DestroyVMs", nil, 0, false}},
		{"running, the master", job(Running, vms...), WorkerLost{VM: "j-1-a2-m", Reason: "host lost"},
			want{Queued, "Commit StopRun DestroyVMs", nil, 0, false}},
		{"running, a VM it does not have", job(Running, vms...), WorkerLost{VM: "j-1-a2-w9"},
			want{Running, "", nil, 3, true}},
		{"running, a worker already lost", withLost, WorkerLost{VM: "j-1-a2-w2"},
			want{Running, "", []string{"j-1-a2-w2"}, 2, false}},
		{"running, another attempt", job(Running, vms...), WorkerLost{VM: "j-1-a2-w1", Attempt: 1},
			want{Running, "", nil, 3, false}},
		{"queued", job(Queued), WorkerLost{VM: "j-1-a2-w1"}, want{Queued, "", nil, 0, true}},
		{"planned", job(Planned, vms...), WorkerLost{VM: "j-1-a2-w1"}, want{Planned, "", nil, 3, true}},
		{"provisioning", job(Provisioning, vms...), WorkerLost{VM: "j-1-a2-w1"}, want{Provisioning, "", nil, 3, true}},
		{"done", job(Done, vms...), WorkerLost{VM: "j-1-a2-w1"}, want{Done, "", nil, 3, true}},
		{"failed", job(Failed, vms...), WorkerLost{VM: "j-1-a2-w1"}, want{Failed, "", nil, 3, true}},
		{"cancelled", job(Cancelled, vms...), WorkerLost{VM: "j-1-a2-w1"}, want{Cancelled, "", nil, 3, true}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.ev.At = at
			next, acts, err := tc.job.Step(tc.ev)
			if (err != nil) != tc.want.err || (err != nil && !errors.Is(err, ErrNotAllowed)) {
				t.Fatalf("Step: %v, want an error: %v (ErrNotAllowed)", err, tc.want.err)
			}
			var kinds []string
			for _, a := range acts {
				kinds = append(kinds, strings.TrimPrefix(fmt.Sprintf("%T", a), "lifecycle."))
			}
			if got := strings.Join(kinds, " "); got != tc.want.actions {
				t.Errorf("actions %q, want %q", got, tc.want.actions)
			}
			if next.State != tc.want.state {
				t.Errorf("state %s, want %s", next.State, tc.want.state)
			}
			var names []string
			for _, l := range next.Record.LostWorkers {
				names = append(names, l.Name)
			}
			if !slices.Equal(names, tc.want.lost) {
				t.Errorf("lost workers %v, want %v", names, tc.want.lost)
			}
			if len(next.Record.VMs) != tc.want.vms {
				t.Errorf("%d VMs left, want %d: %v", len(next.Record.VMs), tc.want.vms, next.Record.VMs)
			}
			if len(acts) == 0 {
				return
			}
			c := acts[0].(Commit)
			if c.From != tc.job.State || c.To != tc.want.state || c.Reason == "" || c.Reason != next.Reason {
				t.Errorf("commit %s -> %s %q (job's reason %q), want %s -> %s with the reason", c.From, c.To, c.Reason, next.Reason, tc.job.State, tc.want.state)
			}
			if !strings.Contains(c.Reason, tc.ev.VM) {
				t.Errorf("the reason %q does not name the VM %s", c.Reason, tc.ev.VM)
			}
			if next.State == Running {
				l := next.Record.LostWorkers[len(next.Record.LostWorkers)-1]
				d := acts[1].(DestroyVMs)
				if len(d.VMs) != 1 || d.VMs[0].Name != tc.ev.VM || l.At != at || l.Reason != tc.ev.Reason || l.Host == "" {
					t.Errorf("destroyed %v, recorded %+v: want the lost VM only, with the time and reason", d.VMs, l)
				}
				if next.Record.Placement != tc.job.Record.Placement || next.Record.Attempts != tc.job.Record.Attempts || !next.Record.Started.Equal(tc.job.Record.Started) {
					t.Errorf("a lost worker changed the record's placement, attempts or start: %+v", next.Record)
				}
			}
		})
	}
	// The receiver is a value: Step leaves it as it was.
	j := job(Running, vms...)
	if _, _, err := j.Step(WorkerLost{VM: "j-1-a2-w1", At: at}); err != nil || len(j.Record.VMs) != 3 || len(j.Record.LostWorkers) != 0 {
		t.Errorf("Step changed its receiver: %v, %+v", err, j.Record)
	}
}

// TestRecordLostWorkersJSON: a record written before lost workers existed
// reads as one with none; one with lost workers comes back the same from
// the store's JSON.
func TestRecordLostWorkersJSON(t *testing.T) {
	var old Record
	if err := json.Unmarshal([]byte(`{"vms":[{"name":"j-1-a1-m","site":"spain","host":"spain-0","master":true},`+
		`{"name":"j-1-a1-w1","site":"spain","host":"spain-1"}],"predicted_s":12,"started":"2026-01-01T00:00:01Z","attempts":1}`), &old); err != nil {
		t.Fatal(err)
	}
	if len(old.VMs) != 2 || old.LostWorkers != nil || old.Attempts != 1 {
		t.Fatalf("an old record: %+v", old)
	}
	at := time.Date(2026, 1, 1, 0, 0, 5, 0, time.UTC)
	r := old
	r.VMs = r.VMs[:1]
	r.LostWorkers = []LostVM{{VM: VM{Name: "j-1-a1-w1", Site: "spain", Host: "spain-1"}, At: at, Reason: "host spain-1 switched"}}
	data, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	want := `"lost_workers":[{"name":"j-1-a1-w1","site":"spain","host":"spain-1","at":"2026-01-01T00:00:05Z","reason":"host spain-1 switched"}]`
	if !strings.Contains(string(data), want) {
		t.Errorf("record JSON %s, want %s", data, want)
	}
	var back Record
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(r, back); diff != "" {
		t.Errorf("record after a round trip (-want +got):\n%s", diff)
	}
}
