package taskfarm

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"net"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
)

// Defaults of a run.
const (
	// DefaultPort is the master's TCP port.
	DefaultPort = 7420
	// DefaultWorkerTimeout is how long the master waits for a frame of a
	// worker connection (a heartbeat at least) before it drops it and
	// gives its tasks to others: far above a live migration's pause.
	DefaultWorkerTimeout = 15 * time.Second
	// DefaultLinger is how long a master whose run is over keeps telling
	// workers so, unless every connection has closed before.
	DefaultLinger = 3 * time.Second
	// DefaultProgress is how often the master logs its progress.
	DefaultProgress = 10 * time.Second
	// MinWorkerTimeout bounds the worker timeout from below.
	MinWorkerTimeout = 10 * time.Millisecond
	// outQueue is the frames a connection's writer may have queued: a
	// welcome, its prefetch of tasks, a done and an error at most.
	outQueue = MaxPrefetch + 4
)

// MasterConfig configures a master.
type MasterConfig struct {
	// Tasks is T, the tasks of the run (at least 1).
	Tasks int
	// TaskOps is the operations of the kernel per task (Oper, at least 1).
	TaskOps uint64
	// TaskBytes is the bytes exchanged with the master per task (Comm,
	// 0 to MaxTaskBytes), split as Split says.
	TaskBytes int64
	// WorkerTimeout: a worker connection that sends nothing this long is
	// dropped and its tasks given to others (0: DefaultWorkerTimeout;
	// rounded down to a millisecond). Each side sends a heartbeat every
	// fifth of it when it has nothing else to send.
	WorkerTimeout time.Duration
	// Linger: once the run is over, the master answers workers that the
	// run is over until every connection has closed, at most this long
	// (0: DefaultLinger).
	Linger time.Duration
	// Progress is how often the progress is logged (0: DefaultProgress).
	Progress time.Duration
	// Hosts are the job's VMs (its hostfile): the summary names a
	// worker's VM and site by the address its connections come from. A
	// worker at an address not listed is named by its address, without
	// a site.
	Hosts []Host
	Log   zerolog.Logger
}

// Master holds a run's tasks and hands them to worker connections, each
// up to its prefetch at once, until every task is done. Create it with
// NewMaster and run it with Serve, once.
type Master struct {
	cfg       MasterConfig
	timeout   time.Duration
	heartbeat time.Duration
	input     []byte // every task's input (the task's number is the kernel's seed)
	result    int    // the bytes of a result
	log       zerolog.Logger
	hosts     map[netip.Addr]Host
	bytes     atomic.Int64
	overCh    chan struct{}
	changed   chan struct{} // a connection ended

	mu      sync.Mutex
	start   time.Time
	fresh   uint64   // the next task never given
	requeue []uint64 // tasks of lost connections, to give first (the last put back first)
	done    bitset
	ndone   int
	waiting []*mconn // the connections with requests parked (wants > 0), in the order they parked
	conns   map[*mconn]bool
	vms     map[netip.Addr]*vmState
	order   []*vmState
	reissue int
	dups    int
	over    bool
	closing bool // Serve is returning: no more connections
	summary *Summary

	// onResult, when set (by the tests), is called under mu with every
	// result the master takes or, as a duplicate, discards.
	onResult func(vm string, task uint64, data []byte, duplicate bool)
}

// vmState is what the master knows of one worker VM.
type vmState struct {
	w         Worker
	live      int // connections open
	lostConns int
}

// NewMaster checks the configuration and makes the run's input.
func NewMaster(cfg MasterConfig) (*Master, error) {
	bad := func(field, format string, a ...any) error {
		return fmt.Errorf("taskfarm master: %s: %s", field, fmt.Sprintf(format, a...))
	}
	switch {
	case cfg.Tasks < 1 || cfg.Tasks > math.MaxInt32:
		return nil, bad("tasks", "%d, want from 1 to %d", cfg.Tasks, math.MaxInt32)
	case cfg.TaskOps < 1:
		return nil, bad("task_ops", "0, want at least 1")
	case cfg.TaskBytes < 0 || cfg.TaskBytes > MaxTaskBytes:
		return nil, bad("task_bytes", "%d, want from 0 to %d", cfg.TaskBytes, MaxTaskBytes)
	case cfg.WorkerTimeout != 0 && cfg.WorkerTimeout < MinWorkerTimeout:
		return nil, bad("worker_timeout", "%v, want at least %v", cfg.WorkerTimeout, MinWorkerTimeout)
	case cfg.WorkerTimeout > 24*time.Hour:
		return nil, bad("worker_timeout", "%v, want at most 24h", cfg.WorkerTimeout)
	case cfg.Linger < 0:
		return nil, bad("linger", "%v is negative", cfg.Linger)
	case cfg.Progress < 0:
		return nil, bad("progress", "%v is negative", cfg.Progress)
	}
	if cfg.WorkerTimeout == 0 {
		cfg.WorkerTimeout = DefaultWorkerTimeout
	}
	if cfg.Linger == 0 {
		cfg.Linger = DefaultLinger
	}
	if cfg.Progress == 0 {
		cfg.Progress = DefaultProgress
	}
	m := &Master{cfg: cfg, log: cfg.Log, hosts: map[netip.Addr]Host{}, overCh: make(chan struct{}),
		changed: make(chan struct{}, 1), conns: map[*mconn]bool{}, vms: map[netip.Addr]*vmState{},
		done: newBitset(cfg.Tasks)}
	m.timeout = cfg.WorkerTimeout.Truncate(time.Millisecond)
	m.heartbeat = max(time.Millisecond, (m.timeout / 5).Truncate(time.Millisecond))
	for _, h := range cfg.Hosts {
		if _, ok := m.hosts[h.Address]; ok {
			return nil, bad("hosts", "%s is listed twice", h.Address)
		}
		m.hosts[h.Address] = h
	}
	in, res := Split(cfg.TaskBytes)
	m.result = int(res)
	m.input = make([]byte, in)
	rng := rand.New(rand.NewChaCha8([32]byte{'t', 'a', 's', 'k', 'f', 'a', 'r', 'm'}))
	for i := 0; i < len(m.input); i += 8 {
		var b [8]byte
		v := rng.Uint64()
		for j := range b {
			b[j] = byte(v >> (8 * j))
		}
		copy(m.input[i:], b[:])
	}
	return m, nil
}

// Over is closed when every task is done.
func (m *Master) Over() <-chan struct{} { return m.overCh }

// Serve accepts worker connections on ln and runs the tasks until every
// one is done, then tells the workers so until they have all closed
// their connections or the linger is over, closes ln and returns the
// run's summary. It returns ctx's error, without a summary, when ctx
// ends first.
func (m *Master) Serve(ctx context.Context, ln net.Listener) (*Summary, error) {
	m.mu.Lock()
	if !m.start.IsZero() {
		m.mu.Unlock()
		return nil, errors.New("taskfarm master: Serve called twice")
	}
	m.start = time.Now()
	m.mu.Unlock()
	m.log.Info().Int("tasks", m.cfg.Tasks).Uint64("task_ops", m.cfg.TaskOps).Int64("task_bytes", m.cfg.TaskBytes).
		Int("input_bytes", len(m.input)).Int("result_bytes", m.result).Str("listen", ln.Addr().String()).
		Dur("worker_timeout", m.timeout).Msg("task farm master: waiting for workers")

	var wg sync.WaitGroup
	acceptErr := make(chan error, 1)
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				acceptErr <- err
				return
			}
			mc := &mconn{m: m, out: make(chan Frame, outQueue), writerDone: make(chan struct{})}
			mc.c = &farmConn{Conn: c, timeout: m.timeout, bytes: &m.bytes}
			m.mu.Lock()
			if m.closing { // Serve returns: this one came too late
				m.mu.Unlock()
				c.Close()
				continue
			}
			m.conns[mc] = true
			m.mu.Unlock()
			wg.Go(func() { m.handle(mc) })
		}
	})
	stop := func() {
		ln.Close()
		m.mu.Lock()
		m.closing = true
		for mc := range m.conns {
			mc.c.Close()
		}
		m.mu.Unlock()
		wg.Wait()
	}

	progress := time.NewTicker(m.cfg.Progress)
	defer progress.Stop()
wait:
	for {
		select {
		case <-m.overCh:
			break wait
		case <-ctx.Done():
			stop()
			return nil, fmt.Errorf("taskfarm master: %w", ctx.Err())
		case err := <-acceptErr:
			stop()
			return nil, fmt.Errorf("taskfarm master: accept: %w", err)
		case <-progress.C:
			m.logProgress()
		}
	}

	s := m.Progress()
	m.log.Info().Int("tasks", s.Tasks).Int("done", s.Done).Int("reissued", s.Reissued).Int("duplicates", s.Duplicates).
		Float64("wall_seconds", s.WallSeconds).Msg("task farm master: every task done")
	linger := time.NewTimer(m.cfg.Linger)
	defer linger.Stop()
	for m.openConns() > 0 {
		select {
		case <-m.changed:
		case <-linger.C:
			m.log.Info().Int("connections", m.openConns()).Msg("task farm master: connections still open at the end of the linger: closing them")
			stop()
			return m.final(), nil
		case <-ctx.Done():
			stop()
			return nil, fmt.Errorf("taskfarm master: %w", ctx.Err())
		}
	}
	stop()
	return m.final(), nil
}

// final is the summary with every byte moved, once the connections are
// closed.
func (m *Master) final() *Summary {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.summary.BytesMoved = m.bytes.Load()
	s := *m.summary
	return &s
}

func (m *Master) openConns() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.conns)
}

func (m *Master) logProgress() {
	p := m.Progress()
	m.mu.Lock()
	inFlight, live := 0, 0
	for mc := range m.conns {
		inFlight += len(mc.tasks)
		if mc.vm != nil && !mc.ended {
			live++
		}
	}
	m.mu.Unlock()
	m.log.Info().Int("done", p.Done).Int("tasks", p.Tasks).Int("in_flight", inFlight).Int("connections", live).
		Int("worker_vms", len(p.Workers)).Int("reissued", p.Reissued).Msg("task farm master: progress")
}

// Progress is the run's summary as it stands: the tasks done so far, per
// worker VM and site (a VM is lost while it has no connection left and
// lost one); after the end, the final summary (BytesMoved aside, which
// Serve fills in when it returns).
func (m *Master) Progress() Summary {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.summary != nil {
		s := *m.summary
		s.Workers = append([]Worker(nil), s.Workers...)
		s.Sites = maps.Clone(s.Sites)
		return s
	}
	return *m.snapshot()
}

// snapshot builds the summary of the run as it stands (under m.mu).
func (m *Master) snapshot() *Summary {
	in, res := Split(m.cfg.TaskBytes)
	wall := 0.0
	if !m.start.IsZero() {
		wall = time.Since(m.start).Seconds()
	}
	s := &Summary{Tasks: m.cfg.Tasks, Done: m.ndone, Reissued: m.reissue, Duplicates: m.dups,
		TaskOps: float64(m.cfg.TaskOps), TaskBytes: float64(m.cfg.TaskBytes), InputBytes: in, ResultBytes: res,
		BytesMoved: m.bytes.Load(), WallSeconds: wall, Workers: []Worker{}, Sites: map[string]SiteTotals{}}
	for _, vm := range m.order {
		w := vm.w
		w.Lost = vm.lostConns > 0 && vm.live == 0
		s.Workers = append(s.Workers, w)
		t := s.Sites[w.Site]
		t.Workers++
		t.Tasks += w.Tasks
		if w.Lost {
			t.Lost++
		}
		s.Sites[w.Site] = t
	}
	return s
}

// mconn is one worker connection of the master.
type mconn struct {
	m          *Master
	c          *farmConn
	out        chan Frame // to the writer; never more than a few at once
	writerDone chan struct{}

	// Guarded by m.mu:
	vm       *vmState // nil until registered (never, for a connection after the end)
	addr     netip.Addr
	prefetch int      // the tasks it may hold at once, from its hello
	tasks    []uint64 // the tasks it holds (computed or on their way), in the order given
	wants    int      // its requests parked until a task is put back
	told     bool     // it was told the run is over
	ended    bool
}

// held is the tasks the connection holds or asked for: never more than
// its prefetch.
func (mc *mconn) held() int { return len(mc.tasks) + mc.wants }

// holding says what the connection holds, for a protocol error.
func (mc *mconn) holding() string {
	return fmt.Sprintf("it holds its prefetch of %d already (tasks given: %v; requests waiting: %d)", mc.prefetch, mc.tasks, mc.wants)
}

// send queues a frame for the connection's writer (under m.mu or not).
func (mc *mconn) send(f Frame) {
	select {
	case mc.out <- f:
	default: // cannot happen: a connection has at most a welcome, its prefetch of tasks, a done and an error queued
		mc.m.log.Error().Str("worker", mc.c.RemoteAddr().String()).Stringer("frame", f.Type).Msg("task farm master: a connection's queue is full: dropping it")
		mc.c.Close()
	}
}

// writer writes the queued frames, and a heartbeat whenever nothing was
// written for a heartbeat's time; after an error frame it closes the
// connection.
func (mc *mconn) writer(quit <-chan struct{}) {
	defer close(mc.writerDone)
	hb := mc.m.heartbeat
	t := time.NewTimer(hb)
	defer t.Stop()
	var buf []byte
	for {
		var f Frame
		select {
		case f = <-mc.out:
		case <-t.C:
			f = Frame{Type: FrameHeartbeat}
		case <-quit:
			return
		}
		var err error
		if f.Type == FrameTask {
			buf = appendTaskHeader(buf[:0], f.Task, f.Ops, len(mc.m.input))
			if _, err = mc.c.Write(buf); err == nil && len(mc.m.input) > 0 {
				_, err = mc.c.Write(mc.m.input)
			}
		} else {
			if buf, err = AppendFrame(buf[:0], f); err == nil {
				_, err = mc.c.Write(buf)
			}
		}
		if err != nil || f.Type == FrameError {
			mc.c.Close() // the reader ends
			return
		}
		t.Reset(hb)
	}
}

// errProtocol is a worker breaking the protocol: the master answers with
// an error frame and drops the connection.
type errProtocol struct{ msg string }

func (e errProtocol) Error() string { return e.msg }

func protocolf(format string, a ...any) error { return errProtocol{fmt.Sprintf(format, a...)} }

// handle reads one connection's frames until it ends.
func (m *Master) handle(mc *mconn) {
	setKeepAlive(mc.c.Conn)
	remote := mc.c.RemoteAddr().String()
	if ap, err := netip.ParseAddrPort(remote); err == nil {
		mc.addr = ap.Addr().Unmap()
	}
	quit := make(chan struct{})
	defer func() {
		m.drop(mc)
		close(quit)
		mc.c.Close()
		<-mc.writerDone
		m.mu.Lock()
		delete(m.conns, mc)
		m.mu.Unlock()
		select {
		case m.changed <- struct{}{}:
		default:
		}
	}()
	go mc.writer(quit)

	br := bufio.NewReader(mc.c)
	fail := func(err error) {
		var pe errProtocol
		if !errors.As(err, &pe) && !errors.Is(err, ErrFrame) {
			return
		}
		m.log.Warn().Str("worker", remote).Err(err).Msg("task farm master: dropping a worker connection that broke the protocol")
		mc.send(Frame{Type: FrameError, Message: clipMessage(err.Error())})
		select { // the writer closes the connection after the error frame
		case <-mc.writerDone:
		case <-time.After(time.Second):
		}
	}
	// A hello's version comes first, before the fields whose layout
	// depends on it: another version is refused as such.
	body, err := readBody(br, MaxControlFrame)
	if err != nil {
		fail(err)
		return
	}
	if v, ok := helloVersion(body); ok && v != ProtocolVersion {
		fail(protocolf("hello: version: %d, this master speaks version %d", v, ProtocolVersion))
		return
	}
	f, err := DecodeFrame(body)
	if err != nil {
		fail(err)
		return
	}
	if f.Type != FrameHello {
		fail(protocolf("the first frame must be hello, not %s", f.Type))
		return
	}
	m.register(mc, f)
	for {
		f, err := ReadFrame(br, MaxControlFrame)
		if err != nil {
			fail(err)
			m.mu.Lock()
			over := m.over
			m.mu.Unlock()
			if !over {
				m.log.Warn().Str("worker", remote).Err(err).Msg("task farm master: lost a worker connection")
			}
			return
		}
		switch f.Type {
		case FrameHeartbeat:
		case FrameRequest:
			err = m.request(mc)
		case FrameResult:
			err = m.accept(mc, f)
		default:
			err = protocolf("a worker sends no %s frame", f.Type)
		}
		if err != nil {
			fail(err)
			return
		}
	}
}

func clipMessage(s string) string {
	if len(s) <= MaxMessage {
		return s
	}
	n := MaxMessage
	for n > 0 && s[n]&0xc0 == 0x80 {
		n--
	}
	return s[:n]
}

// register counts a connection's VM and welcomes it; after the end it
// only tells it the run is over.
func (m *Master) register(mc *mconn, hello Frame) {
	m.mu.Lock()
	defer m.mu.Unlock()
	mc.send(Frame{Type: FrameWelcome, Version: ProtocolVersion, Heartbeat: m.heartbeat, Timeout: m.timeout,
		InputBytes: uint32(len(m.input)), ResultBytes: uint8(m.result)})
	if m.over {
		mc.told = true
		mc.send(Frame{Type: FrameDone})
		return
	}
	mc.prefetch = int(hello.Prefetch)
	vm := m.vms[mc.addr]
	if vm == nil {
		vm = &vmState{w: Worker{Name: mc.addr.String(), Address: mc.addr.String()}}
		if h, ok := m.hosts[mc.addr]; ok {
			if h.Name != "" {
				vm.w.Name = h.Name
			}
			vm.w.Site = h.Site
		} else {
			m.log.Warn().Str("address", mc.addr.String()).Str("name", hello.Name).Msg("task farm master: a worker VM not in the hostfile: named by its address")
		}
		m.vms[mc.addr] = vm
		m.order = append(m.order, vm)
		m.log.Info().Str("vm", vm.w.Name).Str("site", vm.w.Site).Str("address", vm.w.Address).Int("procs", int(hello.Procs)).
			Msg("task farm master: a worker VM joined")
	}
	vm.w.Procs = max(vm.w.Procs, int(hello.Procs))
	vm.live++
	mc.vm = vm
}

// next takes the next task to give, if any.
func (m *Master) next() (uint64, bool) {
	for len(m.requeue) > 0 {
		t := m.requeue[len(m.requeue)-1]
		m.requeue = m.requeue[:len(m.requeue)-1]
		if m.done.has(t) { // its lost worker came back with its result
			continue
		}
		m.reissue++
		return t, true
	}
	if m.fresh < uint64(m.cfg.Tasks) {
		m.fresh++
		return m.fresh - 1, true
	}
	return 0, false
}

// park parks a request of mc until a result comes or a task is put
// back.
func (m *Master) park(mc *mconn) {
	if mc.wants == 0 {
		m.waiting = append(m.waiting, mc)
	}
	mc.wants++
}

// hand sends mc task t.
func (m *Master) hand(mc *mconn, t uint64) {
	mc.tasks = append(mc.tasks, t)
	mc.send(Frame{Type: FrameTask, Task: t, Ops: m.cfg.TaskOps})
}

// tellOver tells mc the run is over, once.
func (m *Master) tellOver(mc *mconn) {
	mc.tasks, mc.wants = nil, 0
	if !mc.told {
		mc.told = true
		mc.send(Frame{Type: FrameDone})
	}
}

// request: a worker asks for a task. A connection that holds none gets
// one at once, if one is left. A request beyond that, a prefetch, waits
// for the next result (of any connection) or a task put back: the
// processes that have not connected yet (they connect one by one) must
// not find the tasks gone to the prefetch of those that came first.
func (m *Master) request(mc *mconn) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if mc.vm == nil || mc.told { // it was told the run is over
		return nil
	}
	if mc.held() >= mc.prefetch {
		return protocolf("request: %s", mc.holding())
	}
	if m.over {
		m.tellOver(mc)
		return nil
	}
	if len(mc.tasks) == 0 {
		if t, ok := m.next(); ok {
			m.hand(mc, t)
			return nil
		}
	}
	m.park(mc)
	return nil
}

// accept takes a result and gives the connection its next task.
func (m *Master) accept(mc *mconn, f Frame) error {
	if f.Task >= uint64(m.cfg.Tasks) {
		return protocolf("result: task: %d is not a task of this run (0 to %d)", f.Task, m.cfg.Tasks-1)
	}
	if len(f.Data) != m.result {
		return protocolf("result: %d bytes, want %d", len(f.Data), m.result)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if mc.vm == nil || mc.told {
		return nil
	}
	// A result for a task the connection does not hold is that of a
	// worker whose connection was lost while it computed: it is as good
	// as any, unless the task is done already; as every result, it asks
	// for the next task, so the connection must have room for one.
	if i := slices.Index(mc.tasks, f.Task); i >= 0 {
		mc.tasks = slices.Delete(mc.tasks, i, i+1)
	} else if mc.held() >= mc.prefetch {
		return protocolf("result: task: %d is not one the connection holds, and %s", f.Task, mc.holding())
	}
	if m.over { // every task is done: it is told so
		m.tellOver(mc)
		return nil
	}
	if m.onResult != nil {
		m.onResult(mc.vm.w.Name, f.Task, f.Data, m.done.has(f.Task))
	}
	if m.done.has(f.Task) {
		m.dups++
	} else {
		m.done.set(f.Task)
		m.ndone++
		mc.vm.w.Tasks++
		if m.ndone == m.cfg.Tasks {
			m.end()
		}
	}
	if m.over {
		m.tellOver(mc)
		return nil
	}
	// The result asks for a task: it waits with the others, and every
	// waiting request is served now, while tasks are left.
	m.park(mc)
	m.serveWaiting(-1)
	return nil
}

// end: every task is done. The summary is taken now, and every
// connection that holds or waits for a task is told.
func (m *Master) end() {
	m.over = true
	s := m.snapshot()
	m.summary = s
	for mc := range m.conns {
		if mc.vm != nil && mc.held() > 0 {
			m.tellOver(mc)
		}
	}
	m.waiting = nil
	close(m.overCh)
}

// drop: a connection ended. Before the end, every task it held is given
// again before any new one, to the waiting connections if there are
// some.
func (m *Master) drop(mc *mconn) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if mc.ended {
		return
	}
	mc.ended = true
	if mc.wants > 0 {
		mc.wants = 0
		m.waiting = slices.DeleteFunc(m.waiting, func(w *mconn) bool { return w == mc })
	}
	if mc.vm == nil {
		return
	}
	mc.vm.live--
	if m.over {
		return
	}
	mc.vm.lostConns++
	// The requeue is given from its end: the first task given to the
	// connection, the one it was computing, goes again first.
	var lost []uint64
	for _, t := range mc.tasks {
		if !m.done.has(t) {
			lost = append(lost, t)
		}
	}
	for _, t := range slices.Backward(lost) {
		m.requeue = append(m.requeue, t)
	}
	mc.tasks = nil
	if len(lost) > 0 {
		mc.vm.w.LostInFlight += len(lost)
		m.log.Warn().Str("vm", mc.vm.w.Name).Uints64("tasks", lost).Msg("task farm master: a lost connection's tasks go to other workers")
		m.serveWaiting(len(lost)) // the tasks put back, not new ones
	}
}

// serveWaiting hands at most n tasks (n < 0: any number) to the parked
// requests while tasks are left, one at a time to the waiting connection
// that holds the fewest tasks (the first parked among equals): every
// connection that holds no task gets one before any gets a second, and
// so on. It goes through the waiting connections once per number of
// tasks held, so at most MaxPrefetch times.
func (m *Master) serveWaiting(n int) {
	if len(m.waiting) == 0 || n == 0 || (m.fresh == uint64(m.cfg.Tasks) && len(m.requeue) == 0) {
		return
	}
	defer func() { m.waiting = slices.DeleteFunc(m.waiting, func(w *mconn) bool { return w.wants == 0 }) }()
	for level := 0; level < MaxPrefetch; level++ {
		asking := false
		for _, w := range m.waiting {
			if w.wants == 0 || len(w.tasks) > level {
				asking = asking || w.wants > 0
				continue
			}
			t, ok := m.next()
			if !ok {
				return
			}
			w.wants--
			m.hand(w, t)
			if n--; n == 0 {
				return
			}
			asking = asking || w.wants > 0
		}
		if !asking {
			return
		}
	}
}

// bitset is a set of task numbers: a run of 10 million tasks keeps 1.25
// MB of it.
type bitset []uint64

func newBitset(n int) bitset       { return make(bitset, (n+63)/64) }
func (b bitset) has(i uint64) bool { return b[i/64]&(1<<(i%64)) != 0 }
func (b bitset) set(i uint64)      { b[i/64] |= 1 << (i % 64) }
