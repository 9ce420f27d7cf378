package httpapi_test

import (
	"testing"
	"time"

	"github.com/metasched/metasched/metasched"
	"github.com/metasched/metasched/metasched/internal/daemontest"
)

// testDaemon runs a demo-configured daemon with in-process agents on the
// libvirt test driver in a temporary directory, serving this package's
// server, until the test ends.
type testDaemon struct {
	d    *metasched.Daemon
	addr string
	log  *daemontest.Log
	stop func()
}

func startDaemon(t *testing.T, opt metasched.Options, edit func(*metasched.Config)) *testDaemon {
	t.Helper()
	td := daemontest.Start(t, nil, opt, edit)
	return &testDaemon{d: td.D, addr: td.Addr, log: td.Log, stop: td.Stop}
}

// waitFor is daemontest.WaitFor.
func waitFor(t *testing.T, what string, limit time.Duration, cond func() bool) {
	t.Helper()
	daemontest.WaitFor(t, what, limit, cond)
}
