package executor

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/jonboulle/clockwork"

	hp "github.com/metasched/metasched/hypervisorproxy"
)

// Program is a program run to its end in a VM through the guest agent
// (RunProgram): the calibration's benchmark and probes, a benchmark's task
// farm.
type Program struct {
	Path string
	Args []string
	// Limit bounds the run (0: none but the context's).
	Limit time.Duration
	// Poll is how often the program's end is asked of the guest agent:
	// every call costs the guest some of its CPU.
	Poll time.Duration
	// Clock is the clock of the polls and the limit; nil is the real one.
	Clock clockwork.Clock
}

// programTries is how many failed status calls in a row (the guest agent,
// or the site's agent, failing once) end a run.
const programTries = 5

// RunProgram starts p in vm through g, waits for its end and returns its
// standard output when it exited 0; an exit with another code or by a
// signal is an error quoting its output.
func RunProgram(ctx context.Context, g GuestAgent, vm string, p Program) ([]byte, error) {
	clock := p.Clock
	if clock == nil {
		clock = clockwork.NewRealClock()
	}
	proc, err := g.GuestExec(ctx, vm, hp.GuestExec{Path: p.Path, Args: p.Args, CaptureOutput: true})
	if err != nil {
		return nil, err
	}
	deadline := clock.Now().Add(p.Limit)
	fails := 0
	for {
		st, err := g.GuestExecStatus(ctx, vm, proc.PID)
		switch {
		case err != nil && ctx.Err() != nil:
			return nil, ctx.Err()
		case err != nil:
			if fails++; fails >= programTries {
				return nil, err
			}
		case st.Exited && (st.ExitCode != 0 || st.Signal != 0):
			how := fmt.Sprintf("exit code %d", st.ExitCode)
			if st.Signal != 0 {
				how = fmt.Sprintf("killed by signal %d", st.Signal)
			}
			return nil, fmt.Errorf("%s: stderr %s, stdout %s", how, QuoteOutput(st.Stderr), QuoteOutput(st.Stdout))
		case st.Exited:
			return st.Stdout, nil
		default:
			fails = 0
		}
		if p.Limit > 0 && !clock.Now().Before(deadline) {
			return nil, fmt.Errorf("still running after %s", p.Limit)
		}
		t := clock.NewTimer(p.Poll)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-t.Chan():
		}
	}
}

// QuoteOutput quotes a program's output for an error, at most 200 bytes.
func QuoteOutput(b []byte) string {
	const most = 200
	if len(b) > most {
		return strconv.Quote(string(b[:most])) + "..."
	}
	return strconv.Quote(string(b))
}
