package metasched

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/metasched/metasched/gramvm"
	"github.com/metasched/metasched/metasched/api"
	co "github.com/metasched/metasched/metasched/coordinator"
	"github.com/metasched/metasched/metasched/store"
)

// Prometheus metrics of the daemon (GET /metrics). Each daemon has its own
// registry, not the client library's global one, so that several daemons
// can run in one process (the tests do). Two kinds of metrics:
//
//   - events counted or timed where they happen: plans, policy solves,
//     tuning candidates and the decisions carried out (the HTTP server,
//     package httpapi, adds the API requests);
//   - the daemon's state, read at scrape time by stateCollector under d.jobs.mu:
//     jobs per state, pools, hosts, switches, VMs and the policy. Its
//     counters (switches, VMs, completions, decisions) are the daemon's own
//     totals since it started, exposed as constant metrics.

// outcomes of a tuning candidate (metasched_tuning_candidates_total).
const (
	candRejected    = "rejected"
	candNotChosen   = "not_chosen"
	candCarryingOut = "carrying_out"
)

// outcomes of a carried-out tuning decision (metasched_migrations_total).
const (
	tuneDone   = "done"
	tuneFailed = "failed"
)

// metrics holds the daemon's registry and the metrics it updates itself.
type metrics struct {
	reg        *prometheus.Registry
	plan       prometheus.Histogram
	round      prometheus.Histogram
	solve      prometheus.Histogram
	migrations *prometheus.CounterVec
	candidates *prometheus.CounterVec
	rounds     *prometheus.CounterVec
	plans      *prometheus.CounterVec
	ratio      *prometheus.HistogramVec
}

// newMetrics returns the metrics of d, registered with the Go runtime's and
// the process's collectors and a collector of d's state.
func newMetrics(d *Daemon) *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		plan: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "metasched_plan_duration_seconds",
			Help:    "Duration of the GramVM planning of one job on the live grid.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14), // 0.5 ms to 4 s
		}),
		round: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "metasched_dispatch_round_duration_seconds",
			Help:    "Duration of the dispatcher's planned rounds (the queues planned on the free hosts, the jobs that fit started).",
			Buckets: prometheus.ExponentialBucketsRange(0.0001, 60, 15), // 0.1 ms to 1 min
		}),
		solve: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "metasched_policy_solve_duration_seconds",
			Help:    "Duration of the optimal policy's table solves that ended (succeeded or failed).",
			Buckets: prometheus.ExponentialBucketsRange(0.01, 600, 13), // 10 ms to 10 min
		}),
		migrations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "metasched_migrations_total",
			Help: "Bandwidth tuning decisions carried out, by action (consolidate: live migrations, shrink: vCPU resizes) and outcome (done, failed).",
		}, []string{"kind", "outcome"}),
		candidates: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "metasched_tuning_candidates_total",
			Help: "Bandwidth tuning candidates evaluated, by outcome (rejected, not_chosen, carrying_out).",
		}, []string{"outcome"}),
		rounds: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "metasched_dispatch_rounds_total",
			Help: "Dispatcher rounds, by kind: planned (the queues were planned) or skipped (hosts and queues as the last round left them).",
		}, []string{"kind"}),
		plans: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "metasched_dispatch_plans_total",
			Help: "Plans of queued jobs in dispatch rounds, by how: searched (hill climbing or a baseline ran) or reused (a job of the same shape was searched on the same free host counts in the round).",
		}, []string{"how"}),
		ratio: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "metasched_job_runtime_ratio",
			Help:    "Measured over predicted run time of the jobs done, by pool (1: as predicted; above: slower than predicted).",
			Buckets: []float64{0.25, 0.5, 0.75, 0.9, 1, 1.1, 1.25, 1.5, 2, 4},
		}, []string{"pool"}),
	}
	for _, jt := range d.types {
		m.ratio.WithLabelValues(jt.Name)
	}
	m.rounds.WithLabelValues("planned")
	m.rounds.WithLabelValues("skipped")
	m.plans.WithLabelValues("searched")
	m.plans.WithLabelValues("reused")
	for _, kind := range []string{gramvm.ActionConsolidate, gramvm.ActionShrink} {
		for _, out := range []string{tuneDone, tuneFailed} {
			m.migrations.WithLabelValues(kind, out)
		}
	}
	for _, out := range []string{candRejected, candNotChosen, candCarryingOut} {
		m.candidates.WithLabelValues(out)
	}
	m.reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		m.plan, m.round, m.solve, m.migrations, m.candidates, m.rounds, m.plans, m.ratio,
		newStateCollector(d),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "metasched_store_commits_total",
			Help: "Write transactions the store committed since the daemon opened it (a group commit is one).",
		}, func() float64 {
			if st := d.st; st != nil {
				return float64(st.Commits())
			}
			return 0
		}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "metasched_store_size_bytes",
			Help: "Size of the store's file (0 for a store in etcd).",
		}, func() float64 {
			if st := d.st; st != nil {
				return float64(st.Size())
			}
			return 0
		}),
	)
	return m
}

// Registry is the daemon's Prometheus registry: the Go runtime's and the
// process's collectors, the metrics the daemon updates and its state read
// at scrape time. The HTTP server serves it and adds its own.
func (d *Daemon) Registry() *prometheus.Registry { return d.metrics.reg }

// solved observes a policy solve that ended (policy.Config.OnSolved).
func (m *metrics) solved(seconds float64, _ error) { m.solve.Observe(seconds) }

// tuned counts a carried-out tuning decision of action kind.
func (m *metrics) tuned(kind string, failed bool) {
	out := tuneDone
	if failed {
		out = tuneFailed
	}
	m.migrations.WithLabelValues(kind, out).Inc()
}

// stateCollector reads the daemon's state at scrape time.
type stateCollector struct {
	d *Daemon

	jobs, queue, poolJobs, poolHosts, switching, arrival, service, completed,
	cost, switches, inFlight, hosts, vmsCreated, vmsDestroyed, decisions,
	switchDecisions, policyInfo *prometheus.Desc
}

var _ prometheus.Collector = (*stateCollector)(nil)

func newStateCollector(d *Daemon) *stateCollector {
	desc := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, labels, nil)
	}
	return &stateCollector{d: d,
		jobs:            desc("metasched_jobs", "Jobs in the store by state.", "state"),
		queue:           desc("metasched_pool_queue_length", "Jobs of the pool waiting (queued).", "pool"),
		poolJobs:        desc("metasched_pool_jobs", "Jobs of the pool queued or active (j_i of the policy).", "pool"),
		poolHosts:       desc("metasched_pool_hosts", "Hosts serving the pool (k_i), busy (running VMs of jobs) or idle.", "pool", "state"),
		switching:       desc("metasched_pool_switching_hosts", "Hosts in transit into (in) or out of (out) the pool.", "pool", "direction"),
		arrival:         desc("metasched_pool_arrival_rate_per_second", "Estimated arrival rate λ of the pool's jobs.", "pool"),
		service:         desc("metasched_pool_service_rate_per_host_second", "Estimated service rate µ of the pool: completions per busy host-second.", "pool"),
		completed:       desc("metasched_pool_completed_total", "Jobs of the pool completed since the daemon started.", "pool"),
		cost:            desc("metasched_holding_cost_rate", "Holding cost per unit of time: the sum over the pools of holding cost × jobs."),
		switches:        desc("metasched_switches_total", "Host switches ended, by outcome (committed, cancelled, rolled_back, stranded).", "outcome"),
		inFlight:        desc("metasched_switches_in_flight", "Host switches in flight."),
		hosts:           desc("metasched_hosts", "Hosts by state (busy, idle, switching, stranded, unreachable, draining, drained).", "state"),
		vmsCreated:      desc("metasched_vms_created_total", "VMs the daemon created since it started."),
		vmsDestroyed:    desc("metasched_vms_destroyed_total", "VMs the daemon destroyed since it started."),
		decisions:       desc("metasched_policy_decisions_total", "Decisions of the switching policy."),
		switchDecisions: desc("metasched_policy_switch_decisions_total", "Decisions of the switching policy to switch a host."),
		policyInfo:      desc("metasched_policy_info", "The switching policy configured and the one in force (1).", "configured", "in_force"),
	}
}

// Describe implements prometheus.Collector.
func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.jobs, c.queue, c.poolJobs, c.poolHosts, c.switching, c.arrival, c.service,
		c.completed, c.cost, c.switches, c.inFlight, c.hosts, c.vmsCreated, c.vmsDestroyed, c.decisions,
		c.switchDecisions, c.policyInfo} {
		ch <- d
	}
}

// switchOutcomes maps the final phases of a switch to the outcome label.
var switchOutcomes = []struct {
	phase   co.Phase
	outcome string
}{
	{co.PhaseDone, "committed"},
	{co.PhaseCancelled, "cancelled"},
	{co.PhaseRolledBack, "rolled_back"},
	{co.PhaseStranded, "stranded"},
}

// hostStates are the values of metasched_hosts' state label.
var hostStates = []string{api.HostBusy, api.HostIdle, api.HostSwitching, api.HostStranded, api.HostUnreachable, api.HostDraining, api.HostDrained}

// Collect implements prometheus.Collector. Each part takes the lock it
// needs for as long as it reads; nothing blocks on I/O.
func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	d := c.d
	gauge := func(desc *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(desc, prometheus.GaugeValue, v, labels...)
	}
	counter := func(desc *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(desc, prometheus.CounterValue, v, labels...)
	}

	counts := d.st.Counts()
	for _, st := range store.States {
		gauge(c.jobs, float64(counts[st]), string(st))
	}

	pools := d.Pools()
	for _, p := range pools {
		gauge(c.queue, float64(p.Queued), p.Name)
		gauge(c.poolJobs, float64(p.Jobs), p.Name)
		gauge(c.poolHosts, float64(p.Busy), p.Name, api.HostBusy)
		gauge(c.poolHosts, float64(p.Idle), p.Name, api.HostIdle)
		gauge(c.switching, float64(p.SwitchingIn), p.Name, "in")
		gauge(c.switching, float64(p.SwitchingOut), p.Name, "out")
		gauge(c.arrival, p.Rates.Arrival, p.Name)
		gauge(c.service, p.Rates.Service, p.Name)
		counter(c.completed, float64(p.Completed), p.Name)
	}
	gauge(c.cost, holdingCostRate(pools))

	inFlight, ended := d.sw.counts()
	hosts := map[string]int{}
	d.lockR()
	for _, name := range d.hv.order {
		hosts[d.hostStateLocked(d.hv.hosts[name])]++
	}
	d.unlockR()
	for _, o := range switchOutcomes {
		counter(c.switches, float64(ended[o.phase]), o.outcome)
	}
	gauge(c.inFlight, float64(inFlight))
	for _, st := range hostStates {
		gauge(c.hosts, float64(hosts[st]), st)
	}

	created, destroyed := d.vmCounts()
	counter(c.vmsCreated, float64(created))
	counter(c.vmsDestroyed, float64(destroyed))

	pv := d.pol.View()
	counter(c.decisions, float64(pv.Decisions))
	counter(c.switchDecisions, float64(pv.Switches))
	gauge(c.policyInfo, 1, pv.Configured, pv.InForce)
}
