package metasched_test

import (
	"bytes"
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/metasched/metasched/graph"
	"github.com/metasched/metasched/hypervisorproxy/virt"
	"github.com/metasched/metasched/metasched"
	"github.com/metasched/metasched/metasched/store"
)

// testDaemon runs a demo-configured daemon with in-process agents on the
// libvirt test driver in a temporary directory until the test ends.
type testDaemon struct {
	d    *metasched.Daemon
	addr string
	log  *syncWriter
	stop func()
}

func startDaemon(t *testing.T, opt metasched.Options, edit func(*metasched.Config)) *testDaemon {
	t.Helper()
	return startDaemonGrid(t, nil, opt, edit)
}

// startDaemonGrid is startDaemon on another grid (nil: the demo's).
func startDaemonGrid(t *testing.T, g *graph.Grid, opt metasched.Options, edit func(*metasched.Config)) *testDaemon {
	t.Helper()
	cfg, grid, err := metasched.DemoConfig(t.TempDir(), "127.0.0.1:0")
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
	buf := &syncWriter{w: &bytes.Buffer{}}
	log := zerolog.New(buf).Level(zerolog.InfoLevel)
	opt.Logger = log
	opt.Connect = virt.Connector(log.Level(zerolog.WarnLevel))
	opt.Store.NoSync = true
	if opt.Tick == 0 {
		opt.Tick = 100 * time.Millisecond
	}
	ctx, cancel := context.WithCancel(context.Background())
	d, err := metasched.NewWithGrid(ctx, cfg, grid, opt)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx, ln) }()
	td := &testDaemon{d: d, addr: "http://" + ln.Addr().String(), log: buf}
	stopped := false
	td.stop = func() {
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
	t.Cleanup(td.stop)
	return td
}

// TestEndToEnd runs 100 jobs of three types with a demand shift through
// the daemon and its in-process agents: every job finishes, the pools
// follow the demand, and every VM created is destroyed.
func TestEndToEnd(t *testing.T) {
	td := startDaemon(t, metasched.Options{}, func(c *metasched.Config) { c.Executor.TimeScale = 0.0033 })
	const n, gap = 100, 200 * time.Millisecond
	stream := metasched.DemoStream(n, gap, 1)
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	var progress bytes.Buffer
	sum, err := metasched.RunDemo(ctx, td.d, stream, &progress)
	if err != nil {
		t.Fatalf("demo: %v\n%s", err, td.log)
	}
	var out bytes.Buffer
	sum.Print(&out)
	t.Logf("%s%s", progress.String(), out.String())

	done := 0
	for typ, c := range sum.Jobs {
		if c[store.Failed]+c[store.Cancelled] > 0 {
			t.Errorf("type %s: %v", typ, c)
		}
		done += c[store.Done]
	}
	if done != n {
		t.Errorf("%d jobs done, want %d", done, n)
	}
	if sum.VMsCreated == 0 || sum.VMsCreated != sum.VMsDestroyed || sum.VMsLeft != 0 {
		t.Errorf("VMs: %d created, %d destroyed, %d left", sum.VMsCreated, sum.VMsDestroyed, sum.VMsLeft)
	}
	// The shift: the first 40% of the jobs mostly render, the rest mostly
	// simulate. Before the shift more hosts move into render than out of
	// it, after it (while jobs arrive) more into sim than out of it, and
	// the pools' sizes show it.
	shift := start.Add(time.Duration(n*2/5) * gap)
	end := start.Add(time.Duration(n) * gap)
	into, outof := map[string]int{}, map[string]int{}
	for _, sw := range td.d.Switches(false) {
		if sw.Phase != "done" || sw.Started.After(end) {
			continue
		}
		phase := "1"
		if !sw.Started.Before(shift) {
			phase = "2"
		}
		into[phase+sw.To]++
		outof[phase+sw.From]++
	}
	t.Logf("switches into/out of each pool per phase: %v %v", into, outof)
	if into["1render"] <= outof["1render"] {
		t.Errorf("before the shift %d switches into render, %d out of it: want more in", into["1render"], outof["1render"])
	}
	if into["2sim"] <= outof["2sim"] {
		t.Errorf("after the shift %d switches into sim, %d out of it: want more in", into["2sim"], outof["2sim"])
	}
	if !(sum.HostsShift["render"] > sum.HostsBefore["render"] && sum.HostsShift["render"] > sum.HostsShift["sim"]) {
		t.Errorf("hosts at the shift %v (start %v): want render grown and above sim", sum.HostsShift, sum.HostsBefore)
	}
	if !(sum.HostsEnd["sim"] > sum.HostsShift["sim"] && sum.HostsEnd["sim"] > sum.HostsEnd["render"]) {
		t.Errorf("hosts at the last submission %v (shift %v): want sim grown and above render", sum.HostsEnd, sum.HostsShift)
	}
}

// syncWriter serializes writes to a buffer shared by goroutines.
type syncWriter struct {
	mu sync.Mutex
	w  *bytes.Buffer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

func (s *syncWriter) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.String()
}
