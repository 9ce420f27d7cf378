package calibration

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/metasched/metasched/internal/deptest"
	"github.com/metasched/metasched/metasched/api"
)

var t0 = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

var cfg = Config{MaxAge: time.Hour, Retry: 10 * time.Minute}

// host is an idle host of pool farm, whose VMs boot image debian.
func host(name string) Host {
	return Host{Name: name, Pool: "farm", Image: "debian", VCPUs: 1, MemoryMiB: 256, Reachable: true, Boots: true, Idle: true}
}

// grid: site a with two hosts, b with one, c whose agent boots no
// guest; links a–b and a–c.
func grid() Grid {
	return Grid{Starts: true,
		Sites: []Site{
			{Name: "a", Hosts: []Host{host("a-1"), host("a-2")}, Perf: 1e9, LANMbps: 1000},
			{Name: "b", Hosts: []Host{host("b-1")}, Perf: 2e9, LANMbps: 100},
			{Name: "c", Why: "its agent boots no guest", Hosts: []Host{host("c-1")}},
		},
		Links: []Link{{Between: [2]string{"a", "b"}, Mbps: 20}, {Between: [2]string{"a", "c"}, Mbps: 10}}}
}

func keys(figs []Figure) []string {
	var out []string
	for _, f := range figs {
		out = append(out, f.Key)
	}
	return out
}

// state is the state after Look's update on st.
func apply(st State, u Update, now time.Time) State {
	out := State{Figs: map[string]Figure{}, Seen: u.Seen, Running: st.Running}
	for k, f := range st.Figs {
		out.Figs[k] = f
	}
	for _, f := range u.New {
		out.Figs[f.Key] = f
	}
	for _, k := range u.Force {
		f := out.Figs[k]
		f.Forced = now
		out.Figs[k] = f
	}
	return out
}

// Look adds the figures the sites call for, none of a site that cannot
// be calibrated, and asks again for a site whose agent answers again,
// but with auto: false.
func TestLook(t *testing.T) {
	g := grid()
	u := Look(State{}, g, cfg)
	if want := []string{"perf/a/debian", "lan/a", "start/a", "perf/b/debian", "start/b", "link/a/b"}; !slices.Equal(keys(u.New), want) {
		t.Errorf("new figures %v, want %v", keys(u.New), want)
	}
	if want := map[string]bool{"a": true, "b": true}; !maps.Equal(u.Seen, want) {
		t.Errorf("seen %v, want %v", u.Seen, want)
	}
	if len(u.Back) > 0 || len(u.Force) > 0 {
		t.Errorf("at the first look: back %v, forced %v", u.Back, u.Force)
	}
	st := apply(State{}, u, t0)

	// Site b's one host is unreachable, then answers again.
	g.Sites[1].Hosts[0].Reachable = false
	u = Look(st, g, cfg)
	if len(u.New) > 0 || u.Seen["b"] || len(u.Back) > 0 {
		t.Errorf("site b down: new %v, seen %v, back %v", keys(u.New), u.Seen, u.Back)
	}
	st = apply(st, u, t0)
	g.Sites[1].Hosts[0].Reachable = true
	for _, c := range []struct {
		cfg   Config
		back  []string
		force []string
	}{
		{cfg, []string{"b"}, []string{"link/a/b", "perf/b/debian", "start/b"}},
		{Config{OnDemand: true, MaxAge: time.Hour}, nil, nil},
	} {
		u = Look(st, g, c.cfg)
		if !slices.Equal(u.Back, c.back) || !slices.Equal(u.Force, c.force) || !u.Seen["b"] {
			t.Errorf("on demand %t, site b back: back %v, forced %v, seen %v; want %v, %v", c.cfg.OnDemand, u.Back, u.Force, u.Seen, c.back, c.force)
		}
	}

	// A pool of site b comes to boot another image: its perf is a new
	// figure; no guest executor, no start figures.
	g.Sites[1].Hosts[0].Image = "alpine"
	g.Starts = false
	u = Look(st, g, cfg)
	if want := []string{"perf/b/alpine"}; !slices.Equal(keys(u.New), want) {
		t.Errorf("new image: new figures %v, want %v", keys(u.New), want)
	}
}

func TestDue(t *testing.T) {
	failed := Record{LastAttempt: t0, MeasuredAt: t0.Add(-time.Hour), Error: "boom", ErrorAt: t0}
	for _, c := range []struct {
		name string
		f    Figure
		cfg  Config
		now  time.Time
		at   time.Time
		due  bool
	}{
		{"never tried", Figure{}, cfg, t0, t0, true},
		{"never tried, on demand", Figure{}, Config{OnDemand: true}, t0, time.Time{}, false},
		{"asked for, on demand", Figure{Forced: t0}, Config{OnDemand: true}, t0.Add(time.Second), t0, true},
		{"measured, young", Figure{Rec: Record{LastAttempt: t0, MeasuredAt: t0}}, cfg, t0.Add(59 * time.Minute), t0.Add(time.Hour), false},
		{"measured, old", Figure{Rec: Record{LastAttempt: t0, MeasuredAt: t0}}, cfg, t0.Add(time.Hour), t0.Add(time.Hour), true},
		{"failed: retried", Figure{Rec: failed}, cfg, t0.Add(10 * time.Minute), t0.Add(10 * time.Minute), true},
		{"failed: retried within max age", Figure{Rec: failed}, Config{MaxAge: time.Minute, Retry: 10 * time.Minute}, t0, t0.Add(time.Minute), false},
	} {
		at, due := Due(c.f, c.cfg, c.now)
		if !at.Equal(c.at) || due != c.due {
			t.Errorf("%s: due at %v (%t), want %v (%t)", c.name, at, due, c.at, c.due)
		}
	}
}

// Listed orders the figures by site in grid order, then kind, and leaves
// out a site that cannot be calibrated and the perf of an image no pool
// boots now.
func TestListed(t *testing.T) {
	figs := map[string]Figure{}
	for _, r := range []Record{
		{Kind: api.CalibrationLink, Site: "a", Peer: "b"}, {Kind: api.CalibrationPerf, Site: "b", Image: "debian"},
		{Kind: api.CalibrationStart, Site: "a"}, {Kind: api.CalibrationLAN, Site: "a"}, {Kind: api.CalibrationPerf, Site: "a", Image: "debian"},
		{Kind: api.CalibrationPerf, Site: "a", Image: "alpine"}, {Kind: api.CalibrationPerf, Site: "c", Image: "debian"},
		{Kind: api.CalibrationLink, Site: "a", Peer: "c"},
	} {
		figs[r.Key()] = Figure{Key: r.Key(), Rec: r}
	}
	want := []string{"perf/a/debian", "lan/a", "start/a", "link/a/b", "perf/b/debian"}
	if got := keys(Listed(figs, grid())); !slices.Equal(got, want) {
		t.Errorf("listed %v, want %v", got, want)
	}
}

// Decide starts the first due figure whose hosts are idle, and says what
// the due figures before it wait for.
func TestDecide(t *testing.T) {
	st := apply(State{}, Look(State{}, grid(), cfg), t0)
	vm := func(site, h string) VM {
		return VM{Site: site, Host: h, Pool: "farm", Image: "debian", VCPUs: 1, MemoryMiB: 256}
	}
	idle := func(busy ...string) Grid {
		g := grid()
		for i := range g.Sites {
			for j := range g.Sites[i].Hosts {
				h := &g.Sites[i].Hosts[j]
				h.Idle = !slices.Contains(busy, h.Name)
			}
		}
		return g
	}
	for _, c := range []struct {
		name    string
		st      State
		g       Grid
		cfg     Config
		start   string
		vms     []VM
		waiting []string // the due figures that wait, before the one started
	}{
		{"every host idle", st, idle(), cfg, "perf/a/debian", []VM{vm("a", "a-1")}, nil},
		{"a-1 busy", st, idle("a-1"), cfg, "perf/a/debian", []VM{vm("a", "a-2")}, nil},
		{"site a busy", st, idle("a-1", "a-2"), cfg, "perf/b/debian", []VM{vm("b", "b-1")}, []string{"perf/a/debian", "lan/a", "start/a", "link/a/b"}},
		{"every host busy", st, idle("a-1", "a-2", "b-1"), cfg, "", nil, []string{"perf/a/debian", "lan/a", "start/a", "link/a/b", "perf/b/debian", "start/b"}},
		{"a measurement runs", State{Figs: st.Figs, Running: "lan/a"}, idle(), cfg, "", nil, nil},
		{"on demand, nothing asked", st, idle(), Config{OnDemand: true, MaxAge: time.Hour}, "", nil, nil},
	} {
		d := Decide(c.st, c.g, c.cfg, t0)
		if d.Start != c.start || !slices.Equal(d.VMs, c.vms) {
			t.Errorf("%s: starts %q on %v, want %q on %v", c.name, d.Start, d.VMs, c.start, c.vms)
		}
		var waiting []string
		for _, f := range Listed(c.st.Figs, c.g) {
			if d.Waiting[f.Key] != "" {
				waiting = append(waiting, f.Key)
			}
		}
		if !slices.Equal(waiting, c.waiting) {
			t.Errorf("%s: waiting %v, want %v", c.name, waiting, c.waiting)
		}
	}

	// Measured, but site b's start, asked for: b has one host, so its
	// start is a job of one VM; the LAN of a, asked for, waits for two
	// idle hosts while a-2 is busy.
	for k, f := range st.Figs {
		f.Rec.LastAttempt, f.Rec.MeasuredAt = t0, t0
		st.Figs[k] = f
	}
	for _, k := range []string{"lan/a", "start/b"} {
		f := st.Figs[k]
		f.Forced = t0
		st.Figs[k] = f
	}
	d := Decide(st, idle("a-2"), cfg, t0)
	if d.Start != "start/b" || !slices.Equal(d.VMs, []VM{vm("b", "b-1")}) {
		t.Errorf("starts %q on %v, want start/b on b-1", d.Start, d.VMs)
	}
	if w := d.Waiting["lan/a"]; !strings.Contains(w, "waiting for two idle hosts at site a") {
		t.Errorf("lan/a waits for %q", w)
	}
	if w, ok := d.Waiting["perf/a/debian"]; !ok || w != "" {
		t.Errorf("perf/a/debian, not due, waits for %q (listed %t)", w, ok)
	}
}

// A book's measurement: a round starts it on named VMs, no other starts
// while it runs, its value goes to the planner, and its end lets the next
// start; a stop for a switch asks for the figure again.
func TestBook(t *testing.T) {
	var observed []Record
	refuse := false
	b := NewBook(cfg, "i1", func(r Record) error {
		if refuse {
			return errors.New("out of bounds")
		}
		observed = append(observed, r)
		return nil
	})
	ctx := context.Background()
	s, _, ok := b.Round(ctx, grid(), t0)
	if !ok || s.Key != "perf/a/debian" || len(s.VMs) != 1 || s.VMs[0].Name != "cal-i1-1" || s.VMs[0].Host != "a-1" {
		t.Fatalf("round: %+v, %t", s, ok)
	}
	if !b.Measuring("a-1") || b.Measuring("a-2") || !b.Owns("cal-i1-1") {
		t.Errorf("measuring a-1 %t, a-2 %t; owns cal-i1-1 %t", b.Measuring("a-1"), b.Measuring("a-2"), b.Owns("cal-i1-1"))
	}
	if _, _, ok := b.Round(ctx, grid(), t0); ok {
		t.Error("a second measurement started while one runs")
	}
	if v := b.View(grid(), t0); v.Measuring != "perf/a/debian" || v.Figures[0].State != api.CalibrationMeasuring {
		t.Errorf("view while measuring: %q, %s", v.Measuring, v.Figures[0].State)
	}
	rec, err := b.Measured(s, 2e8, nil, t0.Add(time.Minute))
	if err != nil || rec.Value != 2e8 || !slices.Equal(rec.Hosts, []string{"a-1"}) || len(observed) != 1 {
		t.Errorf("measured: %+v, %v; observed %v", rec, err, observed)
	}
	b.Ended(s)
	if b.Measuring("a-1") || b.Owns("cal-i1-1") {
		t.Error("a measurement ended still holds its host or VM")
	}
	select {
	case <-b.Kicked():
	default:
		t.Error("the end of a measurement did not wake the loop")
	}

	// The planner refuses a figure: the last value stays, with the error.
	s, _, _ = b.Round(ctx, grid(), t0.Add(2*time.Hour))
	if s.Key != "perf/a/debian" {
		t.Fatalf("after max age: %s starts", s.Key)
	}
	refuse = true
	rec, err = b.Measured(s, 5, nil, t0.Add(2*time.Hour))
	if err == nil || rec.Value != 2e8 || !strings.Contains(rec.Error, "the figure 5 is refused") {
		t.Errorf("refused: %+v, %v", rec, err)
	}
	b.Ended(s)
	refuse = false

	// A switch takes a host of the next measurement's: it is stopped and
	// asked for again.
	s, _, _ = b.Round(ctx, grid(), t0.Add(2*time.Hour))
	done := b.Abort(s.VMs[0].Host, "switch s-1 takes host "+s.VMs[0].Host)
	if done == nil || s.Ctx.Err() == nil {
		t.Fatalf("abort of %s: done %v, ctx %v", s.Key, done, s.Ctx.Err())
	}
	if b.Abort("b-1", "no") != nil && s.VMs[0].Host != "b-1" {
		t.Error("an abort on a host no measurement uses stopped one")
	}
	if why := b.Stopped(s, t0.Add(2*time.Hour)); !strings.HasPrefix(why, "switch s-1") {
		t.Errorf("stopped: %q", why)
	}
	b.Ended(s)
	<-done
	for _, f := range b.View(grid(), t0.Add(2*time.Hour)).Figures {
		if f.Key == s.Key && f.State != api.CalibrationDue {
			t.Errorf("%s after its stop: %s, want due", f.Key, f.State)
		}
	}
}

// Restore takes the store's figures: a measured one goes to the planner,
// one that cannot be read or that is refused is named and measured again.
func TestRestore(t *testing.T) {
	var observed []string
	b := NewBook(cfg, "i1", func(r Record) error {
		if r.Value > 1e12 {
			return errors.New("too fast")
		}
		observed = append(observed, r.Key())
		return nil
	})
	bad := b.Restore(map[string][]byte{
		"perf/a/debian": []byte(`{"kind":"perf","site":"a","image":"debian","value":2e8,"measured_at":"2026-11-29T11:00:00Z","last_attempt":"2026-11-29T11:00:00Z"}`),
		"perf/b/debian": []byte(`{"kind":"perf","site":"b","image":"debian","value":2e13,"measured_at":"2026-11-29T11:00:00Z","last_attempt":"2026-11-29T11:00:00Z"}`),
		"lan/a":         []byte(`{"kind":"lan","site":"b"}`),
		"start/a":       []byte(`{"kind":"start","site":"a","value":7200,"measured_at":"2026-11-29T11:00:00Z"}`),
		"start/b":       []byte(`{"kind":"start","site":"b","value":3.5,"measured_at":"2026-11-29T11:00:00Z"}`),
		"link/a/b":      []byte(`{`),
	})
	var names []string
	for _, r := range bad {
		names = append(names, r.Key)
	}
	if want := []string{"lan/a", "link/a/b", "perf/b/debian", "start/a"}; !slices.Equal(names, want) {
		t.Errorf("refused %v, want %v", bad, want)
	}
	if !slices.Equal(observed, []string{"perf/a/debian"}) || b.StartSeconds("b") != 3.5 || b.StartSeconds("a") != 0 {
		t.Errorf("observed %v, starts a %g b %g", observed, b.StartSeconds("a"), b.StartSeconds("b"))
	}
	due := map[string]string{}
	for _, f := range b.View(grid(), t0.Add(-30*time.Minute)).Figures {
		due[f.Key] = f.State
	}
	if due["perf/a/debian"] != api.CalibrationMeasured || due["perf/b/debian"] != api.CalibrationDue || due["start/a"] != api.CalibrationDue {
		t.Errorf("after the restore: %v", due)
	}
}

// The calibration decides on values: it links the API's types and the
// standard library, nothing of the daemon's, the store's or libvirt's.
func TestDeps(t *testing.T) {
	deptest.Allow(t, "github.com/metasched/metasched/metasched/calibration", false,
		deptest.Rule{Path: "github.com/metasched/metasched/metasched/calibration"},
		deptest.Rule{Path: "github.com/metasched/metasched/metasched/api"})
}
