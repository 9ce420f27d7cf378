package switching

import (
	"errors"
	"fmt"
	"math"
)

// ErrBadK reports a heuristic constant K that is not a positive finite number.
var ErrBadK = errors.New("heuristic constant K must be positive and finite")

// Heuristic is the switching heuristic of Fisher et al. for any number of
// pools M; for M = 2 and K = 1 it is Palmer–Mitrani's two-pool rule (with the
// inequalities the way the papers explain them, not as printed in 002).
//
// For each switch a→b in the papers' action order (Pairs), with k_a > 0 and
// ζ_ab > 0, it evaluates
//
//	H(a,b) = c_b (j_b + (λ_b − µ_b min(k_b, j_b))/ζ_ab)
//	       − K c_a (j_a + (λ_a − µ_a min(k_a−1, j_a))/ζ_ab)
//
// (H(a,b) = c_b j_b − K c_a j_a with instant switches) and starts the switch
// with the largest H if that H is positive. k counts servers in place
// (State.Servers), not those in transit. H is often exactly 0 in real
// arithmetic, so comparisons allow a tolerance of 1e-9·(1+|best|): a later pair
// replaces the best so far only if it beats it by more than that (the first
// pair in paper order wins ties), and the best starts a switch only if it
// exceeds that tolerance.
//
// The rates are copied at construction: a Heuristic for other arrival rates
// (a demand phase) is a new Heuristic. Decide takes O(M²) time and does not
// allocate; a Heuristic is immutable and safe for concurrent use.
type Heuristic struct {
	k       float64
	instant bool
	pairs   []heuristicPair // the pairs that can switch, in paper order
}

// heuristicPair is one switch a→b that may be started, with the constants
// of H(a,b) precomputed so that Decide reads one record per pair.
type heuristicPair struct {
	from, to int
	action   Action
	// H(a,b) = cb·(j_b + (λ_b − µ_b min(k_b, j_b))·invZeta)
	//        − kca·(j_a + (λ_a − µ_a min(k_a−1, j_a))·invZeta)
	cb, lambdaB, muB  float64 // c_b, λ_b, µ_b
	kca, lambdaA, muA float64 // K·c_a, λ_a, µ_a
	invZeta           float64 // 1/ζ_ab; 0 with instant switches
}

var _ Policy = (*Heuristic)(nil)

// heuristicTol is the relative tolerance of the heuristic's comparisons.
const heuristicTol = 1e-9

// NewHeuristic returns the heuristic for model m with constant K = k (the
// paper uses 5 under heavy load; 1 gives Palmer–Mitrani's rule for M = 2).
// It copies what it needs from m, which must be a valid model.
func NewHeuristic(m *Model, k float64) (*Heuristic, error) {
	if !(k > 0) || math.IsInf(k, 1) {
		return nil, fmt.Errorf("new heuristic: K = %g: %w", k, ErrBadK)
	}
	if m == nil {
		return nil, errors.New("new heuristic: nil model")
	}
	n := m.NumPools()
	if len(m.SwitchRates) != n {
		return nil, fmt.Errorf("new heuristic: %d rows of switch rates for %d pools", len(m.SwitchRates), n)
	}
	for a, row := range m.SwitchRates {
		if len(row) != n {
			return nil, fmt.Errorf("new heuristic: row %d of switch rates has %d entries for %d pools", a+1, len(row), n)
		}
	}
	h := &Heuristic{k: k, instant: m.InstantSwitches}
	for d, p := range Pairs(n) {
		if !m.CanSwitch(p.From, p.To) {
			continue
		}
		a, b := m.Pools[p.From], m.Pools[p.To]
		hp := heuristicPair{
			from: p.From, to: p.To, action: Action(d + 1),
			cb: b.HoldingCost, lambdaB: b.ArrivalRate, muB: b.ServiceRate,
			kca: k * a.HoldingCost, lambdaA: a.ArrivalRate, muA: a.ServiceRate,
		}
		if !h.instant {
			hp.invZeta = 1 / m.SwitchRates[p.From][p.To]
		}
		h.pairs = append(h.pairs, hp)
	}
	return h, nil
}

// K returns the constant K.
func (h *Heuristic) K() float64 { return h.k }

// Decide returns the switch with the largest positive H(a,b), or NoAction.
// The state must have the model's number of pools.
func (h *Heuristic) Decide(s State) Action {
	jobs, servers := s.Jobs, s.Servers
	best, bestAction := 0.0, NoAction
	found := false
	for i := range h.pairs {
		p := &h.pairs[i]
		ka := servers[p.from]
		if ka <= 0 {
			continue
		}
		ja, jb, kb := jobs[p.from], jobs[p.to], servers[p.to]
		var v float64
		if h.instant {
			v = p.cb*float64(jb) - p.kca*float64(ja)
		} else {
			v = p.cb*(float64(jb)+(p.lambdaB-p.muB*float64(min(kb, jb)))*p.invZeta) -
				p.kca*(float64(ja)+(p.lambdaA-p.muA*float64(min(ka-1, ja)))*p.invZeta)
		}
		if !found || v > best+heuristicTol*(1+math.Abs(best)) {
			best, bestAction, found = v, p.action, true
		}
	}
	if !found || !(best > heuristicTol*(1+math.Abs(best))) {
		return NoAction
	}
	return bestAction
}
