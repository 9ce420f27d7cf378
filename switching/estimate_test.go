package switching

import (
	"math"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// estApprox compares estimates to a relative 1e-12.
var estApprox = cmpopts.EquateApprox(1e-12, 0)

// meanState is what a Mean reports.
type meanState struct {
	Value float64
	N     int
	Ready bool
}

func TestMean(t *testing.T) {
	tests := []struct {
		name   string
		mean   Mean
		obs    []float64
		wantOK []bool
		want   meanState
	}{
		{
			name: "prior with no observation",
			mean: Mean{Alpha: 0.5, MinSamples: 3, Prior: 7},
			want: meanState{Value: 7},
		},
		{
			name:   "plain mean below MinSamples",
			mean:   Mean{Alpha: 0.5, MinSamples: 3, Prior: 7},
			obs:    []float64{1, 2},
			wantOK: []bool{true, true},
			want:   meanState{Value: 1.5, N: 2},
		},
		{
			// Seeded with (1+2+6)/3 = 3 at the third observation.
			name:   "seeded with the mean of the first MinSamples",
			mean:   Mean{Alpha: 0.5, MinSamples: 3, Prior: 7},
			obs:    []float64{1, 2, 6},
			wantOK: []bool{true, true, true},
			want:   meanState{Value: 3, N: 3, Ready: true},
		},
		{
			// 3 + 0.5·(11 − 3) = 7, then 7 + 0.5·(1 − 7) = 4.
			name:   "weighted after MinSamples",
			mean:   Mean{Alpha: 0.5, MinSamples: 3},
			obs:    []float64{1, 2, 6, 11, 1},
			wantOK: []bool{true, true, true, true, true},
			want:   meanState{Value: 4, N: 5, Ready: true},
		},
		{
			name:   "alpha 1 keeps the last observation",
			mean:   Mean{Alpha: 1, MinSamples: 1},
			obs:    []float64{5, 9, 2},
			wantOK: []bool{true, true, true},
			want:   meanState{Value: 2, N: 3, Ready: true},
		},
		{
			name:   "nonsense ignored",
			mean:   Mean{Alpha: 0.5, MinSamples: 1, Prior: 7},
			obs:    []float64{math.NaN(), -1, math.Inf(1), math.Inf(-1), 4, math.NaN()},
			wantOK: []bool{false, false, false, false, true, false},
			want:   meanState{Value: 4, N: 1, Ready: true},
		},
		{
			name:   "zero is an observation",
			mean:   Mean{Alpha: 0.5, MinSamples: 1},
			obs:    []float64{4, 0},
			wantOK: []bool{true, true},
			want:   meanState{Value: 2, N: 2, Ready: true},
		},
		{
			// DefaultMinSamples = 5 and DefaultAlpha = 0.2: seeded with 2
			// after five 2s, then 2 + 0.2·(12 − 2) = 4.
			name:   "zero value uses the defaults",
			obs:    []float64{2, 2, 2, 2, 2, 12},
			wantOK: []bool{true, true, true, true, true, true},
			want:   meanState{Value: 4, N: 6, Ready: true},
		},
		{
			name:   "out-of-range settings use the defaults",
			mean:   Mean{Alpha: 1.5, MinSamples: -2},
			obs:    []float64{2, 2, 2, 2},
			wantOK: []bool{true, true, true, true},
			want:   meanState{Value: 2, N: 4, Ready: false},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := tt.mean
			var ok []bool
			for _, x := range tt.obs {
				ok = append(ok, m.Observe(x))
			}
			if diff := cmp.Diff(tt.wantOK, ok); diff != "" {
				t.Errorf("Observe results (-want +got):\n%s", diff)
			}
			got := meanState{Value: m.Value(), N: m.N(), Ready: m.Ready()}
			if diff := cmp.Diff(tt.want, got, estApprox); diff != "" {
				t.Errorf("state (-want +got):\n%s", diff)
			}
		})
	}
}

var estStart = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// estAt returns estStart + s seconds.
func estAt(s float64) time.Time { return estStart.Add(time.Duration(s * float64(time.Second))) }

// estEvery returns n event times from start, gap seconds apart.
func estEvery(start, gap float64, n int) []float64 {
	ts := make([]float64, n)
	for i := range ts {
		ts[i] = start + float64(i)*gap
	}
	return ts
}

func TestArrivalRate(t *testing.T) {
	tests := []struct {
		name   string
		est    ArrivalRate
		events []float64 // seconds after estStart
		now    float64
		want   float64
		ready  bool
	}{
		{
			name:   "every 2 s is 0.5/s",
			est:    ArrivalRate{Prior: 9},
			events: estEvery(0, 2, 30),
			now:    58,
			want:   0.5,
			ready:  true,
		},
		{
			// Between events the silence is below the mean gap: no decay.
			name:   "between events",
			est:    ArrivalRate{Prior: 9},
			events: estEvery(0, 2, 30),
			now:    59.5,
			want:   0.5,
			ready:  true,
		},
		{
			name:   "silence decays the rate",
			est:    ArrivalRate{Prior: 9},
			events: estEvery(0, 2, 30),
			now:    58 + 10,
			want:   0.1,
			ready:  true,
		},
		{
			name:   "long silence decays towards 0",
			est:    ArrivalRate{Prior: 9},
			events: estEvery(0, 2, 30),
			now:    58 + 1000,
			want:   0.001,
			ready:  true,
		},
		{
			name: "prior with no event",
			est:  ArrivalRate{Prior: 3},
			now:  1000,
			want: 3,
		},
		{
			// MinSamples 5: five events are four gaps.
			name:   "prior below MinSamples",
			est:    ArrivalRate{MinSamples: 5, Prior: 3},
			events: estEvery(0, 2, 5),
			now:    8,
			want:   3,
		},
		{
			name:   "estimate from MinSamples on",
			est:    ArrivalRate{MinSamples: 5, Prior: 3},
			events: estEvery(0, 2, 6),
			now:    10,
			want:   0.5,
			ready:  true,
		},
		{
			// Silence bounds the prior too: 1/(now − last) = 1/4 < 3.
			name:   "silence bounds the prior",
			est:    ArrivalRate{MinSamples: 5, Prior: 3},
			events: estEvery(0, 2, 2),
			now:    6,
			want:   0.25,
		},
		{
			name: "silence since the start bounds the prior",
			est:  ArrivalRate{Prior: 1, Since: estStart},
			now:  100,
			want: 0.01,
		},
		{
			// Gaps 2, 0 (out of order: 1 < 2), 2 (from 2, the latest, to
			// 4), 2: mean 6/4 with MinSamples 4.
			name:   "out of order counts a gap of 0",
			est:    ArrivalRate{MinSamples: 4},
			events: []float64{0, 2, 1, 4, 6},
			now:    6,
			want:   4.0 / 6,
			ready:  true,
		},
		{
			name:   "simultaneous events give a finite rate",
			est:    ArrivalRate{MinSamples: 2},
			events: []float64{5, 5, 5},
			now:    5,
			want:   1e9,
			ready:  true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := tt.est
			for _, e := range tt.events {
				if !a.Observe(estAt(e)) {
					t.Fatalf("Observe(%v) = false", e)
				}
			}
			got := a.Rate(estAt(tt.now))
			if diff := cmp.Diff(tt.want, got, estApprox); diff != "" {
				t.Errorf("Rate (-want +got):\n%s", diff)
			}
			if a.N() != len(tt.events) || a.Ready() != tt.ready {
				t.Errorf("N, Ready = %d, %v, want %d, %v", a.N(), a.Ready(), len(tt.events), tt.ready)
			}
		})
	}
}

func TestArrivalRateRejectsZeroTime(t *testing.T) {
	var a ArrivalRate
	if a.Observe(time.Time{}) || a.N() != 0 || !a.Last().IsZero() {
		t.Fatalf("a zero time was taken: N = %d, last = %v", a.N(), a.Last())
	}
}

// TestArrivalRateDemandShift: arrivals every 2 s, then every 0.5 s. With
// DefaultAlpha = 0.2 the mean gap after n new gaps is
// 0.5 + 1.5·0.8^n: within 10% of the new rate (≥ 1.8/s) from n = 15 on
// (0.8^15 = 0.035, gap 0.553, rate 1.81; at n = 14 the rate is 1.77).
func TestArrivalRateDemandShift(t *testing.T) {
	var a ArrivalRate
	for _, s := range estEvery(0, 2, 21) { // 20 gaps of 2 s
		a.Observe(estAt(s))
	}
	if got := a.Rate(estAt(40)); math.Abs(got-0.5) > 1e-12 {
		t.Fatalf("before the shift: %v/s, want 0.5/s", got)
	}
	const within = 15
	var rates []float64
	for n := 1; n <= 30; n++ {
		now := estAt(40 + 0.5*float64(n))
		a.Observe(now)
		rates = append(rates, a.Rate(now))
	}
	for n, r := range rates {
		want := 1 / (0.5 + 1.5*math.Pow(0.8, float64(n+1)))
		if math.Abs(r-want) > 1e-9*want {
			t.Errorf("after %d new gaps: %v/s, want %v/s", n+1, r, want)
		}
	}
	if r := rates[within-2]; r >= 1.8 {
		t.Errorf("after %d new gaps already %v/s ≥ 1.8/s: the documented count is wrong", within-1, r)
	}
	for n := within; n <= len(rates); n++ {
		if r := rates[n-1]; r < 1.8 || r > 2 {
			t.Errorf("after %d new gaps %v/s, want within 10%% of 2/s", n, r)
		}
	}
}

func TestServiceRate(t *testing.T) {
	tests := []struct {
		name   string
		est    ServiceRate
		obs    []float64
		wantOK []bool
		want   float64
		ready  bool
	}{
		{
			name: "prior with no completion",
			est:  ServiceRate{Prior: 0.25},
			want: 0.25,
		},
		{
			name:   "prior below MinSamples",
			est:    ServiceRate{MinSamples: 3, Prior: 0.25},
			obs:    []float64{10, 10},
			wantOK: []bool{true, true},
			want:   0.25,
		},
		{
			// A job on 4 hosts for 25 s is 100 host-seconds: 0.01 per
			// busy host-second.
			name:   "one over the mean host-seconds",
			est:    ServiceRate{MinSamples: 3, Prior: 0.25},
			obs:    []float64{100, 100, 100},
			wantOK: []bool{true, true, true},
			want:   0.01,
			ready:  true,
		},
		{
			name:   "nonsense and zero ignored",
			est:    ServiceRate{MinSamples: 1, Prior: 0.25},
			obs:    []float64{0, -5, math.NaN(), math.Inf(1), 50},
			wantOK: []bool{false, false, false, false, true},
			want:   0.02,
			ready:  true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := tt.est
			var ok []bool
			for _, x := range tt.obs {
				ok = append(ok, s.Observe(x))
			}
			if diff := cmp.Diff(tt.wantOK, ok); diff != "" {
				t.Errorf("Observe results (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.want, s.Rate(), estApprox); diff != "" {
				t.Errorf("Rate (-want +got):\n%s", diff)
			}
			if s.Ready() != tt.ready {
				t.Errorf("Ready = %v, want %v", s.Ready(), tt.ready)
			}
		})
	}
}

func TestSwitchRate(t *testing.T) {
	tests := []struct {
		name   string
		est    SwitchRate
		obs    []time.Duration
		wantOK []bool
		want   float64
		n      int
	}{
		{
			name: "prior with no switch",
			est:  SwitchRate{Prior: 0.1},
			want: 0.1,
		},
		{
			name:   "prior below MinSamples",
			est:    SwitchRate{MinSamples: 2, Prior: 0.1},
			obs:    []time.Duration{4 * time.Second},
			wantOK: []bool{true},
			want:   0.1,
			n:      1,
		},
		{
			// Seeded with 3 s, then 3 + 0.5·(5 − 3) = 4 s.
			name:   "one over the weighted mean duration",
			est:    SwitchRate{Alpha: 0.5, MinSamples: 2, Prior: 0.1},
			obs:    []time.Duration{2 * time.Second, 4 * time.Second, 5 * time.Second},
			wantOK: []bool{true, true, true},
			want:   0.25,
			n:      3,
		},
		{
			name:   "non-positive durations ignored",
			est:    SwitchRate{MinSamples: 1, Prior: 0.1},
			obs:    []time.Duration{0, -time.Second, 500 * time.Millisecond},
			wantOK: []bool{false, false, true},
			want:   2,
			n:      1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := tt.est
			var ok []bool
			for _, d := range tt.obs {
				ok = append(ok, s.Observe(d))
			}
			if diff := cmp.Diff(tt.wantOK, ok); diff != "" {
				t.Errorf("Observe results (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.want, s.Rate(), estApprox); diff != "" {
				t.Errorf("Rate (-want +got):\n%s", diff)
			}
			if s.N() != tt.n {
				t.Errorf("N = %d, want %d", s.N(), tt.n)
			}
		})
	}
}
