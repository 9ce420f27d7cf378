package metasched_test

import (
	"context"
	"io"
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/metasched/metasched/metasched"
	"github.com/metasched/metasched/metasched/api"
	"github.com/metasched/metasched/metasched/demo"
	"github.com/metasched/metasched/metasched/store"
)

// families indexes parsed metric families by name.
type families map[string]*dto.MetricFamily

// get returns the value of the metric name whose labels include want (a
// histogram's sample count), and whether there is one.
func (f families) get(name string, want map[string]string) (float64, bool) {
	mf, ok := f[name]
	if !ok {
		return 0, false
	}
next:
	for _, m := range mf.GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		for k, v := range want {
			if labels[k] != v {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			return m.GetCounter().GetValue(), true
		case m.Gauge != nil:
			return m.GetGauge().GetValue(), true
		case m.Histogram != nil:
			return float64(m.GetHistogram().GetSampleCount()), true
		case m.Untyped != nil:
			return m.GetUntyped().GetValue(), true
		}
	}
	return 0, false
}

// must is get for a metric the test needs.
func (f families) must(t *testing.T, name string, labels ...string) float64 {
	t.Helper()
	want := map[string]string{}
	for i := 0; i+1 < len(labels); i += 2 {
		want[labels[i]] = labels[i+1]
	}
	v, ok := f.get(name, want)
	if !ok {
		t.Fatalf("no metric %s%v", name, want)
	}
	return v
}

// sum adds every metric of family name that has label key = value (any
// value when key is empty).
func (f families) sum(name, key, value string) float64 {
	s := 0.0
	for _, m := range f[name].GetMetric() {
		match := key == ""
		for _, l := range m.GetLabel() {
			match = match || (l.GetName() == key && l.GetValue() == value)
		}
		if match {
			s += m.GetGauge().GetValue() + m.GetCounter().GetValue()
		}
	}
	return s
}

// scrape gets url and parses the text exposition format.
func scrape(t *testing.T, hc *http.Client, url string) families {
	t.Helper()
	resp, err := hc.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		t.Fatalf("GET %s: %s\n%s", url, resp.Status, b)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parse the metrics: %v", err)
	}
	return mfs
}

// outcomeOf is the outcome label of each final phase of a switch.
var outcomeOf = map[string]string{"done": "committed", "cancelled": "cancelled", "rolled_back": "rolled_back", "stranded": "stranded"}

// switchOutcomeCounts counts the final switches by outcome label, and
// those in flight.
func switchOutcomeCounts(t testing.TB, d *metasched.Daemon) (map[string]float64, int) {
	out := map[string]float64{}
	for _, o := range outcomeOf {
		out[o] = 0
	}
	inFlight := 0
	for _, sw := range allSwitches(t, d) {
		if !sw.Final {
			inFlight++
			continue
		}
		out[outcomeOf[sw.Phase]]++
	}
	return out, inFlight
}

// TestMetricsDemo runs a short demo stream through a daemon, then scrapes
// its metrics: they add up to what the daemon reports.
func TestMetricsDemo(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		td := startDaemon(t, metasched.Options{}, func(c *metasched.Config) {
			c.SwitchDelay = 50 * time.Millisecond
			c.Executor.TimeScale = 0.001
		})
		d := td.d
		const n = 20
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		sum, err := demo.Run(ctx, d, demo.Stream(n, 20*time.Millisecond, 1), io.Discard)
		if err != nil {
			t.Fatalf("demo: %v", err)
		}
		// A switch started while the last jobs ran may still be in flight.
		for {
			if _, inFlight := switchOutcomeCounts(t, d); inFlight == 0 {
				break
			}
			select {
			case <-ctx.Done():
				t.Fatal("switches still in flight after the demo")
			case <-time.After(20 * time.Millisecond):
			}
		}
		// The daemon keeps running: scrape until no switch ended meanwhile.
		var (
			f        families
			outcomes map[string]float64
		)
		for range 20 {
			before, _ := switchOutcomeCounts(t, d)
			f = scrape(t, td.http, td.addr+"/metrics") // public: no token
			outcomes, _ = switchOutcomeCounts(t, d)
			if cmp.Equal(before, outcomes) {
				break
			}
		}

		for _, st := range store.States {
			want := 0.0
			if st == store.Done {
				want = n
			}
			if got := f.must(t, "metasched_jobs", "state", string(st)); got != want {
				t.Errorf("metasched_jobs{state=%q} = %v, want %v", st, got, want)
			}
		}
		if got := f.sum("metasched_pool_completed_total", "", ""); got != n {
			t.Errorf("metasched_pool_completed_total summed over the pools = %v, want %d", got, n)
		}
		hosts := d.Hosts()
		serving := f.sum("metasched_pool_hosts", "state", api.HostBusy) + f.sum("metasched_pool_hosts", "state", api.HostIdle)
		notServing := f.must(t, "metasched_hosts", "state", api.HostSwitching) + f.must(t, "metasched_hosts", "state", api.HostStranded) +
			f.must(t, "metasched_hosts", "state", api.HostUnreachable)
		if serving+notServing != float64(len(hosts)) || serving == 0 {
			t.Errorf("pools' hosts %v + switching, stranded or unreachable %v, want the %d hosts", serving, notServing, len(hosts))
		}
		if got := f.sum("metasched_hosts", "", ""); got != float64(len(hosts)) {
			t.Errorf("metasched_hosts summed over the states = %v, want %d", got, len(hosts))
		}
		if busy := f.sum("metasched_pool_hosts", "state", api.HostBusy); busy != 0 || f.must(t, "metasched_hosts", "state", api.HostBusy) != 0 {
			t.Errorf("%v busy hosts in the pools with every job done, want 0", busy)
		}
		for _, p := range demo.Types {
			if q := f.must(t, "metasched_pool_queue_length", "pool", p.Name); q != 0 {
				t.Errorf("pool %s: queue %v, want 0", p.Name, q)
			}
			f.must(t, "metasched_pool_arrival_rate_per_second", "pool", p.Name)
			f.must(t, "metasched_pool_service_rate_per_host_second", "pool", p.Name)
			f.must(t, "metasched_pool_switching_hosts", "pool", p.Name, "direction", "in")
		}
		if got := f.must(t, "metasched_holding_cost_rate"); got != 0 {
			t.Errorf("metasched_holding_cost_rate = %v with every job done, want 0", got)
		}

		got := map[string]float64{}
		for _, o := range outcomeOf {
			got[o] = f.must(t, "metasched_switches_total", "outcome", o)
		}
		if diff := cmp.Diff(outcomes, got); diff != "" {
			t.Errorf("metasched_switches_total by outcome (-daemon +metrics):\n%s", diff)
		}
		if done := sum.Outcomes["done"]; done > 0 && got["committed"] < 1 {
			t.Errorf("the demo committed %d switches, metasched_switches_total{outcome=\"committed\"} = %v", done, got["committed"])
		}
		if v := f.must(t, "metasched_switches_in_flight"); v != 0 {
			t.Errorf("metasched_switches_in_flight = %v, want 0", v)
		}
		t.Logf("switches %v, demo outcomes %v, demo %.1fs", got, sum.Outcomes, sum.Seconds)

		created, destroyed := f.must(t, "metasched_vms_created_total"), f.must(t, "metasched_vms_destroyed_total")
		if created == 0 || created != destroyed || created != float64(sum.VMsCreated) {
			t.Errorf("VMs created %v, destroyed %v, want equal and the demo's %d", created, destroyed, sum.VMsCreated)
		}
		if c := f.must(t, "metasched_plan_duration_seconds"); c < n {
			t.Errorf("metasched_plan_duration_seconds_count = %v, want >= %d", c, n)
		}
		if v := f.must(t, "metasched_policy_decisions_total"); v < 1 {
			t.Errorf("metasched_policy_decisions_total = %v, want >= 1", v)
		}
		f.must(t, "metasched_policy_switch_decisions_total")
		if v := f.must(t, "metasched_policy_info", "configured", "heuristic K=2", "in_force", "heuristic K=2"); v != 1 {
			t.Errorf("metasched_policy_info = %v, want 1", v)
		}
		f.must(t, "metasched_tuning_candidates_total", "outcome", "rejected")
		f.must(t, "metasched_migrations_total", "kind", "consolidate", "outcome", "done")
		if v := f.must(t, "go_goroutines"); v < 1 {
			t.Errorf("go_goroutines = %v", v)
		}
	})
}
