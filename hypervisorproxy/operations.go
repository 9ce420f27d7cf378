package hypervisorproxy

import (
	"errors"
	"fmt"
	"time"

	"github.com/rs/zerolog"
)

// What the VM operations share: a managed VM is held by one operation at
// a time (acquire, release), and every operation logs one line when it ends
// (opLog, logDone).

// opLog starts the log line of a VM operation.
func (a *Agent) opLog(op string, s VMSpec) zerolog.Logger {
	return a.log.With().Str("op", op).Str("vm", s.Name).Str("host", s.Host).Str("job", s.Job).Logger()
}

// logDone writes the line of an operation that ended: its duration, and
// the error as a warning when it failed.
func logDone(l zerolog.Logger, start time.Time, err error, msg string) {
	ev := l.Info()
	if err != nil {
		ev = l.Warn().Err(err)
	}
	ev.Float64("duration_ms", float64(time.Since(start).Microseconds())/1000).Msg(msg)
}

// acquire marks a managed VM busy with op and returns it and its host,
// which must be connected.
func (a *Agent) acquire(name, op string) (*vm, *host, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	v, ok := a.vms[name]
	if !ok {
		return nil, nil, fmt.Errorf("%s vm %s: %w", op, name, ErrNotFound)
	}
	if v.busy != "" {
		return nil, nil, fmt.Errorf("%s vm %s: %w: %s in progress", op, name, ErrBusy, v.busy)
	}
	h := a.host(v.spec.Host)
	if h.hv == nil {
		return nil, nil, fmt.Errorf("%s vm %s: host %s: %w", op, name, h.cfg.Name, errors.Join(ErrConnLost, h.err))
	}
	v.busy = op
	return v, h, nil
}

// release makes a VM idle again and saves the record.
func (a *Agent) release(v *vm) {
	a.mu.Lock()
	v.busy, v.moving = "", ""
	a.saveAndUnlock()
}
