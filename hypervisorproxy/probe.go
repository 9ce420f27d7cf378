package hypervisorproxy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/metasched/metasched/graph"
	"github.com/metasched/metasched/internal/tlsx"
)

// Probe limits.
const (
	DefaultProbeBytes   = 8 << 20
	MaxProbeBytes       = 1 << 30
	DefaultProbeTimeout = 30 * time.Second
	MaxProbeTimeout     = 10 * time.Minute
)

// Probe measures the throughput from this agent to another: it sends a
// bounded stream of bytes to the other agent's probe sink (PUT
// /v1/probe/sink) over one TLS connection, on which each agent proves
// itself by its certificate; the sink times the transfer from its first
// byte to its last. A transfer cut by the timeout still reports what
// arrived. GramVM uses the result to keep link weights current. An agent
// without TLS cannot probe: it has no way to prove itself to another
// but a token, which it must not pass on.
func (a *Agent) Probe(ctx context.Context, req ProbeRequest) (Probe, error) {
	var errs []error
	u, err := url.Parse(req.Target)
	if err != nil || u.Scheme != "https" || u.Host == "" || u.Path != "" && u.Path != "/" || u.RawQuery != "" || u.User != nil {
		errs = append(errs, fmt.Errorf("target: must be an agent's address like https://10.0.0.2:9101, not %q", req.Target))
	}
	if err := tlsx.Agent(req.Site).Check(); err != nil || req.Site == a.site.Site {
		errs = append(errs, fmt.Errorf("site: must be the site of another agent, not %q", req.Site))
	}
	n := req.Bytes
	switch {
	case n == 0:
		n = DefaultProbeBytes
	case n < 1<<10 || n > MaxProbeBytes:
		errs = append(errs, fmt.Errorf("bytes: must be within 1024 and %d, not %d", MaxProbeBytes, n))
	}
	timeout := DefaultProbeTimeout
	if req.Timeout != "" {
		t, err := time.ParseDuration(req.Timeout)
		if err != nil || t <= 0 || t > MaxProbeTimeout {
			errs = append(errs, fmt.Errorf("timeout: must be a duration within 0s and %v like 30s, not %q", MaxProbeTimeout, req.Timeout))
		}
		timeout = t
	}
	if len(errs) > 0 {
		return Probe{}, fmt.Errorf("probe: %w: %w", ErrInvalid, errors.Join(errs...))
	}
	if a.tls == nil {
		return Probe{}, fmt.Errorf("probe: %w: this agent serves plain HTTP: probes need tls (agents prove themselves to each other by their certificates)", ErrUnsupported)
	}
	// The stream is cut at the timeout; the sink then reports what came.
	sendCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	body := &deadlineReader{ctx: sendCtx, left: n}
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPut, strings.TrimRight(req.Target, "/")+"/v1/probe/sink", body)
	if err != nil {
		return Probe{}, fmt.Errorf("probe %s: %w", req.Target, err)
	}
	hreq.Header.Set("Content-Type", "application/octet-stream")
	client := &http.Client{Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true,
		TLSClientConfig: a.tls.ClientConfig(tlsx.Agent(req.Site), u.Hostname())}, Timeout: timeout + 30*time.Second}
	resp, err := client.Do(hreq)
	if err != nil {
		return Probe{}, fmt.Errorf("probe %s: %w", req.Target, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode != http.StatusOK {
		return Probe{}, fmt.Errorf("probe %s: %w", req.Target, DecodeError(resp.StatusCode, data))
	}
	var sr SinkResult
	if err := json.Unmarshal(data, &sr); err != nil {
		return Probe{}, fmt.Errorf("probe %s: the sink's answer: %w", req.Target, err)
	}
	p := Probe{Target: req.Target, Bytes: sr.Bytes, Seconds: sr.Seconds, MeasuredAt: a.now().UTC()}
	if sr.Seconds > 0 {
		p.Mbps = float64(sr.Bytes) * 8 / sr.Seconds / 1e6
	}
	if err := sr.check(n, p.Mbps); err != nil {
		return Probe{}, fmt.Errorf("probe %s: the sink's answer is not a measure of this probe: %w", req.Target, err)
	}
	a.log.Info().Str("op", "probe").Str("target", req.Target).Int64("bytes", p.Bytes).
		Float64("seconds", p.Seconds).Float64("mbps", p.Mbps).Msg("bandwidth probe")
	return p, nil
}

// check returns what is wrong with a sink's answer to a probe of n bytes
// that gives a rate of mbps: the sink cannot have timed more bytes than it
// received, nor received more than were sent, and its time and the rate
// must be finite and not negative, the rate at most graph.MaxMbps (what a
// link of a grid can have).
func (sr SinkResult) check(n int64, mbps float64) error {
	switch {
	case sr.Bytes < 0 || sr.TotalBytes < sr.Bytes || sr.TotalBytes > n:
		return fmt.Errorf("bytes %d of total_bytes %d: must be 0 <= bytes <= total_bytes <= the %d bytes sent", sr.Bytes, sr.TotalBytes, n)
	case !(sr.Seconds >= 0) || math.IsInf(sr.Seconds, 0):
		return fmt.Errorf("seconds %g: must be a finite time >= 0", sr.Seconds)
	case !(mbps >= 0 && mbps <= graph.MaxMbps):
		return fmt.Errorf("%d bytes in %g s is %g Mbit/s: must be at most %g", sr.Bytes, sr.Seconds, mbps, float64(graph.MaxMbps))
	}
	return nil
}

// deadlineReader yields left bytes of a fixed pattern, then EOF; it ends
// early (EOF) when ctx is done, so that the transfer is bounded in time.
type deadlineReader struct {
	ctx  context.Context
	left int64
}

var probeChunk = bytes.Repeat([]byte("metasched bandwidth probe "), 2521) // ~64 KiB

func (r *deadlineReader) Read(p []byte) (int, error) {
	if r.left <= 0 || r.ctx.Err() != nil {
		return 0, io.EOF
	}
	n := min(int64(len(p)), r.left, int64(len(probeChunk)))
	copy(p, probeChunk[:n])
	r.left -= n
	return int(n), nil
}

// sink receives a probe stream and times it from the end of the first read
// to the end of the last: the bytes of the first read arrived before the
// clock started and do not count.
func sink(body io.Reader, limit int64) (SinkResult, error) {
	buf := make([]byte, 64<<10)
	var first, last time.Time
	var total, head int64
	for {
		n, err := body.Read(buf)
		if n > 0 {
			now := time.Now()
			if first.IsZero() {
				first, head = now, int64(n) // arrived before the clock started
			}
			last = now
			total += int64(n)
			if total > limit {
				return SinkResult{}, fmt.Errorf("%w: the probe stream exceeds %d bytes", ErrInvalid, limit)
			}
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			if total > 0 && errors.Is(err, io.ErrUnexpectedEOF) {
				break
			}
			return SinkResult{}, err
		}
	}
	return SinkResult{Bytes: total - head, Seconds: last.Sub(first).Seconds(), TotalBytes: total}, nil
}
