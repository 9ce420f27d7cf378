package lab

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/metasched/metasched/hypervisorproxy/libvirtdtest"
)

// StartTimeout bounds StartT's start of a lab: a bound against a hang
// (libvirtds, agents and a daemon on a loaded machine take far less), not
// a measure.
const StartTimeout = 10 * time.Minute

// StartT starts a lab for a test, once the test binary holds the QEMU
// suites' lock (see libvirtdtest): opt.Dir defaults to a directory of the
// test's, opt.Logf to t.Logf. When the test ends it prints the end of
// every log of the lab's processes if the test failed, then closes the
// lab (everything stopped by PID); a failed start fails the test.
func StartT(t testing.TB, spec Spec, opt Options) *Lab {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: starts a lab of QEMU hosts under libvirtd; make test runs it")
	}
	if opt.Dir == "" {
		opt.Dir = t.TempDir()
	}
	if opt.Logf == nil {
		opt.Logf = t.Logf
	}
	// The wait for another test binary's QEMU suite is not part of the
	// start (libvirtdtest.Start would count it in each host's deadline).
	release, err := libvirtdtest.AcquireSuite()
	if err != nil {
		t.Fatal(err)
	}
	defer release() // the lab's daemons hold it from here on
	ctx, cancel := context.WithTimeout(context.Background(), StartTimeout)
	defer cancel()
	l, err := Start(ctx, spec, opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			l.mu.Lock()
			procs := append([]*Proc(nil), l.procs...)
			l.mu.Unlock()
			for _, p := range procs {
				t.Logf("--- %s:\n%s", filepath.Base(p.Log), p.Tail())
			}
		}
		if err := l.Close(); err != nil {
			t.Errorf("stop the lab: %v", err)
		}
	})
	return l
}
