package taskfarm

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

// farm is a master on a loopback port of a test, serving in the
// background.
type farm struct {
	t    *testing.T
	m    *Master
	addr string // host:port
	done chan struct{}
	sum  *Summary
	err  error

	mu       sync.Mutex
	accepted map[uint64]string // task → the VM whose result was taken
	bad      []string          // results that are not the kernel's
}

// startFarm starts a master with the given configuration (and the
// test's logger) on 127.0.0.1 and checks every result it gets against
// the kernel.
func startFarm(t *testing.T, cfg MasterConfig) *farm {
	t.Helper()
	cfg.Log = zerolog.New(zerolog.NewTestWriter(t)).With().Str("side", "master").Logger()
	m, err := NewMaster(cfg)
	if err != nil {
		t.Fatal(err)
	}
	f := &farm{t: t, m: m, done: make(chan struct{}), accepted: map[uint64]string{}}
	m.onResult = func(vm string, task uint64, data []byte, dup bool) {
		f.mu.Lock()
		defer f.mu.Unlock()
		if d := Compute(task, cfg.TaskOps, m.input); !bytes.Equal(data, d[:m.result]) {
			f.bad = append(f.bad, fmt.Sprintf("task %d from %s: %x, want %x", task, vm, data, d[:m.result]))
		}
		if dup {
			return
		}
		if prev, ok := f.accepted[task]; ok {
			f.bad = append(f.bad, fmt.Sprintf("task %d taken from %s and again from %s", task, prev, vm))
		}
		f.accepted[task] = vm
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f.addr = ln.Addr().String()
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		defer close(f.done)
		f.sum, f.err = m.Serve(ctx, ln)
	}()
	t.Cleanup(func() {
		cancel()
		<-f.done
	})
	return f
}

// wait waits for the end of the run and checks its summary: it parses,
// every task is done and was taken once, with the kernel's result.
func (f *farm) wait() *Summary {
	f.t.Helper()
	<-f.done
	if f.err != nil {
		f.t.Fatal(f.err)
	}
	data, err := json.Marshal(f.sum)
	if err != nil {
		f.t.Fatal(err)
	}
	s, err := ParseSummary(data)
	if err != nil {
		f.t.Fatalf("the summary does not add up: %v\n%s", err, data)
	}
	if s.Done != s.Tasks {
		f.t.Errorf("done %d of %d tasks", s.Done, s.Tasks)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.accepted) != s.Tasks {
		f.t.Errorf("%d tasks taken, want %d", len(f.accepted), s.Tasks)
	}
	for _, b := range f.bad {
		f.t.Error(b)
	}
	return s
}

// waitFor polls the master's progress until cond holds (bounded by the
// test's own timeout, not measured).
func (f *farm) waitFor(what string, cond func(Summary) bool) Summary {
	f.t.Helper()
	for {
		p := f.m.Progress()
		if cond(p) {
			return p
		}
		select {
		case <-f.done:
			if p := f.m.Progress(); cond(p) {
				return p
			}
			f.t.Fatalf("the run ended before %s", what)
		case <-time.After(5 * time.Millisecond):
		}
	}
}

func workerOf(s Summary, name string) (Worker, bool) {
	for _, w := range s.Workers {
		if w.Name == name {
			return w, true
		}
	}
	return Worker{}, false
}

// group is the worker processes of one simulated VM: their connections
// come from their own loopback address, and the test may wrap them.
type group struct {
	done chan struct{}
	rep  WorkerReport
	err  error
}

// startGroup runs procs worker processes from 127.0.0.x (ip) against f,
// each connection wrapped by wrap (when not nil), with the default
// prefetch.
func startGroup(ctx context.Context, t *testing.T, f *farm, ip string, procs int, wrap func(net.Conn) net.Conn) *group {
	t.Helper()
	return startGroupWith(ctx, t, f, ip, WorkerConfig{Procs: procs}, wrap)
}

// startGroupWith is startGroup with cfg's processes and prefetch.
func startGroupWith(ctx context.Context, t *testing.T, f *farm, ip string, cfg WorkerConfig, wrap func(net.Conn) net.Conn) *group {
	t.Helper()
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
	g := &group{done: make(chan struct{})}
	cfg.Master, cfg.Name, cfg.RetryFor = f.addr, "vm-"+ip, time.Minute
	cfg.Log = zerolog.New(zerolog.NewTestWriter(t)).With().Str("side", ip).Logger()
	cfg.Dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := d.DialContext(ctx, network, addr)
		if err != nil || wrap == nil {
			return c, err
		}
		return wrap(c), nil
	}
	go func() {
		defer close(g.done)
		g.rep, g.err = RunWorkers(ctx, cfg)
	}()
	t.Cleanup(func() { <-g.done })
	return g
}

func (g *group) wait(t *testing.T) WorkerReport {
	t.Helper()
	<-g.done
	if g.err != nil {
		t.Errorf("worker group: %v", g.err)
	}
	return g.rep
}

// hostfile of the loopback tests: the master on 127.0.0.1, worker VMs on
// 127.0.0.2 and up.
const loopHostfile = `127.0.0.1 slots=1 # name=m site=a role=master
127.0.0.2 slots=2 # name=w2 site=a role=worker
127.0.0.3 slots=1 # name=w3 site=a role=worker
127.0.0.4 slots=3 # name=w4 site=b role=worker
127.0.0.5 slots=2 # name=w5 site=b role=worker
127.0.0.6 slots=1 # name=w6 site=c role=worker
`

func loopHosts(t *testing.T) []Host {
	t.Helper()
	hosts, err := ParseHostfile("hostfile", []byte(loopHostfile))
	if err != nil {
		t.Fatal(err)
	}
	return hosts
}

// Three worker VMs of two sites, six processes (those of w3 one task at
// a time, the others with the default prefetch, and w4 with the most):
// every task done once, with the kernel's result; the summary names the
// VMs and sites from the hostfile, counts their processes, and adds up.
// The results wait until every process has asked for its tasks, so that
// none finds them all done already (they take microseconds).
func TestFarmLoopback(t *testing.T) {
	const tasks = 200
	f := startFarm(t, MasterConfig{Tasks: tasks, TaskOps: 20000, TaskBytes: 4096, Hosts: loopHosts(t)})
	ctx := t.Context()
	g := newGate(0)
	gs := []*group{
		startGroup(ctx, t, f, "127.0.0.2", 2, g.wrap),
		startGroupWith(ctx, t, f, "127.0.0.3", WorkerConfig{Procs: 1, Prefetch: 1}, g.wrap),
		startGroupWith(ctx, t, f, "127.0.0.4", WorkerConfig{Procs: 3, Prefetch: MaxPrefetch}, g.wrap),
	}
	t.Cleanup(g.open)
	f.until("every process asked", allAsked(6))
	g.open()
	s := f.wait()
	sent := 0
	for _, g := range gs {
		sent += g.wait(t).Tasks
	}
	if sent != tasks || s.Reissued != 0 || s.Duplicates != 0 {
		t.Errorf("the workers sent %d results, reissued %d, duplicates %d; want %d, 0, 0", sent, s.Reissued, s.Duplicates, tasks)
	}
	if s.InputBytes != 4064 || s.ResultBytes != 32 || s.TaskOps != 20000 || s.TaskBytes != 4096 {
		t.Errorf("summary %+v", s)
	}
	// Every task's input and result went through, with their frames.
	if min := int64(tasks) * (taskHeader + 4064 + 4 + 1 + 8 + 32); s.BytesMoved < min {
		t.Errorf("bytes moved %d, want at least %d", s.BytesMoved, min)
	}
	if s.WallSeconds <= 0 {
		t.Errorf("wall seconds %g", s.WallSeconds)
	}
	procs := map[string]int{}
	for _, w := range s.Workers {
		procs[w.Name] = w.Procs
		if w.Lost || w.Tasks == 0 {
			t.Errorf("worker %+v: lost or idle", w)
		}
	}
	if want := map[string]int{"w2": 2, "w3": 1, "w4": 3}; fmt.Sprint(procs) != fmt.Sprint(want) {
		t.Errorf("workers' processes %v, want %v", procs, want)
	}
	if a, b := s.Sites["a"], s.Sites["b"]; a.Workers != 2 || b.Workers != 1 || a.Tasks+b.Tasks != tasks {
		t.Errorf("sites %+v", s.Sites)
	}
}

// killable wraps a worker's connections: kill closes them at once, with
// a reset (no FIN handshake to wait for), as the destruction of its VM
// would, or rather sooner.
type killable struct {
	mu    sync.Mutex
	conns []*net.TCPConn
}

func (k *killable) wrap(c net.Conn) net.Conn {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.conns = append(k.conns, c.(*net.TCPConn))
	return c
}

func (k *killable) kill() {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, c := range k.conns {
		_ = c.SetLinger(0) // a reset rather than a close: best effort, the close follows anyway
		c.Close()
	}
}

// watched is a worker connection whose reader watches the master's
// frames go by and calls onTask when the first task frame begins.
type watched struct {
	net.Conn
	mu     sync.Mutex
	buf    []byte
	seen   bool
	onTask func()
}

func (w *watched) Read(p []byte) (int, error) {
	n, err := w.Conn.Read(p)
	w.mu.Lock()
	fire := false
	if !w.seen {
		w.buf = append(w.buf, p[:n]...)
		for len(w.buf) >= 5 {
			if FrameType(w.buf[4]) == FrameTask {
				w.seen, fire = true, true
				break
			}
			l := 4 + int(uint32(w.buf[0])<<24|uint32(w.buf[1])<<16|uint32(w.buf[2])<<8|uint32(w.buf[3]))
			if len(w.buf) < l {
				break
			}
			w.buf = w.buf[l:]
		}
	}
	w.mu.Unlock()
	if fire {
		w.onTask()
	}
	return n, err
}

// frozen is a worker connection that, once its first task has begun,
// stops: its reads and writes block until release is closed, as a VM
// that is gone without a word.
type frozen struct {
	*watched
	stop    chan struct{} // closed at the first task
	release <-chan struct{}
}

func (f *frozen) Read(p []byte) (int, error) {
	select {
	case <-f.stop:
		<-f.release
		return 0, net.ErrClosed
	default:
	}
	return f.watched.Read(p)
}

func (f *frozen) Write(p []byte) (int, error) {
	select {
	case <-f.stop:
		<-f.release
		return 0, net.ErrClosed
	default:
	}
	return f.watched.Conn.Write(p)
}

// paused is a worker connection whose reads and writes stop for pause
// once its first task has begun, as a live-migrated VM's do.
type paused struct {
	*watched
	mu    sync.Mutex
	until time.Time
}

func (p *paused) wait() {
	p.mu.Lock()
	d := time.Until(p.until)
	p.mu.Unlock()
	if d > 0 {
		time.Sleep(d)
	}
}

func (p *paused) Read(b []byte) (int, error)  { p.wait(); return p.watched.Read(b) }
func (p *paused) Write(b []byte) (int, error) { p.wait(); return p.watched.Conn.Write(b) }

// A worker VM killed while it holds tasks, and one that goes silent
// without closing its connection, holding its first task (its second
// request waits for a result, which never comes): both are lost, all
// their tasks given to others; one paused for less than the
// timeout (a live migration) is not lost; the run ends with every task
// done once.
func TestFarmLosesWorkers(t *testing.T) {
	const tasks = 120
	f := startFarm(t, MasterConfig{Tasks: tasks, TaskOps: 50000, TaskBytes: 1024, WorkerTimeout: 3 * time.Second, Hosts: loopHosts(t)})
	ctx := t.Context()

	// w2, two processes, killed as soon as a task reaches it.
	victim := &killable{}
	vctx, vcancel := context.WithCancel(ctx)
	defer vcancel()
	g2 := startGroup(vctx, t, f, "127.0.0.2", 2, func(c net.Conn) net.Conn {
		victim.wrap(c)
		return &watched{Conn: c, onTask: func() { victim.kill(); vcancel() }}
	})
	<-g2.done
	if !errors.Is(g2.err, context.Canceled) {
		t.Errorf("the killed worker: %v, want context.Canceled", g2.err)
	}
	p := f.waitFor("w2 is lost", func(s Summary) bool { w, _ := workerOf(s, "w2"); return w.Lost })
	t.Logf("w2 killed: %+v", p.Workers)

	// w3 goes silent holding its first task (the second it asked for
	// with it waits for a result): it is dropped after the timeout.
	release := make(chan struct{})
	defer close(release)
	sctx, scancel := context.WithCancel(ctx)
	defer scancel()
	startGroup(sctx, t, f, "127.0.0.3", 1, func(c net.Conn) net.Conn {
		fz := &frozen{stop: make(chan struct{}), release: release}
		var once sync.Once
		fz.watched = &watched{Conn: c, onTask: func() { once.Do(func() { close(fz.stop) }) }}
		return fz
	})
	f.waitFor("w3 is lost", func(s Summary) bool { w, _ := workerOf(s, "w3"); return w.Lost })
	scancel() // its processes stop trying

	// w4 pauses for 0.3 s at its first task, as a live migration does;
	// w5 and w6 work on.
	g4 := startGroup(ctx, t, f, "127.0.0.4", 1, func(c net.Conn) net.Conn {
		p := &paused{}
		p.watched = &watched{Conn: c, onTask: func() {
			p.mu.Lock()
			p.until = time.Now().Add(300 * time.Millisecond)
			p.mu.Unlock()
		}}
		return p
	})
	g5 := startGroup(ctx, t, f, "127.0.0.5", 2, nil)
	g6 := startGroup(ctx, t, f, "127.0.0.6", 1, nil)
	s := f.wait()
	for _, g := range []*group{g4, g5, g6} {
		g.wait(t)
	}
	t.Logf("summary: reissued %d, duplicates %d, workers %+v, sites %+v", s.Reissued, s.Duplicates, s.Workers, s.Sites)
	w2, _ := workerOf(*s, "w2")
	w3, _ := workerOf(*s, "w3")
	w4, _ := workerOf(*s, "w4")
	// Each of its processes got a task, and may have got the other's
	// when that one's connection was lost first.
	if !w2.Lost || w2.LostInFlight < 1 || w2.LostInFlight > 2*DefaultPrefetch || w2.Tasks != 0 || w2.Procs != 2 {
		t.Errorf("killed worker %+v: want lost with its tasks in flight", w2)
	}
	if !w3.Lost || w3.LostInFlight != 1 || w3.Tasks != 0 {
		t.Errorf("silent worker %+v: want lost with its 1 task in flight", w3)
	}
	if w4.Lost || w4.LostInFlight != 0 || w4.Tasks == 0 {
		t.Errorf("paused worker %+v: want not lost, with tasks done", w4)
	}
	if s.Reissued != w2.LostInFlight+w3.LostInFlight || s.Duplicates != 0 {
		t.Errorf("reissued %d, duplicates %d; want %d (the tasks of the lost workers), 0", s.Reissued, s.Duplicates, w2.LostInFlight+w3.LostInFlight)
	}
	if a := s.Sites["a"]; a.Workers != 2 || a.Lost != 2 || a.Tasks != 0 {
		t.Errorf("site a %+v: want its 2 workers lost", a)
	}
}

// A worker whose connection is lost while it computes sends the result
// on its next connection: the master takes it, or counts a duplicate
// when another worker did the task meanwhile; no task counts twice.
func TestFarmResultAfterReconnect(t *testing.T) {
	f := startFarm(t, MasterConfig{Tasks: 3, TaskOps: 1000, TaskBytes: 100, WorkerTimeout: 2 * time.Second})
	c := rawConn(t, f, "127.0.0.7")
	c.hello(1, 0)
	c.expect(FrameWelcome)
	c.send(Frame{Type: FrameRequest})
	task := c.expect(FrameTask)
	c.close() // lost while it computes

	f.waitFor("the task is back", func(s Summary) bool { return s.Workers[0].Lost })
	// It comes back with its result: taken (the task was not given
	// again yet).
	c = rawConn(t, f, "127.0.0.7")
	c.hello(1, 0)
	c.expect(FrameWelcome)
	d := Compute(task.Task, task.Ops, task.Data)
	c.send(Frame{Type: FrameResult, Task: task.Task, Data: d[:32]})
	next := c.expect(FrameTask)
	if next.Task == task.Task {
		t.Fatalf("task %d given again after its result", task.Task)
	}
	// This one is lost too, and done by another worker.
	c.close()
	g := startGroup(t.Context(), t, f, "127.0.0.8", 1, nil)
	f.waitFor("the other worker did it", func(s Summary) bool { return s.Done == 3 })
	g.wait(t)
	s := f.wait()
	if s.Reissued != 1 || s.Duplicates != 0 {
		t.Errorf("reissued %d, duplicates %d; want 1, 0", s.Reissued, s.Duplicates)
	}
	if w, _ := workerOf(*s, "127.0.0.7"); w.Tasks != 1 || !w.Lost || w.LostInFlight != 2 {
		t.Errorf("the worker lost twice: %+v", w)
	}
}

// A connection of prefetch 2, alone, gets one task for its two requests
// (the second waits for a result), then holds two tasks and may send
// their results in any order, each asking for the next; lost holding
// two, it loses both, which go to the connections that wait for a task
// at the end of the run, the one holding the fewest first: every task
// done once, none lost, its summary counting the two in flight.
func TestFarmPrefetch(t *testing.T) {
	f := startFarm(t, MasterConfig{Tasks: 4, TaskOps: 1000, TaskBytes: 100})
	a, t0 := askTwice(t, f, "127.0.0.7")
	a.send(result(t0)) // it asks again: the waiting request and this one
	t1, t2 := a.expect(FrameTask), a.expect(FrameTask)
	a.send(result(t2)) // the second first
	t3 := a.expect(FrameTask)
	if got := []uint64{t0.Task, t1.Task, t2.Task, t3.Task}; fmt.Sprint(got) != "[0 1 2 3]" {
		t.Fatalf("tasks given %v, want 0 to 3 in order", got)
	}

	// Every task is given: b (prefetch 2) parks both its requests, then
	// c (prefetch 1) its one.
	b := rawConn(t, f, "127.0.0.8")
	b.helloPrefetch(1, 0, 2)
	b.expect(FrameWelcome)
	b.send(Frame{Type: FrameRequest})
	b.send(Frame{Type: FrameRequest})
	// b parks first: the master reads each connection on its own, so c's
	// request, sent later on another connection, could otherwise park
	// before b's (the test failed so on a loaded machine).
	f.waitFor("b waits with both its requests", func(Summary) bool {
		f.m.mu.Lock()
		defer f.m.mu.Unlock()
		return len(f.m.waiting) == 1 && f.m.waiting[0].wants == 2
	})
	c := rawConn(t, f, "127.0.0.9")
	c.hello(1, 0)
	c.expect(FrameWelcome)
	c.send(Frame{Type: FrameRequest})
	f.waitFor("b and c wait", func(Summary) bool {
		f.m.mu.Lock()
		defer f.m.mu.Unlock()
		return len(f.m.waiting) == 2
	})

	// a is lost holding 1 and 3: 1, which it got first, goes to b (the
	// first parked), 3 to c, which holds nothing, before b's second
	// request.
	a.close()
	if tb := b.expect(FrameTask); tb.Task != t1.Task {
		t.Errorf("b got task %d, want %d", tb.Task, t1.Task)
	} else {
		b.send(result(tb))
	}
	if tc := c.expect(FrameTask); tc.Task != t3.Task {
		t.Errorf("c got task %d, want %d", tc.Task, t3.Task)
	} else {
		c.send(result(tc))
	}
	endRaw(t, f, 2, []Worker{
		{Name: "127.0.0.7", Address: "127.0.0.7", Procs: 1, Tasks: 2, Lost: true, LostInFlight: 2},
		{Name: "127.0.0.8", Address: "127.0.0.8", Procs: 1, Tasks: 1},
		{Name: "127.0.0.9", Address: "127.0.0.9", Procs: 1, Tasks: 1},
	}, b, c)
}

// A duplicate: the result of a task the master gave again and took from
// the other worker first.
func TestFarmDuplicate(t *testing.T) {
	f := startFarm(t, MasterConfig{Tasks: 2, TaskOps: 10, TaskBytes: 10})
	a := rawConn(t, f, "127.0.0.7")
	a.hello(1, 0)
	a.expect(FrameWelcome)
	a.send(Frame{Type: FrameRequest})
	ta := a.expect(FrameTask)
	a.close()
	f.waitFor("a is lost", func(s Summary) bool { return len(s.Workers) == 1 && s.Workers[0].Lost })

	b := rawConn(t, f, "127.0.0.8")
	b.hello(1, 0)
	b.expect(FrameWelcome)
	b.send(Frame{Type: FrameRequest})
	tb := b.expect(FrameTask)
	if tb.Task != ta.Task {
		t.Fatalf("b got task %d, want a's task %d first", tb.Task, ta.Task)
	}
	d := Compute(tb.Task, tb.Ops, tb.Data)
	b.send(Frame{Type: FrameResult, Task: tb.Task, Data: d[:5]})
	other := b.expect(FrameTask)

	// a is back with the result of the task b did: a duplicate; then it
	// gets the last task... which b holds: it waits.
	a = rawConn(t, f, "127.0.0.7")
	a.hello(1, 0)
	a.expect(FrameWelcome)
	a.send(Frame{Type: FrameResult, Task: ta.Task, Data: d[:5]})
	f.waitFor("the duplicate", func(s Summary) bool { return s.Duplicates == 1 })
	d = Compute(other.Task, other.Ops, other.Data)
	b.send(Frame{Type: FrameResult, Task: other.Task, Data: d[:5]})
	b.expect(FrameDone)
	a.expect(FrameDone)
	a.close()
	b.close()
	s := f.wait()
	if s.Duplicates != 1 || s.Reissued != 1 || s.Workers[0].Tasks != 0 || s.Workers[1].Tasks != 2 {
		t.Errorf("summary %+v", s)
	}
	if s.Workers[0].Lost {
		t.Errorf("a came back before the end: %+v", s.Workers[0])
	}
}

// raw is a test's own worker connection, speaking frames directly.
type raw struct {
	t  *testing.T
	c  net.Conn
	br *bufio.Reader
}

func rawConn(t *testing.T, f *farm, ip string) *raw {
	t.Helper()
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
	c, err := d.Dial("tcp", f.addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &raw{t: t, c: c, br: bufio.NewReader(c)}
}

func (r *raw) send(f Frame) {
	r.t.Helper()
	b, err := AppendFrame(nil, f)
	if err != nil {
		r.t.Fatal(err)
	}
	r.write(b)
}

func (r *raw) write(b []byte) {
	r.t.Helper()
	if _, err := r.c.Write(b); err != nil {
		r.t.Fatal(err)
	}
}

// hello says hello with a prefetch of 1: one task at a time.
func (r *raw) hello(procs, proc uint16) { r.helloPrefetch(procs, proc, 1) }

func (r *raw) helloPrefetch(procs, proc, prefetch uint16) {
	r.send(Frame{Type: FrameHello, Version: ProtocolVersion, Procs: procs, Proc: proc, Prefetch: prefetch, Name: "raw"})
}

// expect reads frames, heartbeats aside, until one comes; it must be of
// type want.
func (r *raw) expect(want FrameType) Frame {
	r.t.Helper()
	for {
		f, err := ReadFrame(r.br, 1<<20)
		if err != nil {
			r.t.Fatalf("waiting for %s: %v", want, err)
		}
		if f.Type == FrameHeartbeat {
			continue
		}
		if f.Type != want {
			r.t.Fatalf("got %+v, want a %s frame", f, want)
		}
		return f
	}
}

// closed reads until the master closes the connection.
func (r *raw) closed() {
	r.t.Helper()
	for {
		f, err := ReadFrame(r.br, 1<<20)
		if err != nil {
			return
		}
		if f.Type != FrameHeartbeat {
			r.t.Fatalf("got %+v, want the end of the connection", f)
		}
	}
}

func (r *raw) close() { r.c.Close() }

// Workers that break the protocol get an error frame naming what is
// wrong and are dropped (their tasks given to others): among them a
// request or a result beyond the connection's prefetch, and a hello of
// version 1; the run goes on and ends well.
func TestMasterProtocolErrors(t *testing.T) {
	f := startFarm(t, MasterConfig{Tasks: 4, TaskOps: 100, TaskBytes: 100})
	for _, c := range []struct {
		name, want string
		do         func(r *raw)
	}{
		{"not hello first", "the first frame must be hello, not request", func(r *raw) { r.send(Frame{Type: FrameRequest}) }},
		{"another version", "hello: version: 9, this master speaks version 2", func(r *raw) {
			r.send(Frame{Type: FrameHello, Version: 9, Procs: 1, Prefetch: 1})
		}},
		{"a hello of version 1", "hello: version: 1, this master speaks version 2", func(r *raw) {
			r.write(frameBytes(cat([]byte{byte(FrameHello)}, u16(1), u16(1), u16(0), []byte("old-worker"))...))
		}},
		{"bad frame", "length: 5000", func(r *raw) { r.write(u32(5000)) }},
		{"unknown task", "result: task: 999 is not a task of this run (0 to 3)", func(r *raw) {
			r.hello(1, 0)
			r.expect(FrameWelcome)
			r.send(Frame{Type: FrameResult, Task: 999, Data: make([]byte, 32)})
		}},
		{"result size", "result: 3 bytes, want 32", func(r *raw) {
			r.hello(1, 0)
			r.expect(FrameWelcome)
			r.send(Frame{Type: FrameResult, Task: 1, Data: make([]byte, 3)})
		}},
		{"second request", "request: it holds its prefetch of 1 already (tasks given: [", func(r *raw) {
			r.hello(1, 0)
			r.expect(FrameWelcome)
			r.send(Frame{Type: FrameRequest})
			r.expect(FrameTask)
			r.send(Frame{Type: FrameRequest})
		}},
		{"another task's result", "is not one the connection holds, and it holds its prefetch of 1 already", func(r *raw) {
			r.hello(1, 0)
			r.expect(FrameWelcome)
			r.send(Frame{Type: FrameRequest})
			if tk := r.expect(FrameTask); tk.Task == 3 {
				r.send(Frame{Type: FrameResult, Task: 2, Data: make([]byte, 32)})
				return
			}
			r.send(Frame{Type: FrameResult, Task: 3, Data: make([]byte, 32)})
		}},
		// With a prefetch of 2, the second request waits for a result:
		// the connection holds one task and one request.
		{"third request with a prefetch of 2", "request: it holds its prefetch of 2 already (tasks given: [", func(r *raw) {
			r.helloPrefetch(1, 0, 2)
			r.expect(FrameWelcome)
			r.send(Frame{Type: FrameRequest})
			r.send(Frame{Type: FrameRequest})
			r.expect(FrameTask)
			r.send(Frame{Type: FrameRequest})
		}},
		{"another task's result with a prefetch of 2", "is not one the connection holds, and it holds its prefetch of 2 already", func(r *raw) {
			r.helloPrefetch(1, 0, 2)
			r.expect(FrameWelcome)
			r.send(Frame{Type: FrameRequest})
			r.send(Frame{Type: FrameRequest})
			a := r.expect(FrameTask)
			other := uint64(0)
			for other == a.Task {
				other++
			}
			r.send(Frame{Type: FrameResult, Task: other, Data: make([]byte, 32)})
		}},
		{"a master's frame", "a worker sends no done frame", func(r *raw) {
			r.hello(1, 0)
			r.expect(FrameWelcome)
			r.send(Frame{Type: FrameDone})
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := rawConn(t, f, "127.0.0.9")
			c.do(r)
			e := r.expect(FrameError)
			if !strings.Contains(e.Message, c.want) {
				t.Errorf("error frame %q, want it to say %q", e.Message, c.want)
			}
			r.closed()
			// Its tasks are back before the next one asks (else they
			// could go to the next one's waiting request).
			f.until("the connection is dropped", func(m *Master) bool { return len(m.conns) == 0 })
		})
	}
	g := startGroup(t.Context(), t, f, "127.0.0.2", 1, nil)
	s := f.wait()
	g.wait(t)
	// Each task the dropped connections held (one each, four) went to
	// another.
	if s.Reissued != 4 || s.Duplicates != 0 {
		t.Errorf("reissued %d, duplicates %d; want the 4 tasks the dropped connections held, 0", s.Reissued, s.Duplicates)
	}
}

// A worker that comes after the end of the run is told so and exits
// well, and does not enter the summary; a raw hello after the end gets
// the welcome and done.
func TestFarmLateWorker(t *testing.T) {
	f := startFarm(t, MasterConfig{Tasks: 5, TaskOps: 100, TaskBytes: 100, Linger: time.Hour})
	// A connection that stays open keeps the master lingering.
	stay := rawConn(t, f, "127.0.0.9")
	stay.hello(1, 0)
	stay.expect(FrameWelcome)
	g := startGroup(t.Context(), t, f, "127.0.0.2", 2, nil)
	<-f.m.Over()
	g.wait(t)
	late := startGroup(t.Context(), t, f, "127.0.0.3", 2, nil)
	if rep := late.wait(t); rep.Tasks != 0 {
		t.Errorf("the late worker sent %d results", rep.Tasks)
	}
	r := rawConn(t, f, "127.0.0.4")
	r.hello(1, 0)
	r.expect(FrameWelcome)
	r.expect(FrameDone)
	r.send(Frame{Type: FrameRequest})
	r.send(Frame{Type: FrameResult, Task: 1, Data: make([]byte, 32)})
	r.close()
	stay.send(Frame{Type: FrameRequest})
	stay.expect(FrameDone)
	stay.close()
	s := f.wait()
	if len(s.Workers) != 2 {
		t.Errorf("workers %+v, want the two before the end", s.Workers)
	}
}

// Workers whose master cannot be reached give up after their retry
// period, saying so; one that a master refuses says why.
func TestWorkerGivesUp(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	_, err = RunWorkers(t.Context(), WorkerConfig{Master: addr, Procs: 2, RetryFor: 300 * time.Millisecond, Log: zerolog.Nop()})
	if !errors.Is(err, ErrMasterGone) || !strings.Contains(err.Error(), "no answer from "+addr+" for ") {
		t.Errorf("no master: %v, want ErrMasterGone naming the address", err)
	}

	// A master of another version.
	ln, err = net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				if _, err := ReadFrame(c, MaxControlFrame); err != nil {
					return
				}
				b, err := AppendFrame(nil, Frame{Type: FrameError, Message: "hello: version: 1, this master speaks version 2"})
				if err != nil {
					t.Error(err)
					return
				}
				// A failed write shows as the worker's error below not naming the version.
				_, _ = c.Write(b)
			}()
		}
	}()
	_, err = RunWorkers(t.Context(), WorkerConfig{Master: ln.Addr().String(), Procs: 1, Log: zerolog.Nop()})
	if !errors.Is(err, ErrMasterRefused) || !strings.Contains(err.Error(), "this master speaks version 2") {
		t.Errorf("refused: %v", err)
	}
}

// A master and a worker with a bad configuration say which field.
func TestBadConfig(t *testing.T) {
	for _, c := range []struct {
		cfg  MasterConfig
		want string
	}{
		{MasterConfig{Tasks: 0, TaskOps: 1}, "tasks: 0"},
		{MasterConfig{Tasks: 1}, "task_ops: 0"},
		{MasterConfig{Tasks: 1, TaskOps: 1, TaskBytes: -1}, "task_bytes: -1"},
		{MasterConfig{Tasks: 1, TaskOps: 1, TaskBytes: MaxTaskBytes + 1}, "task_bytes: 268435457"},
		{MasterConfig{Tasks: 1, TaskOps: 1, WorkerTimeout: time.Millisecond}, "worker_timeout: 1ms"},
		{MasterConfig{Tasks: 1, TaskOps: 1, Linger: -1}, "linger"},
		{MasterConfig{Tasks: 1, TaskOps: 1, Hosts: append(loopHosts(t), loopHosts(t)[0])}, "hosts: 127.0.0.1 is listed twice"},
	} {
		if _, err := NewMaster(c.cfg); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("NewMaster(%+v) = %v, want an error saying %q", c.cfg, err, c.want)
		}
	}
	for _, c := range []struct {
		cfg  WorkerConfig
		want string
	}{
		{WorkerConfig{Procs: 1}, "master: empty"},
		{WorkerConfig{Master: "10.0.0.1", Procs: 1}, "master: address 10.0.0.1: missing port"},
		{WorkerConfig{Master: "10.0.0.1:7420", Procs: 0}, "procs: 0"},
		{WorkerConfig{Master: "10.0.0.1:7420", Procs: 1, RetryFor: -1}, "retry_for"},
		{WorkerConfig{Master: "10.0.0.1:7420", Procs: 1, Name: strings.Repeat("n", 256)}, "name: 256 bytes"},
		{WorkerConfig{Master: "10.0.0.1:7420", Procs: 1, Prefetch: -1}, "prefetch: -1, want from 1 to 16"},
		{WorkerConfig{Master: "10.0.0.1:7420", Procs: 1, Prefetch: 17}, "prefetch: 17, want from 1 to 16"},
	} {
		if _, err := RunWorkers(t.Context(), c.cfg); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("RunWorkers(%+v) = %v, want an error saying %q", c.cfg, err, c.want)
		}
	}
}

// BenchmarkTaskFarmLoopback is the task farm's throughput over loopback
// (tasks/s): runs of 200 small tasks (1,000 operations, 1 KiB) by one
// worker VM of two processes, one task at a time each and with the
// default prefetch.
func BenchmarkTaskFarmLoopback(b *testing.B) {
	const tasks = 200
	for _, prefetch := range []int{1, DefaultPrefetch} {
		b.Run(fmt.Sprintf("prefetch=%d", prefetch), func(b *testing.B) {
			var total time.Duration
			for b.Loop() {
				m, err := NewMaster(MasterConfig{Tasks: tasks, TaskOps: 1000, TaskBytes: 1024, Log: zerolog.Nop()})
				if err != nil {
					b.Fatal(err)
				}
				ln, err := net.Listen("tcp", "127.0.0.1:0")
				if err != nil {
					b.Fatal(err)
				}
				start := time.Now()
				werr := make(chan error, 1)
				go func() {
					_, err := RunWorkers(b.Context(), WorkerConfig{Master: ln.Addr().String(), Procs: 2, Prefetch: prefetch, Log: zerolog.Nop()})
					werr <- err
				}()
				s, err := m.Serve(b.Context(), ln)
				if err != nil || s.Done != tasks {
					b.Fatal(s, err)
				}
				total += time.Since(start)
				if err := <-werr; err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(tasks*b.N)/total.Seconds(), "tasks/s")
		})
	}
}

// A master of the most tasks a job may have (10 million) holds them in
// little memory: a bit each, not a queue of task numbers, so that it runs
// in a small VM.
func TestMasterMemory(t *testing.T) {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	m, err := NewMaster(MasterConfig{Tasks: 10_000_000, TaskOps: 1, TaskBytes: 0})
	if err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	if n := after.TotalAlloc - before.TotalAlloc; n > 4<<20 {
		t.Errorf("a master of 10 million tasks allocated %d bytes, want at most 4 MiB", n)
	}
	runtime.KeepAlive(m)
}
