package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/metasched/metasched/switching"
)

func TestFormatETA(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		want string
	}{
		{-time.Second, "ETA 0s"},
		{0, "ETA 0s"},
		{300 * time.Millisecond, "ETA 1s"},
		{7 * time.Second, "ETA 7s"},
		{59*time.Second + 100*time.Millisecond, "ETA 1m00s"},
		{time.Minute, "ETA 1m00s"},
		{3*time.Minute + 4*time.Second + time.Millisecond, "ETA 3m05s"},
		{59*time.Minute + 59*time.Second, "ETA 59m59s"},
		{time.Hour, "ETA 1h00m"},
		{2*time.Hour + 3*time.Minute + time.Second, "ETA 2h04m"},
	} {
		if got := formatETA(tc.d); got != tc.want {
			t.Errorf("formatETA(%v) = %q, want %q", tc.d, got, tc.want)
		}
	}
	for _, tc := range []struct {
		elapsed time.Duration
		frac    float64
		want    time.Duration
		ok      bool
	}{
		{10 * time.Second, 0.25, 30 * time.Second, true},
		{2 * time.Second, 1, 0, true},
		{500 * time.Millisecond, 0.5, 0, false}, // too early to tell
		{10 * time.Second, 0.005, 0, false},     // too little done
		{10 * time.Second, 0, 0, false},
	} {
		got, ok := timeLeft(tc.elapsed, tc.frac)
		if ok != tc.ok || got != tc.want {
			t.Errorf("timeLeft(%v, %g) = %v, %v; want %v, %v", tc.elapsed, tc.frac, got, ok, tc.want, tc.ok)
		}
	}
}

// The bar shows the time left once a second has passed, from the
// fraction done; the long-run analysis of a solve is a phase of its own,
// with its budget in the label.
func TestProgressBarETA(t *testing.T) {
	var out bytes.Buffer
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	bar := &progressBar{w: &out, now: func() time.Time { return now }}
	bar.show(0, "start")
	now = now.Add(20 * time.Second)
	bar.show(0.4, "step 2/5")
	if got := out.String(); !strings.HasSuffix(got, "[#########---------------] step 2/5  ETA 30s") {
		t.Errorf("bar = %q, want 40%% done and 30 s left", got)
	}
	out.Reset()
	now = now.Add(time.Second)
	bar.update(switching.Progress{Phase: "stationary", Sweep: 1, Residual: 2, Tolerance: 1e-6, MaxSweeps: 200})
	now = now.Add(10 * time.Second)
	bar.update(switching.Progress{Phase: "stationary", Sweep: 100, Residual: 0.5, Tolerance: 1e-6, MaxSweeps: 200})
	if got := out.String(); !strings.Contains(got, "stationary sweep 100/200  residual 0.5 → 1e-06  ETA 10s") {
		t.Errorf("bar = %q, want the analysis half way through its budget, 10 s left", got)
	}
	// An evaluation of the krylov method: the bar is that evaluation's,
	// from its starting residual to its goal (100 → 1e-2 here, half way at
	// 1), and restarts with the next one.
	out.Reset()
	bar.update(switching.Progress{Phase: "improve", Sweep: 3, Residual: 120})
	now = now.Add(time.Second)
	bar.update(switching.Progress{Phase: "evaluate", Sweep: 1, Residual: 50, Tolerance: 1e-2, Start: 100, Policy: 4, Span: 0.31})
	now = now.Add(6 * time.Second)
	bar.update(switching.Progress{Phase: "evaluate", Sweep: 40, Residual: 1, Tolerance: 1e-2, Start: 100, Policy: 4, Span: 0.31})
	if got := out.String(); !strings.HasSuffix(got, "[############------------] evaluate   policy 4, iteration 40: residual 1 → 0.01 (last span 0.31)  ETA 6s") {
		t.Errorf("bar = %q, want policy 4's evaluation half way, 6 s left", got)
	}
}
