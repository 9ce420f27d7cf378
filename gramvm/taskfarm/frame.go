package taskfarm

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"time"
	"unicode/utf8"
)

// ProtocolVersion is the version of the wire protocol that hello and
// welcome carry; a master answers another version with an error frame.
// Version 2 added the hello's prefetch: a connection may hold more than
// one task.
const ProtocolVersion = 2

// ErrFrame: a frame that does not decode, or that the protocol does not
// allow where it came.
var ErrFrame = errors.New("invalid task-farm frame")

// FrameType is a frame's type, its first byte after the length.
type FrameType byte

// The frame types (see the package documentation for their payloads).
const (
	FrameHello     FrameType = 1 // worker → master, first
	FrameWelcome   FrameType = 2 // master → worker, answers hello
	FrameRequest   FrameType = 3 // worker → master: give me a task
	FrameTask      FrameType = 4 // master → worker
	FrameResult    FrameType = 5 // worker → master: a task's result, and a request for the next
	FrameHeartbeat FrameType = 6 // either way, when nothing else is sent
	FrameDone      FrameType = 7 // master → worker: the run is over
	FrameError     FrameType = 8 // master → worker: why the master drops the connection
)

func (t FrameType) String() string {
	switch t {
	case FrameHello:
		return "hello"
	case FrameWelcome:
		return "welcome"
	case FrameRequest:
		return "request"
	case FrameTask:
		return "task"
	case FrameResult:
		return "result"
	case FrameHeartbeat:
		return "heartbeat"
	case FrameDone:
		return "done"
	case FrameError:
		return "error"
	}
	return fmt.Sprintf("type %d", byte(t))
}

// Bounds of frames.
const (
	// MaxName bounds a worker's name in its hello.
	MaxName = 255
	// MaxPrefetch bounds a connection's prefetch, the tasks it may hold
	// at once (computed, arriving or asked for): a worker holds their
	// inputs in memory.
	MaxPrefetch = 16
	// MaxMessage bounds an error frame's message.
	MaxMessage = 1024
	// MaxTaskBytes bounds a task's bytes (task_bytes): a worker holds a
	// task's input in memory.
	MaxTaskBytes = 256 << 20
	// MaxControlFrame bounds every frame but a task (the largest is an
	// error frame): what a master reads from a worker.
	MaxControlFrame = 1 + MaxMessage
	// taskHeader is a task frame's bytes before its input: length, type,
	// task, ops.
	taskHeader = 4 + 1 + 8 + 8
)

// Frame is one message of the protocol. Which fields it carries depends
// on its Type: hello has Version, Procs, Proc, Prefetch and Name; welcome has
// Version, Heartbeat, Timeout, InputBytes and ResultBytes; task has Task,
// Ops and Data (the input); result has Task and Data (the result); error
// has Message; request, heartbeat and done have nothing.
type Frame struct {
	Type FrameType

	Version uint16
	// Procs is the number of worker processes of the worker's VM, Proc
	// this one's index (0 ≤ Proc < Procs).
	Procs, Proc uint16
	// Prefetch is the tasks the connection may hold at once, from 1 to
	// MaxPrefetch: the one it computes and those it asked for meanwhile.
	Prefetch uint16
	Name     string

	// Heartbeat is how often each side sends a frame when it has nothing
	// else to send; Timeout how long each side waits for a frame before
	// it drops the connection (whole milliseconds, Heartbeat < Timeout).
	Heartbeat, Timeout time.Duration
	// InputBytes and ResultBytes are the size of every task's input and
	// result in this run.
	InputBytes  uint32
	ResultBytes uint8

	Task uint64
	Ops  uint64
	Data []byte

	Message string
}

// errField is ErrFrame about one field of a frame.
func errField(t FrameType, field, format string, a ...any) error {
	return fmt.Errorf("%w: %s: %s: %s", ErrFrame, t, field, fmt.Sprintf(format, a...))
}

// check reports the first field of f that the protocol does not allow.
func (f *Frame) check() error {
	switch f.Type {
	case FrameHello:
		switch {
		case f.Procs == 0:
			return errField(f.Type, "procs", "0, want at least 1")
		case f.Proc >= f.Procs:
			return errField(f.Type, "proc", "%d, want less than procs (%d)", f.Proc, f.Procs)
		case f.Prefetch < 1 || f.Prefetch > MaxPrefetch:
			return errField(f.Type, "prefetch", "%d, want from 1 to %d", f.Prefetch, MaxPrefetch)
		case len(f.Name) > MaxName:
			return errField(f.Type, "name", "%d bytes, more than %d", len(f.Name), MaxName)
		case !utf8.ValidString(f.Name):
			return errField(f.Type, "name", "not UTF-8")
		}
	case FrameWelcome:
		ms := func(d time.Duration) bool { return d > 0 && d%time.Millisecond == 0 && d/time.Millisecond <= 1<<32-1 }
		switch {
		case !ms(f.Heartbeat):
			return errField(f.Type, "heartbeat", "%v, want a whole number of milliseconds from 1 ms", f.Heartbeat)
		case !ms(f.Timeout) || f.Timeout <= f.Heartbeat:
			return errField(f.Type, "timeout", "%v, want a whole number of milliseconds above the heartbeat (%v)", f.Timeout, f.Heartbeat)
		case f.InputBytes > MaxTaskBytes:
			return errField(f.Type, "input_bytes", "%d, more than %d", f.InputBytes, MaxTaskBytes)
		case f.ResultBytes > DigestSize:
			return errField(f.Type, "result_bytes", "%d, more than the digest's %d", f.ResultBytes, DigestSize)
		}
	case FrameTask:
		switch {
		case f.Ops == 0:
			return errField(f.Type, "ops", "0, want at least 1")
		case len(f.Data) > MaxTaskBytes:
			return errField(f.Type, "input", "%d bytes, more than %d", len(f.Data), MaxTaskBytes)
		}
	case FrameResult:
		if len(f.Data) > DigestSize {
			return errField(f.Type, "result", "%d bytes, more than the digest's %d", len(f.Data), DigestSize)
		}
	case FrameError:
		switch {
		case len(f.Message) > MaxMessage:
			return errField(f.Type, "message", "%d bytes, more than %d", len(f.Message), MaxMessage)
		case !utf8.ValidString(f.Message):
			return errField(f.Type, "message", "not UTF-8")
		}
	case FrameRequest, FrameHeartbeat, FrameDone:
	default:
		return fmt.Errorf("%w: type: %d is no frame type", ErrFrame, byte(f.Type))
	}
	return nil
}

// AppendFrame appends f's encoding to dst: its length (big-endian uint32,
// the bytes after it), its type and its payload.
func AppendFrame(dst []byte, f Frame) ([]byte, error) {
	if err := f.check(); err != nil {
		return dst, err
	}
	at := len(dst)
	dst = append(dst, 0, 0, 0, 0, byte(f.Type))
	be := binary.BigEndian
	switch f.Type {
	case FrameHello:
		dst = be.AppendUint16(dst, f.Version)
		dst = be.AppendUint16(dst, f.Procs)
		dst = be.AppendUint16(dst, f.Proc)
		dst = be.AppendUint16(dst, f.Prefetch)
		dst = append(dst, f.Name...)
	case FrameWelcome:
		dst = be.AppendUint16(dst, f.Version)
		dst = be.AppendUint32(dst, uint32(f.Heartbeat/time.Millisecond))
		dst = be.AppendUint32(dst, uint32(f.Timeout/time.Millisecond))
		dst = be.AppendUint32(dst, f.InputBytes)
		dst = append(dst, f.ResultBytes)
	case FrameTask:
		dst = be.AppendUint64(dst, f.Task)
		dst = be.AppendUint64(dst, f.Ops)
		dst = append(dst, f.Data...)
	case FrameResult:
		dst = be.AppendUint64(dst, f.Task)
		dst = append(dst, f.Data...)
	case FrameError:
		dst = append(dst, f.Message...)
	}
	be.PutUint32(dst[at:], uint32(len(dst)-at-4))
	return dst, nil
}

// appendTaskHeader appends a task frame's bytes before its input of n
// bytes, so that a master sends one input to many workers without
// copying it into each frame.
func appendTaskHeader(dst []byte, task, ops uint64, n int) []byte {
	be := binary.BigEndian
	dst = be.AppendUint32(dst, uint32(1+8+8+n))
	dst = append(dst, byte(FrameTask))
	dst = be.AppendUint64(dst, task)
	return be.AppendUint64(dst, ops)
}

// ReadFrame reads one frame from r; a frame whose length is 0 or more
// than max is refused before its payload is read. An error is ErrFrame
// for a frame that does not decode, else r's (io.EOF when r ends before a
// frame begins, io.ErrUnexpectedEOF within one).
func ReadFrame(r io.Reader, max int) (Frame, error) {
	body, err := readBody(r, max)
	if err != nil {
		return Frame{}, err
	}
	return DecodeFrame(body)
}

// readBody reads one frame's type and payload (the bytes after its
// length), as ReadFrame does, without decoding them.
func readBody(r io.Reader, max int) ([]byte, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if n == 0 || uint64(n) > uint64(max) {
		return nil, fmt.Errorf("%w: length: %d, want from 1 to %d", ErrFrame, n, max)
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(r, body); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	return body, nil
}

// helloVersion is the protocol version of a hello's body, read before
// the rest, whose layout depends on it: the version is the first field
// of a hello in every version.
func helloVersion(body []byte) (uint16, bool) {
	if len(body) < 3 || FrameType(body[0]) != FrameHello {
		return 0, false
	}
	return binary.BigEndian.Uint16(body[1:]), true
}

// DecodeFrame decodes a frame's type and payload (the bytes after its
// length) and checks its fields.
func DecodeFrame(body []byte) (Frame, error) {
	if len(body) == 0 {
		return Frame{}, fmt.Errorf("%w: empty", ErrFrame)
	}
	f := Frame{Type: FrameType(body[0])}
	p := body[1:]
	be := binary.BigEndian
	need := func(field string, n int) error {
		if len(p) < n {
			return errField(f.Type, field, "the payload has %d bytes, want at least %d", len(p), n)
		}
		return nil
	}
	exact := func(n int) error {
		if len(p) != n {
			return errField(f.Type, "length", "the payload has %d bytes, want %d", len(p), n)
		}
		return nil
	}
	switch f.Type {
	case FrameHello:
		if err := need("name", 8); err != nil {
			return Frame{}, err
		}
		f.Version, f.Procs, f.Proc, f.Prefetch = be.Uint16(p), be.Uint16(p[2:]), be.Uint16(p[4:]), be.Uint16(p[6:])
		f.Name = string(p[8:])
	case FrameWelcome:
		if err := exact(15); err != nil {
			return Frame{}, err
		}
		f.Version = be.Uint16(p)
		f.Heartbeat = time.Duration(be.Uint32(p[2:])) * time.Millisecond
		f.Timeout = time.Duration(be.Uint32(p[6:])) * time.Millisecond
		f.InputBytes = be.Uint32(p[10:])
		f.ResultBytes = p[14]
	case FrameTask:
		if err := need("input", 16); err != nil {
			return Frame{}, err
		}
		f.Task, f.Ops = be.Uint64(p), be.Uint64(p[8:])
		f.Data = p[16:]
	case FrameResult:
		if err := need("result", 8); err != nil {
			return Frame{}, err
		}
		f.Task = be.Uint64(p)
		f.Data = p[8:]
	case FrameError:
		f.Message = string(p)
	case FrameRequest, FrameHeartbeat, FrameDone:
		if err := exact(0); err != nil {
			return Frame{}, err
		}
	}
	if err := f.check(); err != nil {
		return Frame{}, err
	}
	return f, nil
}
