// Package daemontest runs a daemon for tests: the demo's configuration
// (or another grid), in-process agents on the libvirt test driver, a
// temporary data directory, and the HTTP server (package httpapi) on a
// local port, or on an in-memory network for a test that runs in a
// testing/synctest bubble, until the test ends.
package daemontest

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/metasched/metasched/graph"
	"github.com/metasched/metasched/hypervisorproxy/sim"
	"github.com/metasched/metasched/hypervisorproxy/virt"
	"github.com/metasched/metasched/internal/memnet"
	"github.com/metasched/metasched/metasched"
	"github.com/metasched/metasched/metasched/demo"
	"github.com/metasched/metasched/metasched/httpapi"
)

// Daemon is a daemon that runs until the test ends (or Stop).
type Daemon struct {
	D *metasched.Daemon
	// Addr is the server's URL: http://127.0.0.1:PORT, or http://memnet
	// in a bubble.
	Addr string
	// HTTP is the client that reaches the server.
	HTTP *http.Client
	// Log holds what the daemon logged, at info level and above.
	Log *Log
	// Stop stops the daemon and closes it; the test's cleanup calls it
	// too (once is enough).
	Stop func()
}

// Start runs a demo-configured daemon on grid g (nil: the demo's), with a
// switch delay of 200 ms and a tick of 100 ms unless opt says otherwise;
// edit changes the configuration before the daemon opens it. Each wrap, in
// order, wraps the server the daemon serves (a test's check of every
// request and answer, say).
func Start(t testing.TB, g *graph.Grid, opt metasched.Options, edit func(*metasched.Config), wrap ...func(http.Handler) http.Handler) *Daemon {
	t.Helper()
	return start(t, g, opt, edit, false, wrap)
}

// StartInBubble is Start for a test that runs in a testing/synctest
// bubble: the server listens on an in-memory network (package memnet) that
// HTTP reaches, so that nothing waits on a real socket and the bubble's
// fake clock is the daemon's time. Its ticks, timers, switch delays and
// emulated runs then pass as soon as every goroutine waits: the test steps
// time instead of sleeping through it.
func StartInBubble(t testing.TB, g *graph.Grid, opt metasched.Options, edit func(*metasched.Config), wrap ...func(http.Handler) http.Handler) *Daemon {
	t.Helper()
	return start(t, g, opt, edit, true, wrap)
}

func start(t testing.TB, g *graph.Grid, opt metasched.Options, edit func(*metasched.Config), inMemory bool, wrap []func(http.Handler) http.Handler) *Daemon {
	t.Helper()
	cfg, grid, err := demo.Config(t.TempDir(), "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if g != nil {
		grid = g
	}
	cfg.SwitchDelay = 200 * time.Millisecond
	if edit != nil {
		edit(cfg)
	}
	buf := NewLog()
	log := zerolog.New(buf).Level(zerolog.InfoLevel)
	opt.Logger = log
	opt.Connect = sim.Connector(virt.Connector(log.Level(zerolog.WarnLevel)))
	opt.Store.NoSync = true
	if inMemory {
		// Each write commits at once: bbolt's group commit waits on a
		// timer, which the bubble's clock fires only when every goroutine
		// waits, and the daemon writes some records under its lock.
		opt.Store.MaxBatchSize = 1
	}
	if opt.Tick == 0 {
		opt.Tick = 100 * time.Millisecond
	}
	ctx, cancel := context.WithCancel(context.Background())
	d, err := metasched.NewWithGrid(ctx, cfg, grid, opt)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	var (
		ln   net.Listener
		addr string
		hc   = &http.Client{}
	)
	if inMemory {
		mem := memnet.Listen()
		ln, addr, hc = mem, "http://memnet", mem.Client()
	} else {
		if ln, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
			t.Fatal(err)
		}
		addr = "http://" + ln.Addr().String()
		if cfg.TLS != nil { // the daemon serves TLS: its clients need the CA (and their certificates)
			addr = "https://" + ln.Addr().String()
		}
	}
	var h http.Handler = httpapi.New(httpapi.All(d), log)
	for _, w := range wrap {
		h = w(h)
	}
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx, ln, h) }()
	td := &Daemon{D: d, Addr: addr, HTTP: hc, Log: buf}
	stopped := false
	td.Stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run: %v", err)
		}
		if err := d.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	}
	t.Cleanup(td.Stop)
	return td
}

// NewLog returns an empty log.
func NewLog() *Log { return &Log{w: &bytes.Buffer{}} }

// WaitFor polls cond until it holds or the time is up. In a synctest
// bubble its pauses step the bubble's fake clock.
func WaitFor(t testing.TB, what string, limit time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", limit, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Log serializes writes to a buffer shared by goroutines.
type Log struct {
	mu sync.Mutex
	w  *bytes.Buffer
}

func (l *Log) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func (l *Log) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.String()
}
