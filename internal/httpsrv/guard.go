package httpsrv

import (
	"container/list"
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"time"

	"github.com/rs/zerolog"
)

// guard counts the connections that have not proven themselves yet (no
// request on them has been authenticated) and closes some of them when a
// cap is passed:
//
//   - per client address: while an address has more than perAddr unproven
//     connections, its oldest ones that have stayed unproven for grace are
//     closed, at an accept from that address and by a sweep when the grace
//     of its oldest runs out. A burst of new connections (a browser, a NAT,
//     a load test) is left alone: its requests prove it within
//     milliseconds, while a connection still unproven after the grace
//     belongs to a slow client.
//   - in all: while more than total connections are unproven, the oldest
//     unproven connection of the address that holds the most is closed at
//     once, whatever its age. This bounds the descriptors a flood can take,
//     and a flood from one address closes its own connections first.
//
// A newly accepted connection is never the one closed, so a client whose
// request proves itself before the caps' worth of connections arrive from
// its address is never kept out. Proven connections are tracked only to be
// forgotten when they close: they count against nothing.
type guard struct {
	perAddr, total int
	grace          time.Duration
	log            zerolog.Logger // sampled: an attack logs a few lines, not one per connection

	mu       sync.Mutex
	conns    map[net.Conn]*tracked
	byAddr   map[string]*list.List // unproven connections per client address, oldest first
	unproven int
	proven   int
	closed   uint64 // closed for a cap
	seq      uint64 // accept order
	sweep    *time.Timer
	sweepAt  time.Time // when sweep fires; zero: not pending
	stopped  bool
}

// tracked is one connection the guard knows.
type tracked struct {
	g      *guard
	c      net.Conn
	addr   string
	at     time.Time // accepted
	seq    uint64
	inAddr *list.Element // nil once proven or closed
}

func newGuard(l Limits, grace time.Duration, log zerolog.Logger) *guard {
	return &guard{
		perAddr: l.MaxUnprovenPerAddress, total: l.MaxUnproven, grace: grace,
		log:   log.Sample(&zerolog.BurstSampler{Burst: 3, Period: time.Minute}),
		conns: map[net.Conn]*tracked{}, byAddr: map[string]*list.List{},
	}
}

// listener counts every connection it accepts as unproven.
type listener struct {
	net.Listener
	g *guard
}

func (l *listener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	l.g.add(c)
	return c, nil
}

// add counts c as unproven and applies the caps.
func (g *guard) add(c net.Conn) {
	now := time.Now()
	g.mu.Lock()
	g.seq++
	t := &tracked{g: g, c: c, addr: clientAddr(c.RemoteAddr()), at: now, seq: g.seq}
	g.conns[c] = t
	l := g.byAddr[t.addr]
	if l == nil {
		l = list.New()
		g.byAddr[t.addr] = l
	}
	t.inAddr = l.PushBack(t)
	g.unproven++
	victims := g.trimLocked(l, now, nil)
	perAddr := len(victims)
	for g.unproven > g.total {
		v := g.hogLocked()
		g.forgetLocked(v)
		victims = append(victims, v)
	}
	g.closeLocked(victims, t.addr, perAddr)
}

// trimLocked closes (appends to victims) the oldest unproven connections
// of l beyond the cap per address that have stayed unproven for the grace,
// and plans a sweep for when the next one's grace runs out if l is still
// over the cap.
func (g *guard) trimLocked(l *list.List, now time.Time, victims []*tracked) []*tracked {
	for l.Len() > g.perAddr {
		v := l.Front().Value.(*tracked)
		if now.Sub(v.at) < g.grace {
			g.planSweepLocked(v.at.Add(g.grace))
			break
		}
		g.forgetLocked(v)
		victims = append(victims, v)
	}
	return victims
}

// hogLocked is the oldest unproven connection of the address with the
// most (of those, the address whose oldest is the oldest).
func (g *guard) hogLocked() *tracked {
	var best *tracked
	bestLen := 0
	for _, l := range g.byAddr {
		f := l.Front().Value.(*tracked)
		if l.Len() > bestLen || l.Len() == bestLen && f.seq < best.seq {
			best, bestLen = f, l.Len()
		}
	}
	return best
}

// planSweepLocked makes sure a sweep runs at or before at.
func (g *guard) planSweepLocked(at time.Time) {
	if g.stopped || !g.sweepAt.IsZero() && !at.Before(g.sweepAt) {
		return
	}
	if g.sweep != nil {
		g.sweep.Stop()
	}
	g.sweepAt = at
	g.sweep = time.AfterFunc(time.Until(at), g.sweepNow)
}

// sweepNow applies the cap per address to every address (the grace of a
// connection over it ran out).
func (g *guard) sweepNow() {
	now := time.Now()
	g.mu.Lock()
	g.sweepAt = time.Time{}
	var victims []*tracked
	var addr string
	for a, l := range g.byAddr {
		n := len(victims)
		if victims = g.trimLocked(l, now, victims); len(victims) > n {
			addr = a // the log names one of the addresses
		}
	}
	g.closeLocked(victims, addr, len(victims))
}

// closeLocked unlocks g.mu, then closes the victims and logs it (perAddr
// of them for the cap per address, the rest for the cap in all).
func (g *guard) closeLocked(victims []*tracked, addr string, perAddr int) {
	g.closed += uint64(len(victims))
	unproven, closed := g.unproven, g.closed
	g.mu.Unlock()
	for _, v := range victims {
		_ = v.c.Close()
	}
	if len(victims) == 0 {
		return
	}
	why := "max_unproven_per_address"
	if perAddr < len(victims) {
		why = "max_unproven_connections"
	}
	g.log.Warn().Str("client", addr).Str("cap", why).Int("max_unproven_per_address", g.perAddr).
		Int("max_unproven_connections", g.total).Int("unproven", unproven).Int("closed", len(victims)).
		Uint64("closed_total", closed).
		Msg("too many connections that have not authenticated a request: closed the oldest")
}

// forgetLocked removes t from the guard.
func (g *guard) forgetLocked(t *tracked) {
	if g.conns[t.c] == t {
		delete(g.conns, t.c)
	}
	if t.inAddr == nil {
		g.proven--
		return
	}
	g.unlistLocked(t)
}

// unlistLocked takes t off the unproven connections.
func (g *guard) unlistLocked(t *tracked) {
	l := g.byAddr[t.addr]
	l.Remove(t.inAddr)
	if l.Len() == 0 {
		delete(g.byAddr, t.addr)
	}
	t.inAddr = nil
	g.unproven--
}

// prove marks t proven: it no longer counts and is never closed by the
// guard.
func (g *guard) prove(t *tracked) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if t.inAddr == nil || g.conns[t.c] != t {
		return // already proven, or closed
	}
	g.unlistLocked(t)
	g.proven++
}

// stop cancels the planned sweep (the server is closing).
func (g *guard) stop() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.stopped = true
	if g.sweep != nil {
		g.sweep.Stop()
	}
}

// connContext is http.Server.ConnContext: it puts the connection's record
// in the context of every request on it, for Prove.
func (g *guard) connContext(ctx context.Context, c net.Conn) context.Context {
	c = rawConn(c)
	g.mu.Lock()
	t := g.conns[c]
	g.mu.Unlock()
	if t == nil {
		return ctx
	}
	return context.WithValue(ctx, connKey{}, t)
}

// connState is http.Server.ConnState: a closed (or hijacked) connection
// is forgotten.
func (g *guard) connState(c net.Conn, s http.ConnState) {
	if s != http.StateClosed && s != http.StateHijacked {
		return
	}
	c = rawConn(c)
	g.mu.Lock()
	defer g.mu.Unlock()
	if t := g.conns[c]; t != nil {
		g.forgetLocked(t)
	}
}

func (g *guard) stats() Stats {
	g.mu.Lock()
	defer g.mu.Unlock()
	return Stats{Unproven: g.unproven, Proven: g.proven, Closed: g.closed}
}

// rawConn is the connection the listener accepted under a TLS one.
func rawConn(c net.Conn) net.Conn {
	if tc, ok := c.(*tls.Conn); ok {
		return tc.NetConn()
	}
	return c
}

type connKey struct{}

// Prove marks the connection of the request whose context is ctx as
// proven: a request on it has been authenticated (the bearer token, a
// valid session, a correct login). From then on the connection counts
// against no cap and is never closed for one. It does nothing for a
// request that did not come through a Server.
func Prove(ctx context.Context) {
	if t, ok := ctx.Value(connKey{}).(*tracked); ok {
		t.g.prove(t)
	}
}

// clientAddr is the key a client's connections are counted under: its IP
// address, or its /64 for IPv6 (one host gets a whole /64), or the
// address as given when it is not IP (an in-memory pipe).
func clientAddr(a net.Addr) string {
	if a == nil {
		return ""
	}
	ap, err := netip.ParseAddrPort(a.String())
	if err != nil {
		return a.String()
	}
	ip := ap.Addr().Unmap().WithZone("")
	if ip.Is4() {
		return ip.String()
	}
	p, err := ip.Prefix(64)
	if err != nil {
		return ip.String()
	}
	return p.String()
}
