package metasched

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/metasched/metasched/gramvm"
	hp "github.com/metasched/metasched/hypervisorproxy"
	"github.com/metasched/metasched/metasched/api"
	"github.com/metasched/metasched/metasched/lifecycle"
)

// Bandwidth tuning (Bertogna et al., 004 §3.2): when a queued job's plan is
// held back by a link that running jobs load, or by hosts that a running job
// of its type holds, gramvm evaluates consolidating that job's VMs (two per
// host, live migration through the agents) or shrinking their vCPUs (where
// the hypervisor can unplug them), and the daemon carries out the best one
// only when the predicted gain for the new job exceeds the predicted loss
// plus the migration time. Every evaluated candidate is logged and kept for
// GET /v1/tuning with its numbers. Migrations in flight are capped per host
// and per cluster LAN (Options.MaxMigrationsPerHost, MaxMigrationsPerLink).
// The emulated executor does not slow the consolidated job down: the loss
// is a prediction only.

// tuneEvery is how often a waiting job's tuning is evaluated again.
const tuneEvery = 10 * time.Second

// maxTuning bounds the kept tuning records.
const maxTuning = 200

// tune evaluates the candidates for job j and starts carrying out the
// chosen one; it reports whether it did.
func (d *Daemon) tune(ctx context.Context, j *liveJob, free map[string][]string, running []gramvm.RunningJob) bool {
	d.mu.Lock()
	var hosts []gramvm.Host
	for _, name := range d.order {
		if h := d.hosts[name]; h.reachable {
			hosts = append(hosts, h.plannerHost())
		}
	}
	inFlight := map[string]int{}
	for k, v := range d.migrating {
		inFlight[k] = v
	}
	shrinks := map[string]bool{}
	for _, s := range d.sites {
		shrinks[s.name] = s.canShrink
	}
	d.mu.Unlock()
	decs, err := d.planner.Tune(ctx, j.spec, free, gramvm.HostCapacities(hosts), running, gramvm.TuneOptions{
		MaxPerHost: d.opt.MaxMigrationsPerHost, MaxPerLink: d.opt.MaxMigrationsPerLink, InFlight: inFlight,
		CanShrink: func(s string) bool { return shrinks[s] }})
	if err != nil {
		d.log.Warn().Err(err).Str("job", j.id()).Msg("bandwidth tuning")
		return false
	}
	now := d.now()
	started := false
	for i := range decs {
		decs[i].Reason += shrinkNote(decs[i].Cluster, shrinks[decs[i].Cluster])
	}
	for i, dec := range decs {
		rec := api.TuningRecord{TuningDecision: dec, At: now, Outcome: "rejected"}
		cand := candRejected
		if dec.Accepted {
			rec.Outcome, cand = "not chosen", candNotChosen
			if i == 0 {
				rec.Outcome, cand = "carrying out", candCarryingOut
			}
		}
		d.metrics.candidates.WithLabelValues(cand).Inc()
		d.log.Info().Str("job", j.id()).Str("target", dec.Target).Str("action", dec.Action).Str("cluster", dec.Cluster).
			Float64("gain_s", dec.GainSeconds).Float64("loss_s", dec.LossSeconds).Float64("migration_s", dec.MigrationSeconds).
			Bool("accepted", dec.Accepted).Str("reason", dec.Reason).Msg("bandwidth tuning evaluated")
		d.mu.Lock()
		d.tuneSeq++
		rec.Seq = d.tuneSeq
		d.tuning = append(d.tuning, rec)
		if len(d.tuning) > maxTuning {
			d.tuning = slices.Delete(d.tuning, 0, len(d.tuning)-maxTuning)
		}
		if i == 0 && dec.Accepted {
			d.tuningActive++
			for _, m := range dec.Moves {
				d.migrating[m.From]++
				d.migrating[m.To]++
				d.migrating[gramvm.LANKey(m.Site)]++
			}
			seq := rec.Seq
			d.mu.Unlock()
			d.goJob(func() { d.carryOut(ctx, dec, seq) })
			started = true
			continue
		}
		d.mu.Unlock()
	}
	return started
}

// shrinkNote says in a candidate's explanation whether shrinking was
// weighed on its cluster, from what the cluster's agent reports.
func shrinkNote(cluster string, can bool) string {
	if can {
		return fmt.Sprintf("; shrinking is weighed on %s: its agent reports that its hosts unplug vCPUs", cluster)
	}
	return fmt.Sprintf("; no shrink weighed on %s: its agent reports that its hosts cannot unplug vCPUs (QEMU cannot; VMs there only grow)", cluster)
}

// carryOut migrates or resizes the VMs of an accepted tuning decision.
func (d *Daemon) carryOut(ctx context.Context, dec gramvm.TuningDecision, seq int) {
	var errs []string
	for _, m := range dec.Moves {
		s := d.site(m.Site)
		var err error
		var mig hp.Migration
		if s == nil {
			err = fmt.Errorf("no agent for site %s", m.Site)
		} else {
			mig, err = s.agent.MigrateVM(ctx, m.VM, hp.MigrateRequest{Host: m.To})
		}
		d.mu.Lock()
		d.migrating[m.From]--
		d.migrating[m.To]--
		d.migrating[gramvm.LANKey(m.Site)]--
		target := d.jobs[dec.Target]
		d.mu.Unlock()
		if err == nil && target != nil {
			d.answer(ctx, target, lifecycle.Moved{VM: m.VM, Site: m.Site, Host: m.To, At: d.now()})
		}
		if err != nil {
			errs = append(errs, fmt.Sprintf("%s: %v", m.VM, err))
			d.log.Warn().Err(err).Str("vm", m.VM).Str("from", m.From).Str("to", m.To).Msg("tuning migration failed")
			continue
		}
		d.log.Info().Str("job", dec.Target).Str("vm", m.VM).Str("from", m.From).Str("to", m.To).Bool("live", mig.Live).
			Float64("seconds", mig.Seconds).Msg("vm migrated to free bandwidth")
	}
	for _, sh := range dec.Shrinks {
		s := d.site(sh.Site)
		var err error
		if s == nil {
			err = fmt.Errorf("no agent for site %s", sh.Site)
		} else {
			_, err = s.agent.ResizeVM(ctx, sh.VM, hp.Resize{VCPUs: sh.VCPUs})
		}
		if err != nil {
			errs = append(errs, fmt.Sprintf("%s: %v", sh.VM, err))
			d.log.Warn().Err(err).Str("vm", sh.VM).Msg("tuning resize failed")
			continue
		}
		d.log.Info().Str("job", dec.Target).Str("vm", sh.VM).Int("vcpus", sh.VCPUs).Msg("vm shrunk to free capacity")
	}
	d.mu.Lock()
	for k, v := range d.migrating {
		if v <= 0 {
			delete(d.migrating, k)
		}
	}
	d.tuningActive--
	outcome := "carried out"
	if len(errs) > 0 {
		outcome = "failed: " + strings.Join(errs, "; ")
	}
	d.metrics.tuned(dec.Action, len(errs) > 0)
	for i := range d.tuning {
		if d.tuning[i].Seq == seq {
			d.tuning[i].Outcome = outcome
		}
	}
	d.mu.Unlock()
	d.kick()
}
