package metasched

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/zap"

	"github.com/metasched/metasched/metasched/store"
)

// The daemon's state in etcd (the serve configuration's store: {etcd}).
// Several daemons may run on one etcd cluster; one of them leads: it holds
// the election's key under a lease of its own, and only then opens the
// store and acts. Every write of the leader's is conditional on that key
// (its creation revision): a daemon whose lease expired (it was cut off,
// or stalled) can no longer write a thing, and it stops at once when its
// session ends or its lease may expire (see keep). The others wait for the
// leadership and take over when the lease of the leader expires (at most
// DefaultLeaseTTL after it stopped renewing it).

// DefaultLeaseTTL is the leader's lease, in seconds (the configuration's
// store.etcd.lease_ttl): how long after a leader stops renewing it (its
// process or its machine lost) another daemon may lead. The leader rides
// out an outage of etcd of 7 s at least (see keep): the election of etcd's
// own leader when a member is lost takes seconds on a loaded machine
// (with a lease of 5 s, one of 3 s deposed a leader).
const DefaultLeaseTTL = 10

// ErrLostLeadership: the leader's lease ended (it was cut off from etcd's
// quorum for longer than its TTL, or revoked): the daemon stopped acting.
var ErrLostLeadership = errors.New("lost the leadership")

// leadership is a daemon's place in the election.
type leadership struct {
	client   *clientv3.Client
	session  *concurrency.Session
	election *concurrency.Election
	key      string
	rev      int64

	lostCh   chan struct{} // closed when the leader must stop
	lostOnce sync.Once
	why      atomic.Pointer[string]
	stop     context.Context // ended by close (cancel): keep returns
	cancel   context.CancelFunc
	kept     chan struct{} // closed when keep has returned
}

// guard is the condition of every write of the leader's.
func (l *leadership) guard() []clientv3.Cmp {
	return []clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(l.key), "=", l.rev)}
}

// lost is closed when the leader must stop acting: its session ended, or
// it could not renew its lease for so long that the lease may expire.
func (l *leadership) lost() <-chan struct{} { return l.lostCh }

// reason says why lost is closed.
func (l *leadership) reason() string {
	if w := l.why.Load(); w != nil {
		return *w
	}
	return ""
}

func (l *leadership) lose(why string) {
	l.lostOnce.Do(func() {
		l.why.Store(&why)
		close(l.lostCh)
	})
}

// keep renews the leader's lease on its own, besides the session's
// keep-alive, to know how long the lease surely lasts: etcd renews it on a
// request sent at t, so it lasts until t+TTL at least. Unless a later
// renewal succeeded, the leader stops acting (lost) a fifth of the TTL
// before that: a leader cut off from etcd's quorum has stopped before its
// lease can expire and another daemon can lead. It renews every tenth of
// the TTL, and after a renewal that failed it tries again at once (each
// try bounded by a fifth of the TTL, so that one stuck on a dead member
// leaves time for another): a leader rides out an outage of etcd (the
// election of its own leader) of seven tenths of the TTL at least.
func (l *leadership) keep(ttl time.Duration) {
	defer close(l.kept)
	margin := ttl / 5
	deadline := time.Now().Add(margin) // the lease's age is unknown: renew at once
	for {
		left := time.Until(deadline)
		if left <= 0 {
			l.lose(fmt.Sprintf("no renewal of the lease in etcd answered for %s", ttl-margin))
			return
		}
		sent := time.Now()
		ctx, cancel := context.WithTimeout(l.stop, min(margin, left))
		_, err := l.client.KeepAliveOnce(ctx, l.session.Lease())
		cancel()
		wait := keepRetry
		switch {
		case l.stop.Err() != nil:
			return
		case err == nil:
			deadline = sent.Add(ttl - margin)
			wait = margin / 2
		case errors.Is(err, rpctypes.ErrLeaseNotFound):
			l.lose("the lease in etcd expired")
			return
		}
		select {
		case <-l.stop.Done():
			return
		case <-l.session.Done():
			l.lose("the session in etcd ended")
			return
		case <-time.After(max(min(wait, time.Until(deadline)), 0)):
		}
	}
}

// keepRetry is the pause of keep after a renewal that failed (etcd
// answered with an error: it has no leader yet, say).
const keepRetry = 100 * time.Millisecond

// close gives the leadership up (another daemon leads at once) and closes
// the client.
func (l *leadership) close() error {
	l.cancel()
	<-l.kept
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = l.election.Resign(ctx)
	_ = l.session.Close()
	return l.client.Close()
}

// EtcdClient connects to the configuration's etcd cluster (the caller
// closes it).
func EtcdClient(c *StoreEtcd) (*clientv3.Client, error) {
	cfg := clientv3.Config{Endpoints: c.Endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop()}
	if c.TLS != nil {
		cert, err := tls.LoadX509KeyPair(c.TLS.Cert, c.TLS.Key)
		if err != nil {
			return nil, fmt.Errorf("store.etcd.tls: %w", err)
		}
		pem, err := os.ReadFile(c.TLS.CA)
		if err != nil {
			return nil, fmt.Errorf("store.etcd.tls.ca_file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("store.etcd.tls.ca_file %s: no certificate in it", c.TLS.CA)
		}
		cfg.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	cl, err := clientv3.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("store.etcd: %s: %w", strings.Join(c.Endpoints, ", "), err)
	}
	return cl, nil
}

// lead connects to etcd and waits (until ctx ends) for the leadership. It
// stands by meanwhile: the API's requests are forwarded to the leader.
func (d *Daemon) lead(ctx context.Context, c *StoreEtcd) (*leadership, error) {
	cl, err := EtcdClient(c)
	if err != nil {
		return nil, err
	}
	ttl := d.opt.LeaseTTL
	if ttl <= 0 {
		ttl = int(c.LeaseTTL / time.Second)
	}
	if ttl <= 0 {
		ttl = DefaultLeaseTTL
	}
	adv, err := d.cfg.AdvertiseURL()
	if err != nil {
		cl.Close()
		return nil, err
	}
	// Stand by (from before the session: a daemon started while etcd has
	// no quorum says so) until this daemon leads.
	sb := newStandby(d, cl)
	if d.opt.Standby != nil {
		var tc *tls.Config
		if d.tls != nil {
			tc = d.tls.ServerConfig(tls.VerifyClientCertIfGiven)
		}
		d.opt.Standby(sb, tc)
	}
	for {
		l, err := d.campaign(ctx, cl, sb, c.Prefix+"leader", ttl, adv)
		if err == nil {
			return l, nil
		}
		if ctx.Err() != nil {
			cl.Close()
			return nil, fmt.Errorf("store.etcd: wait for the leadership: %w", ctx.Err())
		}
		d.log.Warn().Err(err).Strs("endpoints", c.Endpoints).Msg("cannot stand for the leadership in etcd: trying again in a second")
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

// campaign opens a session (its lease) and waits in the election until
// this daemon leads, observing the leader for the standby meanwhile. A
// session that ends while it waits (its lease expired: etcd lost its
// quorum for longer than the TTL) ends the campaign with an error: the
// caller campaigns again, on a new session.
func (d *Daemon) campaign(ctx context.Context, cl *clientv3.Client, sb *standby, key string, ttl int, adv string) (*leadership, error) {
	s, err := concurrency.NewSession(cl, concurrency.WithTTL(ttl), concurrency.WithContext(context.WithoutCancel(ctx)))
	if err != nil {
		return nil, fmt.Errorf("store.etcd: %s: open a session: %w", strings.Join(cl.Endpoints(), ", "), err)
	}
	e := concurrency.NewElection(s, key)
	value, _ := json.Marshal(leaderValue{Instance: d.instance, API: adv})
	if r, err := e.Leader(ctx); err == nil && len(r.Kvs) > 0 {
		d.log.Info().Str("leader", string(r.Kvs[0].Value)).Msg("another daemon leads: this one stands by, forwarding requests to it, and takes over when it stops")
	}
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go sb.observe(cctx, e)
	go func() {
		select {
		case <-s.Done():
			cancel()
		case <-cctx.Done():
		}
	}()
	err = e.Campaign(cctx, string(value))
	select {
	case <-s.Done():
		err = errors.New("the session in etcd ended while this daemon waited for the leadership")
	default:
	}
	if err != nil {
		s.Close()
		return nil, err
	}
	l := &leadership{client: cl, session: s, election: e, key: e.Key(), rev: e.Rev(),
		lostCh: make(chan struct{}), kept: make(chan struct{})}
	l.stop, l.cancel = context.WithCancel(context.Background())
	go l.keep(time.Duration(ttl) * time.Second)
	d.log.Info().Str("instance", d.instance).Int64("revision", l.rev).Int("lease_ttl_s", ttl).Msg("leading: this daemon acts on the grid")
	return l, nil
}

// openStore opens the daemon's store: the bbolt file in data_dir, or, with
// the configuration's store in etcd, the leadership first (it waits for
// it), then the store in etcd with every write fenced by it.
func (d *Daemon) openStore(ctx context.Context, so store.Options) error {
	if d.cfg.Store == nil {
		var err error
		d.st, err = store.Open(filepath.Join(d.cfg.DataDir, "metasched.db"), so)
		return err
	}
	l, err := d.lead(ctx, d.cfg.Store)
	if err != nil {
		return err
	}
	st, err := store.OpenEtcd(l.client, store.EtcdOptions{Prefix: d.cfg.Store.Prefix, Guard: l.guard}, so)
	if err != nil {
		l.close()
		return err
	}
	d.st, d.leader = st, l
	return nil
}
