package main

import (
	"bytes"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/metasched/metasched/switching"
)

// Ctrl-C stops long solves and simulations: the real binary, a real signal.
func TestInterrupt(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := buildBinary(t)
	out := t.TempDir()
	for _, tt := range []struct {
		name string
		args []string
	}{
		{"solve", []string{"policy", "solve", "--model", example + "fisher-fig4-n5.yaml"}},
		{"simulate policies", []string{"simulate", "policies", "--model", example + "fisher-fig4-load3.4.yaml",
			"--policy", "heuristic", "--completions", "100000000000"}},
		{"simulate experiment", []string{"simulate", "experiment", "palmer-fig3", "--out", out,
			"--policies", "heuristic K=1", "--completions", "100000000000"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cmd := exec.Command(bin, tt.args...)
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			time.Sleep(2 * time.Second) // parsing and the first sweeps or events
			if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
				t.Fatalf("SIGINT: %v; stderr: %s", err, stderr.String())
			}
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			select {
			case <-done:
			case <-time.After(60 * time.Second):
				_ = cmd.Process.Kill() // by PID: this test's own child; the test fails below
				t.Fatal("did not stop after SIGINT")
			}
			if code := cmd.ProcessState.ExitCode(); code != exitInterrupted {
				t.Errorf("exit code %d, want %d; stderr: %s", code, exitInterrupted, stderr.String())
			}
			if !strings.Contains(stderr.String(), "interrupted") || stdout.Len() != 0 {
				t.Errorf("stdout %q, stderr %q", stdout.String(), stderr.String())
			}
		})
	}
}

func TestProgressBar(t *testing.T) {
	var buf bytes.Buffer
	p := &progressBar{w: &buf}
	p.update(switching.Progress{Phase: "value", Sweep: 10, Residual: 1e-3, Tolerance: 1e-6})
	if got := buf.String(); !strings.Contains(got, "[############------------] value      sweep     10  residual 0.001 → 1e-06") {
		t.Errorf("bar = %q", got)
	}
	buf.Reset()
	p.update(switching.Progress{Phase: "value", Sweep: 11, Residual: 1e-4, Tolerance: 1e-6})
	if buf.Len() != 0 {
		t.Errorf("redrawn within 100 ms: %q", buf.String())
	}
	p.last = time.Time{}
	p.update(switching.Progress{Phase: "horizon", Sweep: 6, Horizon: 12})
	if got := buf.String(); !strings.Contains(got, "[############------------] horizon    sweep      6/12") {
		t.Errorf("bar = %q", got)
	}
	buf.Reset()
	p.done()
	if buf.String() != "\r\033[K" {
		t.Errorf("done = %q", buf.String())
	}
}
