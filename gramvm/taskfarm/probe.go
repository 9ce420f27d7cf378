package taskfarm

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"sync"
	"time"

	"github.com/rs/zerolog"
)

// The bandwidth probe: a prober sends N bytes over one TCP connection to
// a sink and half-closes it; the sink reads until the end, timing its
// reads from the first to the last, and answers one JSON line with what
// it read and in how long. The sink's time leaves out the connection's
// set-up and the prober's own buffering.

// SinkReport is a sink's answer to one connection.
type SinkReport struct {
	Bytes   int64   `json:"bytes"`
	Seconds float64 `json:"seconds"`
}

// ProbeResult is a probe's measure (the JSON line of `taskfarm probe`):
// the bytes the sink read and its time, and their rate in Mbit/s.
type ProbeResult struct {
	Bytes   int64   `json:"bytes"`
	Seconds float64 `json:"seconds"`
	Mbps    float64 `json:"mbps"`
}

// sinkIdle bounds a sink's wait for a prober's next bytes.
const sinkIdle = time.Minute

// Sink answers probes on ln until ctx ends, or until it has answered
// count connections when count > 0; it closes ln when it returns.
func Sink(ctx context.Context, ln net.Listener, count int, log zerolog.Logger) error {
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()
	defer ln.Close()
	var wg sync.WaitGroup
	defer wg.Wait()
	for served := 0; count <= 0 || served < count; served++ {
		c, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("taskfarm sink: accept: %w", err)
		}
		wg.Go(func() { sinkConn(c, log) })
	}
	return nil
}

// sinkConn reads one probe and answers it.
func sinkConn(c net.Conn, log zerolog.Logger) {
	defer c.Close()
	setKeepAlive(c)
	buf := make([]byte, 256<<10)
	var n int64
	var first, last time.Time
	for {
		if err := c.SetReadDeadline(time.Now().Add(sinkIdle)); err != nil {
			return
		}
		k, err := c.Read(buf)
		if k > 0 {
			now := time.Now()
			if n == 0 {
				first = now
			}
			last = now
			n += int64(k)
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			log.Warn().Err(err).Str("prober", c.RemoteAddr().String()).Int64("bytes", n).Msg("taskfarm sink: the probe ended without its end")
			return
		}
	}
	rep := SinkReport{Bytes: n, Seconds: last.Sub(first).Seconds()}
	line, _ := json.Marshal(rep)
	_ = c.SetWriteDeadline(time.Now().Add(sinkIdle))
	if _, err := c.Write(append(line, '\n')); err != nil {
		log.Warn().Err(err).Str("prober", c.RemoteAddr().String()).Msg("taskfarm sink: answer")
		return
	}
	log.Info().Str("prober", c.RemoteAddr().String()).Int64("bytes", n).Float64("seconds", rep.Seconds).Msg("taskfarm sink: probe read")
}

// MaxProbeBytes bounds a probe.
const MaxProbeBytes = 1 << 40

// Probe sends n bytes to the sink at addr (host:port) and returns the
// sink's measure. ctx bounds the whole probe.
func Probe(ctx context.Context, addr string, n int64) (ProbeResult, error) {
	if n < 1 || n > MaxProbeBytes {
		return ProbeResult{}, fmt.Errorf("taskfarm probe: bytes: %d, want from 1 to %d", n, int64(MaxProbeBytes))
	}
	d := &net.Dialer{KeepAliveConfig: keepAlive}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return ProbeResult{}, fmt.Errorf("taskfarm probe: %w", err)
	}
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	buf := make([]byte, 256<<10)
	for i := range buf {
		buf[i] = byte(i*167 + 13) // not all zeros: nothing on the way compresses it
	}
	for left := n; left > 0; {
		k, err := c.Write(buf[:min(int64(len(buf)), left)])
		left -= int64(k)
		if err != nil {
			return ProbeResult{}, fmt.Errorf("taskfarm probe: send to %s with %d of %d bytes left: %w", addr, left, n, ctxErr(ctx, err))
		}
	}
	if tc, ok := c.(*net.TCPConn); ok {
		if err := tc.CloseWrite(); err != nil {
			return ProbeResult{}, fmt.Errorf("taskfarm probe: %w", err)
		}
	}
	line, err := bufio.NewReader(io.LimitReader(c, 4096)).ReadBytes('\n')
	if err != nil {
		return ProbeResult{}, fmt.Errorf("taskfarm probe: the sink's answer: %w", ctxErr(ctx, err))
	}
	var rep SinkReport
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&rep); err != nil {
		return ProbeResult{}, fmt.Errorf("taskfarm probe: the sink's answer %q: %w", clip(string(line)), err)
	}
	switch {
	case rep.Bytes != n:
		return ProbeResult{}, fmt.Errorf("taskfarm probe: the sink read %d bytes of the %d sent", rep.Bytes, n)
	case math.IsNaN(rep.Seconds) || rep.Seconds < 0:
		return ProbeResult{}, fmt.Errorf("taskfarm probe: the sink's answer: seconds: %g", rep.Seconds)
	case rep.Seconds == 0:
		return ProbeResult{}, fmt.Errorf("taskfarm probe: the sink read the %d bytes at once: too few to time, send more", n)
	}
	return ProbeResult{Bytes: rep.Bytes, Seconds: rep.Seconds, Mbps: float64(rep.Bytes) * 8 / rep.Seconds / 1e6}, nil
}

// ctxErr prefers ctx's error to the one of a connection ctx closed.
func ctxErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}
