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
// arithmetic, so comparisons allow a tolerance tol = 1e-9·(1+|best|), best
// the largest H: no switch starts unless best > tol, and among the pairs
// with H ≥ best − tol the first in paper order wins.
//
// The rates are copied at construction: a Heuristic for other arrival rates
// (a demand phase) is a new Heuristic. Decide takes O(M²) time and does not
// allocate for M ≤ 4; a
// Heuristic is immutable and safe for concurrent use.
type Heuristic struct {
	k     float64
	pools []heuristicPool
	pairs []heuristicPair // the pairs that can switch, in paper order
	// uniform: every pair that can switch has the same ζ (or switches are
	// instant), whose inverse is invZeta (0 when instant); then H(a,b) =
	// x_b − y_a with one term per pool.
	uniform bool
	invZeta float64
	// clip: each pool's term, an expected queue length when the switch
	// completes, is taken as at least 0 (Clipped).
	clip bool
}

// heuristicPool holds one pool's constants. H(a,b) splits into a term of
// the destination b and a term of the source a,
//
//	H(a,b) = (c_b j_b + gain_b/ζ_ab) − (K c_a j_a + loss_a/ζ_ab),
//	gain_b = c_b (λ_b − µ_b min(k_b, j_b)),
//	loss_a = K c_a (λ_a − µ_a min(k_a−1, j_a)),
//
// so Decide computes a few numbers per pool and one or two operations per
// pair.
type heuristicPool struct {
	c, kc     float64 // c_i, K·c_i
	cl, kcl   float64 // c_i λ_i, K c_i λ_i
	cmu, kcmu float64 // c_i µ_i, K c_i µ_i
}

// heuristicPair is one switch a→b that may be started.
type heuristicPair struct {
	from, to int
	action   Action
	invZeta  float64 // 1/ζ_ab; 0 with instant switches
}

// heuristicStack is the largest number of pools whose per-pool terms Decide
// keeps in fixed arrays (a power of two: indices are masked with it − 1);
// larger models allocate.
const heuristicStack = 4

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
	h := &Heuristic{k: k, uniform: true}
	for _, p := range m.Pools {
		c := p.HoldingCost
		h.pools = append(h.pools, heuristicPool{
			c: c, kc: k * c,
			cl: c * p.ArrivalRate, kcl: k * c * p.ArrivalRate,
			cmu: c * p.ServiceRate, kcmu: k * c * p.ServiceRate,
		})
	}
	for d, p := range Pairs(n) {
		if !m.CanSwitch(p.From, p.To) {
			continue
		}
		hp := heuristicPair{from: p.From, to: p.To, action: Action(d + 1)}
		if !m.InstantSwitches {
			hp.invZeta = 1 / m.SwitchRates[p.From][p.To]
		}
		if len(h.pairs) > 0 && hp.invZeta != h.pairs[0].invZeta {
			h.uniform = false
		}
		h.pairs = append(h.pairs, hp)
	}
	if len(h.pairs) > 0 {
		h.invZeta = h.pairs[0].invZeta
	}
	return h, nil
}

// K returns the constant K.
func (h *Heuristic) K() float64 { return h.k }

// Clipped returns the heuristic with each pool's term clipped at 0:
//
//	H(a,b) = c_b max(0, j_b + (λ_b − µ_b min(k_b, j_b))/ζ_ab)
//	       − K c_a max(0, j_a + (λ_a − µ_a min(k_a−1, j_a))/ζ_ab).
//
// Each bracket is the expected queue of a pool when the switch completes,
// which cannot be negative. The papers' formula lets a pool that serves
// faster than it receives show a negative queue, so that taking a server
// away from it looks like a gain: with service rates fast against ζ (in a
// live system whose jobs take seconds and whose switches take longer) the
// papers' rule then switches servers away from busy pools with nothing
// waiting. The daemon uses the clipped rule; the simulator and the papers'
// experiments use the papers' formula.
func (h *Heuristic) Clipped() *Heuristic {
	c := *h
	c.clip = true
	return &c
}

// Decide returns the switch with the largest positive H(a,b), or NoAction.
// The state must have the model's number of pools.
func (h *Heuristic) Decide(s State) Action {
	np := len(h.pools)
	if np > heuristicStack || !h.uniform {
		return h.decideGeneral(s)
	}
	const mask = heuristicStack - 1
	// x[b] and y[a] are the destination and source terms of H(a,b) =
	// x[b] − y[a]; y[a] = +Inf when pool a has no server in place, which
	// rules it out as a source.
	var x, y [heuristicStack]float64
	jobs, servers := s.Jobs[:np], s.Servers[:np]
	xmax, ymin := math.Inf(-1), math.Inf(1)
	for i := range np {
		p := &h.pools[i]
		j, k := jobs[i], servers[i]
		fj := float64(j)
		xi := p.c*fj + (p.cl-p.cmu*float64(min(k, j)))*h.invZeta
		yi := p.kc*fj + (p.kcl-p.kcmu*float64(min(k-1, j)))*h.invZeta
		if h.clip {
			xi, yi = max(xi, 0), max(yi, 0)
		}
		if k <= 0 {
			yi = math.Inf(1)
		}
		x[i], y[i] = xi, yi
		if xi > xmax {
			xmax = xi
		}
		if yi < ymin {
			ymin = yi
		}
	}
	// Every H(a,b) ≤ max x − min y: when that is not positive, no switch
	// is worth starting, and the pairs need not be looked at (the common
	// case under a large K).
	if !(xmax-ymin > 0) {
		return NoAction
	}
	var hv [heuristicStack * (heuristicStack - 1)]float64
	best := math.Inf(-1)
	for i := range h.pairs {
		p := &h.pairs[i]
		v := x[p.to&mask] - y[p.from&mask]
		hv[i] = v
		if v > best { // no NaN: x is finite, y finite or +Inf
			best = v
		}
	}
	return h.first(hv[:len(h.pairs)], best)
}

// first returns the action of the first pair whose H is within the
// tolerance of the largest, best, if best is positive beyond the tolerance.
func (h *Heuristic) first(hv []float64, best float64) Action {
	tol := heuristicTol * (1 + math.Abs(best))
	if !(best > tol) {
		return NoAction
	}
	for i, v := range hv {
		if v >= best-tol {
			return h.pairs[i].action
		}
	}
	return NoAction
}

// decideGeneral is Decide for switch rates that differ between pairs or
// more than heuristicStack pools; it allocates only for the latter.
func (h *Heuristic) decideGeneral(s State) Action {
	var buf [heuristicStack * (heuristicStack - 1)]float64
	hv := buf[:0]
	if len(h.pairs) > len(buf) {
		hv = make([]float64, 0, len(h.pairs))
	}
	best := math.Inf(-1)
	for i := range h.pairs {
		p := &h.pairs[i]
		v := math.Inf(-1)
		if ka := s.Servers[p.from]; ka > 0 {
			a, b := &h.pools[p.from], &h.pools[p.to]
			ja, jb, kb := s.Jobs[p.from], s.Jobs[p.to], s.Servers[p.to]
			x := b.c*float64(jb) + (b.cl-b.cmu*float64(min(kb, jb)))*p.invZeta
			y := a.kc*float64(ja) + (a.kcl-a.kcmu*float64(min(ka-1, ja)))*p.invZeta
			if h.clip {
				x, y = max(x, 0), max(y, 0)
			}
			v = x - y
		}
		hv = append(hv, v)
		best = max(best, v)
	}
	return h.first(hv, best)
}
