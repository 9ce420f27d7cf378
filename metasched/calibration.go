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
	"slices"
	"strconv"
	"strings"
	"time"

	hp "github.com/metasched/metasched/hypervisorproxy"
	"github.com/metasched/metasched/hypervisorproxy/image"
	"github.com/metasched/metasched/metasched/api"
	"github.com/metasched/metasched/metasched/executor"
	"github.com/metasched/metasched/metasched/lifecycle"
	"github.com/metasched/metasched/selection"
)

// The calibration (docs/design.md, "Calibration"; Bertogna et al. §3:
// "each time a cluster is added, virtual images are characterized and a
// performance benchmark is done; the network links are monitored"). For
// every site whose agent boots guests, the daemon measures in VMs on the
// site's hosts, one measurement at a time across the grid:
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

// calibrationJob is the job label of the calibration's VMs on their hosts.
const calibrationJob = "calibration"

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

// calRecord is a figure as the store keeps it.
type calRecord struct {
	Kind        string    `json:"kind"`
	Site        string    `json:"site"`
	Peer        string    `json:"peer,omitempty"`
	Image       string    `json:"image,omitempty"`
	Value       float64   `json:"value,omitempty"`
	MeasuredAt  time.Time `json:"measured_at,omitzero"`
	Hosts       []string  `json:"hosts,omitempty"`
	LastAttempt time.Time `json:"last_attempt,omitzero"`
	Error       string    `json:"error,omitempty"`
	ErrorAt     time.Time `json:"error_at,omitzero"`
}

// calFigure is a figure the daemon keeps: its record, and when it was
// asked for (on demand, or its site's agent registered again: zero when
// it was not, or its measurement has started since).
type calFigure struct {
	key     string
	rec     calRecord
	forced  time.Time
	waiting string
}

// calibration is the calibration's state; the daemon's lock guards it.
type calibration struct {
	figs map[string]*calFigure
	// The measurement under way: its figure, hosts and VMs, its cancel,
	// a channel closed when its VMs are gone, and why it was stopped.
	running string
	hosts   []string
	vms     map[string]bool
	cancel  context.CancelFunc
	done    chan struct{}
	aborted string
	// seen is whether each site's agent answered at the last round
	// (absent: not seen yet).
	seen map[string]bool
	seq  int
	kick chan struct{}
	// start is each site's measured start and end, in seconds.
	start map[string]float64
}

func newCalibration() calibration {
	return calibration{figs: map[string]*calFigure{}, vms: map[string]bool{}, seen: map[string]bool{}, kick: make(chan struct{}, 1),
		start: map[string]float64{}}
}

func calKey(kind, site, other string) string {
	if other == "" {
		return kind + "/" + site
	}
	return kind + "/" + site + "/" + other
}

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

// bootsOn says whether a calibration VM on h boots its image.
func bootsOn(s *siteAgent, h *gridHost) bool {
	if _, ok := s.agent.(GuestBooter); ok {
		return true // calibratesWhy asked it
	}
	return !strings.HasPrefix(h.inv.URI, "test:")
}

// anySiteCalibrates reports whether the calibration has a site to measure.
func (d *Daemon) anySiteCalibrates() bool {
	return slices.ContainsFunc(d.sites, func(s *siteAgent) bool { return calibratesWhy(s) == "" })
}

// restoreCalibration reads the figures the store keeps and gives the
// measured ones to the planner, with their time.
func (d *Daemon) restoreCalibration(ctx context.Context) error {
	d.planner.SetPoolImages(d.poolImages())
	recs, err := d.st.Calibrations(ctx)
	if err != nil {
		return err
	}
	for key, v := range recs {
		var r calRecord
		if err := json.Unmarshal(v, &r); err != nil || calKey(r.Kind, r.Site, cmpOr(r.Image, r.Peer)) != key {
			d.log.Warn().Str("figure", key).Msg("a calibration figure in the store cannot be read: it is measured again")
			continue
		}
		if r.Value > 0 {
			if err := d.observe(r); err != nil {
				d.log.Warn().Err(err).Str("figure", key).Msg("a calibration figure in the store is refused: it is measured again")
				r.Value, r.MeasuredAt, r.LastAttempt = 0, time.Time{}, time.Time{}
			}
		}
		d.cal.figs[key] = &calFigure{key: key, rec: r}
	}
	return nil
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// poolImages is the image of each pool.
func (d *Daemon) poolImages() map[string]string {
	out := map[string]string{}
	for _, jt := range d.types {
		out[jt.Name] = jt.Image
	}
	return out
}

// observe gives a measured figure to the planner.
func (d *Daemon) observe(r calRecord) error {
	switch r.Kind {
	case api.CalibrationPerf:
		return d.planner.ObservePerf(r.Site, r.Image, r.Value, r.MeasuredAt)
	case api.CalibrationLAN:
		return d.planner.ObserveLAN(r.Site, r.Value, r.MeasuredAt)
	case api.CalibrationLink:
		return d.planner.ObserveVMs(r.Site, r.Peer, r.Value, r.MeasuredAt)
	case api.CalibrationStart:
		if !(r.Value > 0 && r.Value < maxStartSeconds) {
			return fmt.Errorf("a start and end of %g s is not within 0 and %g s", r.Value, float64(maxStartSeconds))
		}
		d.cal.start[r.Site] = r.Value
		return nil
	}
	return fmt.Errorf("calibration: no kind %q", r.Kind)
}

// maxStartSeconds bounds a start figure: a job that takes longer to start
// than that is not starting.
const maxStartSeconds = 3600

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
		case <-d.cal.kick:
		}
	}
}

// calibrateRound brings the figures up to date with the sites (new
// images, agents registered again) and starts the first due figure whose
// hosts are idle, when nothing is being measured.
func (d *Daemon) calibrateRound(ctx context.Context) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closing || ctx.Err() != nil {
		return
	}
	now := d.now()
	d.updateFiguresLocked(now)
	if d.cal.running != "" {
		return
	}
	for _, f := range d.figuresLocked() {
		if _, due := d.dueLocked(f, now); !due {
			f.waiting = ""
			continue
		}
		vms, why := d.calPlanLocked(f)
		f.waiting = why
		if why != "" {
			continue
		}
		d.startCalibrationLocked(ctx, f, vms, now)
		return
	}
}

// updateFiguresLocked adds the figures the sites call for now (an image a
// pool of the site boots, a LAN of two hosts or more, a link between two
// calibrated sites) and asks again for those of a site whose agent answers
// again after it did not.
func (d *Daemon) updateFiguresLocked(now time.Time) {
	ok := map[string]bool{}
	for _, s := range d.sites {
		if calibratesWhy(s) != "" {
			continue
		}
		ok[s.name] = true
		reachable, boots := false, 0
		for _, name := range d.order {
			h := d.hosts[name]
			if h.rec.Site != s.name {
				continue
			}
			reachable = reachable || h.reachable
			if !bootsOn(s, h) {
				continue
			}
			boots++
			if img := d.imageOf(h.rec.Pool); img != "" && h.rec.Pool != "" {
				d.figureLocked(api.CalibrationPerf, s.name, "", img)
			}
		}
		if boots >= 2 {
			d.figureLocked(api.CalibrationLAN, s.name, "", "")
		}
		if boots >= 1 && d.exec.Name() == "guest" {
			d.figureLocked(api.CalibrationStart, s.name, "", "")
		}
		// With auto: false only what an operator asks for is measured.
		if was, seen := d.cal.seen[s.name]; seen && !was && reachable && !d.cfg.Calibration.OnDemand {
			d.log.Info().Str("site", s.name).Msg("the site's agent answers again: its figures are measured again")
			for _, f := range d.cal.figs {
				if f.rec.Site == s.name || f.rec.Peer == s.name {
					f.forced = now
				}
			}
		}
		d.cal.seen[s.name] = reachable
	}
	for _, l := range d.grid.Links {
		if ok[l.Between[0]] && ok[l.Between[1]] {
			d.figureLocked(api.CalibrationLink, l.Between[0], l.Between[1], "")
		}
	}
}

// figureLocked returns the figure, made when missing.
func (d *Daemon) figureLocked(kind, site, peer, image string) *calFigure {
	key := calKey(kind, site, cmpOr(image, peer))
	f := d.cal.figs[key]
	if f == nil {
		f = &calFigure{key: key, rec: calRecord{Kind: kind, Site: site, Peer: peer, Image: image}}
		d.cal.figs[key] = f
	}
	return f
}

// perfInUseLocked lists the perf figures a pool of their site boots the
// image of now.
func (d *Daemon) perfInUseLocked() map[string]bool {
	out := map[string]bool{}
	for _, name := range d.order {
		h := d.hosts[name]
		if img := d.imageOf(h.rec.Pool); img != "" && h.rec.Pool != "" {
			out[calKey(api.CalibrationPerf, h.rec.Site, img)] = true
		}
	}
	return out
}

// figuresLocked lists the figures of the sites that can be calibrated, but
// the perf of an image no pool of its site boots now (a plan uses none):
// by site in grid order, perf before lan before link, then by image or
// peer.
func (d *Daemon) figuresLocked() []*calFigure {
	kinds := []string{api.CalibrationPerf, api.CalibrationLAN, api.CalibrationStart, api.CalibrationLink}
	inUse := d.perfInUseLocked()
	var out []*calFigure
	for _, f := range d.cal.figs {
		if s := d.site(f.rec.Site); s == nil || calibratesWhy(s) != "" {
			continue
		}
		if f.rec.Kind == api.CalibrationPerf && !inUse[f.key] {
			continue
		}
		if f.rec.Peer != "" {
			if s := d.site(f.rec.Peer); s == nil || calibratesWhy(s) != "" {
				continue
			}
		}
		out = append(out, f)
	}
	slices.SortFunc(out, func(a, b *calFigure) int {
		ia, _ := d.grid.Index(a.rec.Site)
		ib, _ := d.grid.Index(b.rec.Site)
		if ia != ib {
			return ia - ib
		}
		if c := slices.Index(kinds, a.rec.Kind) - slices.Index(kinds, b.rec.Kind); c != 0 {
			return c
		}
		return strings.Compare(a.key, b.key)
	})
	return out
}

// dueLocked says when the figure is (or was) due, and whether it is due
// now: asked for; never tried (with auto); failed, calibrationRetry (at
// most max_age) after its failure; else max_age after its measurement.
// Without auto, only a figure asked for is due.
func (d *Daemon) dueLocked(f *calFigure, now time.Time) (time.Time, bool) {
	c := d.cfg.Calibration.withDefaults()
	if !f.forced.IsZero() {
		return f.forced, true
	}
	if c.OnDemand {
		return time.Time{}, false
	}
	r := f.rec
	var at time.Time
	switch {
	case r.LastAttempt.IsZero():
		return now, true
	case r.Error != "" && !r.ErrorAt.Before(r.MeasuredAt):
		at = r.ErrorAt.Add(min(calibrationRetry, c.MaxAge))
	default:
		at = r.MeasuredAt.Add(c.MaxAge)
	}
	return at, !now.Before(at)
}

// calVM is one VM of a measurement.
type calVM struct {
	site *siteAgent
	spec hp.VMSpec
}

// calPlanLocked chooses the idle hosts of a figure's measurement and the
// VMs on them, or says what it waits for.
func (d *Daemon) calPlanLocked(f *calFigure) ([]calVM, string) {
	r := f.rec
	taken := map[string]bool{}
	pick := func(site, image string) (calVM, bool) {
		s := d.site(site)
		for _, name := range d.order {
			h := d.hosts[name]
			if h.rec.Site != site || taken[name] || !bootsOn(s, h) || !d.calIdleLocked(h) {
				continue
			}
			jt, _, ok := d.jobType(h.rec.Pool)
			if !ok || jt.Image == "" || (image != "" && jt.Image != image) || h.inv.FreeVCPUs < jt.VCPUs || h.inv.FreeMemoryMiB < jt.MemoryMiB {
				continue
			}
			taken[name] = true
			d.cal.seq++
			return calVM{site: s, spec: hp.VMSpec{Name: fmt.Sprintf("cal-%s-%d", d.instance, d.cal.seq), Host: name, Pool: h.rec.Pool,
				Job: calibrationJob, VCPUs: jt.VCPUs, MemoryMiB: jt.MemoryMiB, Image: jt.Image}}, true
		}
		return calVM{}, false
	}
	const idle = " (idle: serving its pool, with no VM, and no job queued in its pool)"
	switch r.Kind {
	case api.CalibrationPerf:
		if v, ok := pick(r.Site, r.Image); ok {
			return []calVM{v}, ""
		}
		return nil, fmt.Sprintf("waiting for an idle host of a pool of site %s whose VMs boot image %s", r.Site, r.Image) + idle
	case api.CalibrationLAN:
		a, okA := pick(r.Site, "")
		b, okB := pick(r.Site, "")
		if okA && okB {
			return []calVM{a, b}, ""
		}
		return nil, fmt.Sprintf("waiting for two idle hosts at site %s, in pools with an image", r.Site) + idle
	case api.CalibrationStart:
		a, okA := pick(r.Site, "")
		if !okA {
			return nil, fmt.Sprintf("waiting for an idle host at site %s, in a pool with an image", r.Site) + idle
		}
		if b, ok := pick(r.Site, ""); ok {
			return []calVM{a, b}, ""
		}
		// A second host may be busy, or the site may have one: a job of
		// one VM, unless another host could take the second VM later.
		if d.bootingHostsLocked(r.Site) >= 2 {
			return nil, fmt.Sprintf("waiting for two idle hosts at site %s, in pools with an image", r.Site) + idle
		}
		return []calVM{a}, ""
	case api.CalibrationLink:
		a, okA := pick(r.Site, "")
		b, okB := pick(r.Peer, "")
		if okA && okB {
			return []calVM{a, b}, ""
		}
		return nil, fmt.Sprintf("waiting for an idle host at each of sites %s and %s, in a pool with an image", r.Site, r.Peer) + idle
	}
	return nil, "no such kind of figure"
}

// bootingHostsLocked counts the hosts of a site whose calibration VMs
// boot their image.
func (d *Daemon) bootingHostsLocked(site string) int {
	s, n := d.site(site), 0
	for _, name := range d.order {
		if h := d.hosts[name]; h.rec.Site == site && bootsOn(s, h) {
			n++
		}
	}
	return n
}

// calIdleLocked says whether the calibration may take h now: it serves its
// pool, no VM is on it or promised to it, no live job is placed on it, and
// no job waits in its pool's queue (a queued job could use it now).
func (d *Daemon) calIdleLocked(h *gridHost) bool {
	if !h.serving() || len(h.inv.VMs) > 0 || d.promised.on(h.name) != (usage{}) || d.hostBusyLocked(h.name) {
		return false
	}
	return len(d.index.queues[h.rec.Pool]) == 0
}

// startCalibrationLocked promises the VMs' capacity on their hosts and
// starts the measurement.
func (d *Daemon) startCalibrationLocked(ctx context.Context, f *calFigure, vms []calVM, now time.Time) {
	f.forced, f.waiting = time.Time{}, ""
	f.rec.LastAttempt = now
	mctx, cancel := context.WithCancel(ctx)
	d.cal.running, d.cal.cancel, d.cal.done, d.cal.aborted, d.cal.hosts = f.key, cancel, make(chan struct{}), "", nil
	for _, v := range vms {
		d.cal.hosts = append(d.cal.hosts, v.spec.Host)
		d.cal.vms[v.spec.Name] = true
		d.promised.add(calibrationJob, []lifecycle.VM{{Name: v.spec.Name, Site: v.site.name, Host: v.spec.Host}},
			usage{vcpus: v.spec.VCPUs, mem: v.spec.MemoryMiB})
	}
	d.log.Info().Str("figure", f.key).Strs("hosts", d.cal.hosts).Msg("calibration: measuring")
	rec := f.rec
	d.goJob(func() { d.runCalibration(mctx, f, rec, vms) })
}

// runCalibration measures a figure (rec is its record when it started),
// records it, and destroys its VMs.
func (d *Daemon) runCalibration(ctx context.Context, f *calFigure, rec calRecord, vms []calVM) {
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
		d.mu.Lock()
		for _, v := range vms {
			delete(d.cal.vms, v.spec.Name)
			d.promised.drop(v.spec.Name)
		}
		d.cal.cancel()
		close(d.cal.done)
		d.cal.running, d.cal.hosts, d.cal.cancel, d.cal.done = "", nil, nil, nil
		d.mu.Unlock()
		select {
		case d.cal.kick <- struct{}{}:
		default:
		}
	}()
	value, err := d.measure(ctx, rec, vms, created)
	now := d.now()
	d.mu.Lock()
	if ctx.Err() != nil {
		why := d.cal.aborted
		if why != "" {
			f.forced = now // stopped for a switch: measured again when hosts allow
		}
		d.mu.Unlock()
		if why != "" {
			d.log.Info().Str("figure", f.key).Str("why", why).Msg("calibration: measurement stopped")
		}
		return
	}
	r := &f.rec
	if err == nil {
		old := *r
		r.Value, r.MeasuredAt, r.Error, r.ErrorAt = value, now, "", time.Time{}
		r.Hosts = nil
		for _, v := range vms {
			r.Hosts = append(r.Hosts, v.spec.Host)
		}
		if err = d.observe(*r); err != nil {
			old.LastAttempt = r.LastAttempt
			*r = old
			err = fmt.Errorf("site %s: the figure %g is refused: %w", r.Site, value, err)
		}
	}
	if err != nil {
		r.Error, r.ErrorAt = err.Error(), now
	}
	rec = *r
	d.mu.Unlock()
	if err != nil {
		d.log.Warn().Str("figure", f.key).Err(err).Msg("calibration: measurement failed")
	} else {
		d.log.Info().Str("figure", f.key).Float64("value", value).Strs("hosts", rec.Hosts).Msg("calibration: measured")
		d.kick() // plans follow the new figure
	}
	if err := d.st.SetCalibration(context.WithoutCancel(ctx), f.key, mustJSON(rec)); err != nil {
		d.log.Error().Err(err).Str("figure", f.key).Msg("calibration: cannot record a figure")
	}
}

// measure creates the VMs of a measurement (created says which exist) and
// takes the figure in them.
func (d *Daemon) measure(ctx context.Context, r calRecord, vms []calVM, created []bool) (float64, error) {
	at := func(i int) string {
		return fmt.Sprintf("site %s, VM %s on host %s", vms[i].site.name, vms[i].spec.Name, vms[i].spec.Host)
	}
	addrs, prefixes := make([]string, len(vms)), make([]string, len(vms))
	for i, v := range vms {
		c, cancel := context.WithTimeout(ctx, calibrationBoot)
		vm, err := v.site.agent.CreateVM(c, v.spec)
		cancel()
		if err != nil {
			return 0, fmt.Errorf("%s: create: %w", at(i), err)
		}
		created[i] = true
		d.vmsCreated.Add(1)
		prefixes[i] = vm.Address
		addrs[i], _, _ = strings.Cut(vm.Address, "/")
	}
	guest := func(i int) executor.GuestAgent { return vms[i].site.agent.(executor.GuestAgent) }
	switch r.Kind {
	case api.CalibrationPerf:
		n := vms[0].spec.VCPUs
		out, err := d.guestRun(ctx, guest(0), vms[0].spec.Name, time.Duration(2*d.cfg.Calibration.withDefaults().BenchSeconds)*time.Second+2*time.Minute,
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
		if _, err := guest(1).GuestExec(ctx, vms[1].spec.Name, hp.GuestExec{Path: image.TaskFarmPath, Args: []string{"sink", "--port", port}}); err != nil {
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
			out, err = d.guestRun(ctx, guest(0), vms[0].spec.Name, calibrationProbeTimeout,
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
		return d.measureStart(ctx, vms, prefixes)
	}
	return 0, fmt.Errorf("calibration: no kind %q", r.Kind)
}

// measureStart runs a job that does nothing in the VMs through the
// daemon's executor, the first VM its master, and returns its run time:
// what a job's start and end take beyond its program's run.
func (d *Daemon) measureStart(ctx context.Context, vms []calVM, prefixes []string) (float64, error) {
	run := executor.Run{JobID: vms[0].spec.Name, Job: &selection.Job{Name: "calibration-start", Type: vms[0].spec.Pool, Tasks: 1,
		Command: []string{"true"}}, Attempt: 1, Output: io.Discard}
	for i, v := range vms {
		run.VMs = append(run.VMs, executor.VM{Name: v.spec.Name, Site: v.site.name, Host: v.spec.Host, Master: i == 0,
			VCPUs: v.spec.VCPUs, MemoryMiB: v.spec.MemoryMiB, Address: prefixes[i]})
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

// guestRun runs the task farm's program in a VM to its end (at most
// limit), polled every calibrationPoll on the daemon's clock.
func (d *Daemon) guestRun(ctx context.Context, g executor.GuestAgent, vm string, limit time.Duration, args ...string) ([]byte, error) {
	return executor.RunProgram(ctx, g, vm, executor.Program{Path: image.TaskFarmPath, Args: args, Limit: limit, Poll: calibrationPoll, Clock: d.clock})
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
	d.mu.Lock()
	if !slices.Contains(d.cal.hosts, host) {
		d.mu.Unlock()
		return
	}
	d.cal.aborted = why
	d.cal.cancel()
	done := d.cal.done
	d.mu.Unlock()
	select {
	case <-ctx.Done():
	case <-done:
	}
}

// calibratingLocked says whether a measurement uses host.
func (d *Daemon) calibratingLocked(host string) bool { return slices.Contains(d.cal.hosts, host) }

// Calibration is the calibration's view: every site, every figure with
// its age and when it is due.
func (d *Daemon) Calibration() api.Calibration {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.calibrationViewLocked(d.now())
}

func (d *Daemon) calibrationViewLocked(now time.Time) api.Calibration {
	c := d.cfg.Calibration.withDefaults()
	v := api.Calibration{At: now, MaxAgeSeconds: c.MaxAge.Seconds(), Auto: !c.OnDemand, BenchSeconds: c.BenchSeconds, ProbeBytes: c.ProbeBytes,
		Measuring: d.cal.running, Sites: []api.CalibrationSite{}, Figures: []api.CalibrationFigure{}}
	for _, s := range d.sites {
		cs := api.CalibrationSite{Name: s.name, Calibrated: true, Note: calibratesWhy(s)}
		if cs.Note != "" {
			cs.Calibrated = false
		} else if d.bootingHostsLocked(s.name) < 2 {
			cs.Note = "fewer than two hosts that boot guests: its LAN is not measured (the grid file's lan_mbps holds)"
		}
		v.Sites = append(v.Sites, cs)
	}
	for _, f := range d.figuresLocked() {
		r := f.rec
		fv := api.CalibrationFigure{Key: f.key, Kind: r.Kind, Site: r.Site, Peer: r.Peer, Image: r.Image, Value: r.Value,
			MeasuredAt: r.MeasuredAt, Hosts: r.Hosts, Error: r.Error, ErrorAt: r.ErrorAt, Waiting: f.waiting}
		switch r.Kind {
		case api.CalibrationPerf:
			fv.Unit, fv.ConfiguredUnit = "ops/s per vCPU", "ops/s per machine"
			if i, ok := d.grid.Index(r.Site); ok {
				fv.Configured = d.grid.Clusters[i].Perf
			}
		case api.CalibrationLAN:
			fv.Unit, fv.ConfiguredUnit = "Mbit/s", "Mbit/s"
			if i, ok := d.grid.Index(r.Site); ok {
				fv.Configured = d.grid.Clusters[i].LANMbps
			}
		case api.CalibrationStart:
			fv.Unit = "s" // nothing configured
		case api.CalibrationLink:
			fv.Unit, fv.ConfiguredUnit = "Mbit/s", "Mbit/s"
			for _, l := range d.grid.Links {
				if l.Between == [2]string{r.Site, r.Peer} {
					fv.Configured = l.Mbps
				}
			}
		}
		if !r.MeasuredAt.IsZero() {
			fv.AgeSeconds = now.Sub(r.MeasuredAt).Seconds()
		}
		at, due := d.dueLocked(f, now)
		fv.Due = at
		switch {
		case d.cal.running == f.key:
			fv.State, fv.Waiting = api.CalibrationMeasuring, ""
		case due:
			fv.State = api.CalibrationDue
		case r.Error != "":
			fv.State = api.CalibrationFailed
		default:
			fv.State = api.CalibrationMeasured
		}
		if fv.State != api.CalibrationDue {
			fv.Waiting = ""
		}
		v.Figures = append(v.Figures, fv)
	}
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
	d.mu.Lock()
	now := d.now()
	d.updateFiguresLocked(now)
	n := 0
	for _, f := range d.figuresLocked() {
		if slices.Contains(sites, f.rec.Site) || slices.Contains(sites, f.rec.Peer) {
			f.forced = now
			n++
		}
	}
	v := d.calibrationViewLocked(now)
	d.mu.Unlock()
	d.log.Info().Strs("sites", sites).Int("figures", n).Msg("calibration asked for")
	select {
	case d.cal.kick <- struct{}{}:
	default:
	}
	return v, nil
}
