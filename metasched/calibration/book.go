package calibration

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/metasched/metasched/metasched/api"
)

// MaxStartSeconds bounds a start figure: a job that takes longer to start
// than that is not starting.
const MaxStartSeconds = 3600

// Observer gives a measured perf, LAN or link figure to the planner; an
// error refuses it.
type Observer func(Record) error

// Book is the calibration's state behind its own lock: the figures, the
// sites seen at the last round, the measurement under way (one at a time
// across the grid) and the start figures. The daemon takes its own lock
// before Book's when it holds both (a round decides on the hosts it
// guards); Book calls out only to its Observer, which takes no lock of
// the daemon's.
type Book struct {
	cfg      Config
	instance string
	observe  Observer
	kick     chan struct{}

	mu   sync.Mutex
	figs map[string]*Figure
	seen map[string]bool
	// The measurement under way: its figure, hosts and VMs, its cancel,
	// a channel closed when its VMs are gone, and why it was stopped.
	running string
	hosts   []string
	vms     map[string]bool
	cancel  context.CancelFunc
	done    chan struct{}
	aborted string
	seq     int
	// start is each site's measured start and end, in seconds.
	start map[string]float64
}

// NewBook is an empty book; its calibration VMs are named
// cal-INSTANCE-N, and its perf, LAN and link figures go to observe.
func NewBook(cfg Config, instance string, observe Observer) *Book {
	return &Book{cfg: cfg, instance: instance, observe: observe, kick: make(chan struct{}, 1),
		figs: map[string]*Figure{}, seen: map[string]bool{}, vms: map[string]bool{}, start: map[string]float64{}}
}

// Restored is a figure of the store that Restore could not take, and why.
type Restored struct {
	Key, Why string
}

// Restore takes the figures the store keeps (key → JSON record) and gives
// the measured ones to the planner. A record that cannot be read is
// skipped, one the planner refuses kept unmeasured: both are measured
// again, and listed in the answer.
func (b *Book) Restore(recs map[string][]byte) []Restored {
	b.mu.Lock()
	defer b.mu.Unlock()
	var bad []Restored
	for _, key := range slices.Sorted(maps.Keys(recs)) {
		var r Record
		if err := json.Unmarshal(recs[key], &r); err != nil || r.Key() != key {
			bad = append(bad, Restored{key, "a calibration figure in the store cannot be read: it is measured again"})
			continue
		}
		if r.Value > 0 {
			if err := b.observeLocked(r); err != nil {
				bad = append(bad, Restored{key, "a calibration figure in the store is refused: it is measured again: " + err.Error()})
				r.Value, r.MeasuredAt, r.LastAttempt = 0, time.Time{}, time.Time{}
			}
		}
		b.figs[key] = &Figure{Key: key, Rec: r}
	}
	return bad
}

// observeLocked takes a measured figure: a start figure is the book's, the
// others the planner's. b.mu must be held.
func (b *Book) observeLocked(r Record) error {
	switch r.Kind {
	case api.CalibrationPerf, api.CalibrationLAN, api.CalibrationLink:
		return b.observe(r)
	case api.CalibrationStart:
		if !(r.Value > 0 && r.Value < MaxStartSeconds) {
			return fmt.Errorf("a start and end of %g s is not within 0 and %g s", r.Value, float64(MaxStartSeconds))
		}
		b.start[r.Site] = r.Value
		return nil
	}
	return fmt.Errorf("calibration: no kind %q", r.Kind)
}

// stateLocked is the state Decide and View take. b.mu must be held.
func (b *Book) stateLocked() State {
	st := State{Figs: make(map[string]Figure, len(b.figs)), Seen: b.seen, Running: b.running}
	for k, f := range b.figs {
		st.Figs[k] = *f
	}
	return st
}

// lookLocked applies Look's update and says which sites came back. b.mu
// must be held.
func (b *Book) lookLocked(g Grid, now time.Time) []string {
	u := Look(b.stateLocked(), g, b.cfg)
	for _, f := range u.New {
		b.figs[f.Key] = &f
	}
	for _, k := range u.Force {
		b.figs[k].Forced = now
	}
	b.seen = u.Seen
	return u.Back
}

// Start is a measurement that starts: its figure's key and record, its
// VMs (named), and the context it runs in (cancelled by Abort).
type Start struct {
	Key string
	Rec Record
	VMs []StartVM
	Ctx context.Context
}

// StartVM is a VM of a measurement, named.
type StartVM struct {
	Name string
	VM
}

// Round brings the figures up to date with the grid and starts the first
// due figure whose hosts are idle, when nothing is being measured: ok
// says one started. back lists the sites whose agents answer again (their
// figures are asked for again). ctx is the parent of the measurement's.
func (b *Book) Round(ctx context.Context, g Grid, now time.Time) (s Start, back []string, ok bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	back = b.lookLocked(g, now)
	d := Decide(b.stateLocked(), g, b.cfg, now)
	for k, why := range d.Waiting {
		b.figs[k].Waiting = why
	}
	if d.Start == "" {
		return Start{}, back, false
	}
	f := b.figs[d.Start]
	f.Forced, f.Waiting = time.Time{}, ""
	f.Rec.LastAttempt = now
	mctx, cancel := context.WithCancel(ctx)
	b.running, b.cancel, b.done, b.aborted, b.hosts = f.Key, cancel, make(chan struct{}), "", nil
	s = Start{Key: f.Key, Rec: f.Rec, Ctx: mctx}
	for _, v := range d.VMs {
		b.seq++
		name := fmt.Sprintf("cal-%s-%d", b.instance, b.seq)
		b.hosts = append(b.hosts, v.Host)
		b.vms[name] = true
		s.VMs = append(s.VMs, StartVM{Name: name, VM: v})
	}
	return s, back, true
}

// Ask asks for the figures of sites (and of the links that touch them) to
// be measured as soon as their hosts are idle, and returns how many.
func (b *Book) Ask(g Grid, sites []string, now time.Time) int {
	b.mu.Lock()
	b.lookLocked(g, now)
	n := 0
	for _, f := range Listed(b.stateLocked().Figs, g) {
		if slices.Contains(sites, f.Rec.Site) || slices.Contains(sites, f.Rec.Peer) {
			b.figs[f.Key].Forced = now
			n++
		}
	}
	b.mu.Unlock()
	b.Kick()
	return n
}

// Measured records the end of a measurement that was not stopped: its
// value on the hosts, or its error. A value the planner refuses is an
// error and leaves the last measured value. It returns the record to
// store and the measurement's error.
func (b *Book) Measured(s Start, value float64, err error, now time.Time) (Record, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	f := b.figs[s.Key]
	r := &f.Rec
	if err == nil {
		old := *r
		r.Value, r.MeasuredAt, r.Error, r.ErrorAt = value, now, "", time.Time{}
		r.Hosts = nil
		for _, v := range s.VMs {
			r.Hosts = append(r.Hosts, v.Host)
		}
		if err = b.observeLocked(*r); err != nil {
			old.LastAttempt = r.LastAttempt
			*r = old
			err = fmt.Errorf("site %s: the figure %g is refused: %w", r.Site, value, err)
		}
	}
	if err != nil {
		r.Error, r.ErrorAt = err.Error(), now
	}
	return *r, err
}

// Stopped records that a measurement's context ended before it did, and
// says why it was stopped ("" when the daemon stops): a figure stopped for
// a switch is asked for again, to be measured when hosts allow.
func (b *Book) Stopped(s Start, now time.Time) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.aborted != "" {
		b.figs[s.Key].Forced = now
	}
	return b.aborted
}

// Ended releases a measurement whose VMs are gone: the next can start.
func (b *Book) Ended(s Start) {
	b.mu.Lock()
	for _, v := range s.VMs {
		delete(b.vms, v.Name)
	}
	b.cancel()
	close(b.done)
	b.running, b.hosts, b.cancel, b.done = "", nil, nil, nil
	b.mu.Unlock()
	b.Kick()
}

// Abort stops the measurement that uses host, if any, for why, and
// returns a channel closed when its VMs are gone (nil: none uses it).
func (b *Book) Abort(host, why string) <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !slices.Contains(b.hosts, host) {
		return nil
	}
	b.aborted = why
	b.cancel()
	return b.done
}

// Measuring reports whether a measurement uses host.
func (b *Book) Measuring(host string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Contains(b.hosts, host)
}

// Owns reports whether the VM is a measurement's under way.
func (b *Book) Owns(vm string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.vms[vm]
}

// StartSeconds is the site's measured start and end (0: none).
func (b *Book) StartSeconds(site string) float64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.start[site]
}

// View is the calibration's view at now (see View).
func (b *Book) View(g Grid, now time.Time) api.Calibration {
	b.mu.Lock()
	defer b.mu.Unlock()
	v := View(b.stateLocked(), g, b.cfg, now)
	v.MaxAgeSeconds, v.Auto = b.cfg.MaxAge.Seconds(), !b.cfg.OnDemand
	return v
}

// Kick wakes the calibration loop.
func (b *Book) Kick() {
	select {
	case b.kick <- struct{}{}:
	default:
	}
}

// Kicked is the channel Kick wakes.
func (b *Book) Kicked() <-chan struct{} { return b.kick }
