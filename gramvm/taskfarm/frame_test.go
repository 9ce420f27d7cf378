package taskfarm

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// goodFrames are one frame of each type.
var goodFrames = []Frame{
	{Type: FrameHello, Version: ProtocolVersion, Procs: 4, Proc: 3, Prefetch: 2, Name: "j-1-a1-w1"},
	{Type: FrameHello, Version: ProtocolVersion, Procs: 1, Prefetch: 1},
	{Type: FrameHello, Version: ProtocolVersion, Procs: 1, Prefetch: MaxPrefetch, Name: "w"},
	{Type: FrameWelcome, Version: ProtocolVersion, Heartbeat: 3 * time.Second, Timeout: 15 * time.Second, InputBytes: 4064, ResultBytes: 32},
	{Type: FrameRequest},
	{Type: FrameTask, Task: 7, Ops: 1e6, Data: []byte("input bytes")},
	{Type: FrameTask, Task: 1<<64 - 1, Ops: 1},
	{Type: FrameResult, Task: 7, Data: bytes.Repeat([]byte{9}, 32)},
	{Type: FrameResult, Task: 0},
	{Type: FrameHeartbeat},
	{Type: FrameDone},
	{Type: FrameError, Message: "result: task: 99 is not a task of this run"},
}

// frameBytes is a frame: its length, then body.
func frameBytes(body ...byte) []byte {
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(body))), body...)
}

func cat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

func u16(v uint16) []byte { return binary.BigEndian.AppendUint16(nil, v) }
func u32(v uint32) []byte { return binary.BigEndian.AppendUint32(nil, v) }
func u64(v uint64) []byte { return binary.BigEndian.AppendUint64(nil, v) }

// badFrames are encoded frames ReadFrame refuses, each with what its
// error names; FuzzReadFrame starts from them.
var badFrames = []struct {
	name, want string
	data       []byte
}{
	{"length 0", "length: 0", frameBytes()},
	{"length above max", "length: 2000", cat(u32(2000), make([]byte, 2000))},
	{"no such type", "type: 9 is no frame type", frameBytes(9)},
	{"type 0", "type: 0 is no frame type", frameBytes(0)},
	{"hello short", "hello: name: the payload has 6 bytes, want at least 8", frameBytes(cat([]byte{1}, u16(2), u16(1), u16(0))...)},
	{"hello of version 1", "hello: name: the payload has 7 bytes, want at least 8", frameBytes(cat([]byte{1}, u16(1), u16(1), u16(0), []byte("w"))...)},
	{"hello procs 0", "hello: procs: 0", frameBytes(cat([]byte{1}, u16(2), u16(0), u16(0), u16(1))...)},
	{"hello proc beyond", "hello: proc: 2, want less than procs (2)", frameBytes(cat([]byte{1}, u16(2), u16(2), u16(2), u16(1))...)},
	{"hello prefetch 0", "hello: prefetch: 0, want from 1 to 16", frameBytes(cat([]byte{1}, u16(2), u16(1), u16(0), u16(0))...)},
	{"hello prefetch beyond", "hello: prefetch: 17, want from 1 to 16", frameBytes(cat([]byte{1}, u16(2), u16(1), u16(0), u16(17), []byte("w"))...)},
	{"hello name not utf-8", "hello: name: not UTF-8", frameBytes(cat([]byte{1}, u16(2), u16(1), u16(0), u16(1), []byte{0xff, 0xfe})...)},
	{"hello name long", "hello: name: 256 bytes", frameBytes(cat([]byte{1}, u16(2), u16(1), u16(0), u16(1), bytes.Repeat([]byte("n"), 256))...)},
	{"welcome short", "welcome: length: the payload has 14 bytes, want 15", frameBytes(cat([]byte{2}, u16(1), u32(1), u32(5), u32(0))...)},
	{"welcome heartbeat 0", "welcome: heartbeat", frameBytes(cat([]byte{2}, u16(1), u32(0), u32(5), u32(0), []byte{0})...)},
	{"welcome timeout below", "welcome: timeout", frameBytes(cat([]byte{2}, u16(1), u32(5), u32(5), u32(0), []byte{0})...)},
	{"welcome input too big", "welcome: input_bytes", frameBytes(cat([]byte{2}, u16(1), u32(1), u32(5), u32(MaxTaskBytes+1), []byte{0})...)},
	{"welcome result too big", "welcome: result_bytes: 33", frameBytes(cat([]byte{2}, u16(1), u32(1), u32(5), u32(0), []byte{33})...)},
	{"request with payload", "request: length: the payload has 1 bytes, want 0", frameBytes(3, 0)},
	{"task short", "task: input: the payload has 15 bytes, want at least 16", frameBytes(cat([]byte{4}, u64(1), make([]byte, 7))...)},
	{"task ops 0", "task: ops: 0", frameBytes(cat([]byte{4}, u64(1), u64(0))...)},
	{"result short", "result: result: the payload has 3 bytes, want at least 8", frameBytes(5, 1, 2, 3)},
	{"result long", "result: result: 33 bytes", frameBytes(cat([]byte{5}, u64(1), make([]byte, 33))...)},
	{"heartbeat with payload", "heartbeat: length", frameBytes(6, 1, 2)},
	{"done with payload", "done: length", frameBytes(7, 1)},
	{"error not utf-8", "error: message: not UTF-8", frameBytes(8, 0xc3)},
	{"error long", "error: message: 1025 bytes", frameBytes(append([]byte{8}, bytes.Repeat([]byte("e"), 1025)...)...)},
}

// testMax is the largest frame the tests read: a task of 1 KiB.
const testMax = 1 + 16 + 1024

// Every frame survives its encoding; ReadFrame reads them back to back.
func TestFrameRoundTrip(t *testing.T) {
	var stream []byte
	for _, f := range goodFrames {
		var err error
		if stream, err = AppendFrame(stream, f); err != nil {
			t.Fatalf("%+v: %v", f, err)
		}
	}
	r := bytes.NewReader(stream)
	for _, want := range goodFrames {
		got, err := ReadFrame(r, testMax)
		if err != nil {
			t.Fatalf("read %s: %v", want.Type, err)
		}
		if d := cmp.Diff(want, got, cmpopts.EquateEmpty()); d != "" {
			t.Errorf("%s (-want +got):\n%s", want.Type, d)
		}
	}
	if _, err := ReadFrame(r, testMax); err != io.EOF {
		t.Errorf("after the last frame: %v, want io.EOF", err)
	}
	// A task frame's header as the master writes it, then its input.
	in := []byte("the input")
	enc, err := AppendFrame(nil, Frame{Type: FrameTask, Task: 5, Ops: 9, Data: in})
	if err != nil {
		t.Fatal(err)
	}
	if hdr := appendTaskHeader(nil, 5, 9, len(in)); !bytes.Equal(append(hdr, in...), enc) || len(hdr) != taskHeader {
		t.Errorf("task header %x + input, want %x", hdr, enc)
	}
}

// Frames that do not decode are ErrFrame naming the field; a stream cut
// within a frame is io.ErrUnexpectedEOF; frames with bad fields are not
// encoded either.
func TestBadFrames(t *testing.T) {
	for _, c := range badFrames {
		t.Run(c.name, func(t *testing.T) {
			_, err := ReadFrame(bytes.NewReader(c.data), testMax)
			if !errors.Is(err, ErrFrame) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("err = %v, want ErrFrame saying %q", err, c.want)
			}
		})
	}
	good, err := AppendFrame(nil, goodFrames[0])
	if err != nil {
		t.Fatal(err)
	}
	for cut := 1; cut < len(good); cut++ {
		if _, err := ReadFrame(bytes.NewReader(good[:cut]), testMax); err != io.ErrUnexpectedEOF {
			t.Errorf("cut at %d: %v, want io.ErrUnexpectedEOF", cut, err)
		}
	}
	for _, f := range []Frame{
		{Type: FrameHello, Procs: 0, Prefetch: 1},
		{Type: FrameHello, Procs: 1, Prefetch: 0},
		{Type: FrameHello, Procs: 1, Prefetch: MaxPrefetch + 1},
		{Type: FrameWelcome, Heartbeat: time.Second, Timeout: time.Second},
		{Type: FrameWelcome, Heartbeat: 1500 * time.Microsecond, Timeout: time.Second},
		{Type: FrameTask, Ops: 0},
		{Type: FrameResult, Data: make([]byte, 33)},
		{Type: 42},
	} {
		if _, err := AppendFrame(nil, f); !errors.Is(err, ErrFrame) {
			t.Errorf("AppendFrame(%+v) = %v, want ErrFrame", f, err)
		}
	}
}

// FuzzReadFrame: any bytes give frames that encode back to the same
// bytes, or ErrFrame, or an end of input.
func FuzzReadFrame(f *testing.F) {
	for _, g := range goodFrames {
		b, err := AppendFrame(nil, g)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	for _, c := range badFrames {
		f.Add(c.data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		r := bytes.NewReader(data)
		for {
			before := len(data) - r.Len()
			fr, err := ReadFrame(r, testMax)
			if err != nil {
				if !errors.Is(err, ErrFrame) && err != io.EOF && err != io.ErrUnexpectedEOF {
					t.Fatalf("err = %v, not ErrFrame nor an end of input", err)
				}
				return
			}
			back, err := AppendFrame(nil, fr)
			if err != nil {
				t.Fatalf("a frame read does not encode: %+v: %v", fr, err)
			}
			if !bytes.Equal(back, data[before:len(data)-r.Len()]) {
				t.Fatalf("frame %+v encodes as %x, read from %x", fr, back, data[before:len(data)-r.Len()])
			}
		}
	})
}
