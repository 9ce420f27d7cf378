package executor_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/jonboulle/clockwork"
	"github.com/rs/zerolog"

	"github.com/metasched/metasched/metasched/executor"
	"github.com/metasched/metasched/selection"
)

func TestEmulatedOutput(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		run  executor.Run
		want string
	}{{
		name: "two sites",
		run: executor.Run{
			JobID: "j-7", Job: &selection.Job{Name: "render-42"}, VMs: testVMs(),
			Predicted: 12500 * time.Millisecond, Elapsed: 12500 * time.Millisecond,
		},
		want: `emulating job render-42 (id j-7): master VM render-42-0 on host spain-1 (site spain)
workers: 2 VMs on spain, 1 VM on latam-a
predicted run time 12.5 s, 12.5 s already run, 0 s to go
emulated run finished
`,
	}, {
		name: "master only, overrun",
		run: executor.Run{
			JobID: "j-8", Job: &selection.Job{Name: "tiny"}, VMs: testVMs()[:1],
			Predicted: time.Second, Elapsed: 2 * time.Second,
		},
		want: `emulating job tiny (id j-8): master VM render-42-0 on host spain-1 (site spain)
workers: none
predicted run time 1 s, 2 s already run, 0 s to go
emulated run finished
`,
	}, {
		name: "no job file, no VMs",
		run:  executor.Run{JobID: "j-9"},
		want: `emulating job j-9: no master VM
workers: none
predicted run time 0 s, 0 s already run, 0 s to go
emulated run finished
`,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var out strings.Builder
			tt.run.Output = &out
			res, err := executor.NewEmulated(testLogger(t)).Run(context.Background(), tt.run)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(executor.Result{}, res); diff != "" {
				t.Fatalf("result (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.want, out.String()); diff != "" {
				t.Fatalf("output (-want +got):\n%s", diff)
			}
		})
	}
}

// TestEmulatedWaits checks that a run is never early: it lasts at least
// Predicted−Elapsed. The upper bounds are loose, only far below the
// predicted time of the resumed runs.
func TestEmulatedWaits(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name               string
		predicted, elapsed time.Duration
		atLeast            time.Duration
	}{
		{"full run", 150 * time.Millisecond, 0, 150 * time.Millisecond},
		{"resumed", 10 * time.Second, 9850 * time.Millisecond, 150 * time.Millisecond},
		{"resumed past its end", 10 * time.Second, 11 * time.Second, 0},
		{"nothing to run", 0, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := executor.Run{JobID: "j-1", VMs: testVMs(), Predicted: tt.predicted, Elapsed: tt.elapsed}
			start := time.Now()
			res, err := executor.NewEmulated(testLogger(t)).Run(context.Background(), r)
			took := time.Since(start)
			if err != nil {
				t.Fatal(err)
			}
			if res != (executor.Result{}) {
				t.Fatalf("result %+v, want done", res)
			}
			if took < tt.atLeast {
				t.Fatalf("run took %v, want at least %v", took, tt.atLeast)
			}
			if limit := 5 * time.Second; took > limit {
				t.Fatalf("run took %v, want well under %v (Elapsed ignored?)", took, limit)
			}
		})
	}
}

func TestEmulatedCancel(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		ctx     func() (context.Context, context.CancelFunc)
		cancel  time.Duration // after Run started; <0: not cancelled
		wantErr error
	}{
		{"cancelled while waiting", func() (context.Context, context.CancelFunc) {
			return context.WithCancel(context.Background())
		}, 50 * time.Millisecond, context.Canceled},
		{"cancelled before", func() (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			return ctx, cancel
		}, -1, context.Canceled},
		{"deadline", func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), 50*time.Millisecond)
		}, -1, context.DeadlineExceeded},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := tt.ctx()
			defer cancel()
			if tt.cancel >= 0 {
				time.AfterFunc(tt.cancel, cancel)
			}
			r := executor.Run{JobID: "j-1", Job: &selection.Job{Name: "long"}, VMs: testVMs(), Predicted: time.Hour}
			start := time.Now()
			_, err := executor.NewEmulated(testLogger(t)).Run(ctx, r)
			if took := time.Since(start); took > 5*time.Second {
				t.Fatalf("cancelled run returned after %v", took)
			}
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("error %v, want %v", err, tt.wantErr)
			}
			if !strings.Contains(err.Error(), "long") {
				t.Fatalf("error %q does not name the job", err)
			}
		})
	}
}

// refusingWriter refuses every write with err.
type refusingWriter struct{ err error }

func (w refusingWriter) Write([]byte) (int, error) { return 0, w.err }

// TestOutputRefusedAsTheDaemonStops: output the daemon's log refuses as
// the daemon stops (an error that wraps ErrDetached) is said at info as the
// stop's, any other refusal is a warning.
func TestOutputRefusedAsTheDaemonStops(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		err       error
		want, not string
	}{
		{fmt.Errorf("%w: etcd does not answer", executor.ErrDetached), `"level":"info"`, `"level":"warn"`},
		{errors.New("disk full"), `"level":"warn"`, "daemon stopping"},
	} {
		var logs bytes.Buffer
		e := executor.NewEmulatedClock(zerolog.New(&logs), clockwork.NewFakeClock())
		if _, err := e.Run(t.Context(), executor.Run{JobID: "j-1", Output: refusingWriter{c.err}}); err != nil {
			t.Fatal(err)
		}
		for line := range strings.Lines(logs.String()) {
			if !strings.Contains(line, "job output not taken") {
				continue
			}
			if !strings.Contains(line, c.want) || strings.Contains(line, c.not) {
				t.Errorf("output refused with %v: %s want %s, not %s", c.err, line, c.want, c.not)
			}
		}
		if !strings.Contains(logs.String(), "job output not taken") {
			t.Errorf("output refused with %v: nothing logged:\n%s", c.err, logs.String())
		}
	}
}
