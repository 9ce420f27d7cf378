package metasched

import (
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"

	co "github.com/metasched/metasched/metasched/coordinator"
	"github.com/metasched/metasched/metasched/policy"
)

// switchBook is the switch driver's state, under a lock of its own: the
// coordinator with the open switches, the hosts the source pools chose
// (PrepareRelease's answers, for repeats), each step's timer and the
// phase it was armed for, who started each switch in flight and why, the
// switch numbers, the switches ended by outcome, the switch rate ζ
// measured, and the policy state at the last switch the cluster manager
// started. Its lock is a leaf: the jobs' lock and the hosts' view may be
// held when it is taken, and nothing else is taken under it (a timer
// fires outside it).
//
// The coordinator's steps go through the book under the hosts' view's lock
// (stepSwitchLocked) so that the hosts' view follows each step at once;
// the readers (the switches' views, the metrics, the policy's inputs)
// take the book alone.
type switchBook struct {
	mu         sync.Mutex
	coord      *co.Coordinator
	released   map[co.SwitchID]string
	timers     map[co.SwitchID]clockwork.Timer
	timerPhase map[co.SwitchID]co.Phase
	why        map[co.SwitchID]string
	// operator holds the open switches an operator asked for: the
	// cluster manager's cooldown does not hold them (byOperator).
	operator    map[co.SwitchID]bool
	restoreActs []co.Action
	seq         int
	ended       map[co.Phase]int
	rates       *switchRate
	lastState   string
	// done are the switches done lately, oldest first, for the cluster
	// manager's cooldown (moves).
	done []policy.Move
	// pastWhy is why each of the last maxPastWhy switches that ended was
	// started, pastOrder their order (reason).
	pastWhy   map[co.SwitchID]string
	pastOrder []co.SwitchID
}

func newSwitchBook(delay time.Duration) *switchBook {
	return &switchBook{coord: co.New(), released: map[co.SwitchID]string{}, timers: map[co.SwitchID]clockwork.Timer{},
		timerPhase: map[co.SwitchID]co.Phase{}, why: map[co.SwitchID]string{}, operator: map[co.SwitchID]bool{}, ended: map[co.Phase]int{},
		rates: newSwitchRate(delay)}
}

// restored takes the coordinator a restart rebuilt, the last switch
// number the store had, and the actions to carry out again at the start
// (takeRestored).
func (b *switchBook) restored(c *co.Coordinator, seq int, acts []co.Action) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.coord, b.seq, b.restoreActs = c, seq, acts
}

// takeRestored returns the actions a restart carries out again, once.
func (b *switchBook) takeRestored() []co.Action {
	b.mu.Lock()
	defer b.mu.Unlock()
	acts := b.restoreActs
	b.restoreActs = nil
	return acts
}

// next numbers a new switch, started by who and why; operator says an
// operator asked for it.
func (b *switchBook) next(why string, operator bool) co.SwitchID {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.seq++
	id := co.NewSwitchID(b.seq)
	b.why[id] = why
	if operator {
		b.operator[id] = true
	}
	return id
}

// byOperator says whether an operator asked for the open switch id.
func (b *switchBook) byOperator(id co.SwitchID) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.operator[id]
}

// step feeds ev to the coordinator; a timeout for a phase its switch has
// left is stale, and steps nothing.
func (b *switchBook) step(ev co.Event) (acts []co.Action, stale bool, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if t, ok := ev.(co.Timeout); ok {
		sw, found := b.coord.Switch(t.ID)
		if !found || b.timerPhase[t.ID] != sw.Phase {
			return nil, true, nil
		}
	}
	acts, err = b.coord.Step(ev)
	return acts, false, err
}

// get returns the switch id while the coordinator holds it (open, or
// over and not yet forgotten).
func (b *switchBook) get(id co.SwitchID) (co.Switch, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.coord.Switch(id)
}

// all lists the switches the coordinator holds, oldest first.
func (b *switchBook) all() []co.Switch {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.coord.Switches()
}

// counts returns the switches in flight and a copy of the switches ended
// by final phase.
func (b *switchBook) counts() (inFlight int, ended map[co.Phase]int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, sw := range b.coord.Switches() {
		if !sw.Phase.Final() {
			inFlight++
		}
	}
	return inFlight, maps.Clone(b.ended)
}

// releasedHost is the host the source pool chose for switch id, if it
// chose one.
func (b *switchBook) releasedHost(id co.SwitchID) (string, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	h, ok := b.released[id]
	return h, ok
}

func (b *switchBook) setReleased(id co.SwitchID, host string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.released[id] = host
}

// takeReleased forgets the host the source pool chose for id, returned.
func (b *switchBook) takeReleased(id co.SwitchID) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	h := b.released[id]
	delete(b.released, id)
	return h
}

// arm stops the timer of sw's last phase and, for a phase that is not
// final, arms one that calls fire after timeout.
func (b *switchBook) arm(sw co.Switch, clock clockwork.Clock, timeout time.Duration, fire func()) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.disarmLocked(sw.ID)
	if sw.Phase.Final() {
		return
	}
	b.timerPhase[sw.ID] = sw.Phase
	b.timers[sw.ID] = clock.AfterFunc(timeout, fire)
}

func (b *switchBook) disarmLocked(id co.SwitchID) {
	if t := b.timers[id]; t != nil {
		t.Stop()
	}
	delete(b.timers, id)
	delete(b.timerPhase, id)
}

// stopTimers stops every timer (the daemon stops).
func (b *switchBook) stopTimers() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for id := range b.timers {
		b.disarmLocked(id)
	}
}

// ended counts sw's end (a final phase; a stranded host's clear is not a
// switch's end) and, for a switch done, its duration in ζ; it returns who
// started it and why.
func (b *switchBook) end(sw co.Switch) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	why := b.why[sw.ID]
	delete(b.why, sw.ID)
	delete(b.operator, sw.ID)
	if b.pastWhy == nil {
		b.pastWhy = map[co.SwitchID]string{}
	}
	if _, ok := b.pastWhy[sw.ID]; !ok {
		b.pastOrder = append(b.pastOrder, sw.ID)
	}
	b.pastWhy[sw.ID] = why
	if n := len(b.pastOrder); n > maxPastWhy {
		for _, id := range b.pastOrder[:n-maxPastWhy] {
			delete(b.pastWhy, id)
		}
		b.pastOrder = slices.Delete(b.pastOrder, 0, n-maxPastWhy)
	}
	if sw.ClearedTo == "" {
		b.ended[sw.Phase]++
	}
	if sw.Phase == co.PhaseDone {
		b.rates.observe(sw.Updated.Sub(sw.Started))
		if sw.ClearedTo == "" {
			b.done = append(b.done, policy.Move{Host: sw.Host, From: sw.From, To: sw.To, Started: sw.Started, Ended: sw.Updated})
			if n := len(b.done); n > maxDoneMoves {
				b.done = slices.Delete(b.done, 0, n-maxDoneMoves)
			}
		}
	}
	return why
}

// maxDoneMoves bounds the switches done that the book keeps for the
// cooldown, maxPastWhy the ended switches whose reason it keeps.
const (
	maxDoneMoves = 256
	maxPastWhy   = 1024
)

// reason is why switch id was started (the policy's decision, or an
// operator's request), while it is open or among the last maxPastWhy to
// end since the daemon started; "" otherwise.
func (b *switchBook) reason(id co.SwitchID) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	if why, ok := b.why[id]; ok {
		return why
	}
	return b.pastWhy[id]
}

// moves returns the switches in flight (Ended zero) and those done less
// than within ago at now, for the cluster manager's guard.
func (b *switchBook) moves(now time.Time, within time.Duration) []policy.Move {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []policy.Move
	for _, sw := range b.coord.Switches() {
		if !sw.Phase.Final() {
			out = append(out, policy.Move{Host: sw.Host, From: sw.From, To: sw.To, Started: sw.Started})
		}
	}
	if within <= 0 {
		return out
	}
	for _, m := range b.done {
		if now.Sub(m.Ended) < within {
			out = append(out, m)
		}
	}
	return out
}

// forget drops a switch that is over from memory: its history is in the
// store.
func (b *switchBook) forget(id co.SwitchID) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.coord.Forget(id); err != nil {
		return err
	}
	delete(b.released, id)
	b.disarmLocked(id)
	return nil
}

// transit counts the switches in flight from pool to pool, by the pools'
// indexes in idx.
func (b *switchBook) transit(idx map[string]int, n int) [][]int {
	out := make([][]int, n)
	for i := range out {
		out[i] = make([]int, n)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, sw := range b.coord.Switches() {
		if sw.Phase.Final() {
			continue
		}
		a, oka := idx[sw.From]
		c, okc := idx[sw.To]
		if oka && okc {
			out[a][c]++
		}
	}
	return out
}

// rate returns ζ and how many switches it was measured on.
func (b *switchBook) rate() (float64, int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.rates.rate(), b.rates.samples()
}

// changed reports whether the policy state sig differs from the one at
// the last switch the cluster manager started.
func (b *switchBook) changed(sig string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return sig != b.lastState
}

// started records sig as the policy state at the last switch started.
func (b *switchBook) started(sig string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.lastState = sig
}
