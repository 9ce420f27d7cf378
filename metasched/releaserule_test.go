package metasched

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	hp "github.com/metasched/metasched/hypervisorproxy"
	"github.com/metasched/metasched/metasched/calibration"
	"github.com/metasched/metasched/metasched/lifecycle"
	"github.com/metasched/metasched/selection"
)

// TestReleaseRule holds chooseReleaseLocked to the release rule: an idle
// host first, one its hypervisor's own users do not use before one they
// do; then a host that costs no work (only workers of running
// elastic jobs that keep a worker elsewhere), the fewest worker VMs lost
// first; then the old rule (fewest jobs to requeue, least work lost), with
// the elastic jobs there losing their workers; never a host whose release
// would requeue a job a switch stopped before.
func TestReleaseRule(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	// job describes a live job: "ID STATE [elastic] [preempted] [ran=S] VM@HOST ...", the
	// first VM its master; or "own HOST ...", hosts the hypervisor's own
	// users use.
	type job string
	build := func(hosts []string, jobs []job) *Daemon {
		d := &Daemon{clock: clockwork.NewFakeClockAt(t0), hv: hostBook{hosts: map[string]*gridHost{}}, jobs: jobBook{live: map[string]*liveJob{}, index: newJobIndex()},
			cal: calibration.NewBook(calibration.Config{}, "t", nil)}
		for _, h := range hosts {
			d.hv.hosts[h] = &gridHost{name: h, rec: hostRecord{Site: "solo", Pool: "render"}, inv: hp.Host{State: hp.HostReady}, reachable: true}
			d.hv.order = append(d.hv.order, h)
		}
		for _, spec := range jobs {
			f := strings.Fields(string(spec))
			if f[0] == "own" { // "own HOST...": the hypervisor's own users use them (not the agent's VMs)
				for _, h := range f[1:] {
					d.hv.hosts[h].inv.VMs = []hp.VM{{Name: "slurm-own-jobs", Host: h, State: hp.StateRunning, VCPUs: 1}}
				}
				continue
			}
			lj := newLiveJob(lifecycle.Job{ID: f[0], Type: "render", State: lifecycle.State(f[1]), Record: lifecycle.Record{Attempts: 1}},
				&selection.Job{Name: f[0]}, "", t0)
			started := t0.Add(-time.Minute)
			for _, w := range f[2:] {
				switch {
				case w == "elastic":
					lj.spec.Elastic = true
				case w == "preempted":
					lj.job.Record.Preemptions = 1
				case strings.HasPrefix(w, "ran="):
					var s int
					if _, err := fmt.Sscanf(w, "ran=%d", &s); err != nil {
						t.Fatal(err)
					}
					started = t0.Add(-time.Duration(s) * time.Second)
				default:
					name, host, _ := strings.Cut(w, "@")
					lj.job.Record.VMs = append(lj.job.Record.VMs, lifecycle.VM{Name: name, Site: "solo", Host: host, Master: len(lj.job.Record.VMs) == 0})
				}
			}
			if lj.job.State == lifecycle.Running {
				lj.job.Record.Started = started
			}
			d.addJobLocked(lj)
		}
		return d
	}
	hosts := []string{"h0", "h1", "h2", "h3"}
	cases := []struct {
		name    string
		jobs    []job
		exclude []string
		host    string
		requeue []string
		lose    []string // JOB:VM
		why     string
	}{
		{"an idle host first, even after cheaper ones in grid order",
			[]job{"e running elastic e-m@h0 e-w1@h1 e-w2@h2"}, nil, "h3", nil, nil, ""},
		{"then a host of elastic workers only: no job is requeued",
			[]job{"e running elastic e-m@h0 e-w1@h1 e-w2@h2", "n running n-m@h3"}, nil, "h1", nil, []string{"e:e-w1"}, ""},
		{"the fewest worker VMs lost among them",
			[]job{"e running elastic e-m@h0 e-w1@h1 e-w2@h1 e-w3@h2 e-w4@h3"}, nil, "h2", nil, []string{"e:e-w3"}, ""},
		{"workers of several elastic jobs on one host",
			[]job{"a running elastic a-m@h0 a-w1@h2 a-w2@h3", "b running elastic b-m@h1 b-w1@h2 b-w2@h3"},
			nil, "h2", nil, []string{"a:a-w1", "b:b-w1"}, ""},
		{"an elastic job's master host is no cheap host",
			[]job{"e running elastic e-m@h0 e-w1@h1", "n running n-m@h2 n-w1@h3"}, []string{"h1"}, "h0", []string{"e"}, nil, ""},
		{"nor its last worker's",
			[]job{"e running elastic e-m@h0 e-w1@h1", "n running n-m@h2 n-w1@h3 ran=600"}, nil, "h0", []string{"e"}, nil, ""},
		{"a job that is not elastic is requeued",
			[]job{"n running n-m@h0 n-w1@h1 n-w2@h2 n-w3@h3"}, nil, "h0", []string{"n"}, nil, ""},
		{"an elastic job not yet running is requeued",
			[]job{"e provisioning elastic e-m@h0 e-w1@h1 e-w2@h2 e-w3@h3"}, nil, "h0", []string{"e"}, nil, ""},
		{"the old rule among the rest: fewest jobs to requeue, then least work lost; the elastic workers there go",
			[]job{"e running elastic e-m@h0 e-w1@h1 e-w2@h2 e-w3@h3", "n running n-m@h1 n-w1@h2 ran=600", "o running o-m@h3 ran=900", "p running p-m@h0 ran=10"},
			nil, "h1", []string{"n"}, []string{"e:e-w1"}, ""},
		{"...so an elastic worker beside a short job",
			[]job{"e running elastic e-m@h0 e-w1@h1 e-w2@h2 e-w3@h3", "n running n-m@h1 ran=600", "o running o-m@h2 ran=30", "p running p-m@h3 ran=700", "q running q-m@h0 ran=10"},
			nil, "h2", []string{"o"}, []string{"e:e-w2"}, ""},
		{"a job a switch stopped before protects its hosts, a lost worker does not",
			[]job{"e running elastic preempted e-m@h0 e-w1@h1 e-w2@h2", "n running preempted n-m@h3 n-w1@h1"}, nil, "h2", nil, []string{"e:e-w2"}, ""},
		{"an idle host its hypervisor's own users do not use first",
			[]job{"own h0 h1"}, nil, "h2", nil, nil, ""},
		{"then one they use, before a host that costs work",
			[]job{"e running elastic e-m@h0 e-w1@h1 e-w2@h2", "own h3"}, nil, "h3", nil, nil, ""},
		{"nothing but protected jobs to requeue: refused",
			[]job{"e running elastic preempted e-m@h0 e-w1@h1", "n running preempted n-m@h2 n-w1@h3"}, nil, "", nil, nil,
			"every host of pool render that could go runs a job a switch has stopped before (4 hosts), and no job is stopped twice"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := build(hosts, tc.jobs)
			rel, why := d.chooseReleaseLocked("render", tc.exclude)
			var requeue, lose []string
			for _, j := range rel.requeue {
				requeue = append(requeue, j.id())
			}
			for _, w := range rel.lose {
				for _, vm := range w.vms {
					lose = append(lose, w.job.id()+":"+vm)
				}
				if w.attempt != 1 {
					t.Errorf("loss of %s for attempt %d, want 1", w.job.id(), w.attempt)
				}
			}
			if rel.host != tc.host || !slices.Equal(requeue, tc.requeue) || !slices.Equal(lose, tc.lose) || why != tc.why {
				t.Errorf("release %s, requeue %v, lose %v, why %q; want %s, %v, %v, %q", rel.host, requeue, lose, why, tc.host, tc.requeue, tc.lose, tc.why)
			}
		})
	}
}
