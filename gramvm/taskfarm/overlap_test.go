package taskfarm

import (
	"context"
	"fmt"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

// throttled is a worker connection whose reads come at rate bytes per
// second at most, as over a slow link: what the master writes waits in
// the socket buffers meanwhile. A link that idles (a read that waited
// for its bytes) saves no credit; a sleep that overslept is made up by
// the next reads.
type throttled struct {
	net.Conn
	rate float64 // bytes/s

	mu   sync.Mutex
	free time.Time // when the link has carried what was read so far
}

// idleRead is how long a read must wait to count as one that waited for
// its bytes (the link idled), not one that merely took its turn.
const idleRead = 500 * time.Microsecond

func (c *throttled) Read(p []byte) (int, error) {
	if len(p) > 16<<10 {
		p = p[:16<<10]
	}
	start := time.Now()
	n, err := c.Conn.Read(p)
	c.mu.Lock()
	if now := time.Now(); c.free.IsZero() || now.Sub(start) > idleRead && c.free.Before(now) {
		c.free = now
	}
	c.free = c.free.Add(time.Duration(float64(n) / c.rate * float64(time.Second)))
	wait := time.Until(c.free)
	c.mu.Unlock()
	time.Sleep(wait)
	return n, err
}

// throttledRun runs a master of cfg and one worker process of the given
// prefetch whose connection reads at rate bytes/s, and returns the run's
// summary.
func throttledRun(tb testing.TB, cfg MasterConfig, prefetch int, rate float64) *Summary {
	tb.Helper()
	cfg.Log = zerolog.Nop()
	m, err := NewMaster(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	werr := make(chan error, 1)
	go func() {
		var d net.Dialer
		_, err := RunWorkers(ctx, WorkerConfig{Master: ln.Addr().String(), Procs: 1, Prefetch: prefetch, Log: zerolog.Nop(),
			Dial: func(ctx context.Context, network, addr string) (net.Conn, error) {
				c, err := d.DialContext(ctx, network, addr)
				if err != nil {
					return nil, err
				}
				return &throttled{Conn: c, rate: rate}, nil
			}})
		werr <- err
	}()
	s, err := m.Serve(ctx, ln)
	if err != nil {
		tb.Fatal(err)
	}
	if err := <-werr; err != nil {
		tb.Fatal(err)
	}
	if s.Done != cfg.Tasks || s.Reissued != 0 || s.Duplicates != 0 {
		tb.Fatalf("summary %+v", s)
	}
	return s
}

// kernelTime is how long the kernel takes for ops operations on this
// machine now: the median of five runs.
func kernelTime(ops uint64) time.Duration {
	var ts []time.Duration
	for range 5 {
		k := NewKernel(1, make([]byte, 64))
		start := time.Now()
		k.Run(ops)
		ts = append(ts, time.Since(start))
	}
	slices.Sort(ts)
	return ts[len(ts)/2]
}

// A worker whose link takes as long to bring a task's input as its
// kernel takes to compute the task: with a prefetch of 2 the next input
// crosses the link during the computation, so a task costs about the
// longer of the two, as the planning model's min(n·perf/Oper, b/Comm)
// counts; one task at a time costs their sum. The figures are logged;
// the bound is wide (prefetching at least 1.2 times as fast), the runs
// alternate (1, 2, 2, 1) so that a change of the machine's load weighs
// on both, and a measure that misses the bound is taken again, up to
// three times, with the kernel timed anew (a load that changes between
// the timing and the runs unbalances compute and transfer).
func TestPrefetchOverlapsTransfer(t *testing.T) {
	var speedups []float64
	for range 3 {
		s := measureOverlap(t)
		if speedups = append(speedups, s); s >= 1.2 {
			return
		}
	}
	t.Errorf("prefetching ran %.2f× as fast as one task at a time (three measures), want at least 1.2×", speedups)
}

// measureOverlap is one measure of TestPrefetchOverlapsTransfer: how
// many times as fast a prefetch of 2 runs as a prefetch of 1.
func measureOverlap(t *testing.T) float64 {
	const (
		tasks     = 24
		taskBytes = 64 << 10
		target    = 25 * time.Millisecond // the compute time per task aimed at
	)
	// The operations that take the target on this machine now, and the
	// link's rate that brings an input in that time.
	probe := uint64(1 << 23)
	ops := uint64(float64(probe) * float64(target) / float64(kernelTime(probe)))
	compute := kernelTime(ops)
	in, _ := Split(taskBytes)
	rate := float64(in) / compute.Seconds()
	transfer := time.Duration(float64(in) / rate * float64(time.Second))
	cfg := MasterConfig{Tasks: tasks, TaskOps: ops, TaskBytes: taskBytes}

	var wall [3]float64 // by prefetch
	for _, p := range []int{1, 2, 2, 1} {
		s := throttledRun(t, cfg, p, rate)
		wall[p] += s.WallSeconds
	}
	per := func(p int) time.Duration { return time.Duration(wall[p] / (2 * tasks) * float64(time.Second)) }
	speedup := wall[1] / wall[2]
	t.Logf("per task: compute %v (%d operations), transfer %v (%d bytes at %.3g MB/s); the model (overlap) says %v, one at a time their sum %v",
		compute.Round(time.Microsecond), ops, transfer.Round(time.Microsecond), in, rate/1e6,
		max(compute, transfer).Round(time.Microsecond), (compute + transfer).Round(time.Microsecond))
	t.Logf("measured per task (%d tasks, twice each): prefetch 1: %v, prefetch 2: %v: %.2f× as fast",
		tasks, per(1).Round(time.Microsecond), per(2).Round(time.Microsecond), speedup)
	return speedup
}

// BenchmarkTaskFarmThrottled is one worker process over a link that
// brings a task's input (64 KiB) in 10 ms: tasks/s, and the share of the
// model's rate min(perf/Oper, b/Comm) reached (1 for a perfect overlap),
// with the kernel computing a task in as long as its transfer takes
// (balanced) and in a quarter of it (link-bound, as the papers' jobs on
// their WAN).
func BenchmarkTaskFarmThrottled(b *testing.B) {
	const (
		tasks     = 20
		taskBytes = 64 << 10
		transfer  = 10 * time.Millisecond
	)
	in, _ := Split(taskBytes)
	rate := float64(in) / transfer.Seconds()
	probe := uint64(1 << 23)
	for _, shape := range []struct {
		name    string
		compute time.Duration
	}{{"balanced", transfer}, {"link-bound", transfer / 4}} {
		ops := uint64(float64(probe) * float64(shape.compute) / float64(kernelTime(probe)))
		model := 1 / max(kernelTime(ops).Seconds(), transfer.Seconds())
		cfg := MasterConfig{Tasks: tasks, TaskOps: ops, TaskBytes: taskBytes}
		for _, p := range []int{1, 2} {
			b.Run(fmt.Sprintf("%s/prefetch=%d", shape.name, p), func(b *testing.B) {
				var wall float64
				for b.Loop() {
					wall += throttledRun(b, cfg, p, rate).WallSeconds
				}
				got := float64(tasks*b.N) / wall
				b.ReportMetric(got, "tasks/s")
				b.ReportMetric(got/model, "of_model")
			})
		}
	}
}
