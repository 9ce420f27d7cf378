package metasched_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/metasched/metasched/hypervisorproxy/virt"
	"github.com/metasched/metasched/metasched"
	"github.com/metasched/metasched/metasched/client"
	"github.com/metasched/metasched/metasched/demo"
	"github.com/metasched/metasched/metasched/httpapi"
	"github.com/metasched/metasched/metasched/internal/daemontest"
	"github.com/metasched/metasched/metasched/store"
)

// The submission benchmarks measure POST /v1/jobs end to end: HTTP, the
// job file's checks, the store's group commit with a real fsync
// (Store.NoSync false), the daemon's bookkeeping, and the dispatcher that
// every submission wakes.
//
// The daemon runs the demo grid with the policy "none" (no switches) and
// the emulated executor. Before the clock starts, long jobs (a million
// tasks: hours of emulated run) fill every host of the sim pool; the
// benchmark then submits more such sim jobs, which wait in the queue. So
// the dispatcher that each submission wakes finds the pool without a free
// host and stops at the first job of the queue: no plan, no VM, no run
// competes with the submissions, only the dispatcher's own round (the
// agents' inventories and a pass over the live jobs).

// benchJob is a sim job that waits once the sim pool is full.
const benchJob = "name: bench\ntype: sim\ntasks: 1000000\ntask_ops: 1.0e11\ntask_bytes: 0\n"

// benchDaemon runs the benchmarks' daemon with a durable store until the
// benchmark ends and returns a client of it whose HTTP client keeps
// enough idle connections for conns concurrent callers, and its URL.
func benchDaemon(b *testing.B, conns int) (*metasched.Daemon, *client.Client, string) {
	b.Helper()
	cfg, grid, err := demo.Config(b.TempDir(), "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	cfg.SwitchDelay = 200 * time.Millisecond
	cfg.Policy = metasched.PolicyConfig{Name: "none"}
	buf := daemontest.NewLog()
	log := zerolog.New(buf).Level(zerolog.WarnLevel)
	opt := metasched.Options{Logger: log, Connect: virt.Connector(log)}
	opt.Store.NoSync = false // the real fsync: what is acknowledged is on disk
	ctx, cancel := context.WithCancel(context.Background())
	d, err := metasched.NewWithGrid(ctx, cfg, grid, opt)
	if err != nil {
		cancel()
		b.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		cancel()
		d.Close()
		b.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx, ln, httpapi.New(d, log)) }()
	tr := &http.Transport{MaxIdleConns: conns, MaxIdleConnsPerHost: conns}
	c := client.New("http://"+ln.Addr().String(), d.Token()).WithHTTPClient(&http.Client{Transport: tr, Timeout: time.Minute})
	b.Cleanup(func() {
		tr.CloseIdleConnections()
		cancel()
		if err := <-done; err != nil {
			b.Errorf("run: %v", err)
		}
		if err := d.Close(); err != nil {
			b.Errorf("close: %v", err)
		}
		if b.Failed() {
			b.Logf("daemon log:\n%s", buf)
		}
	})
	fillSimPool(b, c)
	return d, c, "http://" + ln.Addr().String()
}

// fillSimPool submits long sim jobs until one waits for a free host.
func fillSimPool(b *testing.B, c *client.Client) {
	b.Helper()
	ctx := context.Background()
	for range 30 {
		j, err := c.Submit(ctx, []byte(benchJob))
		if err != nil {
			b.Fatal(err)
		}
		deadline := time.Now().Add(30 * time.Second)
		for j.State != store.Running && !strings.HasPrefix(j.Reason, "waiting: ") {
			if time.Now().After(deadline) {
				b.Fatalf("job %s neither runs nor waits: %s (%s)", j.ID, j.State, j.Reason)
			}
			time.Sleep(20 * time.Millisecond)
			if j, err = c.Job(ctx, j.ID); err != nil {
				b.Fatal(err)
			}
		}
		if j.State != store.Running {
			return
		}
	}
	b.Fatal("30 long jobs and the sim pool is not full")
}

// BenchmarkSubmitAPI submits jobs through the API from 32 goroutines per
// CPU and reports the submissions per second.
func BenchmarkSubmitAPI(b *testing.B) {
	const perCPU = 32
	d, c, _ := benchDaemon(b, perCPU*64)
	ctx := context.Background()
	before, err := d.Store().Jobs(ctx, store.JobFilter{})
	if err != nil {
		b.Fatal(err)
	}
	var failed atomic.Int64
	b.SetParallelism(perCPU)
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := c.Submit(ctx, []byte(benchJob)); err != nil {
				if failed.Add(1) == 1 {
					b.Error(err)
				}
			}
		}
	})
	elapsed := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "submits/s")
	if n := failed.Load(); n > 0 {
		b.Fatalf("%d of %d submissions failed", n, b.N)
	}
	after, err := d.Store().Jobs(ctx, store.JobFilter{})
	if err != nil {
		b.Fatal(err)
	}
	if got := len(after) - len(before); got != b.N {
		b.Errorf("%d jobs stored, want %d", got, b.N)
	}
}

// BenchmarkSubmitAPIAt500 offers 500 submissions per second, 2,500 of
// them, each from its own goroutine at its scheduled time (an open loop:
// a slow answer does not delay the next submission), and reports the
// percentiles of the latency from the scheduled time to the answer.
func BenchmarkSubmitAPIAt500(b *testing.B) {
	const (
		rate = 500
		n    = 2500
	)
	_, c, _ := benchDaemon(b, 512)
	ctx := context.Background()
	var all []time.Duration
	var offered float64
	for b.Loop() {
		lat, secs, err := submitPaced(ctx, c, rate, n)
		if err != nil {
			b.Fatal(err)
		}
		all = append(all, lat...)
		offered += secs
	}
	slices.Sort(all)
	pct := func(p float64) float64 {
		return float64(all[int(p*float64(len(all)-1))].Microseconds()) / 1000
	}
	b.ReportMetric(pct(0.50), "p50-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
	b.ReportMetric(float64(all[len(all)-1].Microseconds())/1000, "max-ms")
	b.ReportMetric(float64(len(all))/offered, "submits/s")
}

// submitPaced submits n jobs at rate per second and returns each one's
// latency from its scheduled time, and the seconds from the first
// scheduled submission to the last answer.
func submitPaced(ctx context.Context, c *client.Client, rate, n int) ([]time.Duration, float64, error) {
	interval := time.Second / time.Duration(rate)
	lat := make([]time.Duration, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := time.Now()
	for i := range n {
		at := start.Add(time.Duration(i) * interval)
		time.Sleep(time.Until(at))
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = c.Submit(ctx, []byte(benchJob))
			lat[i] = time.Since(at)
		}()
	}
	wg.Wait()
	secs := time.Since(start).Seconds()
	for i, err := range errs {
		if err != nil {
			return nil, 0, fmt.Errorf("submission %d: %w", i, err)
		}
	}
	return lat, secs, nil
}
