package httpsrv

import (
	"container/list"
	"context"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"time"

	"github.com/rs/zerolog"
)

// guard counts the connections that have not proven themselves yet (no
// request on them has been authenticated) and closes the oldest of them
// when a cap is passed. Proven connections are tracked only to be
// forgotten when they close: they count against nothing.
type guard struct {
	perAddr, total int
	log            zerolog.Logger // sampled: an attack logs a few lines, not one per connection

	mu      sync.Mutex
	conns   map[net.Conn]*tracked
	all     list.List             // unproven connections, oldest first
	byAddr  map[string]*list.List // unproven connections per client address, oldest first
	proven  int
	evicted uint64
}

// tracked is one connection the guard knows.
type tracked struct {
	g      *guard
	c      net.Conn
	addr   string
	inAll  *list.Element // nil once proven or closed
	inAddr *list.Element
}

func newGuard(l Limits, log zerolog.Logger) *guard {
	return &guard{
		perAddr: l.MaxUnprovenPerAddress, total: l.MaxUnproven,
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

// add counts c as unproven, then closes the oldest unproven connections
// of its address, and overall, beyond the caps. c is the newest, so it is
// never closed here: a client whose request proves itself before the caps'
// worth of newer connections arrive from its address always gets through.
func (g *guard) add(c net.Conn) {
	t := &tracked{g: g, c: c, addr: clientAddr(c.RemoteAddr())}
	g.mu.Lock()
	g.conns[c] = t
	t.inAll = g.all.PushBack(t)
	l := g.byAddr[t.addr]
	if l == nil {
		l = list.New()
		g.byAddr[t.addr] = l
	}
	t.inAddr = l.PushBack(t)
	var victims []*tracked
	var why string
	for l.Len() > g.perAddr {
		v := l.Front().Value.(*tracked)
		g.forgetLocked(v)
		victims, why = append(victims, v), "per_address"
	}
	for g.all.Len() > g.total {
		v := g.all.Front().Value.(*tracked)
		g.forgetLocked(v)
		victims, why = append(victims, v), "total"
	}
	g.evicted += uint64(len(victims))
	unproven, evicted := g.all.Len(), g.evicted
	g.mu.Unlock()
	for _, v := range victims {
		_ = v.c.Close()
	}
	if len(victims) > 0 {
		g.log.Warn().Str("client", t.addr).Str("cap", why).Int("max_unproven_per_address", g.perAddr).
			Int("max_unproven_connections", g.total).Int("unproven", unproven).Uint64("closed_total", evicted).
			Msg("too many connections that have not authenticated a request: closed the oldest")
	}
}

// forgetLocked removes t from the guard (the caller holds g.mu).
func (g *guard) forgetLocked(t *tracked) {
	if g.conns[t.c] == t {
		delete(g.conns, t.c)
	}
	if t.inAll == nil {
		g.proven--
		return
	}
	g.unlistLocked(t)
}

// unlistLocked takes t off the lists of unproven connections.
func (g *guard) unlistLocked(t *tracked) {
	g.all.Remove(t.inAll)
	l := g.byAddr[t.addr]
	l.Remove(t.inAddr)
	if l.Len() == 0 {
		delete(g.byAddr, t.addr)
	}
	t.inAll, t.inAddr = nil, nil
}

// prove marks t proven: it no longer counts and is never closed by the
// guard.
func (g *guard) prove(t *tracked) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if t.inAll == nil || g.conns[t.c] != t {
		return // already proven, or closed
	}
	g.unlistLocked(t)
	g.proven++
}

// connContext is http.Server.ConnContext: it puts the connection's record
// in the context of every request on it, for Prove.
func (g *guard) connContext(ctx context.Context, c net.Conn) context.Context {
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
	g.mu.Lock()
	defer g.mu.Unlock()
	if t := g.conns[c]; t != nil {
		g.forgetLocked(t)
	}
}

func (g *guard) stats() Stats {
	g.mu.Lock()
	defer g.mu.Unlock()
	return Stats{Unproven: g.all.Len(), Proven: g.proven, Closed: g.evicted}
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
