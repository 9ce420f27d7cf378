package executor_test

import (
	"context"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/metasched/metasched/metasched/executor"
	"github.com/metasched/metasched/selection"
)

// TestEmulatedOnInjectedClock: the emulated run waits on the clock it is
// given; stepping a fake clock ends it, not the time that passes.
func TestEmulatedOnInjectedClock(t *testing.T) {
	clock := clockwork.NewFakeClock()
	ex := executor.NewEmulatedClock(testLogger(t), clock)
	done := make(chan error, 1)
	go func() {
		_, err := ex.Run(context.Background(), executor.Run{JobID: "j-1", Job: &selection.Job{Name: "a"}, VMs: testVMs(),
			Predicted: 10 * time.Second, Elapsed: 4 * time.Second})
		done <- err
	}()
	if err := clock.BlockUntilContext(t.Context(), 1); err != nil {
		t.Fatal(err)
	}
	clock.Advance(6*time.Second - time.Nanosecond)
	select {
	case err := <-done:
		t.Fatalf("the run ended %v before its 6 s had passed on its clock", err)
	case <-time.After(50 * time.Millisecond):
	}
	clock.Advance(time.Nanosecond)
	if err := <-done; err != nil {
		t.Fatalf("run: %v", err)
	}
}
