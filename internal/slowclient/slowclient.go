// Package slowclient is the slow client of the tests of the HTTP servers
// (the daemon's, the agent's, package httpsrv): connections that send a
// request's headers, declare a body of 100,000 bytes and send one byte of
// it, as the clients that once held the servers at their limit of open
// files did. The design is described in docs/internals/tests.md of the
// repository ("How the tests are built"); the limits it meets are in
// docs/reference/http.md, "Slow clients".
package slowclient

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"testing"
	"time"
)

// BodyBytes is the length of the body a slow request declares.
const BodyBytes = 100000

// Safety bounds the waits of ClosedByServer: a server that is right closes
// at once; the bound turns one that holds the connection into a failure
// instead of a hang, and says nothing about speed.
const Safety = time.Minute

// Options of a slow request.
type Options struct {
	// Local is the client's IP on the loopback ("": any), e.g. 127.0.0.2
	// for a second client address.
	Local string
	// Header lines sent with the request, each "Name: value".
	Header []string
}

// Open opens a connection to addr (HOST:PORT) and sends "METHOD PATH" with
// a declared body of BodyBytes of which it sends one byte ("{"). The
// connection is closed when the test ends.
func Open(t testing.TB, addr, method, path string, o Options) net.Conn {
	t.Helper()
	d := net.Dialer{}
	if o.Local != "" {
		d.LocalAddr = &net.TCPAddr{IP: net.ParseIP(o.Local)}
	}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatalf("slow client: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	head := fmt.Sprintf("%s %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n", method, path, addr, BodyBytes)
	for _, h := range o.Header {
		head += h + "\r\n"
	}
	if _, err := io.WriteString(c, head+"\r\n{"); err != nil {
		t.Fatalf("slow client: %v", err)
	}
	return c
}

// Flood opens n slow connections, one after the other, so that the server
// accepts them in that order.
func Flood(t testing.TB, n int, addr, method, path string, o Options) []net.Conn {
	t.Helper()
	conns := make([]net.Conn, n)
	for i := range conns {
		conns[i] = Open(t, addr, method, path, o)
	}
	return conns
}

// ClosedByServer reads c to its end: true when the server closed it (an
// end of file or a reset, after an answer or none), false when the server
// still held it after Safety.
func ClosedByServer(c net.Conn) bool {
	c.SetReadDeadline(time.Now().Add(Safety))
	_, err := io.Copy(io.Discard, c)
	return !errors.Is(err, os.ErrDeadlineExceeded)
}
