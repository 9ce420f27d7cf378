package metasched_test

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/metasched/metasched/internal/etcdtest"
	"github.com/metasched/metasched/metasched"
	"github.com/metasched/metasched/metasched/api"
	"github.com/metasched/metasched/metasched/client"
)

// The daemon's load figures (docs/internals/tests.md, "The adversary"; their
// values are in docs/results.md): submissions per second and
// their p99 with 1, 16 and 64 concurrent clients; the daemon's idle CPU and
// the latency of GET /v1/jobs with 50,000 queued jobs; the submission rate
// with 200 dashboard subscribers against none. Run them with
// go test -run '^$' -bench 'Figures' -benchtime 1x ./metasched/.

// submitClosedLoop submits n jobs from clients goroutines, each waiting for
// its answer before it submits again, and returns every latency and the
// seconds it took.
func submitClosedLoop(b *testing.B, c *client.Client, clients, n int) ([]time.Duration, float64) {
	b.Helper()
	ctx := context.Background()
	lat := make([]time.Duration, n)
	var (
		wg    sync.WaitGroup
		next  = make(chan int, n)
		errMu sync.Mutex
		first error
	)
	for i := range n {
		next <- i
	}
	close(next)
	start := time.Now()
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				t0 := time.Now()
				if _, err := c.Submit(ctx, []byte(benchJob)); err != nil {
					errMu.Lock()
					if first == nil {
						first = err
					}
					errMu.Unlock()
				}
				lat[i] = time.Since(t0)
			}
		}()
	}
	wg.Wait()
	if first != nil {
		b.Fatal(first)
	}
	return lat, time.Since(start).Seconds()
}

func pctMs(sorted []time.Duration, p float64) float64 {
	return float64(sorted[int(p*float64(len(sorted)-1))].Microseconds()) / 1000
}

// BenchmarkFiguresSubmitClients: 2,000 submissions (durable: fsync) by 1,
// 16 and 64 concurrent clients.
func BenchmarkFiguresSubmitClients(b *testing.B) {
	for _, clients := range []int{1, 16, 64} {
		b.Run(fmt.Sprintf("clients=%d", clients), func(b *testing.B) {
			_, c, _ := benchDaemon(b, clients*2)
			reportSubmits(b, c, clients, 2000)
		})
	}
}

// reportSubmits runs submitClosedLoop at every round of the benchmark and
// reports the submissions per second and the latency's p50 and p99.
func reportSubmits(b *testing.B, c *client.Client, clients, n int) {
	b.Helper()
	var all []time.Duration
	var secs float64
	for b.Loop() {
		lat, s := submitClosedLoop(b, c, clients, n)
		all, secs = append(all, lat...), secs+s
	}
	slices.Sort(all)
	b.ReportMetric(float64(len(all))/secs, "submits/s")
	b.ReportMetric(pctMs(all, 0.50), "p50-ms")
	b.ReportMetric(pctMs(all, 0.99), "p99-ms")
}

// BenchmarkFiguresSubmitStores: BenchmarkFiguresSubmitClients on each
// store: the bbolt file, and etcd (a three-member cluster on this machine,
// each member syncing its log to disk).
func BenchmarkFiguresSubmitStores(b *testing.B) {
	var cluster *etcdtest.Cluster
	for _, st := range []string{"bbolt", "etcd"} {
		for _, clients := range []int{1, 16, 64} {
			b.Run(fmt.Sprintf("store=%s/clients=%d", st, clients), func(b *testing.B) {
				var edit func(*metasched.Config)
				if st == "etcd" {
					if cluster == nil {
						var err error
						if cluster, err = etcdtest.StartShared(3); err != nil {
							b.Fatal(err)
						}
					}
					prefix := fmt.Sprintf("/bench-%d/", time.Now().UnixNano())
					edit = func(c *metasched.Config) {
						c.Store = &metasched.StoreEtcd{Endpoints: cluster.Endpoints(), Prefix: prefix}
					}
				}
				_, c, _ := benchDaemonEdit(b, clients*2, edit)
				reportSubmits(b, c, clients, 1000)
			})
		}
	}
	if cluster != nil {
		cluster.Stop()
	}
}

// cpuSeconds is the CPU time this process (the daemon runs in it) has used.
func cpuSeconds(b *testing.B) float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	tv := func(t syscall.Timeval) float64 { return float64(t.Sec) + float64(t.Usec)/1e6 }
	return tv(ru.Utime) + tv(ru.Stime)
}

// BenchmarkFiguresBacklog queues 50,000 jobs, then measures the daemon's
// CPU over 20 idle seconds (as a share of one core) and the latency of
// GET /v1/jobs (the first page of 100, and the first page of ?type=sim).
func BenchmarkFiguresBacklog(b *testing.B) {
	const backlog = 50000
	d, c, _ := benchDaemon(b, 64)
	ctx := context.Background()
	submitClosedLoop(b, c, 64, backlog)
	time.Sleep(2 * time.Second) // the last rounds of the dispatcher
	cpu0, t0 := cpuSeconds(b), time.Now()
	time.Sleep(20 * time.Second)
	idle := (cpuSeconds(b) - cpu0) / time.Since(t0).Seconds()
	l, err := d.Jobs(ctx, api.JobFilter{States: []api.State{api.Queued}, Limit: 1})
	if err != nil || len(l.Jobs) == 0 {
		b.Fatalf("no queued job: %v", err)
	}
	list := func(q client.JobsQuery) []time.Duration {
		var out []time.Duration
		for range 50 {
			t := time.Now()
			if _, err := c.Jobs(ctx, q); err != nil {
				b.Fatal(err)
			}
			out = append(out, time.Since(t))
		}
		slices.Sort(out)
		return out
	}
	var all, typed []time.Duration
	for b.Loop() {
		all = append(all, list(client.JobsQuery{Limit: 100})...)
		typed = append(typed, list(client.JobsQuery{Type: "sim", Limit: 100})...)
	}
	slices.Sort(all)
	slices.Sort(typed)
	b.ReportMetric(100*idle, "idle-cpu-%")
	b.ReportMetric(pctMs(all, 0.50), "list-p50-ms")
	b.ReportMetric(pctMs(all, 0.99), "list-p99-ms")
	b.ReportMetric(pctMs(typed, 0.50), "list-type-p50-ms")
	b.ReportMetric(pctMs(typed, 0.99), "list-type-p99-ms")
}

// BenchmarkFiguresSubscribers: 2,000 submissions by 16 clients with 0 and
// with 200 dashboard subscribers reading GET /v1/events.
func BenchmarkFiguresSubscribers(b *testing.B) {
	for _, subs := range []int{0, 200} {
		b.Run(fmt.Sprintf("subscribers=%d", subs), func(b *testing.B) {
			d, c, addr := benchDaemon(b, 32)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			tr := &http.Transport{MaxIdleConnsPerHost: subs + 1}
			defer tr.CloseIdleConnections()
			hc := &http.Client{Transport: tr}
			var wg sync.WaitGroup
			for range subs {
				req, err := http.NewRequestWithContext(ctx, "GET", addr+"/v1/events", nil)
				if err != nil {
					b.Fatal(err)
				}
				req.Header.Set("Authorization", "Bearer "+d.Token())
				resp, err := hc.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				if resp.StatusCode != http.StatusOK {
					b.Fatalf("GET /v1/events: %s", resp.Status)
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					defer resp.Body.Close()
					sc := bufio.NewScanner(resp.Body)
					sc.Buffer(make([]byte, 1<<20), 16<<20)
					for sc.Scan() {
					}
				}()
			}
			var all []time.Duration
			var secs float64
			for b.Loop() {
				lat, s := submitClosedLoop(b, c, 16, 2000)
				all, secs = append(all, lat...), secs+s
			}
			slices.Sort(all)
			b.ReportMetric(float64(len(all))/secs, "submits/s")
			b.ReportMetric(pctMs(all, 0.99), "p99-ms")
			cancel()
			wg.Wait()
		})
	}
}
