// Package calibration is the daemon's calibration subsystem
// (docs/internals/daemon.md, "Calibration"): the figures it measures of its
// sites in VMs, which of them are due, and on which idle hosts the next
// measurement runs. Decide and View are pure: they take the figures, the
// sites' hosts as the daemon sees them, the configuration and the time, and
// return decisions, with no I/O and no clock. Book holds the figures and the
// measurement under way behind a lock of its own; the daemon creates and
// destroys the VMs, runs the programs in them, and gives the results back.
package calibration

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/metasched/metasched/metasched/api"
)

// Job is the job label of the calibration's VMs on their hosts.
const Job = "calibration"

// Record is a figure as the store keeps it.
type Record struct {
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

// Key names a figure: perf/SITE/IMAGE, lan/SITE, start/SITE, link/A/B.
func Key(kind, site, other string) string {
	if other == "" {
		return kind + "/" + site
	}
	return kind + "/" + site + "/" + other
}

// Key is the record's key.
func (r Record) Key() string { return Key(r.Kind, r.Site, cmpOr(r.Image, r.Peer)) }

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// Figure is a figure the daemon keeps: its record, when it was asked for
// (on demand, or its site's agent answered again; zero when it was not,
// or its measurement has started since), and what it waits for when due.
type Figure struct {
	Key     string
	Rec     Record
	Forced  time.Time
	Waiting string
}

// Config is what the calibration's configuration says of when figures
// are due.
type Config struct {
	// OnDemand (calibration.auto: false): only what an operator asks for
	// is measured.
	OnDemand bool
	// MaxAge is how old a figure may get; Retry how long a failed one
	// waits (at most MaxAge).
	MaxAge, Retry time.Duration
}

// Host is a host of a calibrated site as the daemon sees it.
type Host struct {
	Name string
	// Pool is the pool it serves ("" none), Image what the pool's VMs
	// boot ("" none), and VCPUs and MemoryMiB the pool's VM.
	Pool, Image      string
	VCPUs, MemoryMiB int
	Reachable        bool
	// Boots says a calibration VM on it boots its image (a host of
	// libvirt's test driver boots none).
	Boots bool
	// Idle says the calibration may take it now: it serves its pool, no
	// VM is on it or promised to it, no live job is placed on it, no job
	// waits in its pool's queue, and it has room for its pool's VM.
	Idle bool
}

// Site is a site of the grid.
type Site struct {
	Name string
	// Why it cannot be calibrated ("" when it can): its agent has no
	// guest API, or boots no guest. Its figures are kept but not listed.
	Why string
	// Hosts are the site's hosts in grid order (only a calibrated site's
	// count).
	Hosts []Host
	// Perf and LANMbps are the grid file's figures (the view shows them).
	Perf, LANMbps float64
}

// Link is a link of the grid, as the grid file gives it.
type Link struct {
	Between [2]string
	Mbps    float64
}

// Grid is the sites in grid order and the links: what a round looks at.
type Grid struct {
	Sites []Site
	Links []Link
	// Starts says the jobs run a program (the guest executor): each site
	// has a start figure.
	Starts bool
}

func (g *Grid) site(name string) (int, *Site) {
	for i := range g.Sites {
		if g.Sites[i].Name == name {
			return i, &g.Sites[i]
		}
	}
	return -1, nil
}

// calibrated reports whether the site is in the grid and can be
// calibrated.
func (g *Grid) calibrated(name string) bool {
	_, s := g.site(name)
	return s != nil && s.Why == ""
}

// State is the calibration's state a round decides on.
type State struct {
	Figs map[string]Figure
	// Seen is whether each site's agent answered at the last round
	// (absent: not seen yet).
	Seen map[string]bool
	// Running is the key of the figure being measured ("" none).
	Running string
}

// Update is what a look at the sites changes: the figures they call for
// now, the sites whose agents answer again, and whether each site
// answered.
type Update struct {
	// New are the figures the sites call for that the state lacks, in
	// the order found.
	New []Figure
	// Back are the sites whose agents answer again after they did not;
	// Force the keys of their figures (and their links'), asked for
	// again (none with OnDemand).
	Back  []string
	Force []string
	Seen  map[string]bool
}

// Look brings the figures up to date with the sites: a perf figure for
// each image a pool of a calibrated site boots, a LAN figure for a site
// of two hosts or more that boot guests, a start figure for each site
// with the guest executor, a link figure between two calibrated sites;
// and, but with OnDemand, the figures of a site whose agent answers
// again after it did not, asked for again.
func Look(st State, g Grid, cfg Config) Update {
	u := Update{Seen: map[string]bool{}}
	have := func(kind, site, peer, image string) {
		r := Record{Kind: kind, Site: site, Peer: peer, Image: image}
		k := r.Key()
		if _, ok := st.Figs[k]; ok || slices.ContainsFunc(u.New, func(f Figure) bool { return f.Key == k }) {
			return
		}
		u.New = append(u.New, Figure{Key: k, Rec: r})
	}
	for _, s := range g.Sites {
		if s.Why != "" {
			continue
		}
		reachable, boots := false, 0
		for _, h := range s.Hosts {
			reachable = reachable || h.Reachable
			if !h.Boots {
				continue
			}
			boots++
			if h.Image != "" && h.Pool != "" {
				have(api.CalibrationPerf, s.Name, "", h.Image)
			}
		}
		if boots >= 2 {
			have(api.CalibrationLAN, s.Name, "", "")
		}
		if boots >= 1 && g.Starts {
			have(api.CalibrationStart, s.Name, "", "")
		}
		if was, seen := st.Seen[s.Name]; seen && !was && reachable && !cfg.OnDemand {
			u.Back = append(u.Back, s.Name)
		}
		u.Seen[s.Name] = reachable
	}
	for _, l := range g.Links {
		if g.calibrated(l.Between[0]) && g.calibrated(l.Between[1]) {
			have(api.CalibrationLink, l.Between[0], l.Between[1], "")
		}
	}
	if len(u.Back) > 0 {
		for _, f := range all(st.Figs, u.New) {
			if slices.Contains(u.Back, f.Rec.Site) || slices.Contains(u.Back, f.Rec.Peer) {
				u.Force = append(u.Force, f.Key)
			}
		}
		slices.Sort(u.Force)
	}
	return u
}

// all is the figures of figs and more.
func all(figs map[string]Figure, more []Figure) []Figure {
	out := make([]Figure, 0, len(figs)+len(more))
	for _, f := range figs {
		out = append(out, f)
	}
	return append(out, more...)
}

var kinds = []string{api.CalibrationPerf, api.CalibrationLAN, api.CalibrationStart, api.CalibrationLink}

// Listed is the figures of the sites that can be calibrated, but the perf
// of an image no pool of its site boots now (no plan uses it): by site in
// grid order, perf before LAN before start before link, then by key.
func Listed(figs map[string]Figure, g Grid) []Figure {
	inUse := map[string]bool{}
	for _, s := range g.Sites {
		for _, h := range s.Hosts {
			if h.Image != "" && h.Pool != "" {
				inUse[Key(api.CalibrationPerf, s.Name, h.Image)] = true
			}
		}
	}
	var out []Figure
	for _, f := range figs {
		if !g.calibrated(f.Rec.Site) || (f.Rec.Peer != "" && !g.calibrated(f.Rec.Peer)) {
			continue
		}
		if f.Rec.Kind == api.CalibrationPerf && !inUse[f.Key] {
			continue
		}
		out = append(out, f)
	}
	slices.SortFunc(out, func(a, b Figure) int {
		ia, _ := g.site(a.Rec.Site)
		ib, _ := g.site(b.Rec.Site)
		if ia != ib {
			return ia - ib
		}
		if c := slices.Index(kinds, a.Rec.Kind) - slices.Index(kinds, b.Rec.Kind); c != 0 {
			return c
		}
		return strings.Compare(a.Key, b.Key)
	})
	return out
}

// Due says when the figure is (or was) due, and whether it is due now:
// asked for; never tried (but with OnDemand); failed, Retry (at most
// MaxAge) after its failure; else MaxAge after its measurement. With
// OnDemand, only a figure asked for is due.
func Due(f Figure, cfg Config, now time.Time) (time.Time, bool) {
	if !f.Forced.IsZero() {
		return f.Forced, true
	}
	if cfg.OnDemand {
		return time.Time{}, false
	}
	r := f.Rec
	var at time.Time
	switch {
	case r.LastAttempt.IsZero():
		return now, true
	case r.Error != "" && !r.ErrorAt.Before(r.MeasuredAt):
		at = r.ErrorAt.Add(min(cfg.Retry, cfg.MaxAge))
	default:
		at = r.MeasuredAt.Add(cfg.MaxAge)
	}
	return at, !now.Before(at)
}

// VM is a VM of a measurement: on Host of Site, in its pool, of the
// pool's shape and image.
type VM struct {
	Site, Host, Pool, Image string
	VCPUs, MemoryMiB        int
}

// Decision is a round's: the figures that wait (key → what for; "" for
// those not due) and the figure whose measurement starts now, on VMs.
type Decision struct {
	Waiting map[string]string
	Start   string
	VMs     []VM
}

// Decide starts the first due figure (in Listed's order) whose hosts are
// idle, when nothing is being measured, and says what every other due
// figure waits for. st is the state after Look's update.
func Decide(st State, g Grid, cfg Config, now time.Time) Decision {
	d := Decision{Waiting: map[string]string{}}
	if st.Running != "" {
		return d
	}
	for _, f := range Listed(st.Figs, g) {
		if _, due := Due(f, cfg, now); !due {
			d.Waiting[f.Key] = ""
			continue
		}
		vms, why := place(f.Rec, g)
		d.Waiting[f.Key] = why
		if why == "" {
			d.Start, d.VMs = f.Key, vms
			return d
		}
	}
	return d
}

// place chooses the idle hosts of a figure's measurement and the VMs on
// them, or says what it waits for.
func place(r Record, g Grid) ([]VM, string) {
	taken := map[string]bool{}
	pick := func(site, image string) (VM, bool) {
		_, s := g.site(site)
		if s == nil {
			return VM{}, false
		}
		for _, h := range s.Hosts {
			if taken[h.Name] || !h.Boots || !h.Idle || h.Image == "" || (image != "" && h.Image != image) {
				continue
			}
			taken[h.Name] = true
			return VM{Site: site, Host: h.Name, Pool: h.Pool, Image: h.Image, VCPUs: h.VCPUs, MemoryMiB: h.MemoryMiB}, true
		}
		return VM{}, false
	}
	const idle = " (idle: serving its pool, with no VM, and no job queued in its pool)"
	switch r.Kind {
	case api.CalibrationPerf:
		if v, ok := pick(r.Site, r.Image); ok {
			return []VM{v}, ""
		}
		return nil, fmt.Sprintf("waiting for an idle host of a pool of site %s whose VMs boot image %s", r.Site, r.Image) + idle
	case api.CalibrationLAN:
		a, okA := pick(r.Site, "")
		b, okB := pick(r.Site, "")
		if okA && okB {
			return []VM{a, b}, ""
		}
		return nil, fmt.Sprintf("waiting for two idle hosts at site %s, in pools with an image", r.Site) + idle
	case api.CalibrationStart:
		a, okA := pick(r.Site, "")
		if !okA {
			return nil, fmt.Sprintf("waiting for an idle host at site %s, in a pool with an image", r.Site) + idle
		}
		if b, ok := pick(r.Site, ""); ok {
			return []VM{a, b}, ""
		}
		// A second host may be busy, or the site may have one: a job of
		// one VM, unless another host could take the second VM later.
		if booting(g, r.Site) >= 2 {
			return nil, fmt.Sprintf("waiting for two idle hosts at site %s, in pools with an image", r.Site) + idle
		}
		return []VM{a}, ""
	case api.CalibrationLink:
		a, okA := pick(r.Site, "")
		b, okB := pick(r.Peer, "")
		if okA && okB {
			return []VM{a, b}, ""
		}
		return nil, fmt.Sprintf("waiting for an idle host at each of sites %s and %s, in a pool with an image", r.Site, r.Peer) + idle
	}
	return nil, "no such kind of figure"
}

// booting counts the hosts of a site whose calibration VMs boot their
// image.
func booting(g Grid, site string) int {
	_, s := g.site(site)
	if s == nil {
		return 0
	}
	n := 0
	for _, h := range s.Hosts {
		if h.Boots {
			n++
		}
	}
	return n
}

// View is the calibration's view at now: every site, every listed figure
// with its age, its state and when it is due. The caller fills the
// configuration's figures (max age, bench seconds, probe bytes).
func View(st State, g Grid, cfg Config, now time.Time) api.Calibration {
	v := api.Calibration{At: now, Measuring: st.Running, Sites: []api.CalibrationSite{}, Figures: []api.CalibrationFigure{}}
	for _, s := range g.Sites {
		cs := api.CalibrationSite{Name: s.Name, Calibrated: s.Why == "", Note: s.Why}
		if cs.Calibrated && booting(g, s.Name) < 2 {
			cs.Note = "fewer than two hosts that boot guests: its LAN is not measured (the grid file's lan_mbps holds)"
		}
		v.Sites = append(v.Sites, cs)
	}
	for _, f := range Listed(st.Figs, g) {
		r := f.Rec
		fv := api.CalibrationFigure{Key: f.Key, Kind: r.Kind, Site: r.Site, Peer: r.Peer, Image: r.Image, Value: r.Value,
			MeasuredAt: r.MeasuredAt, Hosts: r.Hosts, Error: r.Error, ErrorAt: r.ErrorAt, Waiting: f.Waiting}
		_, s := g.site(r.Site)
		switch r.Kind {
		case api.CalibrationPerf:
			fv.Unit, fv.ConfiguredUnit, fv.Configured = "ops/s per vCPU", "ops/s per machine", s.Perf
		case api.CalibrationLAN:
			fv.Unit, fv.ConfiguredUnit, fv.Configured = "Mbit/s", "Mbit/s", s.LANMbps
		case api.CalibrationStart:
			fv.Unit = "s" // nothing configured
		case api.CalibrationLink:
			fv.Unit, fv.ConfiguredUnit = "Mbit/s", "Mbit/s"
			for _, l := range g.Links {
				if l.Between == [2]string{r.Site, r.Peer} {
					fv.Configured = l.Mbps
				}
			}
		}
		if !r.MeasuredAt.IsZero() {
			fv.AgeSeconds = now.Sub(r.MeasuredAt).Seconds()
		}
		at, due := Due(f, cfg, now)
		fv.Due = at
		switch {
		case st.Running == f.Key:
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
