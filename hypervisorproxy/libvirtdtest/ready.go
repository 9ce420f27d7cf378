package libvirtdtest

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"time"
)

// The socket of libvirtd accepts connections within milliseconds, but the
// QEMU driver probes the capabilities of QEMU (seconds, on every fresh
// daemon, since each has its own cache) only when a client first needs them.
// Readiness is therefore a short session of real remote procedure calls:
// CONNECT_OPEN of qemu:///session, which fails when the QEMU driver is
// missing, CONNECT_GET_CAPABILITIES, answered once the probe is done, and
// CONNECT_CLOSE. What follows is just enough of the libvirt RPC protocol (XDR
// over the socket) for that, from src/rpc/virnetprotocol.x and
// src/remote/remote_protocol.x of libvirt.
const (
	remoteProgram              = 0x20008086
	remoteProtocolVersion      = 1
	procConnectOpen            = 1
	procConnectClose           = 2
	procConnectGetCapabilities = 7
	msgTypeCall                = 0
	msgTypeReply               = 1
	msgStatusOK                = 0
	msgHeaderLen               = 4 + 24 // length word, then the 6-word header
	maxReplyLen                = 4 << 20
)

// The driver URIs opened by the readiness probe, of a session daemon and
// of a root daemon.
const (
	sessionURI = "qemu:///session"
	systemURI  = "qemu:///system"
)

// errNotReady reports a probe that did not get an answer: try again.
var errNotReady = errors.New("no answer")

// waitReady returns once the daemon has answered CONNECT_OPEN and
// CONNECT_GET_CAPABILITIES on its socket, or with an error when the daemon exits, refuses the call or ctx is
// done.
func (d *Daemon) waitReady(ctx context.Context) error {
	sock := d.Socket()
	for {
		err := d.probe(ctx, sock)
		if !errors.Is(err, errNotReady) {
			return err
		}
		select {
		case <-d.exited:
			return fmt.Errorf("libvirtd exited before serving connections: %v", d.waitErr)
		case <-ctx.Done():
			return fmt.Errorf("waiting for libvirtd to serve %s: %w (last attempt: %v)", sock, ctx.Err(), err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// probe connects to sock and makes the readiness calls. It returns nil when
// they succeed, an error wrapping errNotReady when it got no answer (socket
// not there yet, connection closed, daemon exited or ctx done), and any other
// error when the daemon failed a call.
func (d *Daemon) probe(ctx context.Context, sock string) error {
	var dialer net.Dialer
	conn, err := dialer.DialContext(ctx, "unix", sock)
	if err != nil {
		return fmt.Errorf("%w: %v", errNotReady, err)
	}
	defer conn.Close()
	// Unblock the read below when the daemon exits or ctx is done.
	done := make(chan struct{})
	defer close(done)
	go func() {
		select {
		case <-d.exited:
		case <-ctx.Done():
		case <-done:
			return
		}
		conn.Close()
	}()

	uri := d.driverURI()
	if err := call(conn, uri, 1, procConnectOpen, connectOpenArgs(uri)); err != nil {
		return err
	}
	if err := call(conn, uri, 2, procConnectGetCapabilities, nil); err != nil {
		return err
	}
	// Ready. Closing politely keeps an "end of file" error out of the log.
	_ = call(conn, uri, 3, procConnectClose, nil)
	return nil
}

// call makes one call of procedure proc with XDR-encoded args on conn, whose
// driver is uri, and waits for its reply. It returns an error wrapping errNotReady when it got
// no reply, and another error when the call failed.
func call(conn net.Conn, uri string, serial, proc uint32, args []byte) error {
	b := binary.BigEndian.AppendUint32(nil, uint32(msgHeaderLen+len(args)))
	for _, w := range []uint32{remoteProgram, remoteProtocolVersion, proc, msgTypeCall, serial, msgStatusOK} {
		b = binary.BigEndian.AppendUint32(b, w)
	}
	if _, err := conn.Write(append(b, args...)); err != nil {
		return fmt.Errorf("%w: %v", errNotReady, err)
	}
	status, body, err := readReply(conn, proc, serial)
	if err != nil {
		return fmt.Errorf("%w: %v", errNotReady, err)
	}
	if status != msgStatusOK {
		return fmt.Errorf("libvirtd failed %s on %s: %s", procName(proc), uri, remoteErrorMessage(body))
	}
	return nil
}

// procName returns the name of a procedure called here.
func procName(proc uint32) string {
	switch proc {
	case procConnectOpen:
		return "CONNECT_OPEN"
	case procConnectClose:
		return "CONNECT_CLOSE"
	case procConnectGetCapabilities:
		return "CONNECT_GET_CAPABILITIES"
	}
	return fmt.Sprintf("procedure %d", proc)
}

// connectOpenArgs encodes the arguments of CONNECT_OPEN: the URI (a
// remote_string) and no flags.
func connectOpenArgs(uri string) []byte {
	b := binary.BigEndian.AppendUint32(nil, 1) // remote_string: present
	b = binary.BigEndian.AppendUint32(b, uint32(len(uri)))
	b = append(b, uri...)
	b = append(b, make([]byte, (4-len(uri)%4)%4)...) // XDR padding
	return binary.BigEndian.AppendUint32(b, 0)       // flags
}

// readReply reads one message from r and returns its status and body; it
// must be the reply to call serial of procedure proc.
func readReply(r io.Reader, proc, serial uint32) (status uint32, body []byte, err error) {
	var lenWord [4]byte
	if _, err := io.ReadFull(r, lenWord[:]); err != nil {
		return 0, nil, err
	}
	n := binary.BigEndian.Uint32(lenWord[:])
	if n < msgHeaderLen || n > maxReplyLen {
		return 0, nil, fmt.Errorf("bad message length %d", n)
	}
	msg := make([]byte, n-4)
	if _, err := io.ReadFull(r, msg); err != nil {
		return 0, nil, err
	}
	var h [6]uint32
	for i := range h {
		h[i] = binary.BigEndian.Uint32(msg[4*i:])
	}
	if h[0] != remoteProgram || h[2] != proc || h[3] != msgTypeReply || h[4] != serial {
		return 0, nil, fmt.Errorf("unexpected message (program %#x, procedure %d, type %d, serial %d)", h[0], h[2], h[3], h[4])
	}
	return h[5], msg[24:], nil
}

// remoteErrorMessage returns the message of an encoded remote_error
// (int code; int domain; remote_string message; ...).
func remoteErrorMessage(body []byte) string {
	if len(body) >= 16 && binary.BigEndian.Uint32(body[8:]) == 1 {
		n := binary.BigEndian.Uint32(body[12:])
		if msg := body[16:]; uint64(n) <= uint64(len(msg)) {
			return string(bytes.ToValidUTF8(msg[:n], []byte("?")))
		}
	}
	return "unknown error"
}
