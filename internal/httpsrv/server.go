// Package httpsrv is the HTTP server the daemon and the site agent both
// run, hardened against slow clients: the timeouts of a request and of its
// answer, and a cap on the connections that have not yet proven
// themselves (no request on them has been authenticated), per client
// address and in all, which closes the oldest of them rather than refuse
// a newcomer (per address, only those that stayed unproven for a grace
// period: a burst of new connections is not a slow client). Authenticated
// connections are never capped.
//
// The design is described in docs/reference/http.md of the
// repository, "Slow clients", and in docs/internals/security.md, "Slow and
// hostile clients".
package httpsrv

import (
	"context"
	"crypto/tls"
	stdlog "log"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/rs/zerolog"
)

// The defaults (the zero value of a field of Config means its default).
const (
	// DefaultReadHeaderTimeout bounds the request line and headers.
	DefaultReadHeaderTimeout = 10 * time.Second
	// DefaultReadTimeout bounds the whole request, headers and body, from
	// its first byte: a body that has not arrived by then is dropped.
	DefaultReadTimeout = 60 * time.Second
	// DefaultWriteTimeout bounds the writing of an answer, from its first
	// byte (a handler may take its time before it answers); each event of
	// a stream (Stream) gets it anew.
	DefaultWriteTimeout = 60 * time.Second
	// DefaultIdleTimeout bounds the wait for the next request on a
	// kept-alive connection.
	DefaultIdleTimeout = 2 * time.Minute
	// DefaultGrace is how long a new connection may stay unproven before
	// the cap per address may close it: a client sends its request at
	// once, and it is authenticated within milliseconds.
	DefaultGrace = time.Second
	// DefaultMaxUnproven caps the unproven connections in all.
	DefaultMaxUnproven = 1024
	// DefaultMaxUnprovenPerAddress caps the unproven connections of one
	// client address.
	DefaultMaxUnprovenPerAddress = 64
	// MaxUnprovenLimit is the largest cap a configuration may give.
	MaxUnprovenLimit = 1 << 20
)

// Timeouts of a Server; zero means the default.
type Timeouts struct {
	ReadHeader, Read, Write, Idle time.Duration
	// Grace is how long a connection may stay unproven before the cap
	// per address may close it.
	Grace time.Duration
}

// Limits of a Server: the caps on unproven connections; zero means the
// default. MaxUnprovenPerAddress above MaxUnproven is MaxUnproven.
type Limits struct {
	MaxUnproven           int
	MaxUnprovenPerAddress int
}

// Config configures a Server.
type Config struct {
	Timeouts
	Limits
	// Logger gets a line (a few a minute at most) when connections are
	// closed for a cap.
	Logger zerolog.Logger
	// BaseContext is http.Server.BaseContext (nil: context.Background).
	BaseContext func(net.Listener) context.Context
	// TLS, when set, serves HTTPS with it (package tlsx makes it); nil
	// serves plain HTTP.
	TLS *tls.Config
}

// WithDefaults returns c with every zero field set to its default.
func (c Config) WithDefaults() Config {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&c.ReadHeader, DefaultReadHeaderTimeout)
	def(&c.Read, DefaultReadTimeout)
	def(&c.Write, DefaultWriteTimeout)
	def(&c.Idle, DefaultIdleTimeout)
	def(&c.Grace, DefaultGrace)
	if c.MaxUnproven <= 0 {
		c.MaxUnproven = DefaultMaxUnproven
	}
	if c.MaxUnprovenPerAddress <= 0 {
		c.MaxUnprovenPerAddress = DefaultMaxUnprovenPerAddress
	}
	c.MaxUnprovenPerAddress = min(c.MaxUnprovenPerAddress, c.MaxUnproven)
	return c
}

// Server is an http.Server with the timeouts of its Config and the guard
// of unproven connections. Serve it on a listener; the handler marks
// connections proven with Prove.
type Server struct {
	cfg Config
	srv *http.Server
	g   *guard
}

// Stats counts a Server's connections.
type Stats struct {
	Unproven int    // open and not proven
	Proven   int    // open and proven
	Closed   uint64 // unproven connections closed for a cap, since the start
}

// New returns a server of h.
func New(h http.Handler, cfg Config) *Server {
	cfg = cfg.WithDefaults()
	g := newGuard(cfg.Limits, cfg.Grace, cfg.Logger)
	s := &Server{cfg: cfg, g: g}
	s.srv = &http.Server{
		Handler:           s.deadlines(h),
		ReadHeaderTimeout: cfg.ReadHeader,
		ReadTimeout:       cfg.Read,
		// No WriteTimeout: net/http would count it from the end of the
		// request's headers, so that a handler that takes its time (a live
		// migration, a cancel that waits for the agents) would lose its
		// answer. deadlines sets the write deadline when the answer starts.
		IdleTimeout: cfg.Idle,
		ConnState:   g.connState,
		ConnContext: g.connContext,
		BaseContext: cfg.BaseContext,
		// A failed TLS handshake (a certificate refused, an expired one)
		// is logged as a warning, a few a minute at most.
		ErrorLog: stdlog.New(errorLog{cfg.Logger.Sample(&zerolog.BurstSampler{Burst: 5, Period: time.Minute})}, "", 0),
	}
	return s
}

// errorLog writes net/http's own error lines as warnings.
type errorLog struct{ log zerolog.Logger }

func (e errorLog) Write(p []byte) (int, error) {
	e.log.Warn().Msg(strings.TrimSpace(string(p)))
	return len(p), nil
}

// Config returns the server's configuration, defaults filled in.
func (s *Server) Config() Config { return s.cfg }

// Serve accepts connections on ln and serves them until Shutdown or Close;
// it returns http.ErrServerClosed then.
func (s *Server) Serve(ln net.Listener) error {
	var l net.Listener = &listener{Listener: ln, g: s.g}
	if s.cfg.TLS != nil {
		l = tls.NewListener(l, s.cfg.TLS)
	}
	return s.srv.Serve(l)
}

// Shutdown stops accepting and waits (until ctx ends) for the requests in
// flight (http.Server.Shutdown).
func (s *Server) Shutdown(ctx context.Context) error {
	s.g.stop()
	return s.srv.Shutdown(ctx)
}

// Close closes the listeners and every connection (http.Server.Close).
func (s *Server) Close() error {
	s.g.stop()
	return s.srv.Close()
}

// Stats counts the server's connections now.
func (s *Server) Stats() Stats { return s.g.stats() }

// deadlines sets the write deadline of every answer: Write from the start
// of the handler (it covers a "100 Continue"), then Write from the first
// byte of the answer, and, once the handler has returned without writing,
// Write for the answer net/http writes for it. An answer marked a stream
// (Stream) gets Write anew before each of its writes.
func (s *Server) deadlines(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		aw := &answerWriter{ResponseWriter: w, rc: http.NewResponseController(w), timeout: s.cfg.Write}
		aw.renew()
		h.ServeHTTP(aw, r.WithContext(context.WithValue(r.Context(), answerKey{}, aw)))
		if !aw.started {
			aw.renew()
		}
	})
}

type answerKey struct{}

// Stream marks the answer to r as a stream (server-sent events): instead
// of one write deadline for the whole answer, each write and flush gets
// the write timeout anew, so a stream lasts as long as its client takes
// what is sent. It does nothing for a request that did not come through a
// Server. Call it before writing.
func Stream(r *http.Request) {
	if aw, ok := r.Context().Value(answerKey{}).(*answerWriter); ok {
		aw.stream = true
	}
}

// answerWriter sets the connection's write deadline (through
// http.ResponseController) when an answer starts, and at every write of a
// stream.
type answerWriter struct {
	http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
	started bool // the answer has begun (its deadline is set)
	stream  bool
}

func (w *answerWriter) renew() {
	_ = w.rc.SetWriteDeadline(time.Now().Add(w.timeout)) // not supported (a test's recorder): no deadline
}

func (w *answerWriter) begin() {
	if !w.started || w.stream {
		w.started = true
		w.renew()
	}
}

func (w *answerWriter) WriteHeader(code int) {
	if code < 200 {
		w.renew() // an informational answer: the final one is still to come
	} else {
		w.begin()
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *answerWriter) Write(b []byte) (int, error) {
	w.begin()
	return w.ResponseWriter.Write(b)
}

// Flush implements http.Flusher.
func (w *answerWriter) Flush() { _ = w.FlushError() }

// FlushError flushes the answer (http.ResponseController.Flush calls it).
func (w *answerWriter) FlushError() error {
	w.begin()
	return w.rc.Flush()
}

// Unwrap returns the wrapped writer (for http.ResponseController).
func (w *answerWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
