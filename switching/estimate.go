package switching

// Rate estimators for the live system (docs/research/switching.md, "Rate
// estimators"): the model's rates measured from what the running system does.
//
//   - ArrivalRate estimates λ_i, jobs of type i arriving per second, from the
//     times of the arrivals: an exponentially weighted mean of the gaps
//     between them, bounded by the silence since the last one, so that a
//     stream that stops decays towards 0.
//   - ServiceRate estimates µ_i, completions per busy host-second, from the
//     busy host-seconds each completed job took (hosts × seconds): µ_i is one
//     over their exponentially weighted mean.
//   - SwitchRate estimates ζ, switches completed per second per host in
//     transit, from the durations of completed switches: one over their
//     exponentially weighted mean.
//   - Mean is the exponentially weighted mean under all three, with a prior
//     and a minimum sample.
//
// Every estimator reports its prior until it has seen MinSamples
// observations, so a few early events cannot swing the policy. Alpha and
// MinSamples are set before the first observation; Prior may change at any
// time (from a prediction, say) and is read by the queries. Each
// observation and each query costs O(1) time and no allocation; an
// estimator is a few words of memory. They keep no clock (times are
// inputs), do no I/O and are deterministic. Queries do not modify an
// estimator, but Observe must not run concurrently with anything else.
//
// Nonsense is ignored, not stored: Observe returns false for a NaN, an
// infinite or a negative observation (and for a zero duration or host-time,
// which says nothing finite about a rate), and the estimate is unchanged.

import (
	"math"
	"time"
)

// Defaults of the estimators' settings, used when a setting is out of range
// (the zero value included).
const (
	// DefaultAlpha is the weight of a new observation: with 0.2 a change of
	// regime is 90% absorbed after 11 observations ((1−0.2)^11 < 0.1).
	DefaultAlpha = 0.2
	// DefaultMinSamples is the number of observations below which an
	// estimator reports its prior.
	DefaultMinSamples = 5
)

// minGap is the smallest gap between events ArrivalRate divides by: the
// resolution of time.Time, so that a burst of simultaneous events gives a
// finite rate (at most 1e9 per second).
const minGap = time.Nanosecond

// Mean is an exponentially weighted mean of observations with a prior and a
// minimum sample:
//
//   - with no observation, Value is Prior;
//   - with fewer than MinSamples, it is the plain arithmetic mean of those
//     seen;
//   - at the MinSamples-th observation the weighted mean is seeded with the
//     arithmetic mean of the first MinSamples, and each later observation x
//     moves it by Alpha·(x − mean).
//
// After a shift of the observations from a mean g to a mean g', n further
// observations leave the weighted mean at g' + (g − g')(1 − Alpha)^n in
// expectation. Set the fields before the first observation; the zero value
// uses DefaultAlpha, DefaultMinSamples and a prior of 0.
type Mean struct {
	Alpha      float64 // weight of a new observation in (0, 1]; otherwise DefaultAlpha
	MinSamples int     // observations before the weighted mean is reported; < 1: DefaultMinSamples
	Prior      float64 // the value before any observation

	n    int
	sum  float64 // of the first MinSamples observations
	ewma float64
}

func (m *Mean) alpha() float64 {
	if m.Alpha > 0 && m.Alpha <= 1 {
		return m.Alpha
	}
	return DefaultAlpha
}

func (m *Mean) minSamples() int { return need(m.MinSamples) }

// need is the minimum sample of a MinSamples setting.
func need(minSamples int) int {
	if minSamples >= 1 {
		return minSamples
	}
	return DefaultMinSamples
}

// Observe adds an observation. It returns false, and changes nothing, for a
// NaN, an infinite or a negative x.
func (m *Mean) Observe(x float64) bool {
	if math.IsNaN(x) || math.IsInf(x, 0) || x < 0 {
		return false
	}
	m.n++
	switch need := m.minSamples(); {
	case m.n < need:
		m.sum += x
	case m.n == need:
		m.sum += x
		m.ewma = m.sum / float64(m.n)
	default:
		m.ewma += m.alpha() * (x - m.ewma)
	}
	return true
}

// Value returns the prior, the plain mean or the weighted mean (see Mean).
func (m *Mean) Value() float64 {
	switch {
	case m.n == 0:
		return m.Prior
	case m.n < m.minSamples():
		return m.sum / float64(m.n)
	}
	return m.ewma
}

// N returns the number of observations taken.
func (m *Mean) N() int { return m.n }

// Ready reports whether MinSamples observations were taken, so that Value
// is the weighted mean.
func (m *Mean) Ready() bool { return m.n >= m.minSamples() }

// ArrivalRate estimates the rate of a stream of events (arrivals per
// second) from their times. The gaps between successive events are averaged
// by a Mean (Alpha, MinSamples); the rate at time now is
//
//	1 / max(mean gap, now − last event)
//
// so that when the stream stops the estimate decays like 1/silence towards
// 0, and a burst of simultaneous events counts a gap of one nanosecond at
// least. Before MinSamples gaps the rate is Prior, bounded the same way by
// the silence since the last event (or since Since, when set, before the
// first event): min(Prior, 1/(now − last)).
//
// An event earlier than the last one (events reported out of order) counts
// as a gap of 0 and does not move the last event back.
//
// With DefaultAlpha, after a shift from events every 2 s to events every
// 0.5 s the estimate is within 10% of the new 2/s after 15 events.
type ArrivalRate struct {
	Alpha      float64 // weight of a new gap in (0, 1]; otherwise DefaultAlpha
	MinSamples int     // gaps before the estimate replaces Prior; < 1: DefaultMinSamples
	Prior      float64 // events per second reported before MinSamples gaps
	// Since, when set, is when observation began: silence since then lowers
	// the prior before the first event as it does after one.
	Since time.Time

	gaps Mean
	last time.Time
	n    int
}

// Observe records an event at time at. It returns false (and changes
// nothing) for a zero time.
func (a *ArrivalRate) Observe(at time.Time) bool {
	if at.IsZero() {
		return false
	}
	if a.n > 0 {
		gap := 0.0
		if at.After(a.last) {
			gap = at.Sub(a.last).Seconds()
		}
		a.gaps.Alpha, a.gaps.MinSamples = a.Alpha, a.MinSamples
		a.gaps.Observe(gap)
	}
	if a.n == 0 || at.After(a.last) {
		a.last = at
	}
	a.n++
	return true
}

// Rate returns the estimated events per second at time now (see
// ArrivalRate).
func (a *ArrivalRate) Rate(now time.Time) float64 {
	rate := a.Prior
	if a.Ready() {
		rate = 1 / max(a.gaps.Value(), minGap.Seconds())
	}
	ref := a.last
	if a.n == 0 {
		ref = a.Since
	}
	if !ref.IsZero() {
		if silent := now.Sub(ref).Seconds(); silent > 0 && rate*silent > 1 {
			rate = 1 / silent
		}
	}
	return rate
}

// N returns the number of events observed (one more than the gaps).
func (a *ArrivalRate) N() int { return a.n }

// Ready reports whether MinSamples gaps were seen, so that the rate no
// longer rests on the prior.
func (a *ArrivalRate) Ready() bool { return a.gaps.N() >= need(a.MinSamples) }

// Last returns the time of the latest event, zero before the first.
func (a *ArrivalRate) Last() time.Time { return a.last }

// ServiceRate estimates µ_i, completions per busy host-second, from the busy
// host-seconds of each completed job: a job that held h hosts for t seconds
// is one observation of h·t. The rate is 1 / the weighted mean (a Mean with
// Alpha and MinSamples), or Prior before MinSamples observations.
type ServiceRate struct {
	Alpha      float64 // weight of a new observation in (0, 1]; otherwise DefaultAlpha
	MinSamples int     // observations before the estimate replaces Prior; < 1: DefaultMinSamples
	Prior      float64 // completions per busy host-second before MinSamples observations

	mean Mean
}

// Observe records a completed job that took hostSeconds busy host-seconds.
// It returns false (and changes nothing) unless hostSeconds is a finite
// number > 0.
func (s *ServiceRate) Observe(hostSeconds float64) bool {
	return observePositive(&s.mean, s.Alpha, s.MinSamples, hostSeconds)
}

// Rate returns the estimated completions per busy host-second.
func (s *ServiceRate) Rate() float64 { return inverseRate(&s.mean, s.MinSamples, s.Prior) }

// N returns the number of completions observed.
func (s *ServiceRate) N() int { return s.mean.N() }

// Ready reports whether MinSamples completions were seen.
func (s *ServiceRate) Ready() bool { return s.mean.N() >= need(s.MinSamples) }

// SwitchRate estimates ζ, the rate at which a host in transit between pools
// arrives, from the durations of completed switches: 1 / the weighted mean
// duration in seconds (a Mean with Alpha and MinSamples), or Prior before
// MinSamples observations.
type SwitchRate struct {
	Alpha      float64 // weight of a new observation in (0, 1]; otherwise DefaultAlpha
	MinSamples int     // observations before the estimate replaces Prior; < 1: DefaultMinSamples
	Prior      float64 // switches per second per host in transit before MinSamples observations

	mean Mean
}

// Observe records a completed switch that took d. It returns false (and
// changes nothing) unless d > 0.
func (s *SwitchRate) Observe(d time.Duration) bool {
	if d <= 0 {
		return false
	}
	return observePositive(&s.mean, s.Alpha, s.MinSamples, d.Seconds())
}

// Rate returns the estimated switches per second per host in transit.
func (s *SwitchRate) Rate() float64 { return inverseRate(&s.mean, s.MinSamples, s.Prior) }

// N returns the number of switches observed.
func (s *SwitchRate) N() int { return s.mean.N() }

// Ready reports whether MinSamples switches were seen.
func (s *SwitchRate) Ready() bool { return s.mean.N() >= need(s.MinSamples) }

// observePositive adds x > 0 (finite) to m with the given settings.
func observePositive(m *Mean, alpha float64, minSamples int, x float64) bool {
	if !(x > 0) || math.IsInf(x, 1) {
		return false
	}
	m.Alpha, m.MinSamples = alpha, minSamples
	return m.Observe(x)
}

// inverseRate is 1/m's value from minSamples observations on, else prior.
// m holds positive observations only, so its value is positive.
func inverseRate(m *Mean, minSamples int, prior float64) float64 {
	if m.N() < need(minSamples) {
		return prior
	}
	return 1 / m.Value()
}
