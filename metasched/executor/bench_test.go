package executor_test

import (
	"context"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/metasched/metasched/metasched/executor"
	"github.com/metasched/metasched/selection"
)

// countWriter counts the bytes a run's Output takes.
type countWriter struct{ n atomic.Int64 }

func (w *countWriter) Write(p []byte) (int, error) {
	w.n.Add(int64(len(p)))
	return len(p), nil
}

func cpu(who int) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(who, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkCommandYes runs `yes` under the command executor for a second
// per iteration and reports what it costs the daemon's process (its CPU
// time per second of the run, the bytes its Output took per second) and
// its supervisor and command together (children-cpu-%: their CPU per second,
// counted once they are reaped).
func BenchmarkCommandYes(b *testing.B) {
	ex, err := executor.NewCommand(zerolog.Nop(), executor.CommandOptions{RunAs: jobUser()})
	if err != nil {
		b.Fatal(err)
	}
	var (
		out           countWriter
		wall          time.Duration
		self, childen time.Duration
	)
	for b.Loop() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		s0, c0, t0 := cpu(syscall.RUSAGE_SELF), cpu(syscall.RUSAGE_CHILDREN), time.Now()
		_, err := ex.Run(ctx, executor.Run{
			JobID:  "j-1",
			Job:    &selection.Job{Name: "yes", Command: []string{"yes"}},
			VMs:    []executor.VM{{Name: "vm-0", Site: "s", Host: "h", Master: true, VCPUs: 1}},
			Dir:    b.TempDir(),
			Output: &out,
		})
		wall += time.Since(t0)
		self += cpu(syscall.RUSAGE_SELF) - s0
		childen += cpu(syscall.RUSAGE_CHILDREN) - c0
		cancel()
		if err == nil {
			b.Fatal("yes ended by itself")
		}
	}
	b.ReportMetric(100*self.Seconds()/wall.Seconds(), "daemon-cpu-%")
	b.ReportMetric(100*childen.Seconds()/wall.Seconds(), "children-cpu-%")
	b.ReportMetric(float64(out.n.Load())/wall.Seconds(), "output-B/s")
}
