package httpapi_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/metasched/metasched/metasched"
	"github.com/metasched/metasched/metasched/httpapi"
	"github.com/metasched/metasched/metasched/internal/daemontest"
)

// testDaemon runs a demo-configured daemon with in-process agents on the
// libvirt test driver in a temporary directory, serving this package's
// server, until the test ends. Every request a test sends it, and every
// answer, is held to the OpenAPI document (httpapi.CheckOpenAPI): a test
// marks the requests it sends knowing that the document does not describe
// them (offDoc).
type testDaemon struct {
	d    *metasched.Daemon
	addr string
	log  *daemontest.Log
	stop func()
}

func startDaemon(t testing.TB, opt metasched.Options, edit func(*metasched.Config)) *testDaemon {
	t.Helper()
	td := daemontest.Start(t, nil, opt, edit, checkOpenAPI(t))
	return &testDaemon{d: td.D, addr: td.Addr, log: td.Log, stop: td.Stop}
}

// waitFor is daemontest.WaitFor.
func waitFor(t *testing.T, what string, limit time.Duration, cond func() bool) {
	t.Helper()
	daemontest.WaitFor(t, what, limit, cond)
}

// checkOpenAPI wraps a daemon's server in httpapi.CheckOpenAPI.
func checkOpenAPI(t testing.TB) func(http.Handler) http.Handler {
	return func(h http.Handler) http.Handler { return httpapi.CheckOpenAPI(t, h) }
}

// offDoc marks a request that the OpenAPI document does not describe,
// which a test sends on purpose (httpapi.OffDocument): its answer alone is
// held to the document.
func offDoc(r *http.Request) { httpapi.MarkOffDocument(r) }

// offDocIf is the marks of a request: offDoc when off, else none.
func offDocIf(off bool) []func(*http.Request) {
	if off {
		return []func(*http.Request){offDoc}
	}
	return nil
}
