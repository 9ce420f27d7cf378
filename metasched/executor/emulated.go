package executor

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/rs/zerolog"
)

// Emulated stands in for a job's real work: it describes the virtual
// cluster the job would run on, waits for the job's predicted run time and
// reports the job done. It is safe for concurrent use.
type Emulated struct {
	log   zerolog.Logger
	clock clockwork.Clock
}

// NewEmulated returns the emulated executor on the real clock.
func NewEmulated(log zerolog.Logger) *Emulated {
	return NewEmulatedClock(log, clockwork.NewRealClock())
}

// NewEmulatedClock returns the emulated executor waiting on clock (a fake
// one in tests).
func NewEmulatedClock(log zerolog.Logger, clock clockwork.Clock) *Emulated {
	return &Emulated{log: log.With().Str("executor", "emulated").Logger(), clock: clock}
}

// Name returns "emulated", the executor's name in the daemon's
// configuration.
func (e *Emulated) Name() string { return "emulated" }

// Run writes three lines about the run to r.Output, waits
// r.Predicted−r.Elapsed (at once when that is not positive), writes a last
// line and returns ExitCode 0. On cancel it returns at once with ctx's
// error wrapped.
func (e *Emulated) Run(ctx context.Context, r Run) (Result, error) {
	name := jobName(r)
	if err := ctx.Err(); err != nil {
		return Result{}, fmt.Errorf("emulated run of job %s: %w", name, err)
	}
	log := e.log.With().Str("job", r.JobID).Logger()
	remaining := max(r.Predicted-r.Elapsed, 0)
	out := output(r)
	if _, err := io.WriteString(out, describe(r, remaining)); err != nil {
		outputRefused(log, err, "left out")
	}
	log.Debug().Dur("remaining", remaining).Msg("emulated run started")

	if remaining > 0 {
		t := e.clock.NewTimer(remaining)
		defer t.Stop()
		select {
		case <-ctx.Done():
			log.Debug().Err(ctx.Err()).Msg("emulated run stopped")
			return Result{}, fmt.Errorf("emulated run of job %s: %w", name, ctx.Err())
		case <-t.Chan():
		}
	}
	if _, err := io.WriteString(out, "emulated run finished\n"); err != nil {
		outputRefused(log, err, "left out")
	}
	log.Debug().Msg("emulated run finished")
	return Result{}, nil
}

// describe is what an emulated run writes first: the master, the workers
// per site (in the order of r.VMs) and the times. For example:
//
//	emulating job render-42 (id j-7): master VM render-42-0 on host spain-1 (site spain)
//	workers: 3 VMs on spain, 2 VMs on latam-a
//	predicted run time 12.5 s, 2 s already run, 10.5 s to go
func describe(r Run, remaining time.Duration) string {
	var b strings.Builder
	fmt.Fprintf(&b, "emulating job %s", jobName(r))
	if r.JobID != "" && r.JobID != jobName(r) {
		fmt.Fprintf(&b, " (id %s)", r.JobID)
	}
	var sites []string
	workers := map[string]int{}
	master := false
	for _, vm := range r.VMs {
		if vm.Master {
			if !master {
				fmt.Fprintf(&b, ": master VM %s on host %s (site %s)", vm.Name, vm.Host, vm.Site)
				master = true
			}
			continue
		}
		if workers[vm.Site] == 0 {
			sites = append(sites, vm.Site)
		}
		workers[vm.Site]++
	}
	if !master {
		b.WriteString(": no master VM")
	}
	b.WriteString("\nworkers: ")
	if len(sites) == 0 {
		b.WriteString("none")
	}
	for i, s := range sites {
		if i > 0 {
			b.WriteString(", ")
		}
		unit := "VMs"
		if workers[s] == 1 {
			unit = "VM"
		}
		fmt.Fprintf(&b, "%d %s on %s", workers[s], unit, s)
	}
	fmt.Fprintf(&b, "\npredicted run time %s s, %s s already run, %s s to go\n",
		seconds(r.Predicted), seconds(r.Elapsed), seconds(remaining))
	return b.String()
}

func seconds(d time.Duration) string {
	return strconv.FormatFloat(d.Seconds(), 'f', -1, 64)
}
