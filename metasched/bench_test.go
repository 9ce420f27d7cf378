package metasched_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/metasched/metasched/graph"
	"github.com/metasched/metasched/hypervisorproxy/virt"
	"github.com/metasched/metasched/internal/tlsx"
	"github.com/metasched/metasched/internal/tlsx/tlsxtest"
	"github.com/metasched/metasched/metasched"
	"github.com/metasched/metasched/metasched/api"
	"github.com/metasched/metasched/metasched/client"
	co "github.com/metasched/metasched/metasched/coordinator"
	"github.com/metasched/metasched/metasched/dashboard"
	"github.com/metasched/metasched/metasched/demo"
	"github.com/metasched/metasched/metasched/httpapi"
	"github.com/metasched/metasched/metasched/internal/daemontest"
	"github.com/metasched/metasched/metasched/store"
	"github.com/metasched/metasched/selection"
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
	return benchDaemonOver(b, conns, nil, nil)
}

// benchDaemonEdit is benchDaemon with the configuration changed by edit
// (nil: none).
func benchDaemonEdit(b *testing.B, conns int, edit func(*metasched.Config)) (*metasched.Daemon, *client.Client, string) {
	return benchDaemonWith(b, conns, nil, nil, edit)
}

// benchDaemonOver is benchDaemon with the daemon's certificate files
// (nil: plain HTTP) and the clients' TLS configuration; conns < 0: a new
// connection for every request.
func benchDaemonOver(b *testing.B, conns int, files *tlsx.Files, tc *tls.Config) (*metasched.Daemon, *client.Client, string) {
	return benchDaemonWith(b, conns, files, tc, nil)
}

func benchDaemonWith(b *testing.B, conns int, files *tlsx.Files, tc *tls.Config, edit func(*metasched.Config)) (*metasched.Daemon, *client.Client, string) {
	b.Helper()
	cfg, grid, err := demo.Config(b.TempDir(), "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	cfg.SwitchDelay = 200 * time.Millisecond
	cfg.Policy = metasched.PolicyConfig{Name: "none"}
	cfg.TLS = files
	if edit != nil {
		edit(cfg)
	}
	tr := &http.Transport{MaxIdleConns: conns, MaxIdleConnsPerHost: conns, TLSClientConfig: tc, DisableKeepAlives: conns < 0}
	b.Cleanup(tr.CloseIdleConnections)
	d, c, addr, _ := runBench(b, cfg, grid, &http.Client{Transport: tr, Timeout: time.Minute})
	fillSimPool(b, c)
	return d, c, addr
}

// runBench opens a daemon on cfg with a durable store (the real fsync:
// what is acknowledged is on disk) and serves it on a local port until the
// benchmark ends; it returns the daemon, a client of it through hc, its URL
// and how long opening it took (a restart: NewWithGrid).
func runBench(b *testing.B, cfg *metasched.Config, grid *graph.Grid, hc *http.Client) (*metasched.Daemon, *client.Client, string, time.Duration) {
	b.Helper()
	buf := daemontest.NewLog()
	log := zerolog.New(buf).Level(zerolog.WarnLevel)
	opt := metasched.Options{Logger: log, Connect: virt.Connector(log)}
	opt.Store.NoSync = false
	ctx, cancel := context.WithCancel(context.Background())
	start := time.Now()
	d, err := metasched.NewWithGrid(ctx, cfg, grid, opt)
	took := time.Since(start)
	if err != nil {
		cancel()
		b.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		cancel()
		_ = d.Close() // the benchmark fails: err is the error to report
		b.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx, ln, httpapi.New(httpapi.All(d), log)) }()
	addr := "http://" + ln.Addr().String()
	if cfg.TLS != nil {
		addr = "https://" + ln.Addr().String()
	}
	c := client.New(addr, d.Token()).WithHTTPClient(hc)
	b.Cleanup(func() {
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
	return d, c, addr, took
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
		for j.State != api.Running && !strings.HasPrefix(j.Reason, "waiting: ") {
			if time.Now().After(deadline) {
				b.Fatalf("job %s neither runs nor waits: %s (%s)", j.ID, j.State, j.Reason)
			}
			time.Sleep(20 * time.Millisecond)
			if j, err = c.Job(ctx, j.ID); err != nil {
				b.Fatal(err)
			}
		}
		if j.State != api.Running {
			return
		}
	}
	b.Fatal("30 long jobs and the sim pool is not full")
}

// BenchmarkSubmitAPI submits jobs through the API from 32 goroutines per
// CPU and reports the submissions per second.
func BenchmarkSubmitAPI(b *testing.B) {
	d, c, _ := benchDaemon(b, 32*64)
	benchSubmissions(b, d, c)
}

// BenchmarkSubmitTLS is BenchmarkSubmitAPI over TLS (the daemon's
// certificate checked against its CA): keep-alive connections, as a
// client sends, and a new connection for every submission (a handshake
// each; kept is the client's TLS session, as Go resumes it).
func BenchmarkSubmitTLS(b *testing.B) {
	for _, keep := range []bool{true, false} {
		name := "keep-alive"
		if !keep {
			name = "connection-per-submission"
		}
		b.Run(name, func(b *testing.B) {
			p := tlsxtest.New(b)
			files := p.Issue(b, "daemon", tlsx.Request{Identity: tlsx.Daemon(), Hosts: []string{"127.0.0.1"}})
			pool, err := tlsx.CAPool(p.CAFile())
			if err != nil {
				b.Fatal(err)
			}
			conns := 32 * 64
			if !keep {
				conns = -1 // no idle connection kept
			}
			d, c, _ := benchDaemonOver(b, conns, &files, &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12,
				ClientSessionCache: tls.NewLRUClientSessionCache(64)})
			benchSubmissions(b, d, c)
		})
	}
}

// benchSubmissions submits jobs through c from 32 goroutines per CPU and
// reports the submissions per second; every one must be stored.
func benchSubmissions(b *testing.B, d *metasched.Daemon, c *client.Client) {
	const perCPU = 32
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

// The growth benchmarks: what a request or a switch costs against a big
// backlog or a long history, which must not grow with them.

// prefillJobs submits n jobs into a store of dir before its daemon opens,
// a third of each type of the demo (sim, render, etl in turn), each long
// enough (a million tasks) to hold its hosts for hours once it runs.
func prefillJobs(b *testing.B, dir string, n int) {
	b.Helper()
	st, err := store.Open(filepath.Join(dir, "metasched.db"), store.Options{NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close() // every write is committed: closing loses nothing
	types := []string{"sim", "render", "etl"}
	specs := map[string]json.RawMessage{}
	for _, jt := range demo.Types {
		j, err := selection.ParseJob("bench", []byte(fmt.Sprintf("name: bench\ntype: %s\ntasks: 1000000\ntask_ops: 1.0e11\ntask_bytes: 0\nvm: {vcpus: %d, memory_mib: %d}\n",
			jt.Name, jt.VCPUs, jt.MemoryMiB)))
		if err != nil {
			b.Fatal(err)
		}
		if specs[jt.Name], err = json.Marshal(j); err != nil {
			b.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	for w := range 64 {
		wg.Go(func() {
			for i := w; i < n; i += 64 {
				if _, err := st.SubmitJob(context.Background(), types[i%3], specs[types[i%3]], "submitted"); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
}

// prefillSwitches records n finished switches in a store of dir before
// its daemon opens: host spain-7 moved render → sim and back, ended an
// hour ago.
func prefillSwitches(b *testing.B, dir string, n int) {
	b.Helper()
	st, err := store.Open(filepath.Join(dir, "metasched.db"), store.Options{NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close() // every write is committed: closing loses nothing
	at := time.Now().Add(-time.Hour)
	var wg sync.WaitGroup
	for w := range 64 {
		wg.Go(func() {
			for i := w + 1; i <= n; i += 64 {
				from, to := "render", "sim"
				if i%2 == 0 {
					from, to = to, from
				}
				sw := co.Switch{ID: co.NewSwitchID(i), From: from, To: to, Host: "spain-7", Phase: co.PhaseDone,
					ReleaseCommitted: true, AddCommitted: true, Started: at, Updated: at.Add(time.Second)}
				data, err := json.Marshal(co.Record{Switch: sw})
				if err == nil {
					err = st.PutSwitch(context.Background(), store.SwitchRecord{Num: uint64(i), Host: sw.Host, Ended: sw.Updated, Data: data})
				}
				if err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
}

// openBench opens and runs a daemon on dir (the demo's grid, the policy
// none, no switch delay) until the benchmark ends, and returns it, a
// client, and how long opening it took (the restart: NewWithGrid).
func openBench(b *testing.B, dir string) (*metasched.Daemon, *client.Client, time.Duration) {
	b.Helper()
	cfg, grid, err := demo.Config(dir, "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	cfg.SwitchDelay = 0
	cfg.Policy = metasched.PolicyConfig{Name: "none"}
	cfg.Retention = metasched.RetentionConfig{SwitchMaxCount: 1000000, JobDirs: time.Hour}
	d, c, _, took := runBench(b, cfg, grid, &http.Client{Timeout: time.Minute})
	return d, c, took
}

// settle waits until the daemon's start is over: the jobs that can run are
// running and none is being planned or provisioned, for a second.
func settle(b *testing.B, d *metasched.Daemon) {
	b.Helper()
	deadline := time.Now().Add(5 * time.Minute)
	calm := 0
	for calm < 4 {
		c := d.JobCounts()
		if c[api.Running] > 0 && c[api.Planned]+c[api.Provisioning] == 0 {
			calm++
		} else {
			calm = 0
		}
		if time.Now().After(deadline) {
			b.Fatalf("the daemon did not settle: %v", c)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// BenchmarkBacklog50k: GET /v1/jobs (the first page of 500, of a type, of
// a state, of both; through HTTP) and one build of the dashboard's state,
// with 50,000 jobs queued (a few of them run and hold every host).
func BenchmarkBacklog50k(b *testing.B) {
	dir := b.TempDir()
	prefillJobs(b, dir, 50000)
	d, c, _ := openBench(b, dir)
	ctx := context.Background()
	settle(b, d)
	for _, q := range []struct {
		name string
		q    client.JobsQuery
	}{
		{"jobs", client.JobsQuery{}},
		{"jobs?type=render", client.JobsQuery{Type: "render"}},
		{"jobs?state=queued", client.JobsQuery{States: []api.State{api.Queued}}},
		{"jobs?state=queued&type=render", client.JobsQuery{States: []api.State{api.Queued}, Type: "render"}},
		{"jobs?state=queued&type=render&limit=50", client.JobsQuery{States: []api.State{api.Queued}, Type: "render", Limit: 50}},
	} {
		b.Run(q.name, func(b *testing.B) {
			for b.Loop() {
				l, err := c.Jobs(ctx, q.q)
				if err != nil || len(l.Jobs) == 0 {
					b.Fatalf("%d jobs: %v", len(l.Jobs), err)
				}
			}
		})
	}
	b.Run("dashboard-state", func(b *testing.B) {
		board := dashboard.New(d, nil)
		for b.Loop() {
			db, err := board.State(ctx, false)
			if err != nil {
				b.Fatal(err)
			}
			if q := db.Pools[0].Queued; q < 15000 {
				b.Fatalf("pool %s: %d queued", db.Pools[0].Name, q)
			}
		}
	})
}

// BenchmarkSwitchHistory: an operator's switch from its request until it
// is done, and the restart (opening the daemon: restore-open-ms), with no
// switch in the past and with 16,000.
func BenchmarkSwitchHistory(b *testing.B) {
	for _, n := range []int{0, 16000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			dir := b.TempDir()
			prefillSwitches(b, dir, n)
			_, c, took := openBench(b, dir)
			ctx := context.Background()
			pairs := [][2]string{{"etl", "sim"}, {"sim", "etl"}}
			i := 0
			for b.Loop() {
				p := pairs[i%2]
				i++
				sv, err := c.RequestSwitch(ctx, p[0], p[1])
				if err != nil {
					b.Fatal(err)
				}
				for {
					l, err := c.Switches(ctx, client.SwitchesQuery{Active: true})
					if err != nil {
						b.Fatal(err)
					}
					if !slices.ContainsFunc(l.Switches, func(s api.SwitchView) bool { return s.ID == sv.ID }) {
						break
					}
					time.Sleep(time.Millisecond)
				}
			}
			b.ReportMetric(took.Seconds()*1000, "restore-open-ms")
		})
	}
}

// BenchmarkSubmitWithPages: BenchmarkSubmitAPI's submissions while 0 or
// 200 dashboard pages follow GET /v1/events (each reading every event),
// with 50,000 jobs queued before: the pages must not slow the submissions
// (the state is built once per tick for all of them, from indexes).
func BenchmarkSubmitWithPages(b *testing.B) {
	for _, pages := range []int{0, 200} {
		b.Run(fmt.Sprintf("pages=%d", pages), func(b *testing.B) {
			dir := b.TempDir()
			prefillJobs(b, dir, 50000)
			d, c, _ := openBench(b, dir)
			settle(b, d)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var wg sync.WaitGroup
			defer wg.Wait()
			defer cancel()
			var events, evBytes atomic.Int64
			tr := &http.Transport{MaxIdleConns: pages, MaxIdleConnsPerHost: pages}
			defer tr.CloseIdleConnections()
			hc := &http.Client{Transport: tr}
			for range pages {
				wg.Go(func() {
					req, err := http.NewRequestWithContext(ctx, "GET", c.Base()+"/v1/events", nil)
					if err != nil {
						b.Fatal(err)
					}
					req.Header.Set("Authorization", "Bearer "+d.Token())
					resp, err := hc.Do(req)
					if err != nil {
						return
					}
					defer resp.Body.Close()
					r := bufio.NewReaderSize(resp.Body, 64<<10)
					for {
						line, err := r.ReadSlice('\n')
						if err != nil && !errors.Is(err, bufio.ErrBufferFull) {
							return
						}
						if bytes.HasPrefix(line, []byte("event: ")) {
							events.Add(1)
						}
						evBytes.Add(int64(len(line)))
					}
				})
			}
			// Every page has its first state (built for it alone) before
			// the clock starts.
			deadline := time.Now().Add(2 * time.Minute)
			for events.Load() < int64(pages) {
				if time.Now().After(deadline) {
					b.Fatalf("%d of %d pages got their first state", events.Load(), pages)
				}
				time.Sleep(10 * time.Millisecond)
			}
			events.Store(0)
			const perCPU = 32
			sub := client.New(c.Base(), d.Token()).WithHTTPClient(&http.Client{Timeout: time.Minute,
				Transport: &http.Transport{MaxIdleConns: perCPU * 64, MaxIdleConnsPerHost: perCPU * 64}})
			var failed atomic.Int64
			b.SetParallelism(perCPU)
			b.ResetTimer()
			start := time.Now()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := sub.Submit(ctx, []byte(benchJob)); err != nil && failed.Add(1) == 1 {
						b.Error(err)
					}
				}
			})
			elapsed := time.Since(start)
			b.StopTimer()
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "submits/s")
			b.ReportMetric(float64(events.Load()), "events")
			if n := events.Load(); n > 0 {
				b.ReportMetric(float64(evBytes.Load())/float64(n), "bytes/event")
			}
		})
	}
}
