package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	hp "github.com/metasched/metasched/hypervisorproxy"
	hpclient "github.com/metasched/metasched/hypervisorproxy/client"
	"github.com/metasched/metasched/metasched/api"
	"github.com/metasched/metasched/metasched/client"
	"github.com/metasched/metasched/metasched/lab"
)

// The grid of TestGuestTuning, a lab (package metasched/lab): three sites
// of QEMU hosts (each a root libvirtd, 2 CPUs as this machine has), one
// agent per site and the daemon, all the real binary, with the guest
// executor. home (one host, slower machines) and far (two hosts) are well
// connected; side (two hosts) is, for the model, behind a 1 Mbit/s
// uplink, too slow for a communication-heavy job (no uplink is shaped:
// the scenario's jobs only sleep, and the grid file alone decides). VMs
// are created with one vCPU and 128 MiB of headroom (and 256 MiB of
// memory: the bundled image's kernel, booted able to take more memory,
// panicked in 128 MiB, "System is deadlocked on memory").
var tuningSites = []lab.Site{
	{Name: "home", Hosts: 1, Perf: 8e8, LANMbps: 1000, Cores: 2, MemoryMiB: 4096},
	{Name: "far", Hosts: 2, Perf: 1e9, LANMbps: 1000, Cores: 2, MemoryMiB: 4096},
	{Name: "side", Hosts: 2, Perf: 1e9, LANMbps: 1000, Cores: 2, MemoryMiB: 4096},
}

const tuningGrid = `clusters:
  - {name: home, machines: 1, cores: 2, memory_mib: 4096, perf: 8.0e8, lan_mbps: 1000, uplink_mbps: 1000}
  - {name: far, machines: 2, cores: 2, memory_mib: 4096, perf: 1.0e9, lan_mbps: 1000, uplink_mbps: 1000}
  - {name: side, machines: 2, cores: 2, memory_mib: 4096, perf: 1.0e9, lan_mbps: 1000, uplink_mbps: 1}
links:
  - {between: [home, far], mbps: 1000, latency_ms: 1}
  - {between: [home, side], mbps: 1000, latency_ms: 1}
`

// startTuningGrid starts the grid of TestGuestTuning; everything stops
// when the test ends, by PID.
func startTuningGrid(t *testing.T) *guestGrid {
	t.Helper()
	l := startGuestLab(t, lab.Spec{
		Sites: tuningSites,
		Pools: []lab.Pool{{Name: "farm", VCPUs: 1, MemoryMiB: 256, Image: "guest"}},
		// The calibration measures only on demand: the tuning's hosts and
		// migrations are the test's alone.
		Serve: "vm_headroom: {vcpus: 1, memory_mib: 128}\ncalibration: {auto: false}\n",
		Grid:  tuningGrid,
	}, nil)
	return &guestGrid{t: t, lab: l, dir: l.Dir(), c: l.Client}
}

// TestGuestTuning: bandwidth tuning and resizes on booted guests, through
// remote agents on QEMU, with the real binary.
//
// A communication-heavy job runs with its master on home and a worker on
// each of far's hosts (side's uplink is too slow for it); each of its VMs
// takes one of its host's two CPUs. A new job of the same pool, whose VMs
// take two CPUs, then has only side's hosts. Consolidating the running
// job's two workers on one far host pays (the model's gain exceeds its
// loss and the migration; the site cannot shrink, as its agent says): the
// worker live-migrates (its QEMU process moves to the other host, and it
// goes on running), the new job waits for it, and is planned after it on
// what it freed, with a VM on the host the migration emptied. The record
// has the migration's measured time and, once the new job has ended, its
// measured gain. Then the running job's master is grown live through the
// daemon (one more vCPU, 128 MiB more: the guest sees both), taking a
// vCPU out is refused as QEMU cannot, and a growth its host has no room
// for is refused before the agent is asked.
func TestGuestTuning(t *testing.T) {
	if testing.Short() {
		t.Skip("boots guests")
	}
	g := startTuningGrid(t)
	ctx := context.Background()

	heavy := g.submit("name: heavy\ntype: farm\ntasks: 30\ntask_ops: 4.0e9\ntask_bytes: 8.0e5\nwalltime: 30m\ncommand: [/bin/sh, -c, 'sleep 1800']\n")
	h := g.waitState(heavy.ID, 10*time.Minute, api.Running, api.Failed, api.Cancelled)
	if h.State != api.Running {
		t.Fatalf("heavy job %s: %s (%s)", h.ID, h.State, h.Reason)
	}
	t.Logf("heavy job running: %s", h.Explanation)
	onFar := map[string]string{}
	for _, v := range h.VMs {
		if v.Site == "far" && !v.Master {
			onFar[v.Host] = v.Name
		}
	}
	if len(onFar) != 2 {
		t.Fatalf("the heavy job's VMs are %+v: want a worker on each of far's hosts (the scenario's premise)", h.VMs)
	}

	fresh := g.submit("name: fresh\ntype: farm\ntasks: 200\ntask_ops: 1.0e9\ntask_bytes: 1.0e3\nvm: {vcpus: 2, memory_mib: 256}\nwalltime: 30m\ncommand: [/bin/sh, -c, 'sleep 5']\n")
	var chosen api.TuningRecord
	g.eventually(5*time.Minute, "a tuning chosen for the fresh job", func(ctx context.Context) (string, bool) {
		recs, err := g.c.Tuning(ctx)
		if err != nil {
			return err.Error(), false
		}
		var notes []string
		for _, r := range recs {
			if r.NewJobID == fresh.ID && r.Accepted && r.Outcome != "not chosen" {
				chosen = r
				return "", true
			}
			notes = append(notes, fmt.Sprintf("#%d %s: %s", r.Seq, r.Outcome, r.Reason))
		}
		j, err := g.job(ctx, fresh.ID)
		if err != nil {
			t.Fatal(err)
		}
		return fmt.Sprintf("fresh %s (%s); tuning: %s", j.State, j.Reason, strings.Join(notes, "; ")), false
	})
	t.Logf("tuning #%d: %s", chosen.Seq, chosen.Reason)
	if chosen.Action != "consolidate" || len(chosen.Moves) != 1 || !strings.Contains(chosen.Reason, "no shrink weighed on far") {
		t.Fatalf("chosen %+v: want one live migration on far, saying that far's QEMU hosts cannot shrink", chosen)
	}
	move := chosen.Moves[0]

	f := g.waitState(fresh.ID, 10*time.Minute, api.Running, api.Done, api.Failed, api.Cancelled)
	if f.State == api.Failed || f.State == api.Cancelled {
		t.Fatalf("fresh job %s: %s (%s)", f.ID, f.State, f.Reason)
	}
	var rec api.TuningRecord
	g.eventually(time.Minute, "the tuning's record carried out", func(ctx context.Context) (string, bool) {
		recs, err := g.c.Tuning(ctx)
		if err != nil {
			return err.Error(), false
		}
		for _, r := range recs {
			if r.Seq == chosen.Seq {
				rec = r
			}
		}
		return rec.Outcome, rec.Outcome == "carried out"
	})
	if len(rec.Migrations) != 1 || !rec.Migrations[0].Live || rec.Migrations[0].Seconds <= 0 || rec.MigrationS <= 0 {
		t.Errorf("migrations %+v, %g s in all: want one live migration, measured", rec.Migrations, rec.MigrationS)
	}
	t.Logf("migration of %s %s → %s: %.2f s by its agent, %.2f s in all (%.2f s predicted), downtime %.0f ms",
		move.VM, move.From, move.To, rec.Migrations[0].Seconds, rec.MigrationS, rec.MigrationSeconds, rec.Migrations[0].DowntimeMs)
	for _, tr := range f.Transitions {
		if tr.To == api.Planned && tr.At.Before(rec.Ended) {
			t.Errorf("the fresh job was planned at %s, before the tuning ended at %s", tr.At, rec.Ended)
		}
	}
	onFreed := false
	for _, v := range f.VMs {
		onFreed = onFreed || v.Host == move.From
	}
	if !onFreed {
		t.Errorf("the fresh job's VMs are %+v: want one on %s, which the migration emptied", f.VMs, move.From)
	}
	// The migrated worker's QEMU process moved, and the guest goes on.
	if pids, err := g.lab.Libvirt[move.From].GuestPIDs(); err != nil || pids[move.VM] != 0 {
		t.Errorf("QEMU of %s still on %s: %v, %v", move.VM, move.From, pids, err)
	}
	if pids, err := g.lab.Libvirt[move.To].GuestPIDs(); err != nil || pids[move.VM] == 0 {
		t.Errorf("no QEMU of %s on %s: %v, %v", move.VM, move.To, pids, err)
	}
	if st := guestExec(t, g.lab.Agents["far"].Client, move.VM, "echo still here"); strings.TrimSpace(st) != "still here" {
		t.Errorf("the migrated guest answered %q", st)
	}
	if h, err := g.job(ctx, heavy.ID); err != nil || h.State != api.Running {
		t.Errorf("heavy job after the migration: %s, %v: want it running", h.State, err)
	}

	// The new job ends done: the record has its measured gain.
	g.waitState(fresh.ID, 10*time.Minute, api.Done)
	g.eventually(time.Minute, "the new job's gain measured", func(ctx context.Context) (string, bool) {
		recs, err := g.c.Tuning(ctx)
		if err != nil {
			return err.Error(), false
		}
		for _, r := range recs {
			if r.Seq == chosen.Seq && r.Measured != nil && r.Measured.NewJobState == "done" {
				m := r.Measured
				t.Logf("new job: predicted %.1f s before the tuning (gain %.1f s predicted), measured %.1f s: a gain of %.1f s (its command only sleeps: the figure shows the bookkeeping, not the model)",
					m.NewJobPredictedS, m.PredictedGainS, m.NewJobMeasuredS, m.NewJobGainS)
				return "", m.NewJobMeasuredS > 0
			}
		}
		return "not yet", false
	})

	// A live resize of the heavy job's master through the daemon and the
	// remote agent of home.
	var master api.JobVM
	for _, v := range h.VMs {
		if v.Master {
			master = v
		}
	}
	seen := func() (cpus, kib int) {
		f := strings.Fields(guestExec(t, g.lab.Agents["home"].Client, master.Name,
			"grep -c ^processor /proc/cpuinfo; sed -n 's/^MemTotal: *\\([0-9]*\\) kB/\\1/p' /proc/meminfo"))
		if len(f) != 2 {
			t.Fatalf("the guest answered %q", f)
		}
		var err error
		cpus, err = strconv.Atoi(f[0])
		if err != nil {
			t.Fatal(err)
		}
		kib, err = strconv.Atoi(f[1])
		if err != nil {
			t.Fatal(err)
		}
		return cpus, kib
	}
	cpus0, kib0 := seen()
	vm, err := g.c.ResizeVM(ctx, heavy.ID, master.Name, api.ResizeRequest{VCPUs: 2, MemoryMiB: 384})
	if err != nil {
		t.Fatal(err)
	}
	if vm.VCPUs != 2 || vm.MemoryMiB != 384 || vm.MaxVCPUs != 2 || vm.MaxMemoryMiB != 384 {
		t.Errorf("after the resize the master is %+v: want 2 vCPUs and 384 MiB, its maxima", vm)
	}
	cpus1, kib1 := seen()
	t.Logf("the master grown live through the remote agent: the guest saw %d processors and %d KiB, now %d and %d", cpus0, kib0, cpus1, kib1)
	if cpus0 != 1 || cpus1 != 2 {
		t.Errorf("processors in the guest: %d before, %d after; want 1 and 2", cpus0, cpus1)
	}
	if grew := kib1 - kib0; grew < 120<<10 || grew > 136<<10 {
		t.Errorf("the guest's memory grew by %d KiB, want about 128 MiB", grew)
	}
	_, err = g.c.ResizeVM(ctx, heavy.ID, master.Name, api.ResizeRequest{VCPUs: 1})
	var re *client.RemoteError
	if !errors.As(err, &re) || re.Status != 409 || !strings.Contains(err.Error(), "not supported") {
		t.Errorf("taking a vCPU out of a QEMU guest: %v; want 409, not supported", err)
	} else {
		t.Logf("shrink refused: %v", err)
	}
	// The far host that holds both workers has no CPU left for a growth.
	_, err = g.c.ResizeVM(ctx, heavy.ID, move.VM, api.ResizeRequest{VCPUs: 2})
	if !errors.As(err, &re) || re.Status != 409 || !strings.Contains(err.Error(), "host "+move.To+" has 0 vCPUs") {
		t.Errorf("growing a worker on the full host %s: %v; want 409 naming its free vCPUs", move.To, err)
	}

	if _, err := g.c.Cancel(ctx, heavy.ID); err != nil {
		t.Fatal(err)
	}
	g.nothingLeft()
}

// guestExec runs a shell command in a VM through its site's agent and
// returns its standard output.
func guestExec(t *testing.T, c *hpclient.Client, vm, script string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	p, err := c.GuestExec(ctx, vm, hp.GuestExec{Path: "/bin/sh", Args: []string{"-c", script}, CaptureOutput: true})
	if err != nil {
		t.Fatalf("guest exec in %s: %v", vm, err)
	}
	for {
		st, err := c.GuestExecStatus(ctx, vm, p.PID)
		if err != nil {
			t.Fatalf("guest exec status in %s: %v", vm, err)
		}
		if st.Exited {
			return string(st.Stdout)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
