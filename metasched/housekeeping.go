package metasched

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"time"

	"github.com/metasched/metasched/metasched/store"
)

// The housekeeping keeps the history within its retention (Config
// Retention): at the start and every housekeepingEvery on the daemon's
// clock it drops the finished switches beyond their age or count, and
// removes the run directories (DATA_DIR/jobs/ID) of jobs that ended longer
// ago than retention.job_dirs or are no longer in the store. Its cost is
// what it drops and the run directories there are, never the number of
// jobs or switches kept.

// housekeepingEvery is the housekeeping's period.
const housekeepingEvery = time.Minute

// retention is the configured retention, or DefaultRetention for a
// configuration built in code without one.
func (d *Daemon) retention() RetentionConfig {
	if d.cfg.Retention == (RetentionConfig{}) {
		return DefaultRetention
	}
	return d.cfg.Retention
}

// housekeepingLoop runs the housekeeping now and every housekeepingEvery.
func (d *Daemon) housekeepingLoop(ctx context.Context) {
	t := d.clock.NewTicker(housekeepingEvery)
	defer t.Stop()
	for {
		d.housekeeping(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.Chan():
		}
	}
}

// housekeeping is one round.
func (d *Daemon) housekeeping(ctx context.Context) {
	r, now := d.retention(), d.now()
	trim := store.SwitchTrim{MaxCount: r.SwitchMaxCount, Keep: now.Add(-MinSwitchMaxAge)}
	if r.SwitchMaxAge > 0 {
		trim.EndedBefore = now.Add(-r.SwitchMaxAge)
	}
	if n, err := d.st.TrimSwitches(ctx, trim); err != nil {
		if ctx.Err() == nil {
			d.log.Warn().Err(err).Msg("housekeeping: cannot drop the switches beyond their retention")
		}
	} else if n > 0 {
		d.log.Info().Int("switches", n).Msg("housekeeping: finished switches beyond their retention dropped")
	}
	if n := d.removeRunDirs(ctx, now.Add(-r.JobDirs)); n > 0 {
		d.log.Info().Int("dirs", n).Msg("housekeeping: run directories of finished jobs removed")
	}
}

// jobDirName is the name of a job's run directory: its ID.
var jobDirName = regexp.MustCompile(`^j-[0-9]+$`)

// removeRunDirs removes the run directories of the jobs that ended before
// cutoff or that the store no longer has, and returns how many it removed.
// The directory of a live job, or of anything that is not a job's, stays.
func (d *Daemon) removeRunDirs(ctx context.Context, cutoff time.Time) int {
	root := filepath.Join(d.cfg.DataDir, "jobs")
	entries, err := os.ReadDir(root)
	if err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			d.log.Warn().Err(err).Msg("housekeeping: cannot read the run directories")
		}
		return 0
	}
	n := 0
	for _, e := range entries {
		if ctx.Err() != nil {
			return n
		}
		if !e.IsDir() || !jobDirName.MatchString(e.Name()) {
			continue
		}
		j, err := d.st.Job(ctx, e.Name())
		switch {
		case errors.Is(err, store.ErrNotFound):
		case err != nil:
			continue // unreadable now: next round
		case !j.State.Terminal() || len(j.Transitions) == 0:
			continue
		default:
			if end := j.Transitions[len(j.Transitions)-1].At; !end.Before(cutoff) {
				continue
			}
		}
		if err := os.RemoveAll(filepath.Join(root, e.Name())); err != nil {
			d.log.Warn().Err(err).Str("job", e.Name()).Msg("housekeeping: cannot remove a run directory")
			continue
		}
		n++
	}
	return n
}
