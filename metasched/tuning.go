package metasched

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/metasched/metasched/gramvm"
	hp "github.com/metasched/metasched/hypervisorproxy"
	"github.com/metasched/metasched/metasched/api"
	"github.com/metasched/metasched/metasched/lifecycle"
	"github.com/metasched/metasched/metasched/tuning"
	"github.com/metasched/metasched/metasched/wire"
	"github.com/rs/zerolog"
)

// Bandwidth tuning (Bertogna et al., 004 §3.2): when a queued job's plan is
// held back by a link that running jobs load, or by hosts that a running job
// of its type holds, gramvm evaluates consolidating that job's VMs (two per
// host, live migration through the agents) or shrinking their vCPUs (where
// the hypervisor can unplug them), and the daemon carries out the best one
// only when the predicted gain for the new job exceeds the predicted loss
// plus the migration time. Every evaluated candidate is logged and kept for
// GET /v1/tuning with its numbers. Migrations in flight are capped per host
// and per cluster LAN (Options.MaxMigrationsPerHost, MaxMigrationsPerLink):
// gramvm chooses a decision's moves within the caps, so they all start at
// once. The queued job waits for the decision carried out for it (every
// migration and resize ended, or failed) and is then planned on what it
// freed; meanwhile the hosts the decision frees are held for it, and
// younger jobs are planned around them. Each decision carried out records
// its migrations' measured times and, as the two jobs end, their measured
// run times against the predicted loss and gain. The emulated executor
// does not slow the consolidated job down: its loss is a prediction only.

// tuneEvery is how often a waiting job's tuning is evaluated again.
const tuneEvery = 10 * time.Second

// tuneGap is how often a tuning is evaluated at all, for any job: an
// evaluation weighs every running job in the clusters that hold the plan
// back (180 ms each at 5,000 hosts, 11% of the daemon's CPU when it was
// once a round).
const tuneGap = 5 * time.Second

// tune evaluates the candidates for job j and starts carrying out the
// chosen one; it reports whether it did. The job then waits for it
// (liveJob.tuning) and is planned again once it is over.
func (d *Daemon) tune(ctx context.Context, j *liveJob, free map[string][]string, running []gramvm.RunningJob) bool {
	d.hv.mu.RLock()
	var hosts []gramvm.Host
	for _, name := range d.hv.order {
		if h := d.hv.hosts[name]; h.reachable {
			hosts = append(hosts, h.plannerHost())
		}
	}
	shrinks := map[string]bool{}
	for _, s := range d.sites {
		shrinks[s.name] = s.canShrink
	}
	d.hv.mu.RUnlock()
	decs, err := d.planner.Tune(ctx, j.spec, free, gramvm.HostCapacities(hosts), running, gramvm.TuneOptions{
		MaxPerHost: d.opt.MaxMigrationsPerHost, MaxPerLink: d.opt.MaxMigrationsPerLink, InFlight: d.tuner.InFlight(),
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
		rec := api.TuningRecord{TuningDecision: wire.TuningDecision(dec), NewJobID: j.id(), At: now, Outcome: "rejected"}
		cand := candRejected
		if dec.Accepted {
			rec.Outcome, cand = "not chosen", candNotChosen
			if i == 0 {
				rec.Outcome, cand = "carrying out", candCarryingOut
			}
		}
		d.metrics.candidates.WithLabelValues(cand).Inc()
		// The one carried out is what an operator acts on; the others
		// (most are rejected) are for whoever studies the tuning.
		lvl := zerolog.DebugLevel
		if cand == candCarryingOut {
			lvl = zerolog.InfoLevel
		}
		d.log.WithLevel(lvl).Str("job", j.id()).Str("target", dec.Target).Str("action", dec.Action).Str("cluster", dec.Cluster).
			Float64("gain_s", dec.GainSeconds).Float64("loss_s", dec.LossSeconds).Float64("migration_s", dec.MigrationSeconds).
			Bool("accepted", dec.Accepted).Str("reason", dec.Reason).Msg("bandwidth tuning evaluated")
		carried := i == 0 && dec.Accepted
		var moves []tuning.Move
		if carried {
			rec.Started = now
			scale := d.timeScale()
			rec.Measured = &api.TuningMeasured{PredictedLossS: dec.LossSeconds * scale,
				NewJobPredictedS: dec.NewJobSecondsBefore * scale, PredictedGainS: dec.GainSeconds * scale}
			for _, m := range dec.Moves {
				moves = append(moves, tuning.Move{From: m.From, To: m.To, LAN: gramvm.LANKey(m.Site)})
			}
		}
		d.jobs.mu.Lock()
		if t := d.jobs.live[dec.Target]; t != nil && carried {
			rec.Measured.TargetPredictedS = t.job.Record.Predicted
		}
		seq := d.tuner.Add(rec, carried, moves)
		if carried {
			j.tuning = &tuningWait{seq: seq, hosts: freedHosts(dec)}
			j.waiting = j.tuning.reason()
			d.jobs.mu.Unlock()
			d.goJob(func() { d.carryOut(ctx, j, dec, seq) })
			started = true
			continue
		}
		d.jobs.mu.Unlock()
	}
	return started
}

// tuningWait is the tuning decision a queued job waits for.
type tuningWait struct {
	seq int
	// hosts are the hosts the decision frees (the sources of its moves,
	// the hosts of its shrinks): held for the job while it waits.
	hosts []string
}

// reason is why a job waits for the tuning w.
func (w *tuningWait) reason() string {
	why := fmt.Sprintf("waiting for bandwidth tuning #%d, carried out for it, to end: it is then planned on what the tuning frees", w.seq)
	if len(w.hosts) > 0 {
		why += fmt.Sprintf(" (hosts %s are held for it meanwhile)", strings.Join(w.hosts, ", "))
	}
	return why + "; GET /v1/tuning"
}

// freedHosts lists the hosts a decision frees.
func freedHosts(dec gramvm.TuningDecision) []string {
	var out []string
	for _, m := range dec.Moves {
		if !slices.Contains(out, m.From) {
			out = append(out, m.From)
		}
	}
	for _, sh := range dec.Shrinks {
		if !slices.Contains(out, sh.Host) {
			out = append(out, sh.Host)
		}
	}
	return out
}

// shrinkNote says in a candidate's explanation whether shrinking was
// weighed on its cluster, from what the cluster's agent reports.
func shrinkNote(cluster string, can bool) string {
	if can {
		return fmt.Sprintf("; shrinking is weighed on %s: its agent reports that its hosts unplug vCPUs", cluster)
	}
	return fmt.Sprintf("; no shrink weighed on %s: its agent reports that its hosts cannot unplug vCPUs (QEMU cannot; VMs there only grow)", cluster)
}

// carryOut migrates or resizes the VMs of an accepted tuning decision for
// the queued job j: all its moves at once (gramvm chose them within the
// caps on migrations per host and per LAN), then its shrinks. When every
// one has ended, or failed, j is free to be planned again, on what they
// freed; the record gets what each took.
func (d *Daemon) carryOut(ctx context.Context, j *liveJob, dec gramvm.TuningDecision, seq int) {
	start := d.now()
	migs := make([]api.TuningMigration, len(dec.Moves))
	var wg sync.WaitGroup
	for i, m := range dec.Moves {
		wg.Go(func() {
			migs[i] = api.TuningMigration{VM: m.VM, From: m.From, To: m.To}
			mig, err := d.migrate(ctx, m.Site, m.VM, m.From, m.To)
			d.jobs.mu.Lock()
			target := d.jobs.live[dec.Target]
			d.jobs.mu.Unlock()
			if err != nil {
				migs[i].Error = err.Error()
				d.log.Warn().Err(err).Str("vm", m.VM).Str("from", m.From).Str("to", m.To).Msg("tuning migration failed")
				return
			}
			migs[i].Seconds, migs[i].Live, migs[i].DowntimeMs = mig.Seconds, mig.Live, mig.DowntimeMs
			if target != nil {
				d.answer(ctx, target, lifecycle.Moved{VM: m.VM, Site: m.Site, Host: m.To, At: d.now()})
			}
			d.log.Info().Str("job", dec.Target).Str("vm", m.VM).Str("from", m.From).Str("to", m.To).Bool("live", mig.Live).
				Float64("seconds", mig.Seconds).Msg("vm migrated to free bandwidth")
		})
	}
	wg.Wait()
	migrated := d.now()
	resizes := make([]api.TuningResize, len(dec.Shrinks))
	for i, sh := range dec.Shrinks {
		wg.Go(func() {
			resizes[i] = api.TuningResize{VM: sh.VM, Host: sh.Host, VCPUs: sh.VCPUs}
			s := d.site(sh.Site)
			var err error
			t0 := time.Now() // the agent's call, on the wall clock whatever the daemon's
			if s == nil {
				err = fmt.Errorf("no agent for site %s", sh.Site)
			} else {
				_, err = s.agent.ResizeVM(ctx, sh.VM, hp.Resize{VCPUs: sh.VCPUs})
			}
			resizes[i].Seconds = time.Since(t0).Seconds()
			if err != nil {
				resizes[i].Error = err.Error()
				d.log.Warn().Err(err).Str("vm", sh.VM).Msg("tuning resize failed")
				return
			}
			d.log.Info().Str("job", dec.Target).Str("vm", sh.VM).Int("vcpus", sh.VCPUs).Msg("vm shrunk to free capacity")
		})
	}
	wg.Wait()
	var errs []string
	for _, m := range migs {
		if m.Error != "" {
			errs = append(errs, m.VM+": "+m.Error)
		}
	}
	for _, r := range resizes {
		if r.Error != "" {
			errs = append(errs, r.VM+": "+r.Error)
		}
	}
	end := d.now()
	outcome := "carried out"
	if len(errs) > 0 {
		outcome = "failed: " + strings.Join(errs, "; ")
	}
	d.metrics.tuned(dec.Action, len(errs) > 0)
	migrationS := 0.0
	if len(migs) > 0 {
		migrationS = migrated.Sub(start).Seconds()
	}
	d.tuner.Ended(seq, outcome, end, migs, resizes, migrationS)
	d.jobs.mu.Lock()
	// The job is planned at the next round, on what the tuning freed: not
	// tuned again first, and the round is not skipped.
	if j.tuning != nil && j.tuning.seq == seq {
		j.tuning = nil
		j.lastTune.Store(end.UnixNano())
	}
	d.jobs.lastRound = 0
	d.jobs.mu.Unlock()
	d.log.Info().Str("job", j.id()).Int("seq", seq).Str("outcome", outcome).Float64("seconds", end.Sub(start).Seconds()).
		Msg("bandwidth tuning over: the job is planned on what it freed")
	d.kick()
}

// migrate live-migrates a VM counted in flight (tuning.Book) through its
// site's agent, and counts it out when it has ended.
func (d *Daemon) migrate(ctx context.Context, site, vm, from, to string) (hp.Migration, error) {
	var err error
	var mig hp.Migration
	if s := d.site(site); s == nil {
		err = fmt.Errorf("no agent for site %s", site)
	} else {
		mig, err = s.agent.MigrateVM(ctx, vm, hp.MigrateRequest{Host: to})
	}
	d.tuner.MigrationEnded(tuning.Move{From: from, To: to, LAN: gramvm.LANKey(site)})
	return mig, err
}

// tuningEnded fills in the measured run times of the tuning records
// carried out with job j as their target or their new job, now that j has
// ended: its run time from the start of its last attempt to its end.
func (d *Daemon) tuningEnded(j *liveJob) {
	rec := j.job.Record
	measured := 0.0
	if j.job.State == lifecycle.Done && !rec.Started.IsZero() && !rec.Finished.IsZero() {
		measured = rec.Finished.Sub(rec.Started).Seconds()
	}
	d.tuner.JobEnded(j.id(), string(j.job.State), measured)
}
