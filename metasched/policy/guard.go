package policy

import (
	"fmt"
	"time"
)

// The guard is what an operator expects of a cluster manager on top of the
// papers' policies, which know neither the jobs that wait for hosts nor the
// hosts that no job uses, nor the switches done a moment ago:
//
//   - a pool is given a host only while one of its jobs waits for hosts
//     (queued, not placed): a host moved to a pool whose jobs all run
//     already would serve nothing there. The papers' model counts the jobs
//     in the system; with the estimated arrival rates decaying after a
//     stream of jobs, the heuristic would move idle hosts back and forth
//     between idle pools by their c_i·λ_i alone (NeedWaiting);
//   - a host no job uses, in a pool none of whose jobs waits, goes to a
//     pool whose jobs wait when the policy does not switch (Config.MoveIdle
//     of the Engine, with PoolInput.Idle): the heuristic charges a source
//     pool K·c_a for each of its jobs in the system, even when they leave
//     hosts of it idle, as a job spans several hosts here;
//   - no switch undoes a recent one (Cooldown): a host switched from pool
//     a to pool b is not switched back to a within Cooldown after that
//     switch ended (the release rule leaves it out), and no host is
//     switched from b to a while a switch from a to b is in flight.
//
// Guard.Held computes, from the inputs, the recent switches and the time,
// the switches that may not start now and why; Inputs.Held carries them
// to the Engine, which decides among the others. Like the rest of the
// package, the guard does no I/O and reads no clock: the time is an input.

// DefaultCooldown is Guard.Cooldown by default: a host's switch is not
// undone within a minute.
const DefaultCooldown = time.Minute

// Guard says which switches the cluster manager does not start now.
type Guard struct {
	// NeedWaiting: a pool receives a host only while a job of it waits
	// for hosts (PoolInput.Waiting > 0).
	NeedWaiting bool
	// MoveIdle: when the policy does not switch, a host no job uses goes
	// from a pool with no job waiting to one whose jobs wait
	// (Config.MoveIdle).
	MoveIdle bool
	// Cooldown: a host switched from pool a to pool b does not go back to
	// a until Cooldown after that switch ended, and no switch from b to a
	// starts while one from a to b is in flight; 0: neither.
	Cooldown time.Duration
}

// Move is a recent switch of a host, for the cooldown: from pool From to
// pool To, started at Started; Ended is zero while it is in flight. Moves
// that did not end done (cancelled, rolled back) moved nothing and are
// not given.
type Move struct {
	Host, From, To string
	Started, Ended time.Time
}

// Cooling returns the hosts that may not be switched from pool from to
// pool to at now: those whose last move in moves (oldest first) took them
// from to to from less than Cooldown ago. The release rule leaves them out.
func (g Guard) Cooling(moves []Move, from, to string, now time.Time) []string {
	if g.Cooldown <= 0 {
		return nil
	}
	return g.cooling(lastMoves(moves), from, to, now)
}

// lastMoves is each host's last move that ended, hosts in the order they
// first appear in moves.
func lastMoves(moves []Move) []Move {
	at := map[string]int{}
	var last []Move
	for _, m := range moves {
		if m.Ended.IsZero() || m.Host == "" {
			continue
		}
		if i, ok := at[m.Host]; ok {
			last[i] = m
			continue
		}
		at[m.Host] = len(last)
		last = append(last, m)
	}
	return last
}

// cooling is Cooling on each host's last move (lastMoves).
func (g Guard) cooling(last []Move, from, to string, now time.Time) []string {
	var out []string
	for _, m := range last {
		if m.From == to && m.To == from && now.Sub(m.Ended) < g.Cooldown {
			out = append(out, m.Host)
		}
	}
	return out
}

// Held returns, for the pools of in, the switches a→b that may not start
// at now with why (Held[a][b] != ""), or nil when none is held. moves are
// the switches in flight and those done lately, oldest first.
func (g Guard) Held(in Inputs, moves []Move, now time.Time) [][]string {
	np := len(in.Pools)
	idx := make(map[string]int, np)
	for i, p := range in.Pools {
		idx[p.Name] = i
	}
	var held [][]string
	hold := func(a, b int, why string) {
		if held == nil {
			held = make([][]string, np)
			for i := range held {
				held[i] = make([]string, np)
			}
		}
		if held[a][b] == "" {
			held[a][b] = why
		}
	}
	if g.Cooldown > 0 {
		for _, m := range moves {
			a, oka := idx[m.To] // a switch a→b would undo this move from b to a
			b, okb := idx[m.From]
			if !oka || !okb || a == b || !m.Ended.IsZero() {
				continue
			}
			host := "a host"
			if m.Host != "" {
				host = "host " + m.Host
			}
			hold(a, b, fmt.Sprintf("it would undo the switch of %s from %s to %s, still in flight", host, m.From, m.To))
		}
		last := lastMoves(moves)
		for a := range in.Pools {
			for b := range in.Pools {
				if a == b {
					continue
				}
				// Every host of a came from b lately: none may go back.
				if c := g.cooling(last, in.Pools[a].Name, in.Pools[b].Name, now); len(c) > 0 && len(c) >= in.Pools[a].Servers {
					hold(a, b, fmt.Sprintf("every host of %s came from %s less than %s ago: switching one back would undo that switch",
						in.Pools[a].Name, in.Pools[b].Name, g.Cooldown))
				}
			}
		}
	}
	if g.NeedWaiting {
		for b, p := range in.Pools {
			if p.Waiting > 0 {
				continue
			}
			for a := range in.Pools {
				if a != b {
					hold(a, b, fmt.Sprintf("no job of %s waits for a host", p.Name))
				}
			}
		}
	}
	return held
}
