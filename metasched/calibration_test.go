package metasched_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/metasched/metasched/graph"
	hp "github.com/metasched/metasched/hypervisorproxy"
	"github.com/metasched/metasched/hypervisorproxy/image"
	"github.com/metasched/metasched/metasched"
	"github.com/metasched/metasched/metasched/api"
	"github.com/metasched/metasched/metasched/guesttest"
	"github.com/metasched/metasched/metasched/jobfile"
)

// The calibration's tests: sites whose agents are guesttest fakes that
// boot image "debian" (on libvirt's test driver below) and whose task farm
// is played by farm: its bench prints what the test says each site
// computes, its probe what each LAN and link carries.

// calGrid: site a of 3 machines and site b of 2, each of 1 core (a
// calibration VM of 1 vCPU fills its host), joined by 20 Mbit/s.
func calGrid() *graph.Grid {
	return &graph.Grid{
		Clusters: []graph.Cluster{
			{Name: "a", Machines: 3, Cores: 1, MemoryMiB: 1024, Perf: 1e9, LANMbps: 1000, UplinkMbps: 100},
			{Name: "b", Machines: 2, Cores: 1, MemoryMiB: 1024, Perf: 1e9, LANMbps: 1000, UplinkMbps: 100},
		},
		Links: []graph.Link{{Between: [2]string{"a", "b"}, Mbps: 20}},
	}
}

// farm plays the task farm program in the VMs of the calibration's sites
// and checks, at every run, that the calibration's VMs are those of one
// measurement, on hosts where no job's VM is.
type farm struct {
	mu sync.Mutex
	d  *metasched.Daemon
	// agents are the sites' agents, whose inventories check reads (the
	// daemon's view of them is as old as its last refresh).
	agents map[string]metasched.SiteAgent
	// perf is the ops/s per vCPU each site's bench prints; lan and link
	// the Mbit/s of a stream within a site and between sites.
	perf       map[string]float64
	lan        map[string]float64
	link       float64
	benchOut   map[string]hp.GuestExecStatus // a site's bench that prints this instead
	runs       []string                      // "SITE PROGRAM", in order
	times      []time.Time                   // when each ran
	violations []string
}

func newFarm() *farm {
	return &farm{perf: map[string]float64{"a": 2e8, "b": 1e8}, lan: map[string]float64{"a": 70, "b": 60}, link: 18.5,
		benchOut: map[string]hp.GuestExecStatus{}, agents: map[string]metasched.SiteAgent{}}
}

// nets are the guesttest network numbers of the sites (10.77.NET.x).
var nets = map[string]int{"a": 1, "b": 2}

// options wraps each site's agent in a guesttest site whose programs the
// farm plays.
func (f *farm) options() metasched.Options {
	return metasched.Options{WrapAgent: func(site string, a metasched.SiteAgent) metasched.SiteAgent {
		f.mu.Lock()
		f.agents[site] = a
		f.mu.Unlock()
		return &guesttest.Site{SiteAgent: a, Net: nets[site], Images: []string{"debian", "ubuntu"},
			Run: func(vm string, e hp.GuestExec) (hp.GuestExecStatus, error) { return f.run(site, vm, e), nil }}
	}}
}

// calConfig makes the daemon's configuration: one pool, farm, whose VMs
// (1 vCPU) boot debian; no policy; emulated runs of timeScale.
func calConfig(timeScale float64, cal metasched.CalibrationConfig) func(c *metasched.Config) {
	return func(c *metasched.Config) {
		c.JobTypes = []api.JobType{{Name: "farm", VCPUs: 1, MemoryMiB: 256, HoldingCost: 1, Image: "debian"}}
		c.Policy = metasched.PolicyConfig{Name: "none"}
		c.MinPoolHosts = 0
		c.Executor = metasched.ExecutorConfig{Name: "emulated", TimeScale: timeScale}
		c.Calibration = cal
	}
}

func arg(args []string, name string) string {
	i := slices.Index(args, name)
	if i < 0 || i+1 >= len(args) {
		return ""
	}
	return args[i+1]
}

// contextualize is how long the guest executor's mkdir takes in a VM of
// the farm (a guest under a CPU quota answers slowly).
const contextualize = 1500 * time.Millisecond

func (f *farm) run(site, vm string, e hp.GuestExec) hp.GuestExecStatus {
	if e.Path == "/bin/mkdir" { // the guest executor's contextualization
		time.Sleep(contextualize)
		return hp.GuestExecStatus{Exited: true}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if e.Path != image.TaskFarmPath || len(e.Args) == 0 {
		return hp.GuestExecStatus{Exited: true, ExitCode: 127, Stderr: []byte("no such program " + e.Path)}
	}
	f.runs = append(f.runs, site+" "+e.Args[0])
	f.times = append(f.times, time.Now())
	f.check(vm)
	switch e.Args[0] {
	case "bench":
		procs, err := strconv.Atoi(arg(e.Args, "--procs"))
		if err != nil {
			return hp.GuestExecStatus{Exited: true, ExitCode: 2, Stderr: []byte(err.Error())}
		}
		secs, err := strconv.ParseFloat(arg(e.Args, "--seconds"), 64)
		if err != nil {
			return hp.GuestExecStatus{Exited: true, ExitCode: 2, Stderr: []byte(err.Error())}
		}
		if st, ok := f.benchOut[site]; ok {
			return st
		}
		p := f.perf[site]
		out := fmt.Sprintf(`{"procs":%d,"seconds":%g,"ops":%g,"ops_per_second":%g,"ops_per_second_per_proc":%g}`+"\n",
			procs, secs, p*secs*float64(procs), p*float64(procs), p)
		return hp.GuestExecStatus{Exited: true, Stdout: []byte(out)}
	case "sink":
		return hp.GuestExecStatus{} // listens until its VM goes
	case "probe":
		n, err := strconv.ParseInt(arg(e.Args, "--bytes"), 10, 64)
		if err != nil {
			return hp.GuestExecStatus{Exited: true, ExitCode: 2, Stderr: []byte(err.Error())}
		}
		to, _, _ := strings.Cut(arg(e.Args, "--to"), ":")
		mbps := f.link
		if strings.HasPrefix(to, fmt.Sprintf("10.77.%d.", nets[site])) {
			mbps = f.lan[site]
		}
		secs := float64(n) * 8 / mbps / 1e6
		return hp.GuestExecStatus{Exited: true, Stdout: []byte(fmt.Sprintf(`{"bytes":%d,"seconds":%g,"mbps":%g}`+"\n", n, secs, mbps))}
	}
	return hp.GuestExecStatus{Exited: true, ExitCode: 2, Stderr: []byte("unknown command")}
}

// check notes a violation when the calibration's VMs are more than one
// measurement's (two), or share a host with a job's VM, or a job waits in
// the queue of the pool.
func (f *farm) check(vm string) {
	if f.d == nil {
		return
	}
	for _, p := range f.d.Pools() {
		if p.Queued > 0 {
			f.violations = append(f.violations, fmt.Sprintf("pool %s has %d jobs queued", p.Name, p.Queued))
		}
	}
	// The VMs as the agents have them now.
	var vms []hp.VM
	for _, a := range f.agents {
		inv, err := a.Inventory(context.Background())
		if err != nil {
			f.violations = append(f.violations, "an agent's inventory: "+err.Error())
			continue
		}
		for _, h := range inv.Hosts {
			vms = append(vms, h.VMs...)
		}
	}
	cal, byHost := 0, map[string][]hp.VM{}
	for _, v := range vms {
		byHost[v.Host] = append(byHost[v.Host], v)
		if v.Job == "calibration" {
			cal++
		}
	}
	if cal > 2 {
		f.violations = append(f.violations, fmt.Sprintf("%d calibration VMs at once", cal))
	}
	for h, vs := range byHost {
		for _, v := range vs {
			if v.Job != "calibration" && slices.ContainsFunc(vs, func(o hp.VM) bool { return o.Job == "calibration" }) {
				f.violations = append(f.violations, fmt.Sprintf("host %s has calibration VM and job %s's VM %s", h, v.Job, v.Name))
			}
		}
	}
}

func (f *farm) seen() ([]string, []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.runs), slices.Clone(f.violations)
}

// figures is the calibration's figures by key.
func figures(d *metasched.Daemon) map[string]api.CalibrationFigure {
	out := map[string]api.CalibrationFigure{}
	for _, f := range d.Calibration().Figures {
		out[f.Key] = f
	}
	return out
}

var allFigures = []string{"perf/a/debian", "lan/a", "perf/b/debian", "lan/b", "link/a/b"}

// waitMeasured waits until every figure of allFigures was measured at
// after or later.
func waitMeasured(t *testing.T, d *metasched.Daemon, after time.Time) map[string]api.CalibrationFigure {
	t.Helper()
	var figs map[string]api.CalibrationFigure
	waitFor(t, "every figure measured", 10*time.Minute, func() bool {
		figs = figures(d)
		for _, k := range allFigures {
			if f, ok := figs[k]; !ok || f.MeasuredAt.Before(after) || f.State != api.CalibrationMeasured {
				return false
			}
		}
		return true
	})
	return figs
}

// checkFigures checks the figures' values, where they were measured and
// that no calibration VM is left.
func checkFigures(t *testing.T, d *metasched.Daemon, figs map[string]api.CalibrationFigure) {
	t.Helper()
	want := map[string]float64{"perf/a/debian": 2e8, "perf/b/debian": 1e8, "lan/a": 70, "lan/b": 60, "link/a/b": 18.5}
	for k, v := range want {
		f := figs[k]
		if math.Abs(f.Value-v) > 1e-9*v || f.Error != "" {
			t.Errorf("%s: %+v, want the value %g", k, f, v)
		}
		n := 1
		if f.Kind != api.CalibrationPerf {
			n = 2
		}
		if len(f.Hosts) != n {
			t.Errorf("%s measured on hosts %v, want %d", k, f.Hosts, n)
		}
		for _, h := range f.Hosts {
			if site := strings.Split(h, "-")[0]; site != f.Site && site != f.Peer {
				t.Errorf("%s measured on host %s, of another site", k, h)
			}
		}
	}
	if f := figs["perf/a/debian"]; f.Configured != 1e9 || f.Unit != "ops/s per vCPU" || f.ConfiguredUnit != "ops/s per machine" {
		t.Errorf("perf/a/debian: configured %g %s, unit %s", f.Configured, f.ConfiguredUnit, f.Unit)
	}
	if f := figs["link/a/b"]; f.Configured != 20 || f.Peer != "b" {
		t.Errorf("link/a/b: %+v", f)
	}
	waitFor(t, "no calibration VM left", time.Minute, func() bool {
		return !slices.ContainsFunc(d.VMs(), func(v api.VM) bool { return v.Job == "calibration" })
	})
}

// TestCalibrationAtStart: a daemon whose sites boot guests measures every
// figure at its start, one measurement at a time on idle hosts; its plans
// use them and say so; the links take the VM-to-VM measurement; the
// figures are in the store and a restarted daemon plans on them at once,
// without measuring them again while they are fresh; a figure older than
// max_age is measured again.
func TestCalibrationAtStart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		dir := t.TempDir()
		fm := newFarm()
		cal := metasched.CalibrationConfig{MaxAge: 5 * time.Minute, BenchSeconds: 7, ProbeBytes: 1 << 20}
		edit := func(c *metasched.Config) {
			calConfig(0.001, cal)(c)
			c.DataDir = dir
		}
		td := startDaemonGrid(t, calGrid(), fm.options(), edit)
		d := td.d
		fm.mu.Lock()
		fm.d = d
		fm.mu.Unlock()
		start := time.Now()
		figs := waitMeasured(t, d, start)
		checkFigures(t, d, figs)
		runs, bad := fm.seen()
		if len(bad) > 0 {
			t.Errorf("the calibration broke its rules: %v", bad)
		}
		// Each perf figure: one bench; each LAN and link: a sink and a
		// probe.
		count := map[string]int{}
		for _, r := range runs {
			count[r]++
		}
		if want := map[string]int{"a bench": 1, "b bench": 1, "a sink": 1, "b sink": 2, "a probe": 2, "b probe": 1}; fmt.Sprint(count) != fmt.Sprint(want) {
			t.Errorf("programs run: %v, want %v", count, want)
		}

		// The plans use the figures: perf = 2e8 ops/s per vCPU × 1 vCPU
		// at a, LAN 70 Mbit/s; the link's measurement is VM to VM.
		pr, err := d.DryRun(ctx, jobfile.Decode([]byte("name: j\ntype: farm\ntasks: 100\ntask_ops: 1.0e9\ntask_bytes: 1.0e4\n")))
		if err != nil {
			t.Fatal(err)
		}
		if !slices.ContainsFunc(pr.Placement.Calibrated, func(s string) bool {
			return strings.HasPrefix(s, "a perf: 2e+08 ops/s (2e+08 per vCPU × 1 vCPUs, image debian) measured ") && strings.HasSuffix(s, ", 1e+09 configured")
		}) || !slices.ContainsFunc(pr.Placement.Calibrated, func(s string) bool { return strings.HasPrefix(s, "b lan: 60 Mbit/s measured ") }) {
			t.Errorf("the plan's calibrated figures: %q", pr.Placement.Calibrated)
		}
		if !strings.Contains(pr.Explanation, "calibrated a perf: 2e+08 ops/s") {
			t.Errorf("the plan's explanation does not say the measured perf:\n%s", pr.Explanation)
		}
		if l := d.Links()[0]; l.Via != "vms" || math.Abs(l.MeasuredMbps-18.5) > 1e-9 {
			t.Errorf("link after the calibration: %+v, want 18.5 Mbit/s measured VM to VM", l)
		}

		// A restart restores the figures: the plans use them at once, and
		// nothing is measured again while they are fresh.
		measuredAt := figs["perf/a/debian"].MeasuredAt
		td.stop()
		fm.mu.Lock()
		fm.d, fm.runs, fm.times = nil, nil, nil
		fm.mu.Unlock()
		td = startDaemonGrid(t, calGrid(), fm.options(), edit)
		d = td.d
		pr, err = d.DryRun(ctx, jobfile.Decode([]byte("name: j\ntype: farm\ntasks: 100\ntask_ops: 1.0e9\ntask_bytes: 1.0e4\n")))
		if err != nil {
			t.Fatal(err)
		}
		if len(pr.Placement.Calibrated) != 4 {
			t.Errorf("after a restart, the plan's calibrated figures: %q, want the perf and LAN of a and b", pr.Placement.Calibrated)
		}
		restored := figures(d)
		for _, k := range allFigures {
			if f := restored[k]; f.State != api.CalibrationMeasured || !f.MeasuredAt.Equal(figs[k].MeasuredAt) || f.Value != figs[k].Value {
				t.Errorf("%s after a restart: %+v, want it as it was: %+v", k, f, figs[k])
			}
		}
		time.Sleep(10 * time.Second)
		if runs, _ := fm.seen(); len(runs) > 0 {
			t.Errorf("a restarted daemon measured fresh figures again: %v", runs)
		}

		// Stale after max_age: measured again.
		stale := measuredAt.Add(cal.MaxAge)
		if f := figures(d)["perf/a/debian"]; !f.Due.Equal(stale) {
			t.Errorf("perf/a/debian due %v, want %v (max_age after its measurement)", f.Due, stale)
		}
		time.Sleep(time.Until(stale))
		figs = waitMeasured(t, d, stale)
		checkFigures(t, d, figs)
		if runs, _ := fm.seen(); len(runs) < 5 {
			t.Errorf("stale figures measured with %v", runs)
		}
	})
}

// TestCalibrationIdleHostsOnly: on demand, the calibration waits while the
// pool's hosts run a job and while a job of the pool is queued, and
// measures once they are idle; a calibration VM counts in capacity (a job
// submitted meanwhile waits for the host).
func TestCalibrationIdleHostsOnly(t *testing.T) {
	skipShortLong(t)
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		fm := newFarm()
		td := startDaemonGrid(t, calGrid(), fm.options(), calConfig(5, metasched.CalibrationConfig{OnDemand: true}))
		d := td.d
		fm.mu.Lock()
		fm.d = d
		fm.mu.Unlock()
		time.Sleep(5 * time.Second)
		if runs, _ := fm.seen(); len(runs) > 0 {
			t.Fatalf("auto: false, and the daemon measured at its start: %v", runs)
		}
		// Two jobs that need every host: the first runs, the second waits.
		const job = "type: farm\ntasks: 400\ntask_ops: 1.0e9\ntask_bytes: 0\n"
		j1, err := d.Submit(ctx, jobfile.Decode([]byte("name: one\n"+job)))
		if err != nil {
			t.Fatal(err)
		}
		waitFor(t, "job one running", time.Minute, func() bool {
			j, err := d.Job(ctx, j1.ID)
			if err != nil {
				t.Fatal(err)
			}
			return j.State == api.Running
		})
		j2, err := d.Submit(ctx, jobfile.Decode([]byte("name: two\n"+job)))
		if err != nil {
			t.Fatal(err)
		}
		v, err := d.Calibrate(ctx, "")
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range v.Figures {
			if f.State != api.CalibrationDue {
				t.Errorf("%s right after the request: %s, want due", f.Key, f.State)
			}
		}
		time.Sleep(10 * time.Second)
		f := figures(d)["perf/a/debian"]
		if f.State != api.CalibrationDue || !strings.Contains(f.Waiting, "waiting for an idle host") {
			t.Errorf("perf/a/debian while the hosts run a job: %+v, want due and waiting for an idle host", f)
		}
		var two api.Job
		waitFor(t, "job two done", time.Hour, func() bool {
			two, err = d.Job(ctx, j2.ID)
			if err != nil {
				t.Fatal(err)
			}
			return two.State.Terminal()
		})
		one, err := d.Job(ctx, j1.ID)
		if err != nil {
			t.Fatal(err)
		}
		if one.State != api.Done || two.State != api.Done {
			t.Fatalf("jobs: %s and %s", one.State, two.State)
		}
		var twoPlanned time.Time
		for _, tr := range two.Transitions {
			if tr.To == api.Planned {
				twoPlanned = tr.At
			}
		}
		figs := waitMeasured(t, d, twoPlanned)
		checkFigures(t, d, figs)
		fm.mu.Lock()
		for i, at := range fm.times {
			if at.Before(twoPlanned) {
				t.Errorf("%s ran at %v, before job two, queued, was planned at %v", fm.runs[i], at, twoPlanned)
			}
		}
		fm.mu.Unlock()
		if _, bad := fm.seen(); len(bad) > 0 {
			t.Errorf("the calibration broke its rules: %v", bad)
		}
	})
}

// TestCalibrationFailures: a bench that prints garbage, or fails, is an
// error in the calibration's view naming the site and the output; the
// daemon goes on, the other figures are measured, the plans keep the grid
// file's perf for the failed sites, and the failed figures are tried again
// later. Bad requests are refused naming the field.
func TestCalibrationFailures(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		fm := newFarm()
		fm.benchOut["a"] = hp.GuestExecStatus{Exited: true, Stdout: []byte("garbage, not JSON\n")}
		fm.benchOut["b"] = hp.GuestExecStatus{Exited: true, ExitCode: 3, Stderr: []byte("taskfarm: bench: --procs: must be >= 1\n")}
		td := startDaemonGrid(t, calGrid(), fm.options(), calConfig(0.001, metasched.CalibrationConfig{MaxAge: 2 * time.Minute}))
		d := td.d
		var figs map[string]api.CalibrationFigure
		waitFor(t, "every figure tried", 10*time.Minute, func() bool {
			figs = figures(d)
			n := 0
			for _, f := range figs {
				if f.State == api.CalibrationMeasured || f.State == api.CalibrationFailed {
					n++
				}
			}
			return n == len(allFigures)
		})
		a, b := figs["perf/a/debian"], figs["perf/b/debian"]
		if a.State != api.CalibrationFailed || a.Value != 0 || !strings.Contains(a.Error, "site a, VM ") ||
			!strings.Contains(a.Error, `taskfarm bench printed "garbage, not JSON\n": not its JSON line`) {
			t.Errorf("perf/a/debian: %+v, want failed naming the site and the output", a)
		}
		if b.State != api.CalibrationFailed || !strings.Contains(b.Error, "site b, VM ") ||
			!strings.Contains(b.Error, `exit code 3: stderr "taskfarm: bench: --procs: must be >= 1\n"`) {
			t.Errorf("perf/b/debian: %+v, want failed naming the site and the output", b)
		}
		if want := a.ErrorAt.Add(2 * time.Minute); !a.Due.Equal(want) {
			t.Errorf("perf/a/debian due %v, want %v (min(10m, max_age) after the failure)", a.Due, want)
		}
		for _, k := range []string{"lan/a", "lan/b", "link/a/b"} {
			if figs[k].State != api.CalibrationMeasured {
				t.Errorf("%s: %+v, want measured", k, figs[k])
			}
		}
		pr, err := d.DryRun(ctx, jobfile.Decode([]byte("name: j\ntype: farm\ntasks: 100\ntask_ops: 1.0e9\ntask_bytes: 1.0e4\n")))
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range pr.Placement.Calibrated {
			if strings.Contains(c, "perf") {
				t.Errorf("a plan uses a perf that failed: %q", c)
			}
		}
		// Fixed, it is measured at its retry.
		fm.mu.Lock()
		delete(fm.benchOut, "a")
		fm.mu.Unlock()
		time.Sleep(time.Until(a.Due))
		waitFor(t, "perf/a/debian measured again", 10*time.Minute, func() bool {
			f := figures(d)["perf/a/debian"]
			return f.State == api.CalibrationMeasured && f.Value == 2e8 && f.Error == ""
		})
		// Bad requests.
		if _, err := d.Calibrate(ctx, "mars"); err == nil || !strings.Contains(err.Error(), `site: no site "mars" (the grid's sites: a, b)`) {
			t.Errorf("calibrate mars: %v", err)
		}
	})
}

// TestCalibrationRecordsInStore: what the daemon measured is in its store
// with its time (the records the restart reads).
func TestCalibrationRecordsInStore(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fm := newFarm()
		td := startDaemonGrid(t, calGrid(), fm.options(), calConfig(0.001, metasched.CalibrationConfig{}))
		figs := waitMeasured(t, td.d, time.Time{})
		recs, err := td.d.Store().Calibrations(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range allFigures {
			var r struct {
				Value      float64   `json:"value"`
				MeasuredAt time.Time `json:"measured_at"`
			}
			if err := json.Unmarshal(recs[k], &r); err != nil || r.Value != figs[k].Value || !r.MeasuredAt.Equal(figs[k].MeasuredAt) {
				t.Errorf("%s in the store: %s (%v), want %g at %v", k, recs[k], err, figs[k].Value, figs[k].MeasuredAt)
			}
		}
	})
}

// TestCalibrationVMTakesCapacity: a calibration VM counts in capacity like
// any VM: a job submitted while it runs is planned around its host; a
// bench that does not end is given up after twice its time and two
// minutes, an error naming the site, and its VM is destroyed.
func TestCalibrationVMTakesCapacity(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		fm := newFarm()
		fm.benchOut["a"] = hp.GuestExecStatus{} // never ends
		td := startDaemonGrid(t, calGrid(), fm.options(), calConfig(0.001, metasched.CalibrationConfig{BenchSeconds: 1}))
		d := td.d
		fm.mu.Lock()
		fm.d = d
		fm.mu.Unlock()
		var calHost string
		waitFor(t, "the calibration VM", time.Minute, func() bool {
			for _, v := range d.VMs() {
				if v.Job == "calibration" {
					calHost = v.Host
				}
			}
			return calHost != ""
		})
		j, err := d.Submit(ctx, jobfile.Decode([]byte("name: j\ntype: farm\ntasks: 100\ntask_ops: 1.0e9\ntask_bytes: 0\n")))
		if err != nil {
			t.Fatal(err)
		}
		var job api.Job
		waitFor(t, "the job planned", time.Minute, func() bool {
			job, err = d.Job(ctx, j.ID)
			if err != nil {
				t.Fatal(err)
			}
			return len(job.VMs) > 0
		})
		if len(job.VMs) != 4 || slices.ContainsFunc(job.VMs, func(v api.JobVM) bool { return v.Host == calHost }) {
			t.Errorf("the job's VMs %+v: want the 4 hosts other than %s, which the calibration holds", job.VMs, calHost)
		}
		var f api.CalibrationFigure
		waitFor(t, "the bench given up", 10*time.Minute, func() bool {
			f = figures(d)["perf/a/debian"]
			return f.State == api.CalibrationFailed
		})
		if !strings.Contains(f.Error, "site a, VM cal-") || !strings.Contains(f.Error, "taskfarm bench: still running after 2m2s") {
			t.Errorf("perf/a/debian: %+v, want the bench given up, naming the site", f)
		}
		waitFor(t, "no calibration VM left", time.Minute, func() bool {
			return !slices.ContainsFunc(d.VMs(), func(v api.VM) bool { return v.Job == "calibration" })
		})
		if _, bad := fm.seen(); len(bad) > 0 {
			t.Errorf("the calibration broke its rules: %v", bad)
		}
	})
}

// TestCalibrationGivesWayToSwitch: a switch takes an idle host the
// calibration does not use first; when only the host being measured is
// left, it takes that one, the measurement is stopped (not failed), its
// VM destroyed, and the figure is due again.
func TestCalibrationGivesWayToSwitch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		fm := newFarm()
		fm.benchOut["a"] = hp.GuestExecStatus{} // never ends
		td := startDaemonGrid(t, calGrid(), fm.options(), func(c *metasched.Config) {
			calConfig(0.001, metasched.CalibrationConfig{BenchSeconds: 600})(c)
			c.JobTypes = append(c.JobTypes, api.JobType{Name: "other", VCPUs: 1, MemoryMiB: 256, HoldingCost: 1, Image: "debian"})
		})
		d := td.d
		var calHost, calVM string
		waitFor(t, "the calibration VM", time.Minute, func() bool {
			for _, v := range d.VMs() {
				if v.Job == "calibration" {
					calHost, calVM = v.Host, v.Name
				}
			}
			return calHost != ""
		})
		var taken []string
		for len(taken) < 5 && !slices.Contains(taken, calHost) {
			sv, err := d.RequestSwitch(ctx, "farm", "other")
			if err != nil {
				break
			}
			var sw api.SwitchView
			waitFor(t, "switch "+sv.ID+" over", time.Minute, func() bool {
				for _, s := range allSwitches(t, d) {
					if s.ID == sv.ID {
						sw = s
					}
				}
				return sw.Final
			})
			if sw.Phase != "done" {
				t.Fatalf("switch %s: %s (%s)", sw.ID, sw.Phase, sw.Reason)
			}
			taken = append(taken, sw.Host)
		}
		if len(taken) == 0 || taken[len(taken)-1] != calHost || slices.Index(taken, calHost) != len(taken)-1 {
			t.Fatalf("the switches took %v: want the host being measured, %s, last", taken, calHost)
		}
		t.Logf("the switches took %v; the calibration measured on %s", taken, calHost)
		// The measurement was stopped, not failed: the figure is due again
		// (and measured again on a host of the other pool, which boots
		// the same image).
		if f := figures(d)["perf/a/debian"]; (f.State != api.CalibrationDue && f.State != api.CalibrationMeasuring) || f.Error != "" {
			t.Errorf("perf/a/debian after its host was switched: %+v, want due again (or measuring) with no error", f)
		}
		log := td.log.String()
		if !strings.Contains(log, "calibration: measurement stopped") || !strings.Contains(log, "takes host "+calHost) ||
			strings.Contains(log, "calibration: measurement failed") {
			t.Errorf("the daemon's log does not say the measurement was stopped for the switch, or says it failed:\n%s", log)
		}
		if slices.ContainsFunc(d.VMs(), func(v api.VM) bool { return v.Name == calVM }) {
			t.Errorf("the stopped measurement's VM %s is left: %v", calVM, d.VMs())
		}
	})
}

// TestCalibrationAgentBack: when a site's agent answers again after it did
// not, the site's figures (and its links') are measured again; the other
// site's are not. With auto: false, nothing is measured but on demand.
func TestCalibrationAgentBack(t *testing.T) {
	for _, onDemand := range []bool{false, true} {
		t.Run(fmt.Sprintf("on demand %t", onDemand), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { calibrationAgentBack(t, onDemand) })
		})
	}
}

func calibrationAgentBack(t *testing.T, onDemand bool) {
	fm := newFarm()
	sites := map[string]*guesttest.Site{}
	opt := fm.options()
	wrap := opt.WrapAgent
	opt.WrapAgent = func(site string, a metasched.SiteAgent) metasched.SiteAgent {
		g := wrap(site, a).(*guesttest.Site)
		sites[site] = g
		return g
	}
	td := startDaemonGrid(t, calGrid(), opt, calConfig(0.001, metasched.CalibrationConfig{OnDemand: onDemand}))
	d := td.d
	if onDemand {
		if _, err := d.Calibrate(context.Background(), ""); err != nil {
			t.Fatal(err)
		}
	}
	first := waitMeasured(t, d, time.Time{})
	before, _ := fm.seen()
	sites["b"].Down.Store(true)
	waitFor(t, "site b unreachable", time.Minute, func() bool {
		for _, h := range d.Hosts() {
			if h.Site == "b" && h.State != api.HostUnreachable {
				return false
			}
		}
		return true
	})
	time.Sleep(5 * time.Second)
	sites["b"].Down.Store(false)
	back := time.Now()
	var figs map[string]api.CalibrationFigure
	if onDemand {
		waitFor(t, "site b's hosts back", time.Minute, func() bool {
			for _, h := range d.Hosts() {
				if h.Site == "b" && h.State == api.HostUnreachable {
					return false
				}
			}
			return true
		})
		time.Sleep(time.Minute)
		figs = figures(d)
		for _, k := range allFigures {
			if f := figs[k]; !f.MeasuredAt.Equal(first[k].MeasuredAt) || f.State != api.CalibrationMeasured {
				t.Errorf("%s %s, measured at %v after %v: with auto: false only what is asked for is measured", k, f.State, f.MeasuredAt, first[k].MeasuredAt)
			}
		}
		if runs, _ := fm.seen(); len(runs) != len(before) {
			t.Errorf("the calibration ran %v after site b came back", runs[len(before):])
		}
		return
	}
	waitFor(t, "site b's figures measured again", 10*time.Minute, func() bool {
		figs = figures(d)
		for _, k := range []string{"perf/b/debian", "lan/b", "link/a/b"} {
			if f := figs[k]; f.State != api.CalibrationMeasured || f.MeasuredAt.Before(back) {
				return false
			}
		}
		return true
	})
	for _, k := range []string{"perf/a/debian", "lan/a"} {
		if !figs[k].MeasuredAt.Equal(first[k].MeasuredAt) {
			t.Errorf("%s measured again at %v: its site's agent never stopped answering", k, figs[k].MeasuredAt)
		}
	}
}

// TestCalibrationNewImage: when the image a site's pools boot changes (the
// job type's image, at a restart), the new image's perf is measured at
// each site and plans use it; the LAN and link figures, fresh, are not
// measured again.
func TestCalibrationNewImage(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		fm := newFarm()
		edit := func(image string) func(c *metasched.Config) {
			return func(c *metasched.Config) {
				calConfig(0.001, metasched.CalibrationConfig{})(c)
				c.JobTypes[0].Image = image
				c.DataDir = dir
			}
		}
		td := startDaemonGrid(t, calGrid(), fm.options(), edit("debian"))
		first := waitMeasured(t, td.d, time.Time{})
		td.stop()
		fm.mu.Lock()
		fm.perf = map[string]float64{"a": 3e8, "b": 1.5e8}
		fm.runs = nil
		fm.mu.Unlock()
		td = startDaemonGrid(t, calGrid(), fm.options(), edit("ubuntu"))
		d := td.d
		var figs map[string]api.CalibrationFigure
		waitFor(t, "the new image's perf measured", 10*time.Minute, func() bool {
			figs = figures(d)
			return figs["perf/a/ubuntu"].State == api.CalibrationMeasured && figs["perf/b/ubuntu"].State == api.CalibrationMeasured
		})
		if figs["perf/a/ubuntu"].Value != 3e8 || figs["perf/b/ubuntu"].Value != 1.5e8 {
			t.Errorf("the new image's perf: %+v and %+v", figs["perf/a/ubuntu"], figs["perf/b/ubuntu"])
		}
		for _, k := range []string{"lan/a", "lan/b", "link/a/b"} {
			if !figs[k].MeasuredAt.Equal(first[k].MeasuredAt) {
				t.Errorf("%s measured again at %v: it is fresh", k, figs[k].MeasuredAt)
			}
		}
		if f, ok := figs["perf/a/debian"]; ok {
			t.Errorf("the perf of an image no pool boots now is listed: %+v", f)
		}
		if runs, _ := fm.seen(); len(runs) != 2 || runs[0] != "a bench" || runs[1] != "b bench" {
			t.Errorf("programs run after the image changed: %v, want a bench at each site", runs)
		}
		pr, err := d.DryRun(context.Background(), jobfile.Decode([]byte("name: j\ntype: farm\ntasks: 100\ntask_ops: 1.0e9\ntask_bytes: 1.0e4\n")))
		if err != nil {
			t.Fatal(err)
		}
		if !slices.ContainsFunc(pr.Placement.Calibrated, func(s string) bool {
			return strings.HasPrefix(s, "a perf: 3e+08 ops/s (3e+08 per vCPU × 1 vCPUs, image ubuntu)")
		}) {
			t.Errorf("the plan's calibrated figures: %q, want the new image's", pr.Placement.Calibrated)
		}
	})
}

// TestCalibrationStart: with the guest executor, the calibration measures
// each site's start and end (a job that does nothing, its master and a
// worker in VMs on two idle hosts of the site, run by the executor), and a
// pool's first job adds the most of its sites' to its plan's T/R.
func TestCalibrationStart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fm := newFarm()
		td := startDaemonGrid(t, calGrid(), fm.options(), func(c *metasched.Config) {
			calConfig(1, metasched.CalibrationConfig{MaxAge: time.Hour, BenchSeconds: 7, ProbeBytes: 1 << 20})(c)
			c.Executor = metasched.ExecutorConfig{Name: "guest", Poll: 100 * time.Millisecond}
		})
		d := td.d
		var figs map[string]api.CalibrationFigure
		waitFor(t, "every figure measured", 10*time.Minute, func() bool {
			figs = figures(d)
			for _, k := range append(slices.Clone(allFigures), "start/a", "start/b") {
				if f, ok := figs[k]; !ok || f.State != api.CalibrationMeasured {
					return false
				}
			}
			return true
		})
		for _, k := range []string{"start/a", "start/b"} {
			f := figs[k]
			// The worker's contextualization, then the master's.
			if f.Value < 2*contextualize.Seconds() || f.Value > 60 || f.Unit != "s" || f.ConfiguredUnit != "" || len(f.Hosts) != 2 || f.Error != "" {
				t.Errorf("%s: %+v, want at least %g s measured on two hosts", k, f, 2*contextualize.Seconds())
			}
		}
		j := submitText(t, d, "name: first\ntype: farm\ntasks: 10\ntask_ops: 1.0e8\ntask_bytes: 1.0e3\ncommand: [/bin/sh, -c, 'exit 0']\n")
		waitFor(t, "the job done", 10*time.Minute, func() bool { return stateOf(t, d, j.ID).State == api.Done })
		j = stateOf(t, d, j.ID)
		most := 0.0
		for _, v := range j.VMs {
			most = max(most, figs["start/"+v.Site].Value)
		}
		if most == 0 || j.StartEndS != most || math.Abs(j.PredictedS-(j.Placement.Plan.Runtime+most)) > 1e-9 {
			t.Errorf("the first job: predicted %g s, %g s of it to start and end; want its T/R %g s and the most of its sites' start figures, %g s",
				j.PredictedS, j.StartEndS, j.Placement.Plan.Runtime, most)
		}
		if !strings.Contains(j.Transitions[1].Reason, "to start and end, as the calibration measured it at ") {
			t.Errorf("the plan's reason does not say whence its start and end: %q", j.Transitions[1].Reason)
		}
	})
}
