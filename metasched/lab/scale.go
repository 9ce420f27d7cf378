package lab

import (
	"bufio"
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/metasched/metasched/internal/etcdtest"
	"github.com/metasched/metasched/internal/httpx"
	"github.com/metasched/metasched/internal/tlsx"
	"github.com/metasched/metasched/metasched/api"
	"github.com/metasched/metasched/metasched/client"
)

// The scale experiment measures the daemon as Kubernetes' scheduler_perf
// measures its scheduler: a real `metasched serve` process on a generated
// grid of simulated hosts (hypervisor: sim, in its in-process sites or in
// remote `metasched agent` processes over TLS), on the bbolt store or on
// an etcd it starts, two pools, policy none, the emulated executor with
// runs of about 0 s, and jobs of 1 to 8 tasks (one vCPU a VM, 1 MB a
// task) streamed through its API by concurrent clients. Each row
// measures:
//
//   - placements/s, the drain rate of a backlog: every host is drained,
//     the backlog submitted, every host undrained, and the jobs that reach
//     running counted in one-second samples;
//   - latency, submit to running, of a steady stream of submissions once
//     the backlog is gone;
//
// and, in every sample, the dispatch round's mean time, the daemon's CPU
// and memory (its own process metrics), those of the row's other
// processes (etcd, the agents), the store's size and write transactions,
// and the time GET /v1/jobs and the dashboard take.

// ScaleRow is one row of the scale experiment.
type ScaleRow struct {
	Hosts   int     // hosts of the grid, in clusters of 20 to 50
	Backlog int     // jobs queued while every host is drained
	Rate    float64 // the steady stream's submissions per second
}

// ScaleOptions configure the scale experiment.
type ScaleOptions struct {
	Binary string // the metasched binary
	Dir    string // a directory of its own for each row's files
	Rows   []ScaleRow
	Seed   uint64
	// Clients submit at once (default 16).
	Clients int
	// DrainFor bounds the backlog's drain: samples are taken until the
	// backlog is gone or this long (default 10 min).
	DrainFor time.Duration
	// StreamFor is the steady stream's length (default 30 s).
	StreamFor time.Duration
	// SubmitFor bounds the backlog's submission (default 10 min): a row
	// whose daemon takes longer goes on with the jobs submitted.
	SubmitFor time.Duration
	// Profiles, when set, is a directory for each row's daemon's CPU
	// profile, cpu-HOSTS.pprof.
	Profiles string
	// Store is the daemon's store: "bbolt" (the default: its file in the
	// row's directory) or "etcd": a one-member etcd that the row starts
	// (the etcd binary: $ETCD, else etcd on the PATH), its data in the
	// row's directory, on a port free at the time.
	Store string
	// Agents, above 0, is how many `metasched agent` processes serve the
	// grid's clusters, each the sites of a share of them (consecutive
	// clusters, as even as they divide), over TLS: the daemon reaches them
	// as remote sites with its client certificate. 0: the daemon's
	// in-process sites. At most the clusters of each row.
	Agents int
	Log    zerolog.Logger
}

// ScaleStores are the stores a row may run on (ScaleOptions.Store).
var ScaleStores = []string{"bbolt", "etcd"}

// check reports what of the options is wrong, naming the field.
func (o ScaleOptions) check() error {
	var errs []error
	if o.Store != "" && !slices.Contains(ScaleStores, o.Store) {
		errs = append(errs, fmt.Errorf("scale: store: %q is none of %s", o.Store, strings.Join(ScaleStores, ", ")))
	}
	if o.Agents < 0 {
		errs = append(errs, fmt.Errorf("scale: agents: %d is negative", o.Agents))
	}
	for _, r := range o.Rows {
		if _, clusters := ScaleGrid(r.Hosts, o.Seed); o.Agents > clusters {
			errs = append(errs, fmt.Errorf("scale: agents: %d agents for the %d clusters of %d hosts: at most one a cluster", o.Agents, clusters, r.Hosts))
		}
	}
	return errors.Join(errs...)
}

// ScaleSample is one second of a row.
type ScaleSample struct {
	Phase    string  // submit, drain or stream
	T        float64 // seconds since the row's daemon answered
	Placed   int     // jobs that reached running in the sample
	Queued   int     // jobs queued, planned or provisioning at its end
	CPU      float64 // the daemon's CPU in the sample, in cores
	RSSMiB   float64 // the daemon's resident memory
	RoundMs  float64 // the mean time of the dispatch rounds of the sample (0: none)
	Rounds   int     // dispatch rounds planned in the sample
	Commits  float64 // store write transactions in the sample
	StoreMiB float64 // the store's file (bbolt) or etcd's database
	// OthersCPU (cores) and OthersRSSMiB are the row's other processes'
	// (etcd, the agents) in all, from /proc.
	OthersCPU, OthersRSSMiB float64
	// Searched and Reused are the dispatch rounds' plans in the sample:
	// searched, or reused from a job of the same shape.
	Searched, Reused int
}

// Stats are the mean, median and 99th percentile of samples.
type Stats struct{ Mean, P50, P99 float64 }

// ScaleResult is one row's outcome.
type ScaleResult struct {
	Row      ScaleRow
	Clusters int
	// Store and Agents are the options the row ran with (ScaleOptions):
	// "bbolt" or "etcd", and 0 for in-process sites.
	Store  string
	Agents int
	// Submitted is the backlog submitted (Row.Backlog unless SubmitFor
	// ran out), at SubmitPerS.
	Submitted  int
	SubmitPerS float64
	// Placements are the per-second placements of the drain's full
	// samples; Drained says whether the backlog was gone within DrainFor,
	// after DrainS.
	Placements Stats
	Drained    bool
	DrainS     float64
	// Cancelled is what was left queued of a backlog not drained within
	// DrainFor: cancelled before the stream, so that the stream meets a
	// short queue.
	Cancelled int
	// StreamPerS is the stream's achieved rate, Latency its jobs' submit
	// to running (s), of StreamJobs jobs that reached running (within 2
	// minutes of the stream's end).
	StreamPerS float64
	StreamJobs int
	Latency    Stats
	// The daemon: its most memory (over the row), mean CPU (cores), the
	// dispatch rounds' mean time (of those that ended in the drain), store
	// write transactions per second, its file (or etcd's database), over
	// the drain; GET /v1/jobs and the dashboard with the backlog queued
	// (ms).
	RSSMaxMiB, CPUMean, RoundMeanMs, CommitsPerS, StoreMiB float64
	// The row's other processes (etcd, the agents), in all: their mean
	// CPU over the drain (cores) and their most memory over the row.
	OthersCPUMean, OthersRSSMaxMiB float64
	// RoundsEnded counts the dispatch rounds that ended in the drain (0:
	// one round lasted the whole drain).
	RoundsEnded int
	// ReusedPct is the share of the drain's plans reused from a job of
	// the same shape on the same free host counts, in %.
	ReusedPct               float64
	JobsListMs, DashboardMs Stats
	Samples                 []ScaleSample
}

// RunScale runs each row of the experiment in turn and returns their
// results; a row that fails ends the experiment with its error (the rows
// before it are returned).
func RunScale(ctx context.Context, opt ScaleOptions) ([]ScaleResult, error) {
	opt.Clients = cmp.Or(opt.Clients, 16)
	opt.DrainFor = cmp.Or(opt.DrainFor, 10*time.Minute)
	opt.StreamFor = cmp.Or(opt.StreamFor, 30*time.Second)
	opt.SubmitFor = cmp.Or(opt.SubmitFor, 10*time.Minute)
	opt.Store = cmp.Or(opt.Store, "bbolt")
	if err := opt.check(); err != nil {
		return nil, err
	}
	// The processes run in their row's directory, and are given its
	// files' paths.
	dir, err := filepath.Abs(opt.Dir)
	if err != nil {
		return nil, err
	}
	opt.Dir = dir
	var out []ScaleResult
	for i, row := range opt.Rows {
		dir := filepath.Join(opt.Dir, fmt.Sprintf("row-%d-hosts-%d", i, row.Hosts))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return out, err
		}
		r, err := runScaleRow(ctx, opt, row, dir)
		if err != nil {
			return out, fmt.Errorf("scale: %d hosts: %w", row.Hosts, err)
		}
		out = append(out, r)
	}
	return out, nil
}

// ScaleGrid is the grid file of a row: clusters of 20 to 50 machines of
// 8 cores and 16 GiB (the last cluster takes what is left), of 1 to 4
// Gops/s, in regions of 10 along a chain of links, every cluster of
// simulated hosts.
func ScaleGrid(hosts int, seed uint64) (grid string, clusters int) {
	rng := rand.New(rand.NewPCG(seed, 0x5ca1e))
	var b strings.Builder
	b.WriteString("clusters:\n")
	for left := hosts; left > 0; clusters++ {
		n := min(20+rng.IntN(31), left)
		if left-n < 20 && left-n > 0 { // no cluster smaller than 20 but the only one
			n = left
		}
		left -= n
		fmt.Fprintf(&b, "  - {name: c%d, machines: %d, cores: 8, memory_mib: 16384, perf: %de9, lan_mbps: 1000, uplink_mbps: %d, hypervisor: sim}\n",
			clusters, n, 1+clusters%4, 100+10*(clusters%7))
	}
	b.WriteString("links:\n")
	if clusters == 1 {
		b.WriteString("  []\n")
	}
	for c := 1; c < clusters; c++ {
		mbps := 200 + 5*(c%9)
		if c%10 == 0 {
			mbps = 20
		}
		fmt.Fprintf(&b, "  - {between: [c%d, c%d], mbps: %d}\n", c-1, c, mbps)
	}
	return b.String(), clusters
}

// scaleJob is the i-th job of a row: 1 to 8 tasks, 1 MB each, of the
// pool a or b.
func scaleJob(rng *rand.Rand, name string) []byte {
	pool := "a"
	if rng.IntN(2) == 1 {
		pool = "b"
	}
	return fmt.Appendf(nil, "name: %s\ntype: %s\ntasks: %d\ntask_ops: 1.0e9\ntask_bytes: 1.0e6\n", name, pool, 1+rng.IntN(8))
}

// scaleCluster is the name of the i-th cluster of ScaleGrid's grid.
func scaleCluster(i int) string { return fmt.Sprintf("c%d", i) }

// ScaleShares are the clusters each of n agents serves: consecutive
// clusters, the first share starting at cluster 0, the shares' sizes
// differing by at most one.
func ScaleShares(clusters, n int) [][]string {
	out := make([][]string, n)
	for k := range n {
		for i := k * clusters / n; i < (k+1)*clusters/n; i++ {
			out[k] = append(out[k], scaleCluster(i))
		}
	}
	return out
}

// scaleServe is what a row's serve.yaml says beyond what every row's
// does.
type scaleServe struct {
	Port int
	// Etcd is the store's etcd endpoint ("": the bbolt file).
	Etcd string
	// Agents are the sites' remote agents (none: in-process sites).
	Agents []*Agent
}

// file is the daemon's configuration.
func (s scaleServe) file() string {
	var b strings.Builder
	fmt.Fprintf(&b, "listen: 127.0.0.1:%d\n", s.Port)
	if len(s.Agents) > 0 {
		// The daemon proves itself to the agents by its certificate,
		// which is also its server's.
		b.WriteString("tls: {cert_file: daemon.pem, key_file: daemon-key.pem, ca_file: ca.pem}\n")
	} else {
		b.WriteString("insecure_http: true\n")
	}
	b.WriteString(`data_dir: daemon
grid: grid.yaml
job_types:
  - {name: a, vm: {vcpus: 1, memory_mib: 1024}}
  - {name: b, vm: {vcpus: 1, memory_mib: 1024}}
policy: {name: none}
executor: {name: emulated, time_scale: 0.0001}
`)
	if len(s.Agents) > 0 {
		b.WriteString("agents:\n")
		for _, a := range s.Agents {
			fmt.Fprintf(&b, "  - {site: %s, address: %s}\n", a.Site, a.URL)
		}
		// A remote agent is taken to boot guests, which simulated hosts
		// do not: the calibration would try to measure them.
		b.WriteString("calibration: {auto: false}\n")
	}
	if s.Etcd != "" {
		fmt.Fprintf(&b, "store: {etcd: {endpoints: [%s], prefix: /metasched/}}\n", s.Etcd)
	}
	return b.String()
}

// scaleSite is the site file of the agent of a row's cluster site on
// 127.0.0.1:port: its simulated hosts made from the grid file, its record
// journaled in its data directory.
func scaleSite(site string, port int) string {
	return fmt.Sprintf("site: %s\nlisten: 127.0.0.1:%d\n%s\ngrid: grid.yaml\ndata_dir: agent-%s\n", site, port, agentTLS(site), site)
}

// startScale writes a row's files and starts its etcd, its agents and its
// daemon (in l, which stops them whatever happens), and returns the
// daemon's process and a meter of it (its client has the operator token).
func startScale(ctx context.Context, l *Lab, opt ScaleOptions, row ScaleRow, dir string) (*scaleMeter, *Proc, error) {
	grid, clusters := ScaleGrid(row.Hosts, opt.Seed)
	if err := l.write("grid.yaml", grid); err != nil {
		return nil, nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, nil, err
	}
	serve := scaleServe{Port: port}
	var others []func() int
	if opt.Store == "etcd" {
		ed := filepath.Join(dir, "etcd")
		if err := os.MkdirAll(ed, 0o755); err != nil {
			return nil, nil, err
		}
		if l.etcd, err = etcdtest.New(1, ed); err != nil {
			return nil, nil, fmt.Errorf("etcd: %w", err)
		}
		serve.Etcd = l.etcd.Endpoints()[0]
		others = append(others, l.etcd.Members[0].PID)
	}
	if opt.Agents > 0 {
		shares := ScaleShares(clusters, opt.Agents)
		var all []string
		for _, sh := range shares {
			all = append(all, sh...)
		}
		if err := l.certificates(all); err != nil {
			return nil, nil, err
		}
		for k, sh := range shares {
			var as []*Agent
			for _, site := range sh {
				port, err := freePort()
				if err != nil {
					return nil, nil, err
				}
				name := "site-" + site + ".yaml"
				if err := l.write(name, scaleSite(site, port)); err != nil {
					return nil, nil, err
				}
				a, err := l.agentAt(site, name, port)
				if err != nil {
					return nil, nil, err
				}
				as = append(as, a)
			}
			if err := l.startAgents(ctx, fmt.Sprintf("agents-%d", k), as, "warn"); err != nil {
				return nil, nil, err
			}
			others = append(others, as[0].Proc.PID)
			serve.Agents = append(serve.Agents, as...)
		}
	}
	if err := l.write("serve.yaml", serve.file()); err != nil {
		return nil, nil, err
	}
	args := []string{"serve", "--config", filepath.Join(dir, "serve.yaml"), "--log-format", "json", "--log-level", "warn"}
	if opt.Profiles != "" {
		pf, err := filepath.Abs(filepath.Join(opt.Profiles, fmt.Sprintf("cpu-%d.pprof", row.Hosts)))
		if err != nil {
			return nil, nil, err
		}
		args = append(args, "--cpu-profile", pf)
	}
	p, err := l.run("daemon", args...)
	if err != nil {
		return nil, nil, err
	}
	base, err := p.waitAddress(ctx)
	if err != nil {
		return nil, nil, err
	}
	tok, err := httpx.ReadTokenFile(filepath.Join(dir, "daemon", "token"))
	if err != nil {
		return nil, nil, fmt.Errorf("the daemon's token: %w", err)
	}
	tr := &http.Transport{MaxIdleConnsPerHost: 2 * opt.Clients}
	if len(serve.Agents) > 0 {
		pool, err := tlsx.CAPool(filepath.Join(dir, "ca.pem"))
		if err != nil {
			return nil, nil, err
		}
		tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	hc := &http.Client{Timeout: 5 * time.Minute, Transport: tr}
	m := &scaleMeter{c: client.New(base, tok).WithHTTPClient(hc), hc: hc, base: base, token: tok, others: others}
	if l.etcd != nil {
		ec, err := l.etcd.NewClient()
		if err != nil {
			return nil, nil, fmt.Errorf("etcd: %w", err)
		}
		m.size = func(ctx context.Context) (float64, error) {
			st, err := ec.Status(ctx, serve.Etcd)
			if err != nil {
				return 0, fmt.Errorf("etcd status: %w", err)
			}
			return float64(st.DbSize), nil
		}
	}
	return m, p, nil
}

func runScaleRow(ctx context.Context, opt ScaleOptions, row ScaleRow, dir string) (ScaleResult, error) {
	res := ScaleResult{Row: row, Store: opt.Store, Agents: opt.Agents}
	_, res.Clusters = ScaleGrid(row.Hosts, opt.Seed)
	l := &Lab{opt: Options{Binary: opt.Binary, Dir: dir}}
	defer l.Close()
	m, p, err := startScale(ctx, l, opt, row, dir)
	if err != nil {
		return res, err
	}
	c := m.c
	log := opt.Log.With().Int("hosts", row.Hosts).Str("store", opt.Store).Int("agents", opt.Agents).Logger()
	m.start = time.Now()
	if _, err := m.scrape(ctx); err != nil {
		return res, err
	}

	hosts, err := c.Hosts(ctx)
	if err != nil {
		return res, err
	}
	names := make([]string, len(hosts))
	for i, h := range hosts {
		names[i] = h.Name
	}
	log.Info().Int("clusters", res.Clusters).Int("hosts", len(names)).Msg("daemon up: draining every host")
	if err := parallel(ctx, opt.Clients, len(names), func(ctx context.Context, i int) error {
		_, err := c.DrainHost(ctx, names[i], false)
		return err
	}); err != nil {
		return res, fmt.Errorf("drain: %w", err)
	}

	// The backlog, sampled as it grows (memory against queued jobs).
	log.Info().Int("backlog", row.Backlog).Msg("submitting the backlog")
	rng := rand.New(rand.NewPCG(opt.Seed, uint64(row.Hosts)))
	jobs := make([][]byte, row.Backlog)
	for i := range jobs {
		jobs[i] = scaleJob(rng, fmt.Sprintf("backlog-%d", i))
	}
	sctx, cancel := context.WithTimeout(ctx, opt.SubmitFor)
	var submitted atomic.Int64
	stopSampling := m.sample(ctx, "submit", nil)
	t0 := time.Now()
	err = parallel(sctx, opt.Clients, len(jobs), func(ctx context.Context, i int) error {
		if _, err := c.Submit(ctx, jobs[i]); err != nil {
			return err
		}
		submitted.Add(1)
		return nil
	})
	cancel()
	stopSampling()
	if err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return res, fmt.Errorf("submit: %w", err)
	}
	res.Submitted = int(submitted.Load())
	res.SubmitPerS = float64(res.Submitted) / time.Since(t0).Seconds()
	log.Info().Int("submitted", res.Submitted).Float64("per_s", res.SubmitPerS).Msg("backlog submitted: timing GET /v1/jobs and the dashboard")
	res.JobsListMs, err = m.timeGets(ctx, "/v1/jobs?limit=100", 50)
	if err != nil {
		return res, err
	}
	if res.DashboardMs, err = m.timeGets(ctx, "/v1/dashboard", 50); err != nil {
		return res, err
	}

	// The drain: every host back, the jobs reaching running counted.
	log.Info().Msg("undraining every host")
	done := make(chan struct{})
	stopSampling = m.sample(ctx, "drain", done)
	t0 = time.Now()
	if err := parallel(ctx, opt.Clients, len(names), func(ctx context.Context, i int) error {
		_, err := c.UndrainHost(ctx, names[i])
		return err
	}); err != nil {
		stopSampling()
		return res, fmt.Errorf("undrain: %w", err)
	}
	dctx, cancel := context.WithTimeout(ctx, opt.DrainFor)
	res.Drained = m.waitQueue(dctx, 0)
	cancel()
	res.DrainS = time.Since(t0).Seconds()
	close(done)
	drain := stopSampling()
	log.Info().Bool("drained", res.Drained).Float64("seconds", res.DrainS).Msg("backlog drained")
	if !res.Drained {
		if res.Cancelled, err = cancelQueued(ctx, c, opt.Clients); err != nil {
			return res, err
		}
		log.Info().Int("cancelled", res.Cancelled).Msg("the backlog left queued is cancelled before the stream")
		wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		m.waitQueue(wctx, 0)
		cancel()
	}

	// The steady stream.
	log.Info().Float64("rate", row.Rate).Msg("streaming")
	stopSampling = m.sample(ctx, "stream", nil)
	ids, achieved, err := stream(ctx, c, opt, row.Rate, rng)
	stopSampling()
	if err != nil {
		return res, fmt.Errorf("stream: %w", err)
	}
	res.StreamPerS = achieved
	wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	m.waitQueue(wctx, 0)
	cancel()
	lat, err := latencies(ctx, c, opt.Clients, ids)
	if err != nil {
		return res, err
	}
	res.StreamJobs, res.Latency = len(lat), stats(lat)

	// The drain's figures: its full samples (not the last, partial one).
	full := drain
	if len(full) > 1 {
		full = full[:len(full)-1]
	}
	var placed, cpu, others, rounds, roundMs, commits []float64
	for _, s := range full {
		placed = append(placed, float64(s.Placed))
		cpu = append(cpu, s.CPU)
		others = append(others, s.OthersCPU)
		commits = append(commits, s.Commits)
		res.StoreMiB = max(res.StoreMiB, s.StoreMiB)
	}
	searched, reused := 0, 0
	for _, s := range drain { // a round that ends in the last sample counts
		searched, reused = searched+s.Searched, reused+s.Reused
		if s.Rounds > 0 {
			rounds = append(rounds, float64(s.Rounds))
			roundMs = append(roundMs, s.RoundMs*float64(s.Rounds))
		}
	}
	if n := searched + reused; n > 0 {
		res.ReusedPct = 100 * float64(reused) / float64(n)
	}
	res.Placements = stats(placed)
	res.CPUMean = stats(cpu).Mean
	res.OthersCPUMean = stats(others).Mean
	res.CommitsPerS = stats(commits).Mean
	if n := sum(rounds); n > 0 {
		res.RoundMeanMs = sum(roundMs) / n
		res.RoundsEnded = int(n)
	}
	res.Samples = m.all()
	for _, s := range res.Samples {
		res.RSSMaxMiB = max(res.RSSMaxMiB, s.RSSMiB)
		res.OthersRSSMaxMiB = max(res.OthersRSSMaxMiB, s.OthersRSSMiB)
	}
	log.Info().Float64("placements_mean", res.Placements.Mean).Float64("latency_p99", res.Latency.P99).
		Float64("rss_max_mib", res.RSSMaxMiB).Msg("row done")
	return res, p.Stop(time.Minute)
}

// parallel runs f(i) for i in [0, n) on k goroutines; the first error
// stops the rest and is returned.
func parallel(ctx context.Context, k, n int, f func(ctx context.Context, i int) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var next atomic.Int64
	var wg sync.WaitGroup
	for range k {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n || ctx.Err() != nil {
					return
				}
				if err := f(ctx, i); err != nil {
					cancel(err)
					return
				}
			}
		})
	}
	wg.Wait()
	return context.Cause(ctx)
}

// cancelQueued cancels every queued job, and returns how many.
func cancelQueued(ctx context.Context, c *client.Client, k int) (int, error) {
	var ids []string
	q := client.JobsQuery{States: []api.State{api.Queued}, Limit: 1000}
	for {
		l, err := c.Jobs(ctx, q)
		if err != nil {
			return 0, fmt.Errorf("list the queued jobs: %w", err)
		}
		for _, j := range l.Jobs {
			ids = append(ids, j.ID)
		}
		if l.Next == "" {
			break
		}
		q.After = l.Next
	}
	err := parallel(ctx, k, len(ids), func(ctx context.Context, i int) error {
		_, err := c.Cancel(ctx, ids[i])
		var re *client.RemoteError
		if errors.As(err, &re) && re.Status == http.StatusConflict {
			return nil // it started meanwhile
		}
		return err
	})
	return len(ids), err
}

// stream submits at rate per second for opt.StreamFor, from opt.Clients
// clients, and returns the jobs' IDs and the rate achieved.
func stream(ctx context.Context, c *client.Client, opt ScaleOptions, rate float64, rng *rand.Rand) ([]string, float64, error) {
	n := int(rate * opt.StreamFor.Seconds())
	jobs := make([][]byte, n)
	for i := range jobs {
		jobs[i] = scaleJob(rng, fmt.Sprintf("stream-%d", i))
	}
	ids := make([]string, n)
	start := time.Now()
	err := parallel(ctx, opt.Clients, n, func(ctx context.Context, i int) error {
		// The i-th submission is due at i/rate.
		if d := time.Until(start.Add(time.Duration(float64(i) / rate * float64(time.Second)))); d > 0 {
			select {
			case <-time.After(d):
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		j, err := c.Submit(ctx, jobs[i])
		ids[i] = j.ID
		return err
	})
	return ids, float64(n) / time.Since(start).Seconds(), err
}

// latencies reads each job's submit to running, in seconds, from its
// transitions (the daemon's own clock); a job that never ran is left out.
func latencies(ctx context.Context, c *client.Client, k int, ids []string) ([]float64, error) {
	out := make([]float64, len(ids))
	err := parallel(ctx, k, len(ids), func(ctx context.Context, i int) error {
		j, err := c.Job(ctx, ids[i])
		if err != nil {
			return err
		}
		out[i] = -1
		for _, tr := range j.Transitions {
			if tr.To == api.Running && len(j.Transitions) > 0 {
				out[i] = tr.At.Sub(j.Transitions[0].At).Seconds()
				break
			}
		}
		return nil
	})
	return slices.DeleteFunc(out, func(x float64) bool { return x < 0 }), err
}

// stats are the mean, median and 99th percentile (nearest rank) of xs.
func stats(xs []float64) Stats {
	if len(xs) == 0 {
		return Stats{}
	}
	s := slices.Sorted(slices.Values(xs))
	rank := func(q float64) float64 { return s[min(len(s)-1, int(math.Ceil(q*float64(len(s))))-1)] }
	return Stats{Mean: sum(xs) / float64(len(xs)), P50: rank(0.5), P99: rank(0.99)}
}

func sum(xs []float64) float64 {
	var t float64
	for _, x := range xs {
		t += x
	}
	return t
}

// scaleMeter samples the daemon's metrics once a second.
type scaleMeter struct {
	c     *client.Client
	hc    *http.Client
	base  string
	token string
	start time.Time
	// others are the PIDs of the row's other processes (etcd, the
	// agents), read at each scrape; size, when set, is the store's size
	// (etcd's database), read instead of the daemon's figure.
	others []func() int
	size   func(context.Context) (float64, error)

	mu      sync.Mutex
	samples []ScaleSample
}

// metricsRead is what a scrape of /metrics gives.
type metricsRead struct {
	at                   time.Time
	queued, placed       int
	cpu, rss             float64
	roundSum, roundCount float64
	commits, store       float64
	searched, reused     float64
	// The other processes' CPU seconds and resident memory, in all.
	othersCPU, othersRSS float64
}

// scrape reads the daemon's /metrics.
func (m *scaleMeter) scrape(ctx context.Context) (metricsRead, error) {
	r := metricsRead{at: time.Now()}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, m.base+"/metrics", nil)
	if err != nil {
		return r, err
	}
	req.Header.Set("Authorization", "Bearer "+m.token)
	resp, err := m.hc.Do(req)
	if err != nil {
		return r, fmt.Errorf("metrics: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return r, fmt.Errorf("metrics: %s", resp.Status)
	}
	total := 0
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			continue
		}
		name, v, ok := strings.Cut(line, " ")
		if !ok {
			continue
		}
		x, err := strconv.ParseFloat(v, 64)
		if err != nil {
			continue
		}
		switch {
		case strings.HasPrefix(name, `metasched_jobs{state="`):
			total += int(x)
			st := strings.TrimSuffix(strings.TrimPrefix(name, `metasched_jobs{state="`), `"}`)
			if st == string(api.Queued) || st == string(api.Planned) || st == string(api.Provisioning) {
				r.queued += int(x)
			}
		case name == "process_cpu_seconds_total":
			r.cpu = x
		case name == "process_resident_memory_bytes":
			r.rss = x
		case name == "metasched_dispatch_round_duration_seconds_sum":
			r.roundSum = x
		case name == "metasched_dispatch_round_duration_seconds_count":
			r.roundCount = x
		case name == "metasched_store_commits_total":
			r.commits = x
		case name == "metasched_store_size_bytes":
			r.store = x
		case name == `metasched_dispatch_plans_total{how="searched"}`:
			r.searched = x
		case name == `metasched_dispatch_plans_total{how="reused"}`:
			r.reused = x
		}
	}
	r.placed = total - r.queued
	if err := sc.Err(); err != nil {
		return r, fmt.Errorf("metrics: %w", err)
	}
	if m.size != nil {
		if r.store, err = m.size(ctx); err != nil {
			return r, err
		}
	}
	for _, pid := range m.others {
		cpu, rss, err := procUsage(pid())
		if err != nil {
			return r, err
		}
		r.othersCPU, r.othersRSS = r.othersCPU+cpu, r.othersRSS+rss
	}
	return r, nil
}

// procUsage is a process's CPU time (user and system, s) and resident
// memory (bytes), from /proc/PID/stat.
func procUsage(pid int) (cpu, rss float64, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0, fmt.Errorf("lab: usage of process %d: %w", pid, err)
	}
	// The fields after the command's name, in parentheses, from the
	// third (state) on: utime and stime are the 14th and 15th (clock
	// ticks, 100 a second on Linux), rss the 24th (pages).
	i := strings.LastIndexByte(string(b), ')')
	var f []string
	if i >= 0 {
		f = strings.Fields(string(b[i+1:]))
	}
	if len(f) < 22 {
		return 0, 0, fmt.Errorf("lab: usage of process %d: /proc/%d/stat: %q", pid, pid, b)
	}
	var n [3]float64
	for j, k := range []int{14, 15, 24} {
		if n[j], err = strconv.ParseFloat(f[k-3], 64); err != nil {
			return 0, 0, fmt.Errorf("lab: usage of process %d: field %d: %w", pid, k, err)
		}
	}
	return (n[0] + n[1]) / 100, n[2] * float64(os.Getpagesize()), nil
}

// sample takes a sample of phase every second until the function it
// returns is called (or done is closed), which takes a last one and
// returns the samples of the phase.
func (m *scaleMeter) sample(ctx context.Context, phase string, done <-chan struct{}) func() []ScaleSample {
	stop := make(chan struct{})
	finished := make(chan []ScaleSample, 1)
	prev, err := m.scrape(ctx) // the phase's start
	go func() {
		var mine []ScaleSample
		take := func() {
			r, err := m.scrape(ctx)
			if err != nil {
				return
			}
			defer func() { prev = r }()
			s := ScaleSample{Phase: phase, T: r.at.Sub(m.start).Seconds(), Placed: r.placed - prev.placed, Queued: r.queued,
				RSSMiB: r.rss / (1 << 20), Rounds: int(r.roundCount - prev.roundCount), Commits: r.commits - prev.commits, StoreMiB: r.store / (1 << 20),
				Searched: int(r.searched - prev.searched), Reused: int(r.reused - prev.reused)}
			s.OthersRSSMiB = r.othersRSS / (1 << 20)
			if dt := r.at.Sub(prev.at).Seconds(); dt > 0 {
				s.CPU = (r.cpu - prev.cpu) / dt
				s.OthersCPU = (r.othersCPU - prev.othersCPU) / dt
			}
			if s.Rounds > 0 {
				s.RoundMs = 1000 * (r.roundSum - prev.roundSum) / float64(s.Rounds)
			}
			mine = append(mine, s)
			m.mu.Lock()
			m.samples = append(m.samples, s)
			m.mu.Unlock()
		}
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-tick.C:
				take()
			case <-stop:
				take()
				finished <- mine
				return
			case <-ctx.Done():
				finished <- mine
				return
			}
		}
	}()
	if err != nil { // no start to count from: no samples
		close(stop)
		<-finished
		return func() []ScaleSample { return nil }
	}
	var once sync.Once
	var out []ScaleSample
	return func() []ScaleSample {
		once.Do(func() {
			close(stop)
			out = <-finished
		})
		return out
	}
}

func (m *scaleMeter) all() []ScaleSample {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.samples)
}

// waitQueue waits until at most n jobs are queued, planned or
// provisioning (as the last sample saw), or ctx ends: it reports which.
func (m *scaleMeter) waitQueue(ctx context.Context, n int) bool {
	for {
		r, err := m.scrape(ctx)
		if err == nil && r.queued <= n {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// timeGets times n GETs of path, in ms.
func (m *scaleMeter) timeGets(ctx context.Context, path string, n int) (Stats, error) {
	var ms []float64
	for range n {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, m.base+path, nil)
		if err != nil {
			return Stats{}, err
		}
		req.Header.Set("Authorization", "Bearer "+m.token)
		t := time.Now()
		resp, err := m.hc.Do(req)
		if err != nil {
			return Stats{}, fmt.Errorf("GET %s: %w", path, err)
		}
		_, err = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			return Stats{}, fmt.Errorf("GET %s: %s %v", path, resp.Status, err)
		}
		ms = append(ms, float64(time.Since(t).Microseconds())/1000)
	}
	return stats(ms), nil
}
