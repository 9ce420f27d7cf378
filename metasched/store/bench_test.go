package store

import (
	"context"
	"encoding/json"
	"slices"
	"sync"
	"testing"
	"time"
)

var benchSpec = json.RawMessage(`{"type":"render","vm":{"vcpus":2,"memory_mib":2048},"command":["render","--frames","1-100"]}`)

// BenchmarkSubmit submits jobs one after the other, each waiting for its
// own commit and fsync.
func BenchmarkSubmit(b *testing.B) {
	ctx := context.Background()
	s := openTest(b, Options{})
	start := time.Now()
	for b.Loop() {
		if _, err := s.SubmitJob(ctx, "render", benchSpec, "bench"); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "submissions/s")
}

// BenchmarkSubmitParallel submits from 64 goroutines per CPU with real
// fsync: group commit shares each fsync among the waiting callers.
func BenchmarkSubmitParallel(b *testing.B) {
	ctx := context.Background()
	s := openTest(b, Options{})
	b.SetParallelism(64)
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := s.SubmitJob(ctx, "render", benchSpec, "bench"); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "submissions/s")
}

// BenchmarkSubmitLatency500 offers 500 submissions per second for two
// seconds, each from its own goroutine at its scheduled time (open loop),
// and reports the latency percentiles. Run with -benchtime=1x.
func BenchmarkSubmitLatency500(b *testing.B) {
	ctx := context.Background()
	s := openTest(b, Options{})
	const (
		rate = 500
		dur  = 2 * time.Second
	)
	var all []time.Duration
	for b.Loop() {
		lat := submitAtRate(ctx, b, s, rate, dur)
		all = append(all, lat...)
	}
	slices.Sort(all)
	pct := func(p float64) float64 {
		return float64(all[int(p*float64(len(all)-1))].Microseconds()) / 1000
	}
	b.ReportMetric(pct(0.50), "p50-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
	b.ReportMetric(float64(all[len(all)-1].Microseconds())/1000, "max-ms")
}

// submitAtRate submits rate jobs per second for dur and returns each
// submission's latency from its scheduled start.
func submitAtRate(ctx context.Context, tb testing.TB, s *Store, rate int, dur time.Duration) []time.Duration {
	n := int(dur.Seconds() * float64(rate))
	interval := time.Second / time.Duration(rate)
	lat := make([]time.Duration, n)
	var wg sync.WaitGroup
	start := time.Now()
	for i := range n {
		at := start.Add(time.Duration(i) * interval)
		time.Sleep(time.Until(at))
		wg.Go(func() {
			if _, err := s.SubmitJob(ctx, "render", benchSpec, "bench"); err != nil {
				tb.Error(err)
			}
			lat[i] = time.Since(at)
		})
	}
	wg.Wait()
	return lat
}

// BenchmarkJobsPage lists the first page of 500 jobs among 50,000 queued
// ones (a third of each of three types), with each filter.
func BenchmarkJobsPage(b *testing.B) {
	ctx := context.Background()
	s := openTest(b, Options{NoSync: true})
	types := []string{"sim", "render", "etl"}
	var wg sync.WaitGroup
	for w := range 64 {
		wg.Go(func() {
			for i := w; i < 50000; i += 64 {
				if _, err := s.SubmitJob(ctx, types[i%3], benchSpec, "bench"); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	for _, tc := range []struct {
		name string
		f    JobFilter
	}{
		{"all", JobFilter{Limit: 500}},
		{"type", JobFilter{Type: "render", Limit: 500}},
		{"state", JobFilter{States: []JobState{Queued}, Limit: 500}},
		{"state-and-type", JobFilter{States: []JobState{Queued}, Type: "render", Limit: 500}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			for b.Loop() {
				js, err := s.Jobs(ctx, tc.f)
				if err != nil || len(js) != 500 {
					b.Fatalf("%d jobs: %v", len(js), err)
				}
			}
		})
	}
}
