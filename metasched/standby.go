package metasched

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/metasched/metasched/internal/httpx"
	"github.com/metasched/metasched/internal/tlsx"
	"github.com/metasched/metasched/metasched/api"
)

// A daemon that waits for the leadership is a standby: it answers every
// request of the API by forwarding it to the leader (the leader's own
// answer, its errors and streams included), so that a client may talk to
// any daemon of the grid. Its /healthz says it stands by, and for whom.
// With no leader (an election under way), it answers 503 with Retry-After.
//
// A request goes on with its credentials: the bearer token or the session
// cookie as they came; a client certificate, which cannot be passed on, as
// its identity in api.ForwardedClientHeader, over the standby's own
// connection to the leader, made with the daemon's certificate (the leader
// takes that header from a daemon's certificate only).

// leaderValue is what a leader proclaims in the election: who it is and
// where its API is.
type leaderValue struct {
	Instance string `json:"instance"`
	API      string `json:"api"`
}

// standby forwards the API's requests to the leader it observes.
type standby struct {
	d      *Daemon
	client *clientv3.Client
	leader atomic.Pointer[leaderTarget]

	mu      sync.Mutex
	etcd    string    // etcd without its quorum: what its members said (see quorumLost)
	etcdAt  time.Time // when they said it
	probing bool
}

// leaderTarget is the leader a standby forwards to.
type leaderTarget struct {
	value leaderValue
	proxy *httputil.ReverseProxy
	tr    *http.Transport
}

// StandbyRetryAfter is what a standby with no leader tells clients to wait,
// in seconds.
const StandbyRetryAfter = 1

func newStandby(d *Daemon, cl *clientv3.Client) *standby { return &standby{d: d, client: cl} }

// forwardedHeader marks a request a standby forwarded: a daemon that
// stands by too (the leader it was told of just lost the leadership)
// answers it 503 rather than forward it again.
const forwardedHeader = "Metasched-Forwarded-By"

// noLeader says why no daemon leads: an election under way, or etcd
// without its quorum.
func (s *standby) noLeader() string {
	if q := s.quorumLost(); q != "" {
		return q
	}
	return "no daemon leads yet (an election is under way): try again shortly"
}

// quorumLost says that etcd has lost its quorum, from what its members
// last answered (they are asked in the background, at most once a
// second); "" when it has one, or before they first answered.
func (s *standby) quorumLost() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if time.Since(s.etcdAt) > time.Second && !s.probing {
		s.probing = true
		go func() {
			msg := s.probeEtcd()
			s.mu.Lock()
			s.etcd, s.etcdAt, s.probing = msg, time.Now(), false
			s.mu.Unlock()
		}()
	}
	return s.etcd
}

// probeEtcd asks each member of etcd for its status: "" when a majority
// answers with a leader.
func (s *standby) probeEtcd() string {
	eps := s.client.Endpoints()
	up, withLeader := 0, 0
	for _, ep := range eps {
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		st, err := s.client.Status(ctx, ep)
		cancel()
		if err == nil {
			up++
			if st.Leader != 0 {
				withLeader++
			}
		}
	}
	if up > len(eps)/2 && withLeader > len(eps)/2 {
		return ""
	}
	return fmt.Sprintf("no daemon leads: etcd has lost its quorum (%d of its %d members answer, %d of them with a leader): "+
		"the grid takes no request until a majority of its members is back", up, len(eps), withLeader)
}

// observe follows the election's leader until ctx ends.
func (s *standby) observe(ctx context.Context, e *concurrency.Election) {
	for ctx.Err() == nil {
		ch := e.Observe(ctx)
		for r := range ch {
			if len(r.Kvs) == 0 {
				s.leader.Store(nil)
				continue
			}
			s.set(r.Kvs[0].Value)
		}
		// The watch ended (etcd unreachable for a while): no leader known
		// until it is observed again.
		s.leader.Store(nil)
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

// set takes a leader's proclaimed value.
func (s *standby) set(raw []byte) {
	var v leaderValue
	if json.Unmarshal(raw, &v) != nil || v.Instance == s.d.instance {
		s.leader.Store(nil) // unreadable, or itself: it leads, and stops standing by
		return
	}
	u, err := url.Parse(v.API)
	if err != nil || u.Host == "" {
		s.leader.Store(nil)
		return
	}
	tr := &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 16, IdleConnTimeout: 90 * time.Second, TLSHandshakeTimeout: 30 * time.Second}
	if s.d.tls != nil {
		// The leader proves itself by the daemon's certificate for its
		// host; this daemon, by its own.
		tr.TLSClientConfig = s.d.tls.ClientConfig(tlsx.Daemon(), u.Hostname())
	}
	p := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(u)
			pr.Out.Host = u.Host
			pr.Out.Header.Del(api.ForwardedClientHeader)
			pr.Out.Header.Set(forwardedHeader, s.d.instance)
			if id, ok := tlsx.PeerIdentity(pr.In.TLS); ok && id.Kind == tlsx.KindClient {
				pr.Out.Header.Set(api.ForwardedClientHeader, id.URI().String())
			}
			pr.SetXForwarded()
		},
		Transport:     tr,
		FlushInterval: -1, // the event stream, as it comes
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			msg := s.quorumLost()
			if msg == "" {
				msg = fmt.Sprintf("this daemon stands by; the leader at %s does not answer: %v", v.API, err)
			}
			unavailable(w, msg)
		},
	}
	if old := s.leader.Swap(&leaderTarget{value: v, proxy: p, tr: tr}); old != nil {
		old.tr.CloseIdleConnections()
	}
}

func unavailable(w http.ResponseWriter, msg string) {
	w.Header().Set("Retry-After", fmt.Sprint(StandbyRetryAfter))
	httpx.WriteJSON(w, http.StatusServiceUnavailable, api.APIError{Error: msg, Code: api.CodeUnavailable})
}

// ServeHTTP answers a request of the API.
func (s *standby) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	t := s.leader.Load()
	if r.URL.Path == "/healthz" && r.Method == http.MethodGet {
		h := map[string]string{"status": "standby", "version": s.d.opt.Version, "instance": s.d.instance}
		if t != nil {
			h["leader"] = t.value.API
		}
		httpx.WriteJSON(w, http.StatusOK, h)
		return
	}
	switch {
	case t == nil:
		unavailable(w, s.noLeader())
	case r.Header.Get(forwardedHeader) != "":
		unavailable(w, "this daemon stands by too: the leadership is changing hands; try again shortly")
	default:
		t.proxy.ServeHTTP(w, r)
	}
}
