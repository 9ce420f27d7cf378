package coordinator

import (
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestRestoreAtEveryRecord crashes after every journal record of a full
// switch, restores, answers the re-issued actions, and expects the state of
// the run without a crash.
func TestRestoreAtEveryRecord(t *testing.T) {
	for _, fails := range [][]string{
		nil, {"release"}, {"reconfigure"}, {"add"}, {"commit-add"}, {"commit-release"}, {"add", "revert"},
	} {
		t.Run(fmtFails(fails), func(t *testing.T) {
			newWorld := func() *world {
				w := &world{host: "h1", fail: map[string]bool{}, at: t0}
				for _, f := range fails {
					w.fail[f] = true
				}
				return w
			}
			want, journal := run(t, newWorld())
			for k := 0; k <= len(journal); k++ {
				c, acts, err := Restore(journal[:k])
				if err != nil {
					t.Fatalf("cut %d: %v", k, err)
				}
				if _, err := drive(c, newWorld(), acts); err != nil {
					t.Fatalf("cut %d: %v", k, err)
				}
				wantSw := want.Switches()
				if k == 0 {
					wantSw = []Switch{} // the Start never reached the journal
				}
				if diff := cmp.Diff(wantSw, c.Switches()); diff != "" {
					t.Errorf("cut after %d records: switches (-want +got):\n%s", k, diff)
				}
				if diff := cmp.Diff(want.Stranded(), c.Stranded()); k > 0 && diff != "" {
					t.Errorf("cut after %d records: stranded (-want +got):\n%s", k, diff)
				}
			}
		})
	}
}

func fmtFails(fails []string) string {
	if len(fails) == 0 {
		return "no failure"
	}
	return "fail " + strings.Join(fails, "+")
}

func TestRestoreCorrupt(t *testing.T) {
	tests := []struct {
		name    string
		journal []Record
	}{
		{"empty id", []Record{{Switch: Switch{Phase: PhaseReleasing}}}},
		{"unknown phase", []Record{{Switch: Switch{ID: "s1", Phase: "dancing"}}}},
		{"host in two switches", []Record{
			{Switch: Switch{ID: "s1", From: "a", To: "b", Host: "h1", Phase: PhaseAdding}},
			{Switch: Switch{ID: "s2", From: "a", To: "b", Host: "h1", Phase: PhaseReconfiguring}},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, _, err := Restore(tt.journal); !errors.Is(err, ErrCorruptJournal) {
				t.Errorf("Restore: err = %v, want %v", err, ErrCorruptJournal)
			}
		})
	}
}

// TestRandomRuns drives many switches at once over a few hosts, answering
// requests in random order with random successes, failures, timeouts and
// late answers, and checks that no host is ever held by two switches, that
// Restore of the journal always gives the live state, and that every switch
// ends in a final phase.
func TestRandomRuns(t *testing.T) {
	pools := []string{"a", "b", "c"}
	hostPool := func() map[string]string {
		return map[string]string{"h1": "a", "h2": "a", "h3": "b", "h4": "b", "h5": "c", "h6": "c"}
	}
	for seed := uint64(1); seed <= 200; seed++ {
		rng := rand.New(rand.NewPCG(seed, 0x5eed))
		c := New()
		member := hostPool()
		var pending, stale []Action
		var journal []Record
		started := 0
		apply := func(ev Event) []Action {
			acts, err := c.Step(ev)
			if err != nil {
				t.Fatalf("seed %d: Step(%#v): %v", seed, ev, err)
			}
			for _, a := range acts {
				switch a := a.(type) {
				case Persist:
					journal = append(journal, a.Record)
					if sw := a.Record.Switch; sw.Phase == PhaseDone {
						member[sw.Host] = sw.To
					}
				case PrepareRelease, Reconfigure, PrepareAdd, CommitRelease, CommitAdd, Revert:
					pending = append(pending, a)
				}
			}
			return acts
		}
		for step := 0; ; step++ {
			if started < 12 && (len(pending) == 0 || rng.IntN(4) == 0) {
				from := pools[rng.IntN(len(pools))]
				to := pools[(slices.Index(pools, from)+1+rng.IntN(2))%len(pools)]
				started++
				apply(Start{ID: SwitchID(string(rune('a'+started-1)) + "-sw"), From: from, To: to, At: at(step)})
			} else if len(stale) > 0 && rng.IntN(5) == 0 {
				// A late answer to a step already given up on.
				i := rng.IntN(len(stale))
				ev := success(stale[i], member, at(step))
				stale = slices.Delete(stale, i, i+1)
				before := c.Switches()
				if _, err := c.Step(ev); err == nil {
					t.Fatalf("seed %d: late answer %#v accepted", seed, ev)
				}
				if diff := cmp.Diff(before, c.Switches()); diff != "" {
					t.Fatalf("seed %d: late answer changed the state:\n%s", seed, diff)
				}
			} else if len(pending) > 0 {
				i := rng.IntN(len(pending))
				a := pending[i]
				pending = slices.Delete(pending, i, i+1)
				id := actionID(a)
				switch r := rng.IntN(20); {
				case r < 2:
					// Timeout: the driver gives up on every call of the step.
					stale = append(stale, a)
					stale = append(stale, takeAll(&pending, id)...)
					apply(Timeout{ID: id, At: at(step)})
				case r < 5:
					if _, ok := a.(CommitRelease); ok || isCommitAdd(a) {
						stale = append(stale, takeAll(&pending, id)...)
					}
					apply(failure(a, at(step)))
				default:
					ev := success(a, member, at(step))
					if r, ok := ev.(Released); ok && c.busy[r.Host] != "" {
						// The fake source pool does not track the hosts it
						// prepared for switches started after this one's
						// PrepareRelease: the coordinator must refuse, and
						// the driver's timer then cancels the switch.
						if _, err := c.Step(ev); !errors.Is(err, ErrHostBusy) {
							t.Fatalf("seed %d: Released of held host %s: err = %v, want %v", seed, r.Host, err, ErrHostBusy)
						}
						apply(Timeout{ID: id, At: at(step)})
						break
					}
					apply(ev)
				}
			} else if stranded := c.Stranded(); len(stranded) > 0 {
				apply(Cleared{Host: stranded[rng.IntN(len(stranded))], At: at(step)})
			} else {
				break
			}
			checkHeld(t, seed, c)
			if rng.IntN(10) == 0 {
				r, _, err := Restore(journal)
				if err != nil {
					t.Fatalf("seed %d: Restore: %v", seed, err)
				}
				if diff := cmp.Diff(c.Switches(), r.Switches()); diff != "" {
					t.Fatalf("seed %d: restored state differs (-live +restored):\n%s", seed, diff)
				}
				r, _, err = Restore(c.Journal())
				if err != nil {
					t.Fatalf("seed %d: Restore of the compacted journal: %v", seed, err)
				}
				if diff := cmp.Diff(c.Switches(), r.Switches()); diff != "" {
					t.Fatalf("seed %d: state restored from the compacted journal differs (-live +restored):\n%s", seed, diff)
				}
			}
		}
		for _, sw := range c.Switches() {
			if !sw.Phase.Final() {
				t.Errorf("seed %d: switch %s ended in %s", seed, sw.ID, sw.Phase)
			}
		}
	}
}

func checkHeld(t *testing.T, seed uint64, c *Coordinator) {
	t.Helper()
	seen := map[string]SwitchID{}
	for _, sw := range c.Switches() {
		if !sw.holds() {
			continue
		}
		if other, ok := seen[sw.Host]; ok {
			t.Fatalf("seed %d: host %s in switches %s and %s", seed, sw.Host, other, sw.ID)
		}
		seen[sw.Host] = sw.ID
	}
}

func isCommitAdd(a Action) bool {
	_, ok := a.(CommitAdd)
	return ok
}

func takeAll(pending *[]Action, id SwitchID) []Action {
	var out, keep []Action
	for _, a := range *pending {
		if actionID(a) == id {
			out = append(out, a)
		} else {
			keep = append(keep, a)
		}
	}
	*pending = keep
	return out
}

func actionID(a Action) SwitchID {
	switch a := a.(type) {
	case PrepareRelease:
		return a.ID
	case Reconfigure:
		return a.ID
	case PrepareAdd:
		return a.ID
	case CommitRelease:
		return a.ID
	case CommitAdd:
		return a.ID
	case Revert:
		return a.ID
	}
	return ""
}

// success answers a as a well-behaved component would. The source pool picks
// the first host of its pool outside Exclude, which makes collisions likely
// were Exclude wrong; it fails when it has none.
func success(a Action, member map[string]string, when time.Time) Event {
	switch a := a.(type) {
	case PrepareRelease:
		for _, h := range []string{"h1", "h2", "h3", "h4", "h5", "h6"} {
			if member[h] == a.Pool && !slices.Contains(a.Exclude, h) {
				return Released{ID: a.ID, Host: h, Requeued: []string{"job-on-" + h}, At: when}
			}
		}
		return ReleaseFailed{ID: a.ID, Err: "no host", At: when}
	case Reconfigure:
		return Reconfigured{ID: a.ID, At: when}
	case PrepareAdd:
		return Added{ID: a.ID, At: when}
	case CommitRelease:
		return Committed{ID: a.ID, Side: SideRelease, At: when}
	case CommitAdd:
		return Committed{ID: a.ID, Side: SideAdd, At: when}
	case Revert:
		return Reverted{ID: a.ID, At: when}
	}
	panic("not a request")
}

func failure(a Action, when time.Time) Event {
	switch a := a.(type) {
	case PrepareRelease:
		return ReleaseFailed{ID: a.ID, Err: "x", At: when}
	case Reconfigure:
		return ReconfigureFailed{ID: a.ID, Err: "x", At: when}
	case PrepareAdd:
		return AddFailed{ID: a.ID, Err: "x", At: when}
	case CommitRelease:
		return CommitFailed{ID: a.ID, Side: SideRelease, Err: "x", At: when}
	case CommitAdd:
		return CommitFailed{ID: a.ID, Side: SideAdd, Err: "x", At: when}
	case Revert:
		return RevertFailed{ID: a.ID, Err: "x", At: when}
	}
	panic("not a request")
}
