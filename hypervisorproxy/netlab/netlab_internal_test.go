//go:build linux

package netlab

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestNewPairUndo makes NewPair fail half-way, on a namespace name that is
// taken, and checks that it deletes what it created, leaves the namespace
// it did not create alone, and reports ip's message.
func TestNewPairUndo(t *testing.T) {
	if err := Check(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	// A counter NewPair will not reach in this process.
	pid, n, suffix := os.Getpid(), uint32(1<<31), uint16(0xdead)
	free := fmt.Sprintf("%s%d-%d-%04x-0", NamePrefix, pid, n, suffix)
	taken := fmt.Sprintf("%s%d-%d-%04x-1", NamePrefix, pid, n, suffix)
	if err := run(ctx, "ip", "netns", "add", taken); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = deleteNamespace(context.Background(), taken) }) // best effort: TestMain reports a namespace left behind

	p, err := newPair(ctx, Options{RateMbit: 10}, pid, n, suffix)
	if err == nil {
		_ = p.Close() // the test fails: that is the error to report
		t.Fatal("newPair succeeded on a taken namespace name")
	}
	t.Log(err)
	if !strings.Contains(err.Error(), "ip netns add "+taken) || !strings.Contains(err.Error(), "exists") {
		t.Errorf("error %q does not name the command and its message", err)
	}
	names, err := Namespaces(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(names, free) {
		t.Errorf("namespace %s left behind", free)
		_ = deleteNamespace(context.Background(), free) // best effort: the test has failed already
	}
	if !slices.Contains(names, taken) {
		t.Errorf("namespace %s, not created by newPair, was deleted", taken)
	}
}
