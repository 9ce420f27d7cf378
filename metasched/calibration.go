package metasched

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	hp "github.com/metasched/metasched/hypervisorproxy"
	"github.com/metasched/metasched/hypervisorproxy/image"
	"github.com/metasched/metasched/metasched/api"
	"github.com/metasched/metasched/metasched/calibration"
	"github.com/metasched/metasched/metasched/capacity"
	"github.com/metasched/metasched/metasched/executor"
	"github.com/metasched/metasched/selection"
)

// The calibration (docs/internals/daemon.md, "Calibration"; Bertogna et al.
// §3: "each time a cluster is added, virtual images are characterized and a
// performance benchmark is done; the network links are monitored"). For every
// site whose agent boots guests, the daemon measures in VMs on the site's
// hosts (on a Slurm site, in allocations on its nodes, from a copy of the
// daemon's task farm: stageTaskFarm), one measurement at a time across
// the grid:
//
//   - perf/SITE/IMAGE: for each image a pool of the site boots, a VM of the
//     pool's shape on an idle host of the pool runs the task farm's kernel
//     (taskfarm bench --seconds S --procs VCPUS) through the guest agent:
//     operations per second per vCPU under the host's CPU quota and load;
//   - lan/SITE: a VM on each of two idle hosts of the site, a taskfarm sink
//     in one and a taskfarm probe from the other;
//   - start/SITE: with the guest executor, the time it takes to run a job
//     that does nothing (`true`) in a VM on each of two idle hosts of the
//     site (one when it has one): the VMs' contextualization, the workers'
//     start then the master's, its end seen and the job's finish, which a
//     job's program run does not hold;
//   - link/A/B: the same as lan with one VM at each site of a grid link.
//
// The perf, lan and link figures go to gramvm (ObservePerf, ObserveLAN,
// ObserveVMs), which plans on them; a start figure is what a pool's first
// jobs add to their plans' T/R for their start and end, until the pool's
// own jobs have measured it (see startEndLocked); all go to the store
// with their time. A figure is measured
// when it never was (the daemon's start, a site whose pools boot a new
// image), when it is older than calibration.max_age, when its site's agent
// registers again (reachable after it was not), and on demand (Calibrate).
// It runs only on idle hosts: serving their pool, with no VM and nothing
// promised, no live job placed on them, and no queued job in their pool,
// so that it never takes a host a queued job could use now; its VMs count
// in capacity like any VM (a promise until the inventory lists them).

const (
	// calibrationEvery is the calibration loop's round.
	calibrationEvery = time.Second
	// calibrationRetry is how long a figure whose measurement failed
	// waits before it is tried again (at most max_age).
	calibrationRetry = 10 * time.Minute
	// calibrationSinkPort is the port of the task farm's sink in a
	// calibration VM.
	calibrationSinkPort = 7421
	// calibrationPoll is how often a program's end is asked of the guest
	// agent.
	calibrationPoll = time.Second
	// calibrationBoot bounds a calibration VM's creation (its boot).
	calibrationBoot = 10 * time.Minute
	// calibrationProbeTimeout bounds a stream between two VMs.
	calibrationProbeTimeout = 10 * time.Minute
	// calibrationProbeTries is how many times a probe is started while
	// its sink does not answer yet.
	calibrationProbeTries = 3
)

// GuestBooter is implemented by an agent that says whether the VMs it
// creates boot their image (and so run programs through its guest API).
// An agent that does not say is taken to boot guests on hosts that are not
// on libvirt's test driver when it is a remote agent, and never when it is
// an in-process one.
type GuestBooter interface{ BootsGuests() bool }

// calibratesWhy says why a site's figures cannot be measured ("" when
// they can).
func calibratesWhy(s *siteAgent) string {
	if _, ok := s.agent.(executor.GuestAgent); !ok {
		return "its agent has no guest API: its plans keep the grid file's figures"
	}
	if b, ok := s.agent.(GuestBooter); ok {
		if !b.BootsGuests() {
			return "its agent boots no guest: its plans keep the grid file's figures"
		}
		return ""
	}
	if s.closer != nil {
		return "its agent is in process, on libvirt's test driver, which boots no guest: its plans keep the grid file's figures"
	}
	return ""
}

// bootsOn says whether a calibration VM on h boots its image, or, on a
// Slurm node, whether the daemon has a task farm to copy there (its jobs
// run on the node's own system, which has none).
func (d *Daemon) bootsOn(s *siteAgent, h *gridHost) bool {
	if slurmHost(h) {
		return d.taskFarm != nil
	}
	if _, ok := s.agent.(GuestBooter); ok {
		return true // calibratesWhy asked it
	}
	return !strings.HasPrefix(h.inv.URI, "test:")
}

// slurmHost says whether h is a node of a Slurm site.
func slurmHost(h *gridHost) bool { return hp.IsSlurmURI(h.inv.URI) }

// loadTaskFarm reads the task farm the calibration copies onto Slurm
// nodes: the configured one (an error when it cannot be used), else the
// file taskfarm beside this program when it is there (else nil, and why
// not).
func loadTaskFarm(path string) ([]byte, string, error) {
	if path != "" {
		b, err := image.ReadTaskFarm(path)
		if err != nil {
			return nil, "", fmt.Errorf("calibration.taskfarm: %w", err)
		}
		return b, "", nil
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Sprintf("the daemon has no task farm to copy to them (calibration.taskfarm is not set and this program's path is unknown: %v)", err), nil
	}
	b, err := image.ReadTaskFarm(filepath.Join(filepath.Dir(exe), "taskfarm"))
	if err != nil {
		return nil, fmt.Sprintf("the daemon has no task farm to copy to them (calibration.taskfarm is not set, and %v)", err), nil
	}
	return b, "", nil
}

// anySiteCalibrates reports whether the calibration has a site to measure.
func (d *Daemon) anySiteCalibrates() bool {
	return slices.ContainsFunc(d.sites, func(s *siteAgent) bool { return calibratesWhy(s) == "" })
}

// newCalibration is the calibration's book on the daemon's configuration.
func (d *Daemon) newCalibration() *calibration.Book {
	c := d.cfg.Calibration.withDefaults()
	return calibration.NewBook(calibration.Config{OnDemand: c.OnDemand, MaxAge: c.MaxAge, Retry: calibrationRetry}, d.instance, d.observe)
}

// restoreCalibration reads the figures the store keeps and gives the
// measured ones to the planner, with their time.
func (d *Daemon) restoreCalibration(ctx context.Context) error {
	d.planner.SetPoolImages(d.poolImages())
	recs, err := d.st.Calibrations(ctx)
	if err != nil {
		return err
	}
	for _, bad := range d.cal.Restore(recs) {
		d.log.Warn().Str("figure", bad.Key).Msg(bad.Why)
	}
	return nil
}

// poolImages is the image of each pool.
func (d *Daemon) poolImages() map[string]string {
	out := map[string]string{}
	for _, jt := range d.types {
		out[jt.Name] = jt.Image
	}
	return out
}

// observe gives a measured perf, LAN or link figure to the planner.
func (d *Daemon) observe(r calibration.Record) error {
	switch r.Kind {
	case api.CalibrationPerf:
		return d.planner.ObservePerf(r.Site, r.Image, r.Value, r.MeasuredAt)
	case api.CalibrationLAN:
		return d.planner.ObserveLAN(r.Site, r.Value, r.MeasuredAt)
	case api.CalibrationLink:
		return d.planner.ObserveVMs(r.Site, r.Peer, r.Value, r.MeasuredAt)
	}
	return fmt.Errorf("calibration: the planner takes no %q figure", r.Kind)
}

// calibrationLoop measures what is due, one figure at a time.
func (d *Daemon) calibrationLoop(ctx context.Context) {
	t := d.clock.NewTicker(calibrationEvery)
	defer t.Stop()
	for {
		d.calibrateRound(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.Chan():
		case <-d.cal.Kicked():
		}
	}
}

// calGridLocked is the grid as the calibration sees it: the sites in grid
// order, each calibrated one with its hosts, and the links. One pass over
// the hosts; the jobs' lock and the hosts' view must be held (lockR).
func (d *Daemon) calGridLocked() calibration.Grid {
	g := calibration.Grid{Starts: d.exec.Name() == "guest"}
	at := map[string]int{}
	for _, c := range d.grid.Clusters {
		s := d.site(c.Name)
		if s == nil {
			continue
		}
		at[c.Name] = len(g.Sites)
		g.Sites = append(g.Sites, calibration.Site{Name: c.Name, Why: calibratesWhy(s), Perf: c.Perf, LANMbps: c.LANMbps})
	}
	nodes := make([]int, len(g.Sites)) // Slurm nodes, by site
	for _, name := range d.hv.order {
		h := d.hv.hosts[name]
		i, ok := at[h.rec.Site]
		if !ok || g.Sites[i].Why != "" {
			continue
		}
		if slurmHost(h) {
			nodes[i]++
		}
		ch := calibration.Host{Name: name, Pool: h.rec.Pool, Reachable: h.reachable, Boots: d.bootsOn(d.site(h.rec.Site), h)}
		if jt, _, ok := d.jobType(h.rec.Pool); ok {
			ch.Image, ch.VCPUs, ch.MemoryMiB = jt.Image, jt.VCPUs, jt.MemoryMiB
		}
		ch.Idle = ch.Boots && d.calIdleLocked(h) && h.inv.FreeVCPUs >= ch.VCPUs && h.inv.FreeMemoryMiB >= ch.MemoryMiB
		g.Sites[i].Hosts = append(g.Sites[i].Hosts, ch)
	}
	for i := range g.Sites {
		if s := &g.Sites[i]; nodes[i] > 0 && nodes[i] == len(s.Hosts) && d.taskFarm == nil {
			s.Why, s.Hosts = "its hosts are Slurm nodes and "+d.noTaskFarm+": its plans keep the grid file's figures", nil
		}
	}
	for _, l := range d.grid.Links {
		g.Links = append(g.Links, calibration.Link{Between: l.Between, Mbps: l.Mbps})
	}
	return g
}

// calibrateRound brings the figures up to date with the sites (new
// images, agents registered again) and starts the first due figure whose
// hosts are idle, when nothing is being measured: the VMs' capacity is
// promised on their hosts under d.jobs.mu, before a dispatch round can see
// those hosts free.
func (d *Daemon) calibrateRound(ctx context.Context) {
	d.lockR()
	defer d.unlockR()
	if d.jobs.closing || ctx.Err() != nil {
		return
	}
	s, back, ok := d.cal.Round(ctx, d.calGridLocked(), d.now())
	for _, site := range back {
		d.log.Info().Str("site", site).Msg("the site's agent answers again: its figures are measured again")
	}
	if !ok {
		return
	}
	vms := make([]calVM, len(s.VMs))
	hosts := make([]string, len(s.VMs))
	for i, v := range s.VMs {
		vms[i] = calVM{site: d.site(v.Site), spec: hp.VMSpec{Name: v.Name, Host: v.Host, Pool: v.Pool, Job: calibration.Job,
			VCPUs: v.VCPUs, MemoryMiB: v.MemoryMiB, Image: v.Image}}
		hosts[i] = v.Host
		d.ledger.Promise(calibration.Job, capacity.Use{VCPUs: v.VCPUs, MemoryMiB: v.MemoryMiB}, capacity.Spot{VM: v.Name, Host: v.Host})
	}
	d.log.Info().Str("figure", s.Key).Strs("hosts", hosts).Msg("calibration: measuring")
	d.goJob(func() { d.runCalibration(s, vms) })
}

// calVM is one VM of a measurement.
type calVM struct {
	site *siteAgent
	spec hp.VMSpec
}

// calIdleLocked says whether the calibration may take h now: it serves its
// pool, no VM is on it or promised to it, no live job is placed on it, and
// no job waits in its pool's queue (a queued job could use it now).
func (d *Daemon) calIdleLocked(h *gridHost) bool {
	if !h.serving() || len(h.inv.VMs) > 0 || d.ledger.On(h.name) != (capacity.Use{}) || d.hostBusyLocked(h.name) {
		return false
	}
	return len(d.jobs.index.queues[h.rec.Pool]) == 0
}

// runCalibration measures a figure, records it, and destroys its VMs.
func (d *Daemon) runCalibration(s calibration.Start, vms []calVM) {
	ctx := s.Ctx
	created := make([]bool, len(vms))
	defer func() {
		for i, v := range vms {
			// A creation cut short by a stop may have left its VM.
			if !created[i] && ctx.Err() == nil {
				continue
			}
			c, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
			err := v.site.agent.DestroyVM(c, v.spec.Name)
			cancel()
			switch {
			case err != nil && !errors.Is(err, hp.ErrNotFound):
				d.log.Warn().Err(err).Str("vm", v.spec.Name).Msg("calibration: cannot destroy a calibration VM (the next refresh takes it for an orphan)")
			case err == nil:
				d.vmsDestroyed.Add(1)
			}
		}
		for _, v := range vms {
			d.ledger.Drop(v.spec.Name)
		}
		d.cal.Ended(s)
	}()
	value, err := d.measure(ctx, s.Rec, vms, created)
	now := d.now()
	if ctx.Err() != nil {
		if why := d.cal.Stopped(s, now); why != "" {
			d.log.Info().Str("figure", s.Key).Str("why", why).Msg("calibration: measurement stopped")
		}
		return
	}
	rec, err := d.cal.Measured(s, value, err, now)
	if err != nil {
		d.log.Warn().Str("figure", s.Key).Err(err).Msg("calibration: measurement failed")
	} else {
		d.log.Info().Str("figure", s.Key).Float64("value", value).Strs("hosts", rec.Hosts).Msg("calibration: measured")
		d.kick() // plans follow the new figure
	}
	if err := d.st.SetCalibration(context.WithoutCancel(ctx), s.Key, mustJSON(rec)); err != nil {
		d.log.Error().Err(err).Str("figure", s.Key).Msg("calibration: cannot record a figure")
	}
}

// measure creates the VMs of a measurement (created says which exist) and
// takes the figure in them.
func (d *Daemon) measure(ctx context.Context, r calibration.Record, vms []calVM, created []bool) (float64, error) {
	at := func(i int) string {
		return fmt.Sprintf("site %s, VM %s on host %s", vms[i].site.name, vms[i].spec.Name, vms[i].spec.Host)
	}
	guest := func(i int) executor.GuestAgent { return vms[i].site.agent.(executor.GuestAgent) }
	addrs, prefixes, kinds := make([]string, len(vms)), make([]string, len(vms)), make([]string, len(vms))
	farms := make([]string, len(vms)) // the task farm in each VM
	for i, v := range vms {
		c, cancel := context.WithTimeout(ctx, calibrationBoot)
		vm, err := v.site.agent.CreateVM(c, v.spec)
		cancel()
		if err != nil {
			return 0, fmt.Errorf("%s: create: %w", at(i), err)
		}
		created[i] = true
		d.vmsCreated.Add(1)
		prefixes[i], kinds[i] = vm.Address, vm.Kind
		addrs[i], _, _ = strings.Cut(vm.Address, "/")
		farms[i] = image.TaskFarmPath
		if vm.Kind == hp.KindSlurm && r.Kind != api.CalibrationStart {
			defer d.unstageTaskFarm(ctx, guest(i), v.spec.Name)
			if farms[i], err = d.stageTaskFarm(ctx, guest(i), v.spec.Name); err != nil {
				return 0, fmt.Errorf("%s: %w", at(i), err)
			}
		}
	}
	switch r.Kind {
	case api.CalibrationPerf:
		n := vms[0].spec.VCPUs
		out, err := d.guestRun(ctx, guest(0), vms[0].spec.Name, farms[0], time.Duration(2*d.cfg.Calibration.withDefaults().BenchSeconds)*time.Second+2*time.Minute,
			"bench", "--seconds", strconv.Itoa(d.cfg.Calibration.withDefaults().BenchSeconds), "--procs", strconv.Itoa(n))
		if err != nil {
			return 0, fmt.Errorf("%s: taskfarm bench: %w", at(0), err)
		}
		v, err := parseBench(out, n)
		if err != nil {
			return 0, fmt.Errorf("%s: %w", at(0), err)
		}
		return v, nil
	case api.CalibrationLAN, api.CalibrationLink:
		// The sink in the second VM, the probe from the first: a link's
		// stream goes from the figure's site to its peer.
		if addrs[1] == "" {
			return 0, fmt.Errorf("%s: the agent gave the VM no address: the calibration needs the site's network", at(1))
		}
		port := strconv.Itoa(calibrationSinkPort)
		if _, err := guest(1).GuestExec(ctx, vms[1].spec.Name, hp.GuestExec{Path: farms[1], Args: []string{"sink", "--port", port}}); err != nil {
			return 0, fmt.Errorf("%s: taskfarm sink: %w", at(1), err)
		}
		n := d.cfg.Calibration.withDefaults().ProbeBytes
		var err error
		for try := range calibrationProbeTries {
			if try > 0 {
				if err := d.sleep(ctx, 2*time.Second); err != nil {
					return 0, err
				}
			}
			var out []byte
			out, err = d.guestRun(ctx, guest(0), vms[0].spec.Name, farms[0], calibrationProbeTimeout,
				"probe", "--to", addrs[1]+":"+port, "--bytes", strconv.FormatInt(n, 10))
			if err == nil {
				v, err := parseProbe(out, n)
				if err != nil {
					return 0, fmt.Errorf("%s: %w", at(0), err)
				}
				return v, nil
			}
			if ctx.Err() != nil {
				break
			}
		}
		return 0, fmt.Errorf("%s: taskfarm probe to %s: %w", at(0), addrs[1], err)
	case api.CalibrationStart:
		return d.measureStart(ctx, vms, prefixes, kinds)
	}
	return 0, fmt.Errorf("calibration: no kind %q", r.Kind)
}

// measureStart runs a job that does nothing in the VMs (their addresses
// and kinds as the agents gave them) through the daemon's executor, the
// first VM its master, and returns its run time: what a job's start and
// end take beyond its program's run.
func (d *Daemon) measureStart(ctx context.Context, vms []calVM, prefixes, kinds []string) (float64, error) {
	run := executor.Run{JobID: vms[0].spec.Name, Job: &selection.Job{Name: "calibration-start", Type: vms[0].spec.Pool, Tasks: 1,
		Command: []string{"true"}}, Attempt: 1, Output: io.Discard}
	for i, v := range vms {
		run.VMs = append(run.VMs, executor.VM{Name: v.spec.Name, Site: v.site.name, Host: v.spec.Host, Master: i == 0,
			VCPUs: v.spec.VCPUs, MemoryMiB: v.spec.MemoryMiB, Address: prefixes[i], Kind: kinds[i]})
	}
	dir, err := os.MkdirTemp("", "metasched-calibration-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)
	run.Dir = dir
	start := d.now()
	res, err := d.exec.Run(ctx, run)
	took := d.now().Sub(start).Seconds()
	switch {
	case err != nil:
		return 0, fmt.Errorf("site %s: a job that does nothing in %d VMs: %w", vms[0].site.name, len(vms), err)
	case res.ExitCode != 0:
		return 0, fmt.Errorf("site %s: a job that does nothing in %d VMs: %s", vms[0].site.name, len(vms), res.Reason)
	case took <= 0:
		return 0, fmt.Errorf("site %s: a job that does nothing took no time on the daemon's clock", vms[0].site.name)
	}
	return took, nil
}

// sleep waits on the daemon's clock.
func (d *Daemon) sleep(ctx context.Context, x time.Duration) error {
	t := d.clock.NewTimer(x)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.Chan():
		return nil
	}
}

// guestRun runs the program at path in a VM to its end (at most limit),
// polled every calibrationPoll on the daemon's clock.
func (d *Daemon) guestRun(ctx context.Context, g executor.GuestAgent, vm, path string, limit time.Duration, args ...string) ([]byte, error) {
	return executor.RunProgram(ctx, g, vm, executor.Program{Path: path, Args: args, Limit: limit, Poll: calibrationPoll, Clock: d.clock})
}

// stageTaskFarm copies the daemon's task farm into the allocation's own
// directory on a Slurm node (executor.NodeDir, as a job's runner) and
// returns its path there.
func (d *Daemon) stageTaskFarm(ctx context.Context, g executor.GuestAgent, vm string) (string, error) {
	dir := executor.NodeDir(vm)
	if _, err := d.guestRun(ctx, g, vm, "/bin/mkdir", time.Minute, "-p", "--", dir); err != nil {
		return "", fmt.Errorf("make the task farm's directory %s: %w", dir, err)
	}
	p := path.Join(dir, "taskfarm")
	if err := g.GuestWriteFile(ctx, vm, p, d.taskFarm, 0o755); err != nil {
		return "", fmt.Errorf("copy the task farm to %s: %w", p, err)
	}
	return p, nil
}

// unstageTaskFarm removes what stageTaskFarm left on the node (the node
// is shared: nothing of the calibration's stays), even after a stop; a
// failure is logged.
func (d *Daemon) unstageTaskFarm(ctx context.Context, g executor.GuestAgent, vm string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	dir := executor.NodeDir(vm)
	if _, err := d.guestRun(ctx, g, vm, "/bin/rm", time.Minute, "-rf", "--", dir); err != nil {
		d.log.Warn().Err(err).Str("vm", vm).Str("dir", dir).Msg("calibration: the task farm's directory is left on the node")
	}
}

// lastLine is the last line of out that is not blank.
func lastLine(out []byte) []byte {
	lines := bytes.Split(bytes.TrimSpace(out), []byte("\n"))
	return bytes.TrimSpace(lines[len(lines)-1])
}

// benchLine is what taskfarm bench prints.
type benchLine struct {
	Procs        *int     `json:"procs"`
	Seconds      *float64 `json:"seconds"`
	Ops          *float64 `json:"ops"`
	OpsPerSecond *float64 `json:"ops_per_second"`
	PerProc      *float64 `json:"ops_per_second_per_proc"`
}

// parseBench reads the line taskfarm bench printed for procs processes
// and returns its operations per second per process.
func parseBench(out []byte, procs int) (float64, error) {
	bad := func(problem string) (float64, error) {
		return 0, fmt.Errorf("taskfarm bench printed %s: %s", executor.QuoteOutput(out), problem)
	}
	var b benchLine
	if err := json.Unmarshal(lastLine(out), &b); err != nil {
		return bad("not its JSON line")
	}
	switch {
	case b.Procs == nil || b.Seconds == nil || b.Ops == nil || b.OpsPerSecond == nil || b.PerProc == nil:
		return bad("a field is missing (procs, seconds, ops, ops_per_second, ops_per_second_per_proc)")
	case *b.Procs != procs:
		return bad(fmt.Sprintf("procs: %d processes ran, %d were asked for", *b.Procs, procs))
	case !(*b.Seconds > 0) || math.IsInf(*b.Seconds, 0):
		return bad("seconds: must be a number > 0")
	case !(*b.PerProc > 0) || math.IsInf(*b.PerProc, 0):
		return bad("ops_per_second_per_proc: must be a number > 0")
	case !near(*b.Ops / *b.Seconds, *b.OpsPerSecond) || !near(*b.OpsPerSecond/float64(procs), *b.PerProc):
		return bad("ops, ops_per_second and ops_per_second_per_proc do not agree")
	}
	return *b.PerProc, nil
}

// probeLine is what taskfarm probe prints.
type probeLine struct {
	Bytes   *int64   `json:"bytes"`
	Seconds *float64 `json:"seconds"`
	Mbps    *float64 `json:"mbps"`
}

// parseProbe reads the line taskfarm probe printed for a stream of n bytes
// and returns its Mbit/s.
func parseProbe(out []byte, n int64) (float64, error) {
	bad := func(problem string) (float64, error) {
		return 0, fmt.Errorf("taskfarm probe printed %s: %s", executor.QuoteOutput(out), problem)
	}
	var p probeLine
	if err := json.Unmarshal(lastLine(out), &p); err != nil {
		return bad("not its JSON line")
	}
	switch {
	case p.Bytes == nil || p.Seconds == nil || p.Mbps == nil:
		return bad("a field is missing (bytes, seconds, mbps)")
	case *p.Bytes != n:
		return bad(fmt.Sprintf("bytes: the sink received %d of the %d sent", *p.Bytes, n))
	case !(*p.Seconds > 0) || math.IsInf(*p.Seconds, 0):
		return bad("seconds: must be a number > 0")
	case !(*p.Mbps > 0) || math.IsInf(*p.Mbps, 0):
		return bad("mbps: must be a number > 0")
	case !near(float64(*p.Bytes)*8 / *p.Seconds / 1e6, *p.Mbps):
		return bad("bytes, seconds and mbps do not agree")
	}
	return *p.Mbps, nil
}

// near says two figures agree to 0.1% (what a program prints may be
// rounded).
func near(a, b float64) bool { return math.Abs(a-b) <= 1e-3*math.Max(math.Abs(a), math.Abs(b)) }

// abortCalibrationOn stops the measurement that uses host, if any, and
// waits until its VMs are gone (a switch takes the host).
func (d *Daemon) abortCalibrationOn(ctx context.Context, host, why string) {
	done := d.cal.Abort(host, why)
	if done == nil {
		return
	}
	select {
	case <-ctx.Done():
	case <-done:
	}
}

// Calibration is the calibration's view: every site, every figure with
// its age and when it is due.
func (d *Daemon) Calibration() api.Calibration {
	d.lockR()
	g := d.calGridLocked()
	d.unlockR()
	return d.calibrationView(g)
}

// calibrationView is the calibration's view on the grid g, with the
// configuration's figures.
func (d *Daemon) calibrationView(g calibration.Grid) api.Calibration {
	v := d.cal.View(g, d.now())
	c := d.cfg.Calibration.withDefaults()
	v.BenchSeconds, v.ProbeBytes = c.BenchSeconds, c.ProbeBytes
	return v
}

// Calibrate asks for the figures of a site (every site that can be
// calibrated: site empty) to be measured as soon as their hosts are idle,
// and returns the calibration's view.
func (d *Daemon) Calibrate(ctx context.Context, site string) (_ api.Calibration, err error) {
	defer apiError(&err)
	var sites []string
	if site != "" {
		s := d.site(site)
		if s == nil {
			names := make([]string, len(d.sites))
			for i, s := range d.sites {
				names[i] = s.name
			}
			return api.Calibration{}, invalidField("site", fmt.Sprintf("no site %q (the grid's sites: %s)", site, strings.Join(names, ", ")))
		}
		if why := calibratesWhy(s); why != "" {
			return api.Calibration{}, &api.RequestError{Status: 409, Code: api.CodeConflict, Msg: fmt.Sprintf("site %s cannot be calibrated: %s", site, why)}
		}
		sites = []string{site}
	} else {
		for _, s := range d.sites {
			if calibratesWhy(s) == "" {
				sites = append(sites, s.name)
			}
		}
		if len(sites) == 0 {
			return api.Calibration{}, &api.RequestError{Status: 409, Code: api.CodeConflict,
				Msg: "no site can be calibrated: every site's agent is in process on libvirt's test driver, which boots no guest (plans keep the grid file's figures)"}
		}
	}
	d.lockR()
	g := d.calGridLocked()
	d.unlockR()
	n := d.cal.Ask(g, sites, d.now())
	d.log.Info().Strs("sites", sites).Int("figures", n).Msg("calibration asked for")
	return d.calibrationView(g), nil
}
