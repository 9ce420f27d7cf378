// Package memnet is an in-memory network for tests: a net.Listener whose
// connections are net.Pipe pairs, and an HTTP client that dials it. Every
// wait on it is on a channel, so a test that runs a server and its clients
// inside a testing/synctest bubble can let the bubble's fake clock advance
// (a real socket would block the clock). The design is described in
// docs/internals/tests.md of the repository ("How the tests are built").
package memnet

import (
	"context"
	"net"
	"net/http"
	"sync"
)

// Listener is an in-memory net.Listener. The zero value is not usable:
// call Listen.
type Listener struct {
	conns     chan net.Conn
	closed    chan struct{}
	closeOnce sync.Once
}

// Listen returns a new listener.
func Listen() *Listener {
	return &Listener{conns: make(chan net.Conn), closed: make(chan struct{})}
}

// Accept waits for the next connection, or for Close.
func (l *Listener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.closed:
		return nil, net.ErrClosed
	}
}

// Close stops Accept and Dial; connections already made stay open.
func (l *Listener) Close() error {
	l.closeOnce.Do(func() { close(l.closed) })
	return nil
}

// Addr is a made-up loopback address (memnet has no addresses).
func (l *Listener) Addr() net.Addr { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 1} }

// Dial makes a connection to the listener, or fails once it is closed or
// ctx ends.
func (l *Listener) Dial(ctx context.Context) (net.Conn, error) {
	server, client := net.Pipe()
	select {
	case l.conns <- server:
		return client, nil
	case <-l.closed:
		return nil, &net.OpError{Op: "dial", Net: "memnet", Err: net.ErrClosed}
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Client returns an HTTP client whose every request goes to the listener,
// whatever the URL's host.
func (l *Listener) Client() *http.Client {
	return &http.Client{Transport: &http.Transport{
		DialContext:       func(ctx context.Context, _, _ string) (net.Conn, error) { return l.Dial(ctx) },
		DisableKeepAlives: true,
	}}
}
