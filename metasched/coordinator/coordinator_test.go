package coordinator

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// run starts switch s1 from "a" to "b" against w and drives it to the end.
func run(t *testing.T, w *world) (*Coordinator, []Record) {
	t.Helper()
	c := New()
	acts, err := c.Step(Start{ID: "s1", From: "a", To: "b", At: t0})
	if err != nil {
		t.Fatal(err)
	}
	journal, err := drive(c, w, acts)
	if err != nil {
		t.Fatal(err)
	}
	return c, journal
}

func TestOutcomes(t *testing.T) {
	tests := []struct {
		name     string
		fail     []string
		want     Switch
		phases   []Phase // the phases journaled, in order
		notices  []Action
		stranded []string
	}{
		{
			name:   "happy path",
			want:   Switch{ID: "s1", From: "a", To: "b", Host: "h1", Phase: PhaseDone, Requeued: []string{"j1"}, ReleaseCommitted: true, AddCommitted: true, Started: t0, Updated: t0},
			phases: []Phase{PhaseReleasing, PhaseReconfiguring, PhaseAdding, PhaseCommitting, PhaseCommitting, PhaseDone},
		},
		{
			name:    "release failure cancels with nothing to undo",
			fail:    []string{"release"},
			want:    Switch{ID: "s1", From: "a", To: "b", Phase: PhaseCancelled, FailedIn: PhaseReleasing, Reason: "prepare-release failed: no host", Started: t0, Updated: t0},
			phases:  []Phase{PhaseReleasing, PhaseCancelled},
			notices: []Action{AbortRelease{ID: "s1", Pool: "a"}},
		},
		{
			name:    "reconfigure failure cancels and reverts",
			fail:    []string{"reconfigure"},
			want:    Switch{ID: "s1", From: "a", To: "b", Host: "h1", Phase: PhaseCancelled, Requeued: []string{"j1"}, FailedIn: PhaseReconfiguring, Reason: "reconfigure failed: agent down", Started: t0, Updated: t0},
			phases:  []Phase{PhaseReleasing, PhaseReconfiguring, PhaseCancelling, PhaseCancelled},
			notices: []Action{AbortRelease{ID: "s1", Pool: "a", Host: "h1"}},
		},
		{
			name:     "reconfigure failure then revert failure strands",
			fail:     []string{"reconfigure", "revert"},
			want:     Switch{ID: "s1", From: "a", To: "b", Host: "h1", Phase: PhaseStranded, Requeued: []string{"j1"}, FailedIn: PhaseReconfiguring, Reason: "reconfigure failed: agent down; revert failed: disk gone", Started: t0, Updated: t0},
			phases:   []Phase{PhaseReleasing, PhaseReconfiguring, PhaseCancelling, PhaseStranded},
			notices:  []Action{MarkStranded{ID: "s1", Host: "h1", Reason: "reconfigure failed: agent down; revert failed: disk gone"}},
			stranded: []string{"h1"},
		},
		{
			name:    "add failure cancels with revert",
			fail:    []string{"add"},
			want:    Switch{ID: "s1", From: "a", To: "b", Host: "h1", Phase: PhaseCancelled, Requeued: []string{"j1"}, FailedIn: PhaseAdding, Reason: "prepare-add failed: refused", Started: t0, Updated: t0},
			phases:  []Phase{PhaseReleasing, PhaseReconfiguring, PhaseAdding, PhaseCancelling, PhaseCancelled},
			notices: []Action{AbortAdd{ID: "s1", Pool: "b", Host: "h1"}, AbortRelease{ID: "s1", Pool: "a", Host: "h1"}},
		},
		{
			name: "commit-add failure rolls back",
			fail: []string{"commit-add"},
			// The release side answers first (FIFO), then the add side fails.
			want:    Switch{ID: "s1", From: "a", To: "b", Host: "h1", Phase: PhaseRolledBack, Requeued: []string{"j1"}, ReleaseCommitted: true, FailedIn: PhaseCommitting, Reason: "commit-add failed: destination lost", Started: t0, Updated: t0},
			phases:  []Phase{PhaseReleasing, PhaseReconfiguring, PhaseAdding, PhaseCommitting, PhaseCommitting, PhaseRollingBack, PhaseRolledBack},
			notices: []Action{AbortAdd{ID: "s1", Pool: "b", Host: "h1"}, AbortRelease{ID: "s1", Pool: "a", Host: "h1"}},
		},
		{
			name:    "commit-release failure rolls back",
			fail:    []string{"commit-release"},
			want:    Switch{ID: "s1", From: "a", To: "b", Host: "h1", Phase: PhaseRolledBack, Requeued: []string{"j1"}, FailedIn: PhaseCommitting, Reason: "commit-release failed: source lost", Started: t0, Updated: t0},
			phases:  []Phase{PhaseReleasing, PhaseReconfiguring, PhaseAdding, PhaseCommitting, PhaseRollingBack, PhaseRolledBack},
			notices: []Action{AbortAdd{ID: "s1", Pool: "b", Host: "h1"}, AbortRelease{ID: "s1", Pool: "a", Host: "h1"}},
		},
		{
			name:     "commit failure then revert failure strands",
			fail:     []string{"commit-release", "revert"},
			want:     Switch{ID: "s1", From: "a", To: "b", Host: "h1", Phase: PhaseStranded, Requeued: []string{"j1"}, FailedIn: PhaseCommitting, Reason: "commit-release failed: source lost; revert failed: disk gone", Started: t0, Updated: t0},
			phases:   []Phase{PhaseReleasing, PhaseReconfiguring, PhaseAdding, PhaseCommitting, PhaseRollingBack, PhaseStranded},
			notices:  []Action{AbortAdd{ID: "s1", Pool: "b", Host: "h1"}, MarkStranded{ID: "s1", Host: "h1", Reason: "commit-release failed: source lost; revert failed: disk gone"}},
			stranded: []string{"h1"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := &world{host: "h1", fail: map[string]bool{}, at: t0}
			for _, f := range tt.fail {
				w.fail[f] = true
			}
			c, journal := run(t, w)
			if diff := cmp.Diff([]Switch{tt.want}, c.Switches()); diff != "" {
				t.Errorf("switches (-want +got):\n%s", diff)
			}
			var phases []Phase
			for _, r := range journal {
				phases = append(phases, r.Switch.Phase)
			}
			if diff := cmp.Diff(tt.phases, phases); diff != "" {
				t.Errorf("journaled phases (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.notices, w.notices); diff != "" {
				t.Errorf("notifications (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.stranded, c.Stranded()); diff != "" {
				t.Errorf("stranded (-want +got):\n%s", diff)
			}
		})
	}
}

// TestTimeouts feeds a Timeout in each in-flight phase.
func TestTimeouts(t *testing.T) {
	// steps brings s1 to the phase under test.
	steps := map[Phase][]Event{
		PhaseReleasing:     {Start{ID: "s1", From: "a", To: "b", At: at(0)}},
		PhaseReconfiguring: {Start{ID: "s1", From: "a", To: "b", At: at(0)}, Released{ID: "s1", Host: "h1", At: at(1)}},
		PhaseAdding:        {Start{ID: "s1", From: "a", To: "b", At: at(0)}, Released{ID: "s1", Host: "h1", At: at(1)}, Reconfigured{ID: "s1", At: at(2)}},
		PhaseCommitting:    {Start{ID: "s1", From: "a", To: "b", At: at(0)}, Released{ID: "s1", Host: "h1", At: at(1)}, Reconfigured{ID: "s1", At: at(2)}, Added{ID: "s1", At: at(3)}},
		PhaseCancelling:    {Start{ID: "s1", From: "a", To: "b", At: at(0)}, Released{ID: "s1", Host: "h1", At: at(1)}, ReconfigureFailed{ID: "s1", Err: "x", At: at(2)}},
		PhaseRollingBack:   {Start{ID: "s1", From: "a", To: "b", At: at(0)}, Released{ID: "s1", Host: "h1", At: at(1)}, Reconfigured{ID: "s1", At: at(2)}, Added{ID: "s1", At: at(3)}, CommitFailed{ID: "s1", Side: SideAdd, Err: "x", At: at(4)}},
	}
	tests := []struct {
		phase   Phase
		want    Phase
		actions []Action // after the Persist
		reason  string
	}{
		{PhaseReleasing, PhaseCancelled, []Action{AbortRelease{ID: "s1", Pool: "a"}}, "prepare-release timed out"},
		{PhaseReconfiguring, PhaseCancelling, []Action{Revert{ID: "s1", Host: "h1", Pool: "a"}}, "reconfigure timed out"},
		{PhaseAdding, PhaseCancelling, []Action{AbortAdd{ID: "s1", Pool: "b", Host: "h1"}, Revert{ID: "s1", Host: "h1", Pool: "a"}}, "prepare-add timed out"},
		{PhaseCommitting, PhaseRollingBack, []Action{AbortAdd{ID: "s1", Pool: "b", Host: "h1"}, Revert{ID: "s1", Host: "h1", Pool: "a"}}, "commit timed out"},
		{PhaseCancelling, PhaseStranded, []Action{MarkStranded{ID: "s1", Host: "h1", Reason: "reconfigure failed: x; revert timed out"}}, "reconfigure failed: x; revert timed out"},
		{PhaseRollingBack, PhaseStranded, []Action{MarkStranded{ID: "s1", Host: "h1", Reason: "commit-add failed: x; revert timed out"}}, "commit-add failed: x; revert timed out"},
	}
	for _, tt := range tests {
		t.Run(string(tt.phase), func(t *testing.T) {
			c := New()
			for _, ev := range steps[tt.phase] {
				if _, err := c.Step(ev); err != nil {
					t.Fatal(err)
				}
			}
			if sw, _ := c.Switch("s1"); sw.Phase != tt.phase {
				t.Fatalf("setup reached %s, want %s", sw.Phase, tt.phase)
			}
			acts, err := c.Step(Timeout{ID: "s1", At: at(100)})
			if err != nil {
				t.Fatal(err)
			}
			sw, _ := c.Switch("s1")
			if sw.Phase != tt.want || sw.Reason != tt.reason || !sw.Updated.Equal(at(100)) {
				t.Errorf("after timeout: phase %s reason %q updated %v, want %s %q %v", sw.Phase, sw.Reason, sw.Updated, tt.want, tt.reason, at(100))
			}
			want := append([]Action{Persist{Record{Switch: sw}}}, tt.actions...)
			if diff := cmp.Diff(want, acts); diff != "" {
				t.Errorf("actions (-want +got):\n%s", diff)
			}
		})
	}
}

// TestNonsense checks that events that make no sense are errors and leave
// the state unchanged.
func TestNonsense(t *testing.T) {
	// setup: s1 in adding with host h1, s2 done with host h2, s3 stranded with h3.
	setup := []Event{
		Start{ID: "s1", From: "a", To: "b"}, Released{ID: "s1", Host: "h1"}, Reconfigured{ID: "s1"},
		Start{ID: "s2", From: "a", To: "b"}, Released{ID: "s2", Host: "h2"}, Reconfigured{ID: "s2"}, Added{ID: "s2"},
		Committed{ID: "s2", Side: SideAdd}, Committed{ID: "s2", Side: SideRelease},
		Start{ID: "s3", From: "a", To: "b"}, Released{ID: "s3", Host: "h3"}, ReconfigureFailed{ID: "s3"}, RevertFailed{ID: "s3"},
		Start{ID: "s4", From: "b", To: "a"},
	}
	tests := []struct {
		name string
		ev   Event
		want error
	}{
		{"nil event", nil, ErrInvalidEvent},
		{"unknown switch", Reconfigured{ID: "nope"}, ErrUnknownSwitch},
		{"duplicate start", Start{ID: "s1", From: "a", To: "b"}, ErrDuplicateSwitch},
		{"start without id", Start{From: "a", To: "b"}, ErrInvalidEvent},
		{"start without pool", Start{ID: "s9", From: "a"}, ErrInvalidEvent},
		{"start to the same pool", Start{ID: "s9", From: "a", To: "a"}, ErrInvalidEvent},
		{"answer of another phase", Reconfigured{ID: "s1"}, ErrWrongPhase},
		{"released twice", Released{ID: "s1", Host: "h9"}, ErrWrongPhase},
		{"commit before add", Committed{ID: "s1", Side: SideAdd}, ErrWrongPhase},
		{"revert out of phase", Reverted{ID: "s1"}, ErrWrongPhase},
		{"answer to a done switch", Committed{ID: "s2", Side: SideAdd}, ErrWrongPhase},
		{"timeout of a final switch", Timeout{ID: "s2"}, ErrWrongPhase},
		{"released without host", Released{ID: "s4"}, ErrInvalidEvent},
		{"released with a host in flight", Released{ID: "s4", Host: "h1"}, ErrHostBusy},
		{"released with a stranded host", Released{ID: "s4", Host: "h3"}, ErrHostBusy},
		{"clear a host in flight", Cleared{Host: "h1"}, ErrNotStranded},
		{"clear a host never stranded", Cleared{Host: "h2"}, ErrNotStranded},
		{"clear an unknown host", Cleared{Host: "zz"}, ErrNotStranded},
		{"clear without host", Cleared{}, ErrInvalidEvent},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := New()
			for _, ev := range setup {
				if _, err := c.Step(ev); err != nil {
					t.Fatalf("setup %#v: %v", ev, err)
				}
			}
			before, stranded := c.Switches(), c.Stranded()
			acts, err := c.Step(tt.ev)
			if !errors.Is(err, tt.want) {
				t.Fatalf("Step(%#v) = %v, want %v", tt.ev, err, tt.want)
			}
			if acts != nil {
				t.Errorf("rejected event returned actions %v", acts)
			}
			if diff := cmp.Diff(before, c.Switches()); diff != "" {
				t.Errorf("switches changed (-before +after):\n%s", diff)
			}
			if diff := cmp.Diff(stranded, c.Stranded()); diff != "" {
				t.Errorf("stranded changed (-before +after):\n%s", diff)
			}
		})
	}
}

func TestCommitDuplicateSide(t *testing.T) {
	c := New()
	for _, ev := range []Event{
		Start{ID: "s1", From: "a", To: "b"}, Released{ID: "s1", Host: "h1"}, Reconfigured{ID: "s1"}, Added{ID: "s1"},
		Committed{ID: "s1", Side: SideRelease},
	} {
		if _, err := c.Step(ev); err != nil {
			t.Fatal(err)
		}
	}
	for _, ev := range []Event{Committed{ID: "s1", Side: SideRelease}, CommitFailed{ID: "s1", Side: SideRelease}, Committed{ID: "s1", Side: "both"}} {
		if _, err := c.Step(ev); err == nil {
			t.Errorf("Step(%#v) accepted", ev)
		}
	}
}

// TestConcurrentSwitchesExclude checks that a second switch is told to skip
// the host of the first, and cannot take it.
func TestConcurrentSwitchesExclude(t *testing.T) {
	c := New()
	if _, err := c.Step(Start{ID: "s1", From: "a", To: "b"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Step(Released{ID: "s1", Host: "h1"}); err != nil {
		t.Fatal(err)
	}
	acts, err := c.Step(Start{ID: "s2", From: "a", To: "c"})
	if err != nil {
		t.Fatal(err)
	}
	want := PrepareRelease{ID: "s2", Pool: "a", Exclude: []string{"h1"}}
	if diff := cmp.Diff(Action(want), acts[1]); diff != "" {
		t.Errorf("prepare-release (-want +got):\n%s", diff)
	}
	if _, err := c.Step(Released{ID: "s2", Host: "h1"}); !errors.Is(err, ErrHostBusy) {
		t.Errorf("second switch took h1: err = %v", err)
	}
	if _, err := c.Step(Released{ID: "s2", Host: "h2"}); err != nil {
		t.Errorf("second switch could not take h2: %v", err)
	}
}

func TestClearedDefaultsToSourcePool(t *testing.T) {
	c := New()
	for _, ev := range []Event{
		Start{ID: "s1", From: "a", To: "b"}, Released{ID: "s1", Host: "h1"},
		Timeout{ID: "s1"}, Timeout{ID: "s1"},
	} {
		if _, err := c.Step(ev); err != nil {
			t.Fatal(err)
		}
	}
	if diff := cmp.Diff([]string{"h1"}, c.Stranded()); diff != "" {
		t.Fatalf("stranded (-want +got):\n%s", diff)
	}
	acts, err := c.Step(Cleared{Host: "h1", At: at(5)})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(Action(Rejoin{ID: "s1", Host: "h1", Pool: "a"}), acts[len(acts)-1]); diff != "" {
		t.Errorf("rejoin (-want +got):\n%s", diff)
	}
	if got := c.Stranded(); len(got) != 0 {
		t.Errorf("still stranded: %v", got)
	}
	if _, err := c.Step(Cleared{Host: "h1"}); !errors.Is(err, ErrNotStranded) {
		t.Errorf("second clear: err = %v, want %v", err, ErrNotStranded)
	}
}

// A switch that is over can be forgotten: the coordinator then holds only
// the open switches, and an answer for a forgotten switch is refused as
// unknown. An open switch (in flight, or stranded and not cleared) cannot
// be forgotten.
func TestForget(t *testing.T) {
	w := &world{host: "h1", fail: map[string]bool{"reconfigure": true, "revert": true}, at: t0}
	c, _ := run(t, w) // s1 strands h1
	if _, err := c.Step(Start{ID: "s2", From: "a", To: "b", At: t0}); err != nil {
		t.Fatal(err)
	}
	for _, id := range []SwitchID{"s1", "s2"} {
		if err := c.Forget(id); !errors.Is(err, ErrStillOpen) {
			t.Errorf("forget %s: %v, want ErrStillOpen", id, err)
		}
	}
	if sw, _ := c.Switch("s1"); !sw.Open() {
		t.Errorf("a stranded switch not cleared is not open: %+v", sw)
	}
	if _, err := c.Step(Cleared{Host: "h1", At: t0}); err != nil {
		t.Fatal(err)
	}
	if sw, _ := c.Switch("s1"); sw.Open() {
		t.Errorf("a cleared switch is open: %+v", sw)
	}
	if err := c.Forget("s1"); err != nil {
		t.Fatal(err)
	}
	if err := c.Forget("s-unknown"); err != nil {
		t.Errorf("forget an unknown switch: %v", err)
	}
	if diff := cmp.Diff([]SwitchID{"s2"}, c.ids()); diff != "" {
		t.Errorf("switches held (-want +got):\n%s", diff)
	}
	if _, err := c.Step(Reverted{ID: "s1", At: t0}); !errors.Is(err, ErrUnknownSwitch) {
		t.Errorf("an answer for a forgotten switch: %v, want ErrUnknownSwitch", err)
	}
	// h1 is free again: the next switch of pool a may take it.
	if _, err := c.Step(Released{ID: "s2", Host: "h1", At: t0}); err != nil {
		t.Errorf("release h1 after its stranded switch was cleared and forgotten: %v", err)
	}
}
