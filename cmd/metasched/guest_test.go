package main

import (
	"context"
	"flag"
	"fmt"
	"maps"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/metasched/metasched/gramvm/taskfarm"
	"github.com/metasched/metasched/graph"
	hp "github.com/metasched/metasched/hypervisorproxy"
	"github.com/metasched/metasched/hypervisorproxy/image"
	"github.com/metasched/metasched/metasched"
	"github.com/metasched/metasched/metasched/api"
	"github.com/metasched/metasched/metasched/client"
	"github.com/metasched/metasched/metasched/lab"
	"github.com/metasched/metasched/selection"
)

// The grid of the tests that run jobs inside booted guests, a lab (package
// metasched/lab): two sites, a and b, whose bridges are joined through
// the lab's wan, each site's uplink shaped to 20 Mbit/s, in a network
// namespace of their own; three root libvirtds in it (hosts a-1 and a-2
// of site a, b-1 of site b); the bundled guest image; one agent per site
// and the daemon, both the real binary, the daemon with the guest
// executor. Every VM is 1 vCPU and 128 MiB; every host holds one VM of a
// job.

// guestGridSites are the sites of the guest grid, as the grid file says
// of them: one core and 1 GiB per machine, 1e9 operations/s, a gigabit
// LAN and a 20 Mbit/s uplink (the link between a and b).
var guestGridSites = []lab.Site{
	{Name: "a", Hosts: 2, UplinkMbit: 20, Perf: 1e9, LANMbps: 1000, Cores: 1, MemoryMiB: 1024},
	{Name: "b", Hosts: 1, UplinkMbit: 20, Perf: 1e9, LANMbps: 1000, Cores: 1, MemoryMiB: 1024},
}

// guestGrid is a running lab and the test that checks it.
type guestGrid struct {
	t   *testing.T // the (sub)test that checks
	lab *lab.Lab
	dir string         // the lab's directory
	c   *client.Client // the daemon's client, renewed when it restarts
}

// buildGuestImage builds the bundled guest image with the task farm into
// dir/image, beside the lab's files, and returns it.
func buildGuestImage(t testing.TB, dir, taskfarm string) *image.Image {
	t.Helper()
	res, err := image.Build(context.Background(), image.Options{Out: filepath.Join(dir, "image"), TaskFarm: taskfarm})
	if err != nil {
		t.Fatalf("image: %v", err)
	}
	t.Logf("guest image: kernel %s", res.Image.KernelRelease)
	return res.Image
}

// startGuestLab starts a lab of the real binary whose pools boot the
// bundled image ("guest", in dir/image) or the images extra adds to dir
// (from the bundled one); everything stops when the test ends, by PID,
// after the end of every log is printed if the test failed.
func startGuestLab(tb testing.TB, spec lab.Spec, extra func(img *image.Image, dir string) map[string]string) *lab.Lab {
	tb.Helper()
	if err := lab.Check(); err != nil {
		tb.Fatal(err)
	}
	// The task farm beside the daemon's program, as make build puts it:
	// the image's, and the one the calibration copies onto Slurm nodes.
	bin, dir := buildBinary(tb), tb.TempDir()
	img := buildGuestImage(tb, dir, buildTaskFarm(tb, filepath.Dir(bin)))
	spec.Images = map[string]string{"guest": filepath.Join(dir, "image")}
	if extra != nil {
		maps.Copy(spec.Images, extra(img, dir))
	}
	return lab.StartT(tb, spec, lab.Options{Binary: bin, Dir: dir})
}

// startGuestGrid starts the grid of TestGuestGrid.
func startGuestGrid(t *testing.T) *guestGrid {
	t.Helper()
	spec := lab.Spec{
		Sites: guestGridSites,
		Pools: []lab.Pool{{Name: "farm", VCPUs: 1, MemoryMiB: 128, Image: "guest"},
			{Name: "broken", VCPUs: 1, MemoryMiB: 128, Image: "broken"}},
		// The calibration measures only on demand (its own subtest asks
		// for it): the other tests count and check the jobs' VMs alone.
		Serve: "calibration: {auto: false, bench_seconds: 2, probe_bytes: 4194304}\n",
	}
	// An image whose kernel panics (its initramfs is junk): it never boots.
	broken := func(img *image.Image, dir string) map[string]string {
		out := filepath.Join(dir, "image-broken")
		if _, err := img.CopyTo(out, map[string][]byte{"initrd.img": []byte(strings.Repeat("not an initramfs\n", 1000))}); err != nil {
			t.Fatal(err)
		}
		return map[string]string{"broken": out}
	}
	l := startGuestLab(t, spec, broken)
	return &guestGrid{t: t, lab: l, dir: l.Dir(), c: l.Client}
}

// startAgent runs a site's agent again and waits until it answers.
func (g *guestGrid) startAgent(site string) {
	g.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := g.lab.StartAgent(ctx, g.lab.Agents[site]); err != nil {
		g.t.Fatal(err)
	}
}

// killAgent ends a site's agent with SIGKILL.
func (g *guestGrid) killAgent(site string) {
	g.t.Helper()
	g.lab.Agents[site].Proc.Kill()
	g.t.Logf("agent %s killed (SIGKILL)", site)
}

// startDaemon runs the daemon again and renews the client.
func (g *guestGrid) startDaemon() {
	g.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := g.lab.StartDaemon(ctx); err != nil {
		g.t.Fatal(err)
	}
	g.c = g.lab.Client
}

// killDaemon ends the daemon with SIGKILL.
func (g *guestGrid) killDaemon() {
	g.t.Helper()
	g.lab.Daemon.Kill()
	g.t.Log("daemon killed (SIGKILL)")
}

// eventually polls cond (each call bounded to 30 s) until it holds, and
// fails the test with cond's last note after limit. The limits are bounds
// against a hang, far above what anything takes here.
func (g *guestGrid) eventually(limit time.Duration, what string, cond func(context.Context) (string, bool)) {
	g.t.Helper()
	deadline := time.Now().Add(limit)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		note, ok := cond(ctx)
		cancel()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			g.t.Fatalf("%s: not after %s: %s", what, limit, note)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// submit submits a job file.
func (g *guestGrid) submit(job string) api.Job {
	g.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	j, err := g.c.Submit(ctx, []byte(job))
	if err != nil {
		g.t.Fatalf("submit: %v", err)
	}
	return j
}

// job reads a job.
func (g *guestGrid) job(ctx context.Context, id string) (api.Job, error) { return g.c.Job(ctx, id) }

// waitState waits until the job is in one of the states, and returns it.
func (g *guestGrid) waitState(id string, limit time.Duration, states ...api.State) api.Job {
	g.t.Helper()
	var j api.Job
	g.eventually(limit, "job "+id+" in "+fmt.Sprint(states), func(ctx context.Context) (string, bool) {
		var err error
		if j, err = g.job(ctx, id); err != nil {
			return err.Error(), false
		}
		return fmt.Sprintf("%s (%s)", j.State, j.Reason), slices.Contains(states, j.State)
	})
	return j
}

// logs is the job's log.
func (g *guestGrid) jobLog(id string) string {
	g.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b, err := g.c.Logs(ctx, id)
	if err != nil {
		g.t.Fatal(err)
	}
	return string(b)
}

// nothingLeft checks, eventually, that no domain, QEMU process, VM or
// address is left on the grid.
func (g *guestGrid) nothingLeft() {
	g.t.Helper()
	g.eventually(2*time.Minute, "nothing left", func(ctx context.Context) (string, bool) {
		var left []string
		for h, d := range g.lab.Libvirt {
			pids, err := d.GuestPIDs()
			if err != nil || len(pids) > 0 {
				left = append(left, fmt.Sprintf("QEMU on %s: %v %v", h, pids, err))
			}
		}
		for _, a := range g.lab.Agents {
			inv, err := a.Client.Inventory(ctx)
			if err != nil {
				left = append(left, fmt.Sprintf("agent %s: %v", a.Site, err))
				continue
			}
			for _, h := range inv.Hosts {
				for _, v := range h.VMs {
					left = append(left, fmt.Sprintf("vm %s on %s (%s)", v.Name, h.Name, v.Address))
				}
			}
			vms, addrs, err := hp.RecordedVMs(filepath.Join(g.dir, "agent-"+a.Site))
			if err != nil || len(vms) > 0 || len(addrs) > 0 {
				left = append(left, fmt.Sprintf("agent %s record: %v %v %v", a.Site, vms, addrs, err))
			}
		}
		return strings.Join(left, "; "), len(left) == 0
	})
}

// helloJob is the example job examples/job-hello-guests.yaml, named
// name: in every VM its command prints the guest's kernel, host name and
// address and its role; each worker listens on TCP port 7000, and the
// master connects to every worker by its name (from the hostfile), then
// sleeps for sleep seconds and exits with exit.
func helloJob(t *testing.T, name string, sleep, exit int) string {
	t.Helper()
	b, err := os.ReadFile(example + "job-hello-guests.yaml")
	if err != nil {
		t.Fatal(err)
	}
	job := strings.Replace(string(b), "name: hello-guests\n", "name: "+name+"\n", 1)
	return job + fmt.Sprintf("    sleep %d\n    exit %d\n", sleep, exit)
}

// The example files of a grid that runs jobs inside its VMs are valid.
func TestExampleGuestFiles(t *testing.T) {
	for _, f := range []string{"serve-guests.yaml", "job-hello-guests.yaml", "job-taskfarm-guests.yaml", "job-mpi-guests.yaml"} {
		data, err := os.ReadFile(example + f)
		if err != nil {
			t.Fatal(err)
		}
		if f == "serve-guests.yaml" {
			if _, err := metasched.ParseConfig(example+f, data); err != nil {
				t.Error(err)
			}
			continue
		}
		j, err := selection.ParseJob(example+f, data)
		if err != nil {
			t.Error(err)
			continue
		}
		// The task farm's job runs the image's program and keeps its
		// summary.
		if f == "job-taskfarm-guests.yaml" && (!slices.Equal(j.Command, []string{"taskfarm", "run"}) ||
			!slices.Equal(j.Outputs, []string{taskfarm.SummaryFile}) || j.Type != "farm") {
			t.Errorf("%s: command %q, outputs %q, type %s", f, j.Command, j.Outputs, j.Type)
		}
	}
	data, err := os.ReadFile(example + "grid-guests.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := graph.ParseGrid("grid-guests.yaml", data); err != nil {
		t.Error(err)
	}
}

// hostRelease is the kernel release of this machine.
func hostRelease(t *testing.T) string {
	b, err := os.ReadFile("/proc/sys/kernel/osrelease")
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// checkHello checks the log of a helloJob: every VM of the job printed
// the guest's kernel (not the host's), its own name and an address of
// its site's range, and the master connected to every worker by name.
func (g *guestGrid) checkHello(j api.Job, log string) {
	t := g.t
	t.Helper()
	img, err := image.Load(filepath.Join(g.dir, "image"))
	if err != nil {
		t.Fatal(err)
	}
	if img.KernelRelease == hostRelease(t) {
		t.Fatalf("the guest kernel %s is the host's: the test cannot tell them apart", img.KernelRelease)
	}
	sites := map[string]bool{}
	for _, v := range j.VMs {
		sites[v.Site] = true
		line := ""
		for _, l := range strings.Split(log, "\n") {
			if strings.Contains(l, "vm="+v.Name+" ") {
				line = l
			}
		}
		if line == "" {
			t.Errorf("the log has no line of vm %s", v.Name)
			continue
		}
		role := "worker"
		if v.Master {
			role = "master"
		}
		for _, want := range []string{v.Name, "kernel=" + img.KernelRelease + " ", "role=" + role, "job=" + j.ID} {
			if !strings.Contains(line, want) {
				t.Errorf("vm %s: line %q does not say %q", v.Name, line, want)
			}
		}
		if !g.inSiteRange(v.Site, line) {
			t.Errorf("vm %s: line %q does not say an address of site %s's range", v.Name, line, v.Site)
		}
		if !strings.HasPrefix(line, v.Name) {
			t.Errorf("vm %s: line %q is not prefixed with the VM's name", v.Name, line)
		}
		if !v.Master && !strings.Contains(log, "connected to "+v.Name+" by name") {
			t.Errorf("the master did not connect to %s by name", v.Name)
		}
	}
	if len(j.VMs) < 3 || !sites["a"] || !sites["b"] {
		t.Errorf("the job ran on %d VMs of sites %v, want 3 or more on both sites", len(j.VMs), sites)
	}
}

// inSiteRange says whether a helloJob's line says an address (address=IP/BITS)
// within the range the lab gives the site's VMs.
func (g *guestGrid) inSiteRange(site, line string) bool {
	first, last, ok := g.lab.Addresses(site)
	_, rest, found := strings.Cut(line, " address=")
	if !ok || !found {
		return false
	}
	field, _, _ := strings.Cut(rest, " ")
	p, err := netip.ParsePrefix(field)
	if err != nil {
		return false
	}
	a := p.Addr()
	return a.Compare(first) >= 0 && a.Compare(last) <= 0
}

// checkTaskFarm checks the summary a task-farm job's master kept as its
// output: every task done once, by the job's worker VMs, each named
// with its site and its one process.
func (g *guestGrid) checkTaskFarm(j api.Job, tasks int) {
	t := g.t
	t.Helper()
	s := g.summary(j)
	if s.Tasks != tasks || s.Done != tasks || s.Duplicates != 0 {
		t.Errorf("summary: %d of %d tasks done, %d duplicates", s.Done, s.Tasks, s.Duplicates)
	}
	workers := map[string]string{}
	for _, v := range j.VMs {
		if !v.Master {
			workers[v.Name] = v.Site
		}
	}
	for _, w := range s.Workers {
		if site, ok := workers[w.Name]; !ok || w.Site != site || w.Procs != 1 || w.Lost {
			t.Errorf("worker %+v: the job's workers are %v (1 vCPU each)", w, workers)
		}
	}
	if len(s.Workers) != len(workers) {
		t.Errorf("the summary has %d workers, the job %d", len(s.Workers), len(workers))
	}
}

// summary is the task-farm summary a job kept, checked to add up.
func (g *guestGrid) summary(j api.Job) *taskfarm.Summary {
	t := g.t
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	data, err := g.c.Output(ctx, j.ID, taskfarm.SummaryFile)
	if err != nil {
		t.Fatal(err)
	}
	s, err := taskfarm.ParseSummary(data)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("summary: %s", data)
	return s
}

// elasticTasks is the elastic task farm's tasks in TestGuestGrid: enough
// to lose a worker midway (a switch takes a few seconds; the job's
// workers do about a task a second each); make soak runs 150.
var elasticTasks = flag.Int("elastic-tasks", 60, "TestGuestGrid: the elastic task farm's tasks (make soak: 150)")

// elasticFarmJob is the example task-farm job made long enough to lose a
// worker midway, and worth a worker on every host: tasks of 1e8
// operations (0.1 s at the grid file's 1e9 operations/s, about 0.4 s in a
// TCG guest) and 4 KiB, so that the 20 Mbit/s link feeds a worker at site
// b too.
func elasticFarmJob(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(example + "job-taskfarm-guests.yaml")
	if err != nil {
		t.Fatal(err)
	}
	job := strings.NewReplacer("name: taskfarm-guests\n", "name: elastic-farm\n", "tasks: 200\n", fmt.Sprintf("tasks: %d\n", *elasticTasks),
		"task_ops: 5.0e6\n", "task_ops: 1.0e8\n", "task_bytes: 65536\n", "task_bytes: 4096\n").Replace(string(b))
	if !strings.Contains(job, "elastic: true") || !strings.Contains(job, "task_ops: 1.0e8") {
		t.Fatalf("the example job changed:\n%s", job)
	}
	return job
}

// waitWorkersJoined waits until the job runs and its task-farm master has
// every worker VM of the job, and returns the job.
func (g *guestGrid) waitWorkersJoined(id string) api.Job {
	g.t.Helper()
	var j api.Job
	g.eventually(10*time.Minute, "job "+id+" running, every worker joined its master", func(ctx context.Context) (string, bool) {
		var err error
		if j, err = g.job(ctx, id); err != nil {
			return err.Error(), false
		}
		if j.State.Terminal() {
			g.t.Fatalf("job %s ended: %s (%s)", id, j.State, j.Reason)
		}
		if j.State != api.Running {
			return string(j.State), false
		}
		log, err := g.c.Logs(ctx, id)
		if err != nil {
			return err.Error(), false
		}
		joined := 0
		for line := range strings.Lines(string(log)) {
			if strings.Contains(line, "a worker VM joined") {
				joined++
			}
		}
		return fmt.Sprintf("%d of %d worker VMs joined", joined, len(j.VMs)-1), joined == len(j.VMs)-1
	})
	return j
}

// checkFigure checks a measured figure against bounds far outside what
// this machine gives, against a figure of the wrong unit or a probe that
// measured nothing: the lab's links are shaped to 20 Mbit/s on the
// Ethernet frames, its LANs are bridges.
func checkFigure(t *testing.T, f api.CalibrationFigure) {
	t.Helper()
	switch f.Kind {
	case api.CalibrationPerf:
		if f.Value < 1e6 || f.Value > 1e11 {
			t.Errorf("%s: %g ops/s per vCPU", f.Key, f.Value)
		}
	case api.CalibrationLink:
		if f.Value < 2 || f.Value > 20 {
			t.Errorf("%s: %g Mbit/s through a link shaped to 20", f.Key, f.Value)
		}
	case api.CalibrationLAN:
		if f.Value < 20 {
			t.Errorf("%s: %g Mbit/s between two machines on one bridge", f.Key, f.Value)
		}
	case api.CalibrationStart: // contextualization, starts, a poll
		if f.Value < 0.01 || f.Value > 300 {
			t.Errorf("%s: %g s to start and end a job that does nothing", f.Key, f.Value)
		}
	}
}

// TestGuestGrid runs jobs inside booted guests on two sites, each case on
// the same grid (one set of daemons; each job boots its own VMs).
func TestGuestGrid(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: boots QEMU guests; make test runs it")
	}
	// Parallel: the package's longest tests run two at a time once its
	// other tests are done (the QEMU one beside one that boots no guest),
	// each with processes, directories and ports of its own.
	t.Parallel()
	g := startGuestGrid(t)

	t.Run("calibration on demand", func(t *testing.T) {
		g.t = t
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if _, err := g.c.Calibrate(ctx, ""); err != nil {
			t.Fatal(err)
		}
		var cal api.Calibration
		g.eventually(10*time.Minute, "every figure measured", func(ctx context.Context) (string, bool) {
			var err error
			if cal, err = g.c.Calibration(ctx); err != nil {
				return err.Error(), false
			}
			for _, f := range cal.Figures {
				if f.State == api.CalibrationFailed {
					t.Fatalf("%s failed: %s", f.Key, f.Error)
				}
				if f.State != api.CalibrationMeasured {
					return f.Key + " " + f.State, false
				}
			}
			return "no figures", len(cal.Figures) > 0
		})
		kinds := map[string]int{}
		for _, f := range cal.Figures {
			t.Logf("%s: %.4g %s (grid file: %.4g %s)", f.Key, f.Value, f.Unit, f.Configured, f.ConfiguredUnit)
			kinds[f.Kind]++
			checkFigure(t, f)
			if f.Kind == api.CalibrationStart {
				if want := map[string]int{"a": 2, "b": 1}[f.Site]; len(f.Hosts) != want {
					t.Errorf("%s measured on %v, want %d hosts", f.Key, f.Hosts, want)
				}
			}
		}
		if kinds[api.CalibrationPerf] != 2 || kinds[api.CalibrationLAN] != 1 || kinds[api.CalibrationLink] != 1 || kinds[api.CalibrationStart] != 2 {
			t.Errorf("figures by kind %v: want the perf and start of both sites, site a's LAN (b has one host) and the link", kinds)
		}
		job, err := os.ReadFile(example + "job-taskfarm-guests.yaml")
		if err != nil {
			t.Fatal(err)
		}
		// A context of its own: the calibration took what it took.
		pctx, pcancel := context.WithTimeout(context.Background(), time.Minute)
		defer pcancel()
		res, err := g.c.Plan(pctx, job)
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Placement.Calibrated) == 0 {
			t.Errorf("a plan after the calibration uses none of its figures:\n%s", res.Explanation)
		}
		t.Logf("a plan on the calibrated figures:\n%s", res.Explanation)
		g.nothingLeft()
	})

	t.Run("across sites", func(t *testing.T) {
		g.t = t
		start := time.Now()
		j := g.submit(helloJob(t, "hello", 0, 0))
		j = g.waitState(j.ID, 10*time.Minute, api.Done, api.Failed, api.Cancelled)
		log := g.jobLog(j.ID)
		t.Logf("job %s %s after %.1f s (%s); log:\n%s", j.ID, j.State, time.Since(start).Seconds(), j.Reason, log)
		if j.State != api.Done {
			t.Fatalf("job %s: %s (%s)", j.ID, j.State, j.Reason)
		}
		g.checkHello(j, log)
		g.nothingLeft()
	})

	t.Run("task farm", func(t *testing.T) {
		g.t = t
		job, err := os.ReadFile(example + "job-taskfarm-guests.yaml")
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		j := g.submit(string(job))
		j = g.waitState(j.ID, 10*time.Minute, api.Done, api.Failed, api.Cancelled)
		t.Logf("job %s %s after %.1f s (%s); log:\n%s", j.ID, j.State, time.Since(start).Seconds(), j.Reason, g.jobLog(j.ID))
		if j.State != api.Done {
			t.Fatalf("job %s: %s (%s)", j.ID, j.State, j.Reason)
		}
		g.checkTaskFarm(j, 200)
		g.nothingLeft()
	})

	t.Run("cancel", func(t *testing.T) {
		g.t = t
		j := g.submit(helloJob(t, "cancel-me", 900, 0))
		g.waitConnected(j.ID)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if _, err := g.c.Cancel(ctx, j.ID); err != nil {
			t.Fatal(err)
		}
		j = g.waitState(j.ID, 3*time.Minute, api.Cancelled)
		t.Logf("cancelled: %s", j.Reason)
		g.nothingLeft()
	})

	t.Run("daemon killed and restarted", func(t *testing.T) {
		g.t = t
		j := g.submit(helloJob(t, "outlives-the-daemon", 20, 0))
		g.waitConnected(j.ID)
		g.killDaemon()
		g.startDaemon()
		g.doneOnce(j.ID, true)
	})

	t.Run("agent killed and restarted", func(t *testing.T) {
		g.t = t
		j := g.submit(helloJob(t, "outlives-an-agent", 20, 0))
		j = g.waitConnected(j.ID)
		site := "b"
		for _, v := range j.VMs {
			if v.Master {
				site = v.Site // the master's agent: the one the job's end is read through
			}
		}
		g.killAgent(site)
		time.Sleep(2 * time.Second)
		g.startAgent(site)
		g.doneOnce(j.ID, true)
	})

	t.Run("live migration of a running guest", func(t *testing.T) {
		g.t = t
		// Long enough to outlast a migration and the daemon's next look
		// on a loaded machine: a job that ended keeps its last hosts.
		j := g.submit(helloJob(t, "moves", 45, 0))
		t.Cleanup(func() { g.cancelIfFailed(t, j.ID) })
		j = g.waitConnected(j.ID)
		var vm api.JobVM
		for _, v := range j.VMs {
			if v.Site == "a" {
				vm = v
			}
		}
		to := "a-1"
		if vm.Host == "a-1" {
			to = "a-2"
		}
		g.logHosts("a")
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		m, err := g.lab.Agents["a"].Client.Migrate(ctx, vm.Name, to)
		if err != nil {
			t.Fatalf("migrate %s to %s: %v", vm.Name, to, err)
		}
		t.Logf("migrated %s %s -> %s live=%v in %.2f s, downtime %.0f ms, %.0f MiB", vm.Name, m.From, m.To, m.Live, m.Seconds, m.DowntimeMs, m.DataMiB)
		if !m.Live {
			t.Errorf("the migration was not live: %+v", m)
		}
		// The daemon's view follows the move.
		g.eventually(time.Minute, "the daemon sees "+vm.Name+" on "+to, func(ctx context.Context) (string, bool) {
			j, err := g.job(ctx, j.ID)
			if err != nil {
				return err.Error(), false
			}
			for _, v := range j.VMs {
				if v.Name == vm.Name {
					return v.Host, v.Host == to
				}
			}
			return "no such vm", false
		})
		g.doneOnce(j.ID, false)
	})

	// A switch takes a host of the running job's: the job is requeued
	// and runs again on the hosts left. Then, with a second host switched,
	// a job of the pool whose image does not boot fails at its third
	// attempt, leaving nothing; the hosts go back to their pool.
	t.Run("elastic task farm loses a worker's host to a switch", func(t *testing.T) {
		g.t = t
		j := g.submit(elasticFarmJob(t))
		t.Cleanup(func() { g.cancelIfFailed(t, j.ID) })
		j = g.waitWorkersJoined(j.ID)
		first := j.Attempts
		var masterHost string
		workers := map[string]string{} // VM → host
		for _, v := range j.VMs {
			if v.Master {
				masterHost = v.Host
			} else {
				workers[v.Name] = v.Host
			}
		}
		if len(workers) < 2 {
			t.Fatalf("job %s runs %d workers, want 2 (one to lose, one to go on): %+v", j.ID, len(workers), j.VMs)
		}
		g.switchHost("farm", "broken") // every host is busy: it takes a worker's, the job's master's is last
		j = g.waitState(j.ID, 10*time.Minute, api.Done, api.Failed, api.Cancelled)
		t.Logf("job %s %s (%s); log:\n%s", j.ID, j.State, j.Reason, g.jobLog(j.ID))
		if j.State != api.Done || j.Attempts != first {
			t.Fatalf("job %s: %s after %d attempts (%s), want done in its attempt %d", j.ID, j.State, j.Attempts, j.Reason, first)
		}
		if len(j.LostWorkers) != 1 || workers[j.LostWorkers[0].Name] == "" || j.LostWorkers[0].Host == masterHost {
			t.Fatalf("lost workers %+v, want one of %v", j.LostWorkers, workers)
		}
		lost := j.LostWorkers[0].Name
		s := g.summary(j)
		if s.Done != s.Tasks || s.Duplicates != 0 {
			t.Errorf("summary: %d of %d tasks done, %d duplicates", s.Done, s.Tasks, s.Duplicates)
		}
		for _, w := range s.Workers {
			if (w.Name == lost) != w.Lost {
				t.Errorf("worker %+v: lost %t, want %t", w, w.Lost, w.Name == lost)
			}
		}
		t.Logf("worker %s lost on host %s; %d tasks given again; tasks per site: %v", lost, j.LostWorkers[0].Host, s.Reissued, s.TasksBySite())
		g.switchHost("broken", "farm")
		g.nothingLeft()
	})

	t.Run("pool switch, and an image that does not boot", func(t *testing.T) {
		g.t = t
		j := g.submit(helloJob(t, "preempted", 600, 0))
		j = g.waitConnected(j.ID)
		first := j.Attempts
		g.switchHost("farm", "broken")
		g.eventually(10*time.Minute, "job "+j.ID+" running again", func(ctx context.Context) (string, bool) {
			var err error
			if j, err = g.job(ctx, j.ID); err != nil {
				return err.Error(), false
			}
			return fmt.Sprintf("%s after %d attempts (%s)", j.State, j.Attempts, j.Reason), j.Attempts > first && j.State == api.Running
		})
		j = g.waitConnected(j.ID)
		t.Logf("job %s runs again after the switch, on %d VMs", j.ID, len(j.VMs))
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if _, err := g.c.Cancel(ctx, j.ID); err != nil {
			t.Fatal(err)
		}
		g.waitState(j.ID, 3*time.Minute, api.Cancelled)

		g.switchHost("farm", "broken") // a job needs two hosts: a master's and a worker's
		b := g.submit(strings.Replace(helloJob(t, "never-boots", 0, 0), "type: farm", "type: broken", 1))
		b = g.waitState(b.ID, 10*time.Minute, api.Done, api.Failed, api.Cancelled)
		t.Logf("job %s: %s (%s) after %d attempts", b.ID, b.State, b.Reason, b.Attempts)
		if b.State != api.Failed || !strings.Contains(b.Reason, "provisioning failed 3 times") || !strings.Contains(b.Reason, "its kernel panicked") {
			t.Errorf("job %s of the pool whose image does not boot: %s (%s), want failed after 3 provisioning failures", b.ID, b.State, b.Reason)
		}
		g.switchHost("broken", "farm")
		g.switchHost("broken", "farm")
		g.nothingLeft()
	})
}

// switchHost asks the daemon to move a host from one pool to another and
// waits until the switch is over.
func (g *guestGrid) switchHost(from, to string) {
	g.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sw, err := g.c.RequestSwitch(ctx, from, to)
	if err != nil {
		g.t.Fatalf("switch a host from %s to %s: %v", from, to, err)
	}
	g.eventually(5*time.Minute, "switch "+string(sw.ID)+" over", func(ctx context.Context) (string, bool) {
		l, err := g.c.Switches(ctx, client.SwitchesQuery{})
		if err != nil {
			return err.Error(), false
		}
		for _, s := range l.Switches {
			if s.ID == sw.ID {
				return fmt.Sprintf("%s %s", s.Phase, s.Host), s.Final
			}
		}
		return "not listed", false
	})
	g.t.Logf("switch %s: a host from %s to %s", sw.ID, from, to)
}

// waitConnected waits until the job runs and its master has connected to
// every worker (its commands run in every VM), and returns the job.
func (g *guestGrid) waitConnected(id string) api.Job {
	g.t.Helper()
	var j api.Job
	g.eventually(10*time.Minute, "job "+id+" running, its master connected to every worker", func(ctx context.Context) (string, bool) {
		var err error
		if j, err = g.job(ctx, id); err != nil {
			return err.Error(), false
		}
		if j.State.Terminal() {
			g.t.Fatalf("job %s ended: %s (%s)", id, j.State, j.Reason)
		}
		if j.State != api.Running {
			return string(j.State), false
		}
		log, err := g.c.Logs(ctx, id)
		if err != nil {
			return err.Error(), false
		}
		for _, v := range j.VMs {
			if !v.Master && !strings.Contains(string(log), "connected to "+v.Name+" by name") {
				return "waiting for the master to reach " + v.Name, false
			}
		}
		return "", true
	})
	return j
}

// doneOnce waits for the end of a helloJob, which must be done after one
// attempt with its log whole (and, with once, none of its lines twice),
// and checks that nothing is left of it.
func (g *guestGrid) doneOnce(id string, once bool) {
	g.t.Helper()
	j := g.waitState(id, 5*time.Minute, api.Done, api.Failed, api.Cancelled)
	log := g.jobLog(j.ID)
	if j.State != api.Done || j.Attempts != 1 {
		g.t.Fatalf("job %s: %s (%s) after %d attempts, want done after 1; log:\n%s", j.ID, j.State, j.Reason, j.Attempts, log)
	}
	g.checkHello(j, log)
	if once {
		g.onceEach(j, log)
	}
	g.nothingLeft()
}

// cancelIfFailed cancels a job of a failed subtest t and waits for it to
// end, so that the next subtests find the grid's hosts free.
func (g *guestGrid) cancelIfFailed(t *testing.T, id string) {
	if !t.Failed() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if _, err := g.c.Cancel(ctx, id); err != nil {
		t.Logf("cancel %s after the failure: %v", id, err)
	}
	for ctx.Err() == nil {
		if j, err := g.job(ctx, id); err == nil && j.State.Terminal() {
			return
		}
		time.Sleep(time.Second)
	}
	t.Logf("job %s has not ended 3 minutes after its cancel", id)
}

// logHosts logs what the site's agent reports of its hosts: their CPUs
// and memory, what is free, and their VMs.
func (g *guestGrid) logHosts(site string) {
	g.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	inv, err := g.lab.Agents[site].Client.Inventory(ctx)
	if err != nil {
		g.t.Logf("site %s: %v", site, err)
		return
	}
	for _, h := range inv.Hosts {
		var vms []string
		for _, v := range h.VMs {
			vms = append(vms, fmt.Sprintf("%s (%d vCPUs, %s)", v.Name, v.VCPUs, v.State))
		}
		g.t.Logf("host %s: %d CPUs, %d free; %d MiB, %d free; VMs %v", h.Name, h.CPUs, h.FreeVCPUs, h.MemoryMiB, h.FreeMemoryMiB, vms)
	}
}

// onceEach checks that the first line of every VM is in the log once:
// the command ran once, and a restart repeated none of its output.
func (g *guestGrid) onceEach(j api.Job, log string) {
	g.t.Helper()
	for _, v := range j.VMs {
		if n := strings.Count(log, "vm="+v.Name+" "); n != 1 {
			g.t.Errorf("vm %s's first line is %d times in the log, want once", v.Name, n)
		}
	}
}
