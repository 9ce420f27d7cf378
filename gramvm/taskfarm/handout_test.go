package taskfarm

import (
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"slices"
	"sync"
	"testing"
	"time"
)

// frameTally follows one direction of a connection's byte stream and
// counts the frames by type as their headers go by (a frame may span
// reads or writes).
type frameTally struct {
	hdr  []byte // the header read so far: length and type, 5 bytes
	skip int    // the bytes of the current frame's payload still to come
	n    map[FrameType]int
}

func (ft *frameTally) feed(p []byte) {
	if ft.n == nil {
		ft.n = map[FrameType]int{}
	}
	for len(p) > 0 {
		if ft.skip > 0 {
			k := min(ft.skip, len(p))
			ft.skip -= k
			p = p[k:]
			continue
		}
		k := min(5-len(ft.hdr), len(p))
		ft.hdr = append(ft.hdr, p[:k]...)
		p = p[k:]
		if len(ft.hdr) == 5 {
			ft.n[FrameType(ft.hdr[4])]++
			ft.skip = int(binary.BigEndian.Uint32(ft.hdr[:4])) - 1
			ft.hdr = ft.hdr[:0]
		}
	}
}

// gate holds back the results of worker connections: each connection
// sends its first free results, and the others wait until open is
// called. It counts every connection's tasks received and results sent.
type gate struct {
	free int
	open func()
	ch   chan struct{}

	mu    sync.Mutex
	conns []*gated
}

func newGate(free int) *gate {
	g := &gate{free: free, ch: make(chan struct{})}
	var once sync.Once
	g.open = func() { once.Do(func() { close(g.ch) }) }
	return g
}

func (g *gate) wrap(c net.Conn) net.Conn {
	g.mu.Lock()
	defer g.mu.Unlock()
	gc := &gated{Conn: c, g: g}
	g.conns = append(g.conns, gc)
	return gc
}

// results is the results each connection sent, in the order they
// connected.
func (g *gate) results() []int {
	g.mu.Lock()
	defer g.mu.Unlock()
	var r []int
	for _, c := range g.conns {
		c.mu.Lock()
		r = append(r, c.out.n[FrameResult])
		c.mu.Unlock()
	}
	return r
}

// gated is a worker connection of a gate. A worker writes a result frame
// alone (but for the first write of a connection after a lost one, which
// these tests do not lose).
type gated struct {
	net.Conn
	g *gate

	mu      sync.Mutex
	in, out frameTally
}

func (c *gated) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.mu.Lock()
	c.in.feed(p[:n])
	c.mu.Unlock()
	return n, err
}

func (c *gated) Write(p []byte) (int, error) {
	if len(p) >= 5 && FrameType(p[4]) == FrameResult {
		c.mu.Lock()
		sent := c.out.n[FrameResult]
		c.mu.Unlock()
		if sent >= c.g.free {
			<-c.g.ch
		}
	}
	c.mu.Lock()
	c.out.feed(p)
	c.mu.Unlock()
	return c.Conn.Write(p)
}

// until polls the master's state, under its lock, until cond holds
// (bounded by the test's own timeout, not measured).
func (f *farm) until(what string, cond func(m *Master) bool) {
	f.t.Helper()
	for {
		f.m.mu.Lock()
		ok := cond(f.m)
		f.m.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-f.done:
			f.t.Fatalf("the run ended before %s", what)
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// live is the master's worker connections registered and open (under
// m.mu).
func live(m *Master) []*mconn {
	var cs []*mconn
	for mc := range m.conns {
		if mc.vm != nil && !mc.ended && !mc.told {
			cs = append(cs, mc)
		}
	}
	return cs
}

// allAsked: n connections are open, each having asked for its prefetch
// of tasks (given or parked).
func allAsked(n int) func(m *Master) bool {
	return func(m *Master) bool {
		cs := live(m)
		if len(cs) != n {
			return false
		}
		for _, mc := range cs {
			if mc.held() != mc.prefetch {
				return false
			}
		}
		return true
	}
}

// result is a worker's result frame for task tk: its computation's first
// 32 bytes.
func result(tk Frame) Frame {
	d := Compute(tk.Task, tk.Ops, tk.Data)
	return Frame{Type: FrameResult, Task: tk.Task, Data: d[:32]}
}

// askTwice opens a raw connection from ip with a prefetch of 2, asks for
// two tasks, and returns it with the one task the master gives at once.
func askTwice(t *testing.T, f *farm, ip string) (*raw, Frame) {
	t.Helper()
	c := rawConn(t, f, ip)
	c.helloPrefetch(1, 0, 2)
	c.expect(FrameWelcome)
	c.send(Frame{Type: FrameRequest})
	c.send(Frame{Type: FrameRequest})
	return c, c.expect(FrameTask)
}

// vmProcs is a worker VM of gatedGroups: its address and processes.
type vmProcs struct {
	ip    string
	procs int
}

// gatedGroups starts a worker group for each VM on f, their results held
// back by a gate, and waits until every process has asked for its tasks;
// the caller opens the gate.
func gatedGroups(t *testing.T, f *farm, vms ...vmProcs) (*gate, []*group) {
	t.Helper()
	g := newGate(0)
	var gs []*group
	procs := 0
	for _, v := range vms {
		gs = append(gs, startGroup(t.Context(), t, f, v.ip, v.procs, g.wrap))
		procs += v.procs
	}
	t.Cleanup(g.open)
	f.until("every process asked", allAsked(procs))
	return g, gs
}

// A small job: 4 tasks on 2 worker VMs of 2 processes each, with the
// default prefetch of 2. Once every process has connected and asked for
// its two tasks (the results are held back until then), each process
// computes exactly one task: no process gets a second one while another
// holds none, so the job takes one task's time, as planned.
func TestFarmIdleBeforePrefetch(t *testing.T) {
	f := startFarm(t, MasterConfig{Tasks: 4, TaskOps: 20000, TaskBytes: 1024, Hosts: loopHosts(t)})
	g, gs := gatedGroups(t, f, vmProcs{"127.0.0.2", 2}, vmProcs{"127.0.0.4", 2})
	g.open()
	s := f.wait()
	for _, gr := range gs {
		if rep := gr.wait(t); rep.Tasks != 2 {
			t.Errorf("a worker VM of 2 processes sent %d results, want 2", rep.Tasks)
		}
	}
	if r := g.results(); fmt.Sprint(r) != "[1 1 1 1]" {
		t.Errorf("results per connection %v, want one each: [1 1 1 1]", r)
	}
	if s.Reissued != 0 || s.Duplicates != 0 {
		t.Errorf("reissued %d, duplicates %d; want 0, 0", s.Reissued, s.Duplicates)
	}
	for _, w := range s.Workers {
		if w.Tasks != 2 {
			t.Errorf("worker %+v: want 2 tasks, one per process", w)
		}
	}
}

// One task and five processes (two VMs, 3 and 2 processes) that have
// all asked: one process gets the task, the others none, and the task is
// given once.
func TestFarmOneTaskManyProcs(t *testing.T) {
	f := startFarm(t, MasterConfig{Tasks: 1, TaskOps: 20000, TaskBytes: 1024, Hosts: loopHosts(t)})
	g, gs := gatedGroups(t, f, vmProcs{"127.0.0.4", 3}, vmProcs{"127.0.0.5", 2})
	f.m.mu.Lock()
	holding := 0
	for _, mc := range live(f.m) {
		if len(mc.tasks) > 0 {
			holding++
		}
	}
	f.m.mu.Unlock()
	if holding != 1 {
		t.Errorf("%d connections hold a task, want 1", holding)
	}
	g.open()
	s := f.wait()
	sent := 0
	for _, gr := range gs {
		sent += gr.wait(t).Tasks
	}
	r := g.results()
	slices.Sort(r)
	if fmt.Sprint(r) != "[0 0 0 0 1]" || sent != 1 {
		t.Errorf("results per connection %v (%d in all), want one process's one result", r, sent)
	}
	if s.Done != 1 || s.Reissued != 0 || s.Duplicates != 0 {
		t.Errorf("done %d, reissued %d, duplicates %d; want 1, 0, 0", s.Done, s.Reissued, s.Duplicates)
	}
}

// More tasks than processes: the prefetch still happens. Each of the 4
// processes may send its first result; its second waits until every
// process holds two tasks at once (the one it computed, whose result
// waits, and the next), which it does only if it was given a task
// beyond the one it computes. Then the run goes on to its end: every
// task done once, with the kernel's result.
func TestFarmPrefetchWithMoreTasks(t *testing.T) {
	const tasks = 40
	f := startFarm(t, MasterConfig{Tasks: tasks, TaskOps: 20000, TaskBytes: 1024, Hosts: loopHosts(t)})
	g := newGate(1)
	ctx := t.Context()
	gs := []*group{
		startGroup(ctx, t, f, "127.0.0.2", 2, g.wrap),
		startGroup(ctx, t, f, "127.0.0.4", 2, g.wrap),
	}
	t.Cleanup(g.open)
	f.until("every process holds two tasks", func(m *Master) bool {
		cs := live(m)
		if len(cs) != 4 {
			return false
		}
		for _, mc := range cs {
			if len(mc.tasks) != DefaultPrefetch {
				return false
			}
		}
		return true
	})
	g.open()
	s := f.wait()
	sent := 0
	for _, gr := range gs {
		sent += gr.wait(t).Tasks
	}
	if sent != tasks || s.Done != tasks || s.Reissued != 0 || s.Duplicates != 0 {
		t.Errorf("results sent %d, done %d, reissued %d, duplicates %d; want %d, %d, 0, 0", sent, s.Done, s.Reissued, s.Duplicates, tasks, tasks)
	}
	for i, n := range g.results() {
		if n < 2 {
			t.Errorf("connection %d sent %d results, want 2 at least", i, n)
		}
	}
}

// The order of the handout, step by step: a connection's first request
// is served at once, its second (a prefetch) waits for a result, and a
// result serves the connection that holds no task before any other's
// prefetch; the prefetch then goes to every connection in turn, those
// that hold the fewest tasks first.
func TestFarmHandoutOrder(t *testing.T) {
	f := startFarm(t, MasterConfig{Tasks: 6, TaskOps: 1000, TaskBytes: 100})
	var conns [2]*mconn // a and b on the master's side
	asked := func(i int, ip string) func(m *Master) bool {
		return func(m *Master) bool {
			for _, mc := range live(m) {
				if mc.addr.String() == ip && mc.held() == 2 {
					conns[i] = mc
					return true
				}
			}
			return false
		}
	}
	state := func(mc *mconn) string {
		f.m.mu.Lock()
		defer f.m.mu.Unlock()
		return fmt.Sprintf("tasks %v, requests waiting %d", mc.tasks, mc.wants)
	}

	a, a0 := askTwice(t, f, "127.0.0.7")
	f.until("a asked twice", asked(0, "127.0.0.7"))
	if got := state(conns[0]); got != "tasks [0], requests waiting 1" {
		t.Fatalf("a, alone, asked for 2 tasks: %s; want one given and the prefetch waiting", got)
	}
	b, b0 := askTwice(t, f, "127.0.0.8")
	f.until("b asked twice", asked(1, "127.0.0.8"))
	if got := state(conns[1]); got != "tasks [1], requests waiting 1" {
		t.Fatalf("b: %s; want one given and the prefetch waiting", got)
	}

	// a's result: a, holding nothing, gets a task first, then a and b
	// their prefetch (b has sent no result: it holds two).
	a.send(result(a0))
	a1, a2 := a.expect(FrameTask), a.expect(FrameTask)
	b1 := b.expect(FrameTask)
	// b's result: its prefetch again, the last task.
	b.send(result(b0))
	b2 := b.expect(FrameTask)
	got := fmt.Sprint([]uint64{a0.Task, a1.Task, a2.Task}, []uint64{b0.Task, b1.Task, b2.Task})
	if got != "[0 2 3] [1 4 5]" {
		t.Errorf("tasks given to a and b: %s, want [0 2 3] [1 4 5]", got)
	}
	for _, tk := range []Frame{a1, a2} {
		a.send(result(tk))
	}
	for _, tk := range []Frame{b1, b2} {
		b.send(result(tk))
	}
	a.expect(FrameDone)
	b.expect(FrameDone)
	a.close()
	b.close()
	s := f.wait()
	if s.Reissued != 0 || s.Duplicates != 0 || len(s.Workers) != 2 || s.Workers[0].Tasks != 3 || s.Workers[1].Tasks != 3 {
		t.Errorf("summary %+v", s)
	}
}

// A lost connection's tasks are given again, at once, to the waiting
// requests: the connection that holds no task first, then another's
// prefetch.
func TestFarmLostTasksIdleFirst(t *testing.T) {
	f := startFarm(t, MasterConfig{Tasks: 4, TaskOps: 1000, TaskBytes: 100})
	waits := func(ip string, tasks, wants int) func(m *Master) bool {
		return func(m *Master) bool {
			for _, mc := range live(m) {
				if mc.addr.String() == ip && len(mc.tasks) == tasks && mc.wants == wants {
					return true
				}
			}
			return false
		}
	}
	// a holds two tasks: its first result brings two.
	a, a0 := askTwice(t, f, "127.0.0.7")
	f.until("a's prefetch waits", waits("127.0.0.7", 1, 1))
	a.send(result(a0))
	a1, a2 := a.expect(FrameTask), a.expect(FrameTask)
	// b gets the last task and its prefetch waits; c (prefetch 1) waits.
	b, b0 := askTwice(t, f, "127.0.0.8")
	f.until("b's prefetch waits", waits("127.0.0.8", 1, 1))
	c := rawConn(t, f, "127.0.0.9")
	c.hello(1, 0)
	c.expect(FrameWelcome)
	c.send(Frame{Type: FrameRequest})
	f.until("c waits", waits("127.0.0.9", 0, 1))

	// a is lost: a1, which it got first, goes to c, which holds nothing,
	// though b asked before; a2 to b's prefetch.
	a.close()
	tc, tb := c.expect(FrameTask), b.expect(FrameTask)
	if tc.Task != a1.Task || tb.Task != a2.Task {
		t.Errorf("c got task %d, b task %d; want %d and %d", tc.Task, tb.Task, a1.Task, a2.Task)
	}
	c.send(result(tc))
	b.send(result(b0))
	b.send(result(tb))
	endRaw(t, f, 2, []Worker{
		{Name: "127.0.0.7", Address: "127.0.0.7", Procs: 1, Tasks: 1, Lost: true, LostInFlight: 2},
		{Name: "127.0.0.8", Address: "127.0.0.8", Procs: 1, Tasks: 2},
		{Name: "127.0.0.9", Address: "127.0.0.9", Procs: 1, Tasks: 1},
	}, b, c)
}

// endRaw waits for the done frame on each raw connection, closes them, and
// checks that the run reissued that many tasks, with no duplicate, and the
// workers it summarises.
func endRaw(t *testing.T, f *farm, reissued int, want []Worker, conns ...*raw) {
	t.Helper()
	for _, c := range conns {
		c.expect(FrameDone)
	}
	for _, c := range conns {
		c.close()
	}
	s := f.wait()
	if s.Reissued != reissued || s.Duplicates != 0 {
		t.Errorf("reissued %d, duplicates %d; want %d, 0", s.Reissued, s.Duplicates, reissued)
	}
	if fmt.Sprint(s.Workers) != fmt.Sprint(want) {
		t.Errorf("workers %+v, want %+v", s.Workers, want)
	}
}

// A worker VM of two processes is killed while each holds its task, on a
// job with no more tasks than processes: its tasks go to the processes
// of the other VM that hold none, and every task is done once.
func TestFarmLostTasksReissued(t *testing.T) {
	f := startFarm(t, MasterConfig{Tasks: 4, TaskOps: 20000, TaskBytes: 1024, WorkerTimeout: 3 * time.Second, Hosts: loopHosts(t)})
	g := newGate(0)
	ctx := t.Context()
	victim := &killable{}
	vctx, vcancel := context.WithCancel(ctx)
	defer vcancel()
	gv := startGroup(vctx, t, f, "127.0.0.2", 2, func(c net.Conn) net.Conn { return g.wrap(victim.wrap(c)) })
	f.until("w2's processes asked", allAsked(2))
	g2 := startGroup(ctx, t, f, "127.0.0.4", 3, g.wrap)
	t.Cleanup(g.open)
	f.until("every process asked", allAsked(5))
	victim.kill()
	vcancel()
	f.waitFor("w2 is lost", func(s Summary) bool { w, _ := workerOf(s, "w2"); return w.Lost })
	g.open() // w2's processes, whose results wait, see their connections closed
	<-gv.done
	s := f.wait()
	g2.wait(t)
	w2, _ := workerOf(*s, "w2")
	w4, _ := workerOf(*s, "w4")
	if !w2.Lost || w2.Tasks != 0 || w2.LostInFlight != 2 || s.Reissued != 2 || s.Duplicates != 0 || w4.Tasks != 4 {
		t.Errorf("reissued %d, duplicates %d, w2 %+v, w4 %+v; want w2's 2 tasks given to w4", s.Reissued, s.Duplicates, w2, w4)
	}
}
