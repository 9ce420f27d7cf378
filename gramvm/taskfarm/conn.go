package taskfarm

import (
	"net"
	"sync/atomic"
	"time"
)

// keepAlive is the TCP keepalive of every connection of a run: a peer
// whose host is gone is noticed by the kernel too, besides the
// heartbeats. A live-migrated VM pauses well under a second and keeps
// its connections.
var keepAlive = net.KeepAliveConfig{Enable: true, Idle: 5 * time.Second, Interval: 5 * time.Second, Count: 3}

// setKeepAlive turns TCP keepalive on for a TCP connection.
func setKeepAlive(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetKeepAliveConfig(keepAlive)
	}
}

// farmConn is a connection whose reads each wait at most timeout (so a
// peer that sends nothing, not even a heartbeat, for that long is
// dropped, while a long frame that keeps arriving is not) and whose
// bytes are counted.
type farmConn struct {
	net.Conn
	timeout time.Duration // 0: no deadline
	bytes   *atomic.Int64
}

func (c *farmConn) Read(p []byte) (int, error) {
	if c.timeout > 0 {
		if err := c.Conn.SetReadDeadline(time.Now().Add(c.timeout)); err != nil {
			return 0, err
		}
	}
	n, err := c.Conn.Read(p)
	c.bytes.Add(int64(n))
	return n, err
}

func (c *farmConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	c.bytes.Add(int64(n))
	return n, err
}
