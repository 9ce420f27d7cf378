package metasched_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/metasched/metasched/metasched"
	"github.com/metasched/metasched/metasched/api"
	"github.com/metasched/metasched/metasched/internal/daemontest"
	"github.com/metasched/metasched/metasched/jobfile"
)

// faults fails the listed injection points of every switch.
type faults struct {
	mu   sync.Mutex
	fail map[metasched.FaultPoint]error
	hits []string
}

func (f *faults) hook(p metasched.FaultPoint, sw, host string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	err := f.fail[p]
	if err != nil {
		f.hits = append(f.hits, fmt.Sprintf("%s %s %s", p, sw, host))
	}
	return err
}

func (f *faults) set(p metasched.FaultPoint, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fail[p] = err
}

// waitFor is daemontest.WaitFor.
func waitFor(t *testing.T, what string, limit time.Duration, cond func() bool) {
	t.Helper()
	daemontest.WaitFor(t, what, limit, cond)
}

func poolOf(d *metasched.Daemon, host string) (pool, state string) {
	for _, h := range d.Hosts() {
		if h.Name == host {
			return h.Pool, h.State
		}
	}
	return "", ""
}

// TestProtocolFaults fails each step of the switching protocol in turn and
// checks the outcome the protocol specifies: a failure before commit
// cancels, a failure in commit rolls back, a failed revert strands the
// host (until an operator clears it), a step that never answers times out
// like a failure. The source pool is busy, so the release returns jobs to
// the queue: every job still finishes.
func TestProtocolFaults(t *testing.T) {
	injected := fmt.Errorf("test: %w", metasched.ErrInjected)
	cases := []struct {
		name     string
		fail     map[metasched.FaultPoint]error
		phase    string // final phase
		failedIn string
		hostPool string // "from", "to" or "" (stranded)
		stranded bool
	}{
		{"release fails: cancelled", map[metasched.FaultPoint]error{metasched.FaultRelease: injected}, "cancelled", "releasing", "from", false},
		{"reconfigure fails: cancelled", map[metasched.FaultPoint]error{metasched.FaultReconfigure: injected}, "cancelled", "reconfiguring", "from", false},
		{"reconfigure hangs: timed out and cancelled", map[metasched.FaultPoint]error{metasched.FaultReconfigure: metasched.ErrHang}, "cancelled", "reconfiguring", "from", false},
		{"add fails: cancelled", map[metasched.FaultPoint]error{metasched.FaultAdd: injected}, "cancelled", "adding", "from", false},
		{"commit-release fails: rolled back", map[metasched.FaultPoint]error{metasched.FaultCommitRelease: injected}, "rolled_back", "committing", "from", false},
		{"commit-add fails: rolled back", map[metasched.FaultPoint]error{metasched.FaultCommitAdd: injected}, "rolled_back", "committing", "from", false},
		{"commit fails and revert fails: stranded", map[metasched.FaultPoint]error{metasched.FaultCommitAdd: injected, metasched.FaultRevert: injected}, "stranded", "committing", "", true},
		{"reconfigure fails and revert hangs: stranded", map[metasched.FaultPoint]error{metasched.FaultReconfigure: injected, metasched.FaultRevert: metasched.ErrHang}, "stranded", "reconfiguring", "", true},
		{"no fault: done", nil, "done", "", "to", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				f := &faults{fail: tc.fail}
				td := startDaemon(t, metasched.Options{Fault: f.hook, StepTimeout: 700 * time.Millisecond},
					func(c *metasched.Config) {
						c.Policy = metasched.PolicyConfig{Name: "none"}
						c.Executor.TimeScale = 0.004
					})
				d := td.d
				ctx := context.Background()
				// Keep the render pool busy so that the release takes a host
				// with jobs on it.
				var ids []string
				for i := range 6 {
					j, err := d.Submit(ctx, jobfile.Decode([]byte(fmt.Sprintf("name: r%d\ntype: render\ntasks: 60\ntask_ops: 1.0e11\ntask_bytes: 1.0e5\n", i))))
					if err != nil {
						t.Fatal(err)
					}
					ids = append(ids, j.ID)
				}
				waitFor(t, "a render job running", 20*time.Second, func() bool {
					l, err := d.Jobs(ctx, api.JobFilter{States: []api.State{api.Running}})
					if err != nil {
						t.Fatal(err)
					}
					return len(l.Jobs) > 0
				})
				sv, err := d.RequestSwitch(ctx, "render", "sim")
				if err != nil {
					t.Fatal(err)
				}
				var final api.SwitchView
				waitFor(t, "the switch to end", 20*time.Second, func() bool {
					for _, s := range allSwitches(t, d) {
						if s.ID == sv.ID && s.Final {
							final = s
							return true
						}
					}
					return false
				})
				if final.Phase != tc.phase || final.FailedIn != tc.failedIn {
					t.Fatalf("switch ended %s (failed in %q: %s), want %s failed in %q", final.Phase, final.FailedIn, final.Reason, tc.phase, tc.failedIn)
				}
				if tc.phase != "done" && tc.phase != "cancelled" && !strings.Contains(final.Reason, "injected") && !strings.Contains(final.Reason, "timed out") {
					t.Errorf("reason %q does not say what failed", final.Reason)
				}
				if final.Host != "" {
					pool, state := poolOf(d, final.Host)
					switch {
					case tc.stranded:
						if state != api.HostStranded {
							t.Fatalf("host %s is %s in pool %s, want stranded", final.Host, state, pool)
						}
						for _, p := range d.Pools() {
							for _, h := range p.Hosts {
								if h == final.Host {
									t.Fatalf("stranded host %s serves pool %s", h, p.Name)
								}
							}
						}
						// An operator clears it: the host returns to the source pool.
						f.set(metasched.FaultRevert, nil)
						if _, err := d.ClearHost(ctx, final.Host, ""); err != nil {
							t.Fatal(err)
						}
						if pool, state := poolOf(d, final.Host); pool != "render" || state == api.HostStranded {
							t.Fatalf("after clear: host %s is %s in pool %s, want in render", final.Host, state, pool)
						}
					case tc.hostPool == "from" && pool != "render", tc.hostPool == "to" && pool != "sim":
						t.Fatalf("host %s ended in pool %s, want %s", final.Host, pool, tc.hostPool)
					case state == api.HostSwitching:
						t.Fatalf("host %s still switching", final.Host)
					}
				}
				// No job is lost: every one finishes (those returned to the
				// queue by the release run again).
				defer func() {
					if t.Failed() {
						t.Logf("daemon log:\n%s", td.log.String())
					}
				}()
				waitFor(t, "every job done", 60*time.Second, func() bool {
					for _, id := range ids {
						j, err := d.Job(ctx, id)
						if err != nil || j.State != api.Done {
							return false
						}
					}
					return true
				})
				// Every host is in exactly one pool or stranded, none switching.
				seen := map[string]int{}
				for _, p := range d.Pools() {
					for _, h := range p.Hosts {
						seen[h]++
					}
				}
				for _, h := range d.Hosts() {
					if h.State == api.HostSwitching || (h.State != api.HostStranded && seen[h.Name] != 1) {
						t.Errorf("host %s: state %s, in %d pools", h.Name, h.State, seen[h.Name])
					}
				}
				if tc.fail != nil && len(f.hits) == 0 {
					t.Errorf("no fault was injected")
				}
				if errors.Is(tc.fail[metasched.FaultReconfigure], metasched.ErrHang) && !strings.Contains(final.Reason, "timed out") {
					t.Errorf("reason %q: want a timeout", final.Reason)
				}
			})
		})
	}
}
