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
	// gives its task to another: far above a live migration's pause.
	DefaultWorkerTimeout = 15 * time.Second
	// DefaultLinger is how long a master whose run is over keeps telling
	// workers so, unless every connection has closed before.
	DefaultLinger = 3 * time.Second
	// DefaultProgress is how often the master logs its progress.
	DefaultProgress = 10 * time.Second
	// MinWorkerTimeout bounds the worker timeout from below.
	MinWorkerTimeout = 10 * time.Millisecond
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
	// dropped and its task given to another (0: DefaultWorkerTimeout;
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

// Master holds a run's tasks and hands them to worker connections, one
// at a time each, until every task is done. Create it with NewMaster
// and run it with Serve, once.
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
	waiting []*mconn
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
			mc := &mconn{m: m, task: -1, out: make(chan Frame, 8), writerDone: make(chan struct{})}
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
		if mc.task >= 0 {
			inFlight++
		}
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
	vm      *vmState // nil until registered (never, for a connection after the end)
	addr    netip.Addr
	task    int64 // the task it holds, or -1
	waiting bool
	ended   bool
}

// send queues a frame for the connection's writer (under m.mu or not).
func (mc *mconn) send(f Frame) {
	select {
	case mc.out <- f:
	default: // cannot happen: a connection has at most a welcome, a task, a done and an error queued
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
	f, err := ReadFrame(br, MaxControlFrame)
	if err != nil {
		fail(err)
		return
	}
	if f.Type != FrameHello {
		fail(protocolf("the first frame must be hello, not %s", f.Type))
		return
	}
	if f.Version != ProtocolVersion {
		fail(protocolf("hello: version: %d, this master speaks version %d", f.Version, ProtocolVersion))
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
		mc.send(Frame{Type: FrameDone})
		return
	}
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

// give hands mc the next task, or parks it until one is put back.
func (m *Master) give(mc *mconn) {
	if m.over {
		mc.send(Frame{Type: FrameDone})
		return
	}
	t, ok := m.next()
	if !ok {
		if !mc.waiting {
			mc.waiting = true
			m.waiting = append(m.waiting, mc)
		}
		return
	}
	mc.task = int64(t)
	mc.send(Frame{Type: FrameTask, Task: t, Ops: m.cfg.TaskOps})
}

// request: a worker asks for a task.
func (m *Master) request(mc *mconn) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if mc.vm == nil { // after the end: it was told
		return nil
	}
	if mc.task >= 0 {
		return protocolf("request: the connection already holds task %d", mc.task)
	}
	if mc.waiting {
		return protocolf("request: the connection already waits for a task")
	}
	m.give(mc)
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
	if mc.vm == nil {
		return nil
	}
	switch {
	case mc.task == int64(f.Task):
		mc.task = -1
	case mc.task >= 0:
		return protocolf("result: task: %d, but the connection holds task %d", f.Task, mc.task)
	case mc.waiting:
		return protocolf("result: task: %d, but the connection waits for a task", f.Task)
	}
	// A result on a connection that does not hold the task is that of a
	// worker whose connection was lost while it computed: it is as good
	// as any, unless the task is done already.
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
			mc.send(Frame{Type: FrameDone})
			return nil
		}
	}
	m.give(mc)
	return nil
}

// end: every task is done. The summary is taken now, and every
// connection is told.
func (m *Master) end() {
	m.over = true
	s := m.snapshot()
	m.summary = s
	for _, mc := range m.waiting {
		mc.waiting = false
		mc.send(Frame{Type: FrameDone})
	}
	m.waiting = nil
	for mc := range m.conns {
		if mc.vm != nil && mc.task >= 0 {
			mc.task = -1
			mc.send(Frame{Type: FrameDone})
		}
	}
	close(m.overCh)
}

// drop: a connection ended. Before the end, its task is given again
// before any new one, to a waiting connection if there is one.
func (m *Master) drop(mc *mconn) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if mc.ended {
		return
	}
	mc.ended = true
	if mc.waiting {
		mc.waiting = false
		for i, w := range m.waiting {
			if w == mc {
				m.waiting = append(m.waiting[:i], m.waiting[i+1:]...)
				break
			}
		}
	}
	if mc.vm == nil {
		return
	}
	mc.vm.live--
	if m.over {
		return
	}
	mc.vm.lostConns++
	if t := mc.task; t >= 0 {
		mc.task = -1
		if !m.done.has(uint64(t)) {
			m.requeue = append(m.requeue, uint64(t))
			mc.vm.w.LostInFlight++
			m.log.Warn().Str("vm", mc.vm.w.Name).Int64("task", t).Msg("task farm master: a lost connection's task goes to another worker")
		}
	}
	for len(m.waiting) > 0 && len(m.requeue) > 0 {
		w := m.waiting[0]
		m.waiting = m.waiting[1:]
		w.waiting = false
		m.give(w)
	}
}

// bitset is a set of task numbers: a run of 10 million tasks keeps 1.25
// MB of it.
type bitset []uint64

func newBitset(n int) bitset       { return make(bitset, (n+63)/64) }
func (b bitset) has(i uint64) bool { return b[i/64]&(1<<(i%64)) != 0 }
func (b bitset) set(i uint64)      { b[i/64] |= 1 << (i % 64) }
