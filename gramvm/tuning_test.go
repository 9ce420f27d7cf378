package gramvm_test

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/metasched/metasched/gramvm"
	"github.com/metasched/metasched/graph"
	"github.com/metasched/metasched/selection"
)

var approx = cmpopts.EquateApprox(1e-9, 1e-9)

// tuneGrid: a small cluster "home" with a fast uplink and a larger
// cluster "far" behind a slow 10 Mbit/s uplink. Every machine runs at
// 1e9 ops/s; LANs are 1000 Mbit/s = 1.25e8 bytes/s.
func tuneGrid() *graph.Grid {
	return &graph.Grid{
		Clusters: []graph.Cluster{
			{Name: "home", Machines: 4, Cores: 4, MemoryMiB: 8192, Perf: 1e9, LANMbps: 1000, UplinkMbps: 1000},
			{Name: "far", Machines: 8, Cores: 4, MemoryMiB: 8192, Perf: 1e9, LANMbps: 1000, UplinkMbps: 10},
		},
		Links: []graph.Link{{Between: [2]string{"home", "far"}, Mbps: 1000}},
	}
}

// scenario is a running job on tuneGrid and a new job arriving.
type scenario struct {
	s       *gramvm.Service
	newJob  *selection.Job
	free    map[string][]string
	hosts   []gramvm.HostCapacity
	running []gramvm.RunningJob
}

// newScenario: the running job (ID = name) has its master on home-0 and
// six workers on far-0..far-5, VMs of 2 vCPUs and 4096 MiB on hosts of 4
// CPUs and 8192 MiB, so each of those hosts has room for one more of its
// VMs (2 vCPUs, 4096 MiB free) but not for the new job's 4-vCPU VM. Its
// tasks take 4e9 ops (4 s on one machine) and exchange taskBytes.
//
// Its plan (master forced on home): far gets b = min(B = 1000, uplink 10,
// share of home's uplink 1000) Mbit/s = 10 Mbit/s = 1.25e6 bytes/s; its 6
// free machines all work (the uplink would feed ⌊1.25e6·4e9/(0.8·Comm·1e9)⌋
// ≥ 7), rate = min(6·1e9/4e9, 1.25e6/Comm) = 1.5 tasks/s for the Comm used
// here (≤ 8e5).
//
// The new job "fresh" (type render like the running one) has tasks of
// 1e9 ops (1 s) exchanging 5e4 bytes, VM 4 vCPUs, and the free hosts
// home-1..3 and far-6, far-7.
func newScenario(t *testing.T, name string, taskBytes float64, newTasks int, remaining float64) scenario {
	t.Helper()
	s, err := gramvm.New(tuneGrid(), 0)
	if err != nil {
		t.Fatal(err)
	}
	job := &selection.Job{Name: name, Type: "render", Tasks: 1000, TaskOps: 4e9, TaskBytes: taskBytes, Efficiency: 0.8,
		VM: selection.VM{VCPUs: 2, MemoryMiB: 4096}}
	far := []string{"far-0", "far-1", "far-2", "far-3", "far-4", "far-5"}
	pl, err := s.Plan(context.Background(), job, map[string][]string{"home": {"home-0"}, "far": far}, selection.Options{Master: 0})
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(pl.Plan.Rate-1.5) > 1e-12 || len(pl.Workers) != 6 || pl.Master.Host != "home-0" {
		t.Fatalf("running job's placement = %+v", pl)
	}
	vms := []gramvm.TunableVM{{Name: name + "-m", Site: "home", Host: "home-0", VCPUs: 2, MemoryMiB: 4096}}
	for i, h := range far {
		vms = append(vms, gramvm.TunableVM{Name: fmt.Sprintf("%s-w%d", name, i), Site: "far", Host: h, VCPUs: 2, MemoryMiB: 4096})
	}
	var hosts []gramvm.HostCapacity
	for i := range 4 {
		h := gramvm.HostCapacity{Site: "home", Host: fmt.Sprintf("home-%d", i), CPUs: 4, MemoryMiB: 8192, FreeVCPUs: 4, FreeMemoryMiB: 8192}
		if i == 0 {
			h.FreeVCPUs, h.FreeMemoryMiB = 2, 4096
		}
		hosts = append(hosts, h)
	}
	for i := range 8 {
		h := gramvm.HostCapacity{Site: "far", Host: fmt.Sprintf("far-%d", i), CPUs: 4, MemoryMiB: 8192, FreeVCPUs: 4, FreeMemoryMiB: 8192}
		if i < 6 {
			h.FreeVCPUs, h.FreeMemoryMiB = 2, 4096
		}
		hosts = append(hosts, h)
	}
	return scenario{
		s: s,
		newJob: &selection.Job{Name: "fresh", Type: "render", Tasks: newTasks, TaskOps: 1e9, TaskBytes: 5e4, Efficiency: 0.8,
			VM: selection.VM{VCPUs: 4, MemoryMiB: 4096}},
		free:    map[string][]string{"home": {"home-1", "home-2", "home-3"}, "far": {"far-6", "far-7"}},
		hosts:   hosts,
		running: []gramvm.RunningJob{{ID: name, Job: job, Placement: pl, RemainingTasks: remaining, VMs: vms}},
	}
}

func (sc scenario) tune(t *testing.T, opt gramvm.TuneOptions) []gramvm.TuningDecision {
	t.Helper()
	ds, err := sc.s.Tune(context.Background(), sc.newJob, sc.free, sc.hosts, sc.running, opt)
	if err != nil {
		t.Fatal(err)
	}
	return ds
}

// migration4G is the time to move a 4096 MiB VM over a 1000 Mbit/s LAN:
// 4096·2^20 bytes / 1.25e8 bytes/s = 34.359738368 s.
const migration4G = 4096.0 * (1 << 20) / 1.25e8

var ignoreReason = cmpopts.IgnoreFields(gramvm.TuningDecision{}, "Reason")

// The communication-heavy running job (Comm = 8e5 bytes, 600 tasks left)
// holds six of far's eight hosts and 9.6 of its 10 Mbit/s.
//
// Now: the new job's best plan has its master on home, 2 workers on home's
// LAN (2 tasks/s) and 1 on far (1 task/s, see TestPlanLoaded): R = 3,
// T/R = 1200/3 = 400 s, in whole tasks 404 s (VMs of 4 vCPUs, 4 s a task;
// far's worker takes an input a second, its 4th slot starting at 4 s).
// (Master on far: 1 LAN worker and 1 home worker fed by far's 0.4 Mbit/s:
// R = 2.) The running job: 600/1.5 = 400 s (its remaining tasks at its
// rate: bandwidth tuning's loss stays fluid).
//
// Consolidating k = 1 pair (MaxPerLink 2 allows k ≤ 2; the pairs are
// far-1 → far-0, far-3 → far-2, far-5 → far-4):
//   - the running job's far compute is 4 full + 2 half workers = 5
//     machines: rate min(5·1e9/4e9, 1.25e6/8e5) = min(1.25, 1.5625) = 1.25
//     tasks/s; 600/1.25 = 480 s, loss 80 s;
//   - its traffic is 1.25·8e5 = 1e6 bytes/s = 8 Mbit/s: far's uplink keeps
//     2 Mbit/s = 2.5e5 bytes/s, and far-1 is free: far has 3 free hosts,
//     6 machines free in all, so at most 5 workers of 1 task/s: R = 5 (home
//     master, 2 home workers, far ⌊2.5e5·2.5e-5⌋ = 6 ≥ 3 workers at
//     min(3, 5) tasks/s), T/R = 240 s; in whole tasks far's 12 slots take
//     an input every 0.2 s, the 12th's last ends at 2.4 + 240 = 242.4 s:
//     gain 404 − 242.4 = 161.6 s;
//   - migration: 4096 MiB over 1000 Mbit/s = 34.36 s;
//   - net = 161.6 − 80 − 34.36 = 47.24 s > 0.
//
// k = 2: rate 1.0 (loss 600 − 400 = 200 s), 6.4 Mbit/s, 4 free on far,
// R = 6, T/R = 200 s (gain about 200 s), migration 68.72 s: net about
// −68 s. So k = 1, accepted.
func TestTuneConsolidatesCommunicationHeavyJob(t *testing.T) {
	sc := newScenario(t, "heavy", 8e5, 1200, 600)
	got := sc.tune(t, gramvm.TuneOptions{})
	want := []gramvm.TuningDecision{{
		NewJob: "fresh", Target: "heavy", Action: gramvm.ActionConsolidate, Cluster: "far",
		Moves:       []gramvm.Move{{VM: "heavy-w1", Site: "far", From: "far-1", To: "far-0"}},
		GainSeconds: 161.6, LossSeconds: 80, MigrationSeconds: migration4G,
		NewJobSecondsBefore: 404, NewJobSecondsAfter: 242.4, TargetSecondsBefore: 400, TargetSecondsAfter: 480,
		Accepted: true,
	}}
	if diff := cmp.Diff(want, got, approx, ignoreReason); diff != "" {
		t.Fatalf("decisions (-want +got):\n%s", diff)
	}
	if d := got[0]; !(d.GainSeconds > d.LossSeconds+d.MigrationSeconds) {
		t.Errorf("accepted with gain %g <= loss %g + migration %g", d.GainSeconds, d.LossSeconds, d.MigrationSeconds)
	}
	for _, s := range []string{"1 pair(s)", "frees 1 host(s)", "1.6 Mbit/s", "gains 161.6 s", "more than heavy loses (80 s)"} {
		if !strings.Contains(got[0].Reason, s) {
			t.Errorf("reason %q does not say %q", got[0].Reason, s)
		}
	}
}

// The compute-heavy running job (Comm = 1e3 bytes) moves only 1.5e3
// bytes/s = 0.012 Mbit/s: far's uplink is nearly all the new job's.
//
// Now: 5 free machines (home-1..3, far-6, far-7), 4 workers of 1 task/s
// (the master takes one; every bandwidth feeds ≥ 31 workers): R = 4, T/R
// = 1200/4 = 300 s; in whole tasks far's 8 slots take an input every
// 5e4/1.2485e6 = 0.04 s, the 8th's last ending at 300.32 s. Far is limited
// by its free machines, and the running job (same type) holds hosts there.
//
// Consolidating 1 pair: its rate falls to min(5·0.25, 1.25e6/1e3) = 1.25,
// 600/1.25 − 600/1.5 = 480 − 400 = 80 s lost; far-1 frees one host: R = 5,
// T/R = 240 s (12 far slots: 240.48 s), gain 59.84 s; migration 34.36 s:
// net 59.84 − 80 − 34.36 < 0.
// 2 pairs: loss 200 s, R = 6, gain 100 s, migration 68.72 s: worse. So
// the best is k = 1, rejected.
func TestTuneRejectsComputeHeavyJob(t *testing.T) {
	sc := newScenario(t, "crunch", 1e3, 1200, 600)
	got := sc.tune(t, gramvm.TuneOptions{})
	want := []gramvm.TuningDecision{{
		NewJob: "fresh", Target: "crunch", Action: gramvm.ActionConsolidate, Cluster: "far",
		Moves:       []gramvm.Move{{VM: "crunch-w1", Site: "far", From: "far-1", To: "far-0"}},
		GainSeconds: 300.3203844613536 - 240.48048048048048, LossSeconds: 80, MigrationSeconds: migration4G,
		NewJobSecondsBefore: 300.3203844613536, NewJobSecondsAfter: 240.48048048048048, TargetSecondsBefore: 400, TargetSecondsAfter: 480,
		Accepted: false,
	}}
	if diff := cmp.Diff(want, got, approx, ignoreReason); diff != "" {
		t.Fatalf("decisions (-want +got):\n%s", diff)
	}
	if !strings.Contains(got[0].Reason, "gains 59.84 s") || !strings.Contains(got[0].Reason, "not more than crunch loses (80 s)") {
		t.Errorf("reason = %q", got[0].Reason)
	}
}

// TestTuneCaps uses a longer new job (2400 tasks) and a running job with
// 150 tasks left, where two pairs are better than one. Now: 12 slots of 4
// s a task, 200 rounds, far's 4th slot ending at 4 + 800 = 804 s.
//   - k = 1: 20 slots, 120 rounds, far's 12th at 2.4 + 480 = 482.4 s: gain
//     321.6 s, loss 150/1.25 − 150/1.5 = 20 s, migration 34.36 s: net
//     267.24 s;
//   - k = 2: R = 6 with the master on far (3 far workers on its LAN, 3
//     home ones fed by far's 3.6 Mbit/s, an input every 1/9 s): 100
//     rounds, home's 12th slot ending at 12/9 + 400 = 401.33 s, sooner
//     than 16/9 + 400 with the master on home: gain 402.67 s, loss 150/1 −
//     100 = 50 s, migration 68.72 s: net 283.95 s.
func TestTuneCaps(t *testing.T) {
	const capsGain2 = 804 - (12.0/9 + 400)
	sc := newScenario(t, "heavy", 8e5, 2400, 150)
	one := []gramvm.Move{{VM: "heavy-w1", Site: "far", From: "far-1", To: "far-0"}}
	two := append(slices.Clone(one), gramvm.Move{VM: "heavy-w3", Site: "far", From: "far-3", To: "far-2"})
	for _, tc := range []struct {
		name     string
		opt      gramvm.TuneOptions
		moves    []gramvm.Move
		net      float64
		accepted bool
		reason   string
	}{
		{"defaults", gramvm.TuneOptions{}, two, capsGain2 - 50 - 2*migration4G, true, ""},
		{"one in flight on the LAN", gramvm.TuneOptions{InFlight: map[string]int{gramvm.LANKey("far"): 1}},
			one, 804 - 482.4 - 20 - migration4G, true, ""},
		{"LAN full", gramvm.TuneOptions{InFlight: map[string]int{gramvm.LANKey("far"): 2}},
			nil, 0, false, "no migration can start on far's LAN: 2 in flight, at most 2 at a time"},
		{"a wider LAN cap", gramvm.TuneOptions{MaxPerLink: 4, InFlight: map[string]int{gramvm.LANKey("far"): 2}},
			two, capsGain2 - 50 - 2*migration4G, true, ""},
		{"far-0 migrating", gramvm.TuneOptions{InFlight: map[string]int{"far-0": 1}},
			[]gramvm.Move{{VM: "heavy-w2", Site: "far", From: "far-2", To: "far-1"}, {VM: "heavy-w4", Site: "far", From: "far-4", To: "far-3"}},
			capsGain2 - 50 - 2*migration4G, true, ""},
		{"far-0 migrating, two per host", gramvm.TuneOptions{MaxPerHost: 2, InFlight: map[string]int{"far-0": 1}},
			two, capsGain2 - 50 - 2*migration4G, true, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ds := sc.tune(t, tc.opt)
			if len(ds) != 1 {
				t.Fatalf("%d decisions, want 1: %+v", len(ds), ds)
			}
			d := ds[0]
			if diff := cmp.Diff(tc.moves, d.Moves); diff != "" {
				t.Errorf("moves (-want +got):\n%s", diff)
			}
			if net := d.GainSeconds - d.LossSeconds - d.MigrationSeconds; d.Accepted != tc.accepted || math.Abs(net-tc.net) > 1e-6 {
				t.Errorf("accepted %v with net %g, want %v with %g; %s", d.Accepted, net, tc.accepted, tc.net, d.Reason)
			}
			if tc.reason != "" && d.Reason != tc.reason {
				t.Errorf("reason = %q, want %q", d.Reason, tc.reason)
			}
			maxPerHost := max(tc.opt.MaxPerHost, 1)
			touches := map[string]int{}
			for h, n := range tc.opt.InFlight {
				touches[h] = n
			}
			for _, m := range d.Moves {
				touches[m.From]++
				touches[m.To]++
			}
			for h, n := range touches {
				if !strings.HasPrefix(h, "lan:") && n > maxPerHost {
					t.Errorf("host %s in %d migrations, cap %d", h, n, maxPerHost)
				}
			}
			if lan := tc.opt.InFlight[gramvm.LANKey("far")] + len(d.Moves); lan > max(tc.opt.MaxPerLink, 2) {
				t.Errorf("%d migrations on far's LAN", lan)
			}
		})
	}
}

// TestTuneShrink: in the scenario of TestTuneConsolidatesCommunicationHeavyJob
// with vCPU unplug on far. Halving far-0's VM to 1 vCPU halves its speed:
// 5.5 machines, rate min(5.5·0.25, 1.5625) = 1.375 tasks/s, 600/1.375 =
// 436.36 s (loss 36.36 s), traffic 1.375·8e5 = 1.1e6 bytes/s = 8.8 Mbit/s.
// Far's uplink keeps 1.2 Mbit/s = 1.5e5 bytes/s, worth ⌊3.75⌋ = 3 ≥ 2
// workers, so both free far hosts work (a host with 3 free vCPUs still
// cannot take the new 4-vCPU VM): R = 2 + 2 = 4, T/R = 300 s; in whole
// tasks far's 8 slots take an input every 1/3 s, the 8th's last ending at
// 8/3 + 300 = 302.67 s: gain 101.33 s, no migration: net 64.97 s. Halving
// two: rate 1.25, loss 80 s, the same gain: net 21.33 s; more is worse.
// Shrinking one beats consolidating one pair (net 47.24 s), and both are
// accepted.
func TestTuneShrink(t *testing.T) {
	sc := newScenario(t, "heavy", 8e5, 1200, 600)
	onFar := func(site string) bool { return site == "far" }
	got := sc.tune(t, gramvm.TuneOptions{CanShrink: onFar})
	want := []gramvm.TuningDecision{{
		NewJob: "fresh", Target: "heavy", Action: gramvm.ActionShrink, Cluster: "far",
		Shrinks:     []gramvm.Shrink{{VM: "heavy-w0", Site: "far", Host: "far-0", VCPUs: 1}},
		GainSeconds: 404 - (8.0/3 + 300), LossSeconds: 600/1.375 - 400, MigrationSeconds: 0,
		NewJobSecondsBefore: 404, NewJobSecondsAfter: 8.0/3 + 300, TargetSecondsBefore: 400, TargetSecondsAfter: 600 / 1.375,
		Accepted: true,
	}, {
		NewJob: "fresh", Target: "heavy", Action: gramvm.ActionConsolidate, Cluster: "far",
		Moves:       []gramvm.Move{{VM: "heavy-w1", Site: "far", From: "far-1", To: "far-0"}},
		GainSeconds: 161.6, LossSeconds: 80, MigrationSeconds: migration4G,
		NewJobSecondsBefore: 404, NewJobSecondsAfter: 242.4, TargetSecondsBefore: 400, TargetSecondsAfter: 480,
		Accepted: true,
	}}
	if diff := cmp.Diff(want, got, approx, ignoreReason); diff != "" {
		t.Fatalf("decisions (-want +got):\n%s", diff)
	}
	if !strings.Contains(got[1].Reason, "not chosen: to shrink heavy on far nets 64.97 s") {
		t.Errorf("the second decision's reason = %q", got[1].Reason)
	}
	// No vCPU unplug (the QEMU driver): no shrink.
	for _, opt := range []gramvm.TuneOptions{{}, {CanShrink: func(string) bool { return false }}} {
		for _, d := range sc.tune(t, opt) {
			if d.Action == gramvm.ActionShrink || len(d.Shrinks) > 0 {
				t.Errorf("a shrink without vCPU unplug: %+v", d)
			}
		}
	}
}

func TestTuneDeterministic(t *testing.T) {
	sc := newScenario(t, "heavy", 8e5, 1200, 600)
	second := sc.running[0]
	second.ID, second.RemainingTasks = "another", 300
	sc.running = append(sc.running, second) // the same VMs, another ID
	opt := gramvm.TuneOptions{CanShrink: func(string) bool { return true }, MaxPerLink: 3}
	a, b := sc.tune(t, opt), sc.tune(t, opt)
	if diff := cmp.Diff(a, b); diff != "" {
		t.Errorf("two calls differ (-first +second):\n%s", diff)
	}
	if len(a) != 4 {
		t.Errorf("%d decisions, want a consolidation and a shrink per job", len(a))
	}
}

func TestTuneNothingToDo(t *testing.T) {
	sc := newScenario(t, "heavy", 8e5, 1200, 600)
	// A new job of another type whose VM fits nowhere the running job
	// is: nothing limits it that the running job's traffic crosses.
	sc.newJob.Type = "batch"
	sc.free = map[string][]string{"home": {"home-1", "home-2", "home-3"}}
	s, err := gramvm.New(&graph.Grid{
		Clusters: append(tuneGrid().Clusters, graph.Cluster{Name: "alone", Machines: 2, Cores: 4, MemoryMiB: 8192, Perf: 1e9, LANMbps: 1000, UplinkMbps: 1000}),
		Links:    append(tuneGrid().Links, graph.Link{Between: [2]string{"home", "alone"}, Mbps: 1000}),
	}, 0)
	if err != nil {
		t.Fatal(err)
	}
	sc.s = s
	// home's LAN feeds its 2 workers; "alone" has nothing free.
	if ds := sc.tune(t, gramvm.TuneOptions{}); len(ds) != 0 {
		t.Errorf("decisions = %+v, want none", ds)
	}
	// No plan for the new job: no decisions, and no error.
	sc.free = map[string][]string{}
	if ds := sc.tune(t, gramvm.TuneOptions{}); len(ds) != 0 {
		t.Errorf("no plan: decisions = %+v, want none", ds)
	}
}

func TestTuneBadInput(t *testing.T) {
	sc := newScenario(t, "heavy", 8e5, 1200, 600)
	ctx := context.Background()
	dup := append(slices.Clone(sc.running), sc.running[0])
	lost := slices.Clone(sc.running)
	lost[0].VMs = append(slices.Clone(lost[0].VMs), gramvm.TunableVM{Name: "x", Site: "mars", Host: "m-0", VCPUs: 1})
	for name, call := range map[string]func() error{
		"no new job": func() error {
			_, err := sc.s.Tune(ctx, nil, sc.free, sc.hosts, sc.running, gramvm.TuneOptions{})
			return err
		},
		"duplicate IDs": func() error {
			_, err := sc.s.Tune(ctx, sc.newJob, sc.free, sc.hosts, dup, gramvm.TuneOptions{})
			return err
		},
		"unknown site": func() error {
			_, err := sc.s.Tune(ctx, sc.newJob, sc.free, sc.hosts, lost, gramvm.TuneOptions{})
			return err
		},
		"negative cap": func() error {
			_, err := sc.s.Tune(ctx, sc.newJob, sc.free, sc.hosts, sc.running, gramvm.TuneOptions{MaxPerLink: -1})
			return err
		},
		"host twice": func() error {
			_, err := sc.s.Tune(ctx, sc.newJob, sc.free, append(slices.Clone(sc.hosts), sc.hosts[0]), sc.running, gramvm.TuneOptions{})
			return err
		},
		"usage of an unknown site": func() error {
			_, err := gramvm.Usage(tuneGrid(), lost)
			return err
		},
	} {
		if err := call(); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := sc.s.Tune(cancelled, sc.newJob, sc.free, sc.hosts, sc.running, gramvm.TuneOptions{}); err == nil {
		t.Error("cancelled: no error")
	}
}
