package taskfarm

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
)

// Defaults of a worker.
const (
	// DefaultRetryFor is how long a worker process tries to reach its
	// master, at the start and after a lost connection, before it gives
	// up: the master VM starts its program after the workers'.
	DefaultRetryFor = 5 * time.Minute
	// handshakeTimeout bounds the wait for the master's welcome.
	handshakeTimeout = 30 * time.Second
	// computeChunk is the operations computed between two looks at the
	// connection (has the master said the run is over?).
	computeChunk = 1 << 18
	// DefaultPrefetch is a worker process's prefetch: it computes one
	// task while the next one's input arrives.
	DefaultPrefetch = 2
)

// ErrMasterGone: a worker could not reach its master for its retry
// period.
var ErrMasterGone = errors.New("the task-farm master cannot be reached")

// ErrMasterRefused: the master answered with an error frame.
var ErrMasterRefused = errors.New("the task-farm master refused the worker")

// WorkerConfig configures the worker processes of one VM.
type WorkerConfig struct {
	// Master is the master's address, host:port.
	Master string
	// Procs is the number of worker processes, each with its own
	// connection (at least 1; one per vCPU in a VM).
	Procs int
	// Name is the worker VM's name, sent in its hellos for the master's
	// log (at most MaxName bytes).
	Name string
	// Prefetch is the tasks each process holds at once, from 1 to
	// MaxPrefetch (0: DefaultPrefetch): it asks for the next as it starts
	// computing one, so that the next input crosses the link during the
	// computation. 1 asks only when a result is sent: the link idles
	// while the process computes, and the process while the input comes.
	Prefetch int
	// RetryFor: a process that cannot reach the master this long, at the
	// start or after its connection was lost, gives up (0:
	// DefaultRetryFor).
	RetryFor time.Duration
	// Dial opens a connection to the master (nil: a net.Dialer with TCP
	// keepalive).
	Dial func(ctx context.Context, network, address string) (net.Conn, error)
	Log  zerolog.Logger
}

// WorkerReport is what the processes of a VM did.
type WorkerReport struct {
	// Tasks is the results the processes sent (the master may have
	// discarded some as duplicates).
	Tasks int
	// Connections is the connections they opened.
	Connections int
}

// errRunOver ends a process: the master said the run is over.
var errRunOver = errors.New("the run is over")

// RunWorkers runs cfg.Procs worker processes until the master says the
// run is over (nil), ctx ends (ctx's error), or a process gives up: the
// master unreachable for RetryFor (ErrMasterGone; once some process of
// the VM has been told the run is over, an unreachable master is no
// error), or it refused the worker (ErrMasterRefused). A process whose
// connection is lost connects again; a result it computed meanwhile is
// sent on the new connection.
func RunWorkers(ctx context.Context, cfg WorkerConfig) (WorkerReport, error) {
	switch {
	case cfg.Master == "":
		return WorkerReport{}, errors.New("taskfarm worker: master: empty, want host:port")
	case cfg.Procs < 1 || cfg.Procs > 1<<16-1:
		return WorkerReport{}, fmt.Errorf("taskfarm worker: procs: %d, want from 1 to 65535", cfg.Procs)
	case len(cfg.Name) > MaxName:
		return WorkerReport{}, fmt.Errorf("taskfarm worker: name: %d bytes, more than %d", len(cfg.Name), MaxName)
	case cfg.RetryFor < 0:
		return WorkerReport{}, fmt.Errorf("taskfarm worker: retry_for: %v is negative", cfg.RetryFor)
	case cfg.Prefetch < 0 || cfg.Prefetch > MaxPrefetch:
		return WorkerReport{}, fmt.Errorf("taskfarm worker: prefetch: %d, want from 1 to %d (0: %d)", cfg.Prefetch, MaxPrefetch, DefaultPrefetch)
	}
	if _, _, err := net.SplitHostPort(cfg.Master); err != nil {
		return WorkerReport{}, fmt.Errorf("taskfarm worker: master: %w", err)
	}
	if cfg.RetryFor == 0 {
		cfg.RetryFor = DefaultRetryFor
	}
	if cfg.Prefetch == 0 {
		cfg.Prefetch = DefaultPrefetch
	}
	if cfg.Dial == nil {
		d := &net.Dialer{KeepAliveConfig: keepAlive, Timeout: 10 * time.Second}
		cfg.Dial = d.DialContext
	}
	parent := ctx
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	g := &workerGroup{cfg: cfg}
	errs := make([]error, cfg.Procs)
	var wg sync.WaitGroup
	for p := range cfg.Procs {
		wg.Go(func() {
			errs[p] = g.proc(ctx, p)
			if errs[p] != nil {
				cancel() // one gave up: the VM's worker fails
			}
		})
	}
	wg.Wait()
	rep := WorkerReport{Tasks: int(g.tasks.Load()), Connections: int(g.conns.Load())}
	if g.over.Load() {
		return rep, nil
	}
	for _, err := range errs {
		if err != nil && !errors.Is(err, context.Canceled) {
			return rep, err
		}
	}
	if err := parent.Err(); err != nil {
		return rep, fmt.Errorf("taskfarm worker: %w", err)
	}
	return rep, nil
}

// workerGroup is the processes of one VM.
type workerGroup struct {
	cfg   WorkerConfig
	over  atomic.Bool // some process was told the run is over
	tasks atomic.Int64
	conns atomic.Int64
}

// pending is a result not yet sent.
type pending struct {
	task uint64
	data []byte
}

// proc is one worker process: it connects, works, and connects again
// when its connection is lost, until the run is over.
func (g *workerGroup) proc(ctx context.Context, p int) error {
	log := g.cfg.Log.With().Int("proc", p).Logger()
	var res *pending
	lastContact := time.Now()
	pause := 100 * time.Millisecond
	var lastErr error
	told := false // the wait for the master is in the log
	for {
		if g.over.Load() {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		c, err := g.cfg.Dial(ctx, "tcp", g.cfg.Master)
		if err == nil {
			g.conns.Add(1)
			var heard bool
			heard, err = g.session(ctx, log, c, p, &res)
			if heard {
				lastContact = time.Now()
				pause = 100 * time.Millisecond
				told = false
			}
			switch {
			case errors.Is(err, errRunOver):
				g.over.Store(true)
				return nil
			case errors.Is(err, ErrMasterRefused):
				return err
			}
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if g.over.Load() {
			return nil
		}
		lastErr = err
		if time.Since(lastContact) >= g.cfg.RetryFor {
			return fmt.Errorf("taskfarm worker: %w: no answer from %s for %v: %w", ErrMasterGone, g.cfg.Master, g.cfg.RetryFor.Round(time.Second), lastErr)
		}
		if !told {
			log.Info().Err(err).Str("master", g.cfg.Master).Msg("task farm worker: no answer from the master (yet): trying again")
			told = true
		}
		log.Debug().Err(err).Dur("pause", pause).Msg("task farm worker: connecting to the master again")
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(pause):
		}
		pause = min(2*pause, 2*time.Second)
	}
}

// session runs one connection: hello, welcome, then tasks until the run
// is over or the connection fails. heard says whether the master
// answered at all. A result computed when the connection fails is left
// in *res, to send on the next; the tasks not begun then are left to the
// master, which gives them to others.
func (g *workerGroup) session(ctx context.Context, log zerolog.Logger, c net.Conn, p int, res **pending) (heard bool, err error) {
	setKeepAlive(c)
	var bytes atomic.Int64
	fc := &farmConn{Conn: c, timeout: handshakeTimeout, bytes: &bytes}
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stopClose := context.AfterFunc(sctx, func() { c.Close() })
	defer stopClose()
	defer c.Close()

	var wmu sync.Mutex
	var buf []byte
	// write sends frames in one write: the first requests of a
	// connection reach the master together.
	write := func(fs ...Frame) error {
		wmu.Lock()
		defer wmu.Unlock()
		buf = buf[:0]
		for _, f := range fs {
			var err error
			if buf, err = AppendFrame(buf, f); err != nil {
				return err
			}
		}
		_, err := fc.Write(buf)
		return err
	}
	depth := g.cfg.Prefetch
	if err := write(Frame{Type: FrameHello, Version: ProtocolVersion, Procs: uint16(g.cfg.Procs), Proc: uint16(p),
		Prefetch: uint16(depth), Name: g.cfg.Name}); err != nil {
		return false, fmt.Errorf("hello: %w", err)
	}
	br := bufio.NewReader(fc)
	w, err := ReadFrame(br, MaxControlFrame)
	if err != nil {
		return false, fmt.Errorf("welcome: %w", err)
	}
	switch {
	case w.Type == FrameError:
		return true, fmt.Errorf("taskfarm worker: %w: %s", ErrMasterRefused, w.Message)
	case w.Type != FrameWelcome:
		return true, fmt.Errorf("taskfarm worker: %w: it answered the hello with %s", ErrMasterRefused, w.Type)
	case w.Version != ProtocolVersion:
		return true, fmt.Errorf("taskfarm worker: %w: it speaks version %d, this worker %d", ErrMasterRefused, w.Version, ProtocolVersion)
	}
	fc.timeout = w.Timeout // before the reader starts
	maxFrame := 1 + 16 + int(w.InputBytes)

	// The reader hands on the tasks, up to the prefetch of them received
	// and not begun, and the first other frame (done or error), after
	// which it stops; heartbeats only keep the connection alive. The
	// tasks arrive while the process computes.
	tasks := make(chan Frame, depth)
	ctrl := make(chan Frame, 1)
	readErr := make(chan error, 1)
	go func() {
		for {
			f, err := ReadFrame(br, max(maxFrame, MaxControlFrame))
			if err != nil {
				readErr <- err
				return
			}
			switch f.Type {
			case FrameHeartbeat:
				continue
			case FrameTask:
				select {
				case tasks <- f:
					continue
				default: // more than it asked for
					f = Frame{Type: FrameError, Message: fmt.Sprintf("the master sent task %d beyond the prefetch of %d tasks asked for", f.Task, depth)}
				}
			}
			ctrl <- f
			return
		}
	}()
	go func() { // heartbeats
		t := time.NewTicker(w.Heartbeat)
		defer t.Stop()
		for {
			select {
			case <-sctx.Done():
				return
			case <-t.C:
				if write(Frame{Type: FrameHeartbeat}) != nil {
					return
				}
			}
		}
	}()

	// The first requests, the prefetch of them: a result left from a
	// lost connection (which asks for the next task) and plain requests.
	first := make([]Frame, 0, depth)
	if r := *res; r != nil {
		first = append(first, Frame{Type: FrameResult, Task: r.task, Data: r.data})
	}
	for len(first) < depth {
		first = append(first, Frame{Type: FrameRequest})
	}
	if err := write(first...); err != nil {
		return true, fmt.Errorf("request: %w", err)
	}
	if *res != nil {
		*res = nil
		g.tasks.Add(1)
	}
	handle := func(f Frame) error {
		switch f.Type {
		case FrameDone:
			return errRunOver
		case FrameError:
			return fmt.Errorf("taskfarm worker: %w: %s", ErrMasterRefused, f.Message)
		}
		return fmt.Errorf("taskfarm worker: %w: unexpected %s frame", ErrMasterRefused, f.Type)
	}
	// ended is the end of the session when the master has said the run
	// is over, or broke the protocol: looked at before all else.
	ended := func() (bool, error) {
		select {
		case f := <-ctrl:
			return true, handle(f)
		default:
			return false, nil
		}
	}
	for {
		var f Frame
		select {
		case <-ctx.Done():
			return true, ctx.Err()
		case f = <-ctrl:
			return true, handle(f)
		case err := <-readErr:
			return true, fmt.Errorf("connection lost: %w", err)
		case f = <-tasks:
		}
		if ok, err := ended(); ok {
			return true, err
		}
		select { // a task not begun when the connection is lost is the master's to give again
		case err := <-readErr:
			return true, fmt.Errorf("connection lost: %w", err)
		default:
		}
		if len(f.Data) != int(w.InputBytes) {
			return true, fmt.Errorf("taskfarm worker: %w: task %d has %d bytes of input, the welcome said %d", ErrMasterRefused, f.Task, len(f.Data), w.InputBytes)
		}
		// Compute, looking between chunks for the end of the run; a
		// connection lost meanwhile does not stop the work. The next
		// tasks arrive meanwhile.
		k := NewKernel(f.Task, f.Data)
		var lost error
		for k.Ops() < f.Ops {
			k.Run(min(computeChunk, f.Ops-k.Ops()))
			if ok, err := ended(); ok {
				return true, err
			}
			if err := ctx.Err(); err != nil {
				return true, err
			}
			if lost == nil {
				select {
				case lost = <-readErr:
				default:
				}
			}
		}
		if ok, err := ended(); ok {
			return true, err
		}
		d := k.Digest()
		r := &pending{task: f.Task, data: append([]byte(nil), d[:w.ResultBytes]...)}
		if lost != nil {
			*res = r
			return true, fmt.Errorf("connection lost during task %d: %w", f.Task, lost)
		}
		// The result asks for the next task: the process holds its
		// prefetch again.
		if err := write(Frame{Type: FrameResult, Task: r.task, Data: r.data}); err != nil {
			*res = r
			return true, fmt.Errorf("result: %w", err)
		}
		g.tasks.Add(1)
	}
}
