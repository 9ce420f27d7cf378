package metasched_test

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/metasched/metasched/hypervisorproxy/virt"
	"github.com/metasched/metasched/internal/etcdtest"
	"github.com/metasched/metasched/metasched"
	"github.com/metasched/metasched/metasched/api"
	"github.com/metasched/metasched/metasched/client"
	"github.com/metasched/metasched/metasched/demo"
	"github.com/metasched/metasched/metasched/httpapi"
	"github.com/metasched/metasched/metasched/internal/daemontest"
	"github.com/metasched/metasched/metasched/jobfile"
	"github.com/metasched/metasched/metasched/store/kv"
)

// etcdDaemon is a daemon of the demo's configuration with its store in
// etcd, started in the background: it waits for the leadership first.
type etcdDaemon struct {
	d    *metasched.Daemon
	err  error
	addr string // its API's address
	log  *daemontest.Log
	// standby is the server of its API while it stands by (nil: it led
	// at once).
	standby atomic.Pointer[httptest.Server]
	ready   chan struct{} // closed when New has returned (d or err)
	ran     chan struct{} // closed when Run has returned, runErr its error
	runErr  error
	stop    context.CancelFunc
}

func startEtcdDaemon(t *testing.T, endpoints []string, ttl int) *etcdDaemon {
	t.Helper()
	// Its address first: the leader proclaims it, the standbys forward to
	// it.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg, grid, err := demo.Config(t.TempDir(), ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	cfg.Store = &metasched.StoreEtcd{Endpoints: endpoints, Prefix: "/leadertest/"}
	cfg.Policy = metasched.PolicyConfig{Name: "none"}
	cfg.Executor.TimeScale = 1e-4
	ed := &etcdDaemon{log: daemontest.NewLog(), ready: make(chan struct{}), ran: make(chan struct{}), addr: "http://" + ln.Addr().String()}
	log := zerolog.New(ed.log).Level(zerolog.InfoLevel)
	ctx, cancel := context.WithCancel(context.Background())
	ed.stop = cancel
	go func() {
		defer close(ed.ran)
		ed.d, ed.err = metasched.NewWithGrid(ctx, cfg, grid, metasched.Options{Logger: log, Connect: virt.Connector(log.Level(zerolog.WarnLevel)),
			Tick: 100 * time.Millisecond, LeaseTTL: ttl, Standby: func(h http.Handler, _ *tls.Config) {
				ed.standby.Store(httptest.NewServer(h))
			}})
		if s := ed.standby.Load(); s != nil {
			s.Close()
		}
		close(ed.ready)
		if ed.err != nil {
			ed.runErr = ed.err
			return
		}
		ed.runErr = ed.d.Run(ctx, ln, httpapi.New(httpapi.All(ed.d), log))
	}()
	t.Cleanup(func() {
		cancel()
		<-ed.ran
		if ed.d != nil {
			_ = ed.d.Close() // after its run ended: the run's error is the one the test checks
		}
	})
	return ed
}

// leaderWithJob starts a daemon on etcd, where it leads at once, and
// submits a job to it.
func leaderWithJob(t *testing.T, endpoints []string) (*etcdDaemon, api.Job) {
	t.Helper()
	a := startEtcdDaemon(t, endpoints, 5)
	<-a.ready
	if a.err != nil {
		t.Fatal(a.err)
	}
	job, err := a.d.Submit(context.Background(), jobfile.Decode([]byte("name: before\ntype: sim\ntasks: 10\ntask_ops: 1.0e9\ntask_bytes: 0\n")))
	if err != nil {
		t.Fatal(err)
	}
	return a, job
}

// TestEtcdLeadership: two daemons on one etcd cluster. The first leads and
// runs a job; the second stands by, answering (its health, a job, a
// submission) by forwarding to the leader, and takes over when the first
// stops, with the first's jobs. When the leader's lease is revoked (as when it expires
// on a daemon cut off from etcd), the leader stops at once, and a write it
// still tries is refused (fenced).
func TestEtcdLeadership(t *testing.T) {
	c := etcdtest.Start(t, 1)
	a, job := leaderWithJob(t, c.Endpoints())
	ctx := context.Background()
	daemontest.WaitFor(t, "the job done on the first leader", time.Minute, func() bool {
		j, err := a.d.Job(ctx, job.ID)
		if err != nil {
			t.Fatal(err)
		}
		return j.State == api.Done
	})

	b := startEtcdDaemon(t, c.Endpoints(), 5)
	select {
	case <-b.ready:
		t.Fatalf("the second daemon started while the first leads (%v)", b.err)
	case <-time.After(2 * time.Second):
	}
	if !strings.Contains(b.log.String(), "another daemon leads") {
		t.Errorf("the second daemon does not say it waits:\n%s", b.log)
	}
	// The standby answers by forwarding to the leader.
	sb := b.standby.Load()
	if sb == nil {
		t.Fatal("the standby serves no API")
	}
	var health map[string]string
	daemontest.WaitFor(t, "the standby knowing the leader", 30*time.Second, func() bool {
		health = getJSON[map[string]string](t, sb.URL+"/healthz", "")
		return health["leader"] != ""
	})
	if health["status"] != "standby" || health["leader"] != a.addr {
		t.Errorf("the standby's health %v, want standby, leader %s", health, a.addr)
	}
	if j := getJSON[api.Job](t, sb.URL+"/v1/jobs/"+job.ID, a.d.Token()); j.ID != job.ID || j.State != api.Done {
		t.Errorf("the leader's job through the standby: %+v", j)
	}
	sub, err := client.New(sb.URL, a.d.Token()).Submit(ctx, []byte("name: through\ntype: sim\ntasks: 10\ntask_ops: 1.0e9\ntask_bytes: 0\n"))
	if err != nil {
		t.Fatalf("a submission through the standby: %v", err)
	}
	if j, err := a.d.Job(ctx, sub.ID); err != nil || j.Name != "through" {
		t.Errorf("the job submitted through the standby, on the leader: %+v, %v", j, err)
	}
	stopped := time.Now()
	a.stop()
	<-a.ran
	if a.runErr != nil {
		t.Fatalf("the first daemon's run: %v", a.runErr)
	}
	if err := a.d.Close(); err != nil { // resigns
		t.Fatal(err)
	}
	<-b.ready
	if b.err != nil {
		t.Fatal(b.err)
	}
	t.Logf("the second daemon leads %s after the first stopped", time.Since(stopped).Round(time.Millisecond))
	if j, err := b.d.Job(ctx, job.ID); err != nil || j.State != api.Done {
		t.Fatalf("the first leader's job on the second: %+v, %v", j, err)
	}
	next, err := b.d.Submit(ctx, jobfile.Decode([]byte("name: after\ntype: etl\ntasks: 10\ntask_ops: 1.0e9\ntask_bytes: 0\n")))
	if err != nil || next.ID <= job.ID {
		t.Fatalf("a job on the second leader: %+v, %v", next, err)
	}

	// Revoke the leader's lease, as its expiry would: it stops, and its
	// writes are refused.
	cl := c.Client(t)
	r, err := cl.Get(ctx, "/leadertest/leader", clientv3.WithPrefix())
	if err != nil || len(r.Kvs) != 1 {
		t.Fatalf("the leader's key: %v, %v", r, err)
	}
	if _, err := cl.Revoke(ctx, clientv3.LeaseID(r.Kvs[0].Lease)); err != nil {
		t.Fatal(err)
	}
	revoked := time.Now()
	select {
	case <-b.ran:
		if !errors.Is(b.runErr, metasched.ErrLostLeadership) {
			t.Errorf("the run of a leader whose lease ended: %v, want ErrLostLeadership", b.runErr)
		}
		t.Logf("the leader stopped %s after its lease was revoked", time.Since(revoked).Round(time.Millisecond))
	case <-time.After(30 * time.Second):
		t.Fatal("the leader goes on 30 s after its lease was revoked")
	}
	spec, err := json.Marshal(map[string]any{"name": "fenced"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.d.Store().SubmitJob(ctx, "sim", spec, "submitted"); !errors.Is(err, kv.ErrFenced) {
		t.Errorf("a write of the daemon that lost the lead: %v, want ErrFenced", err)
	}
}

// getJSON GETs url with the bearer token (none when empty) and decodes its
// JSON answer, failing the test on any error or status but 200.
func getJSON[T any](t *testing.T, url, token string) T {
	t.Helper()
	var out T
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", url, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestStandbyWithoutLeader: a standby that knows no leader (the elected one
// proclaimed no address it can use) answers 503 with Retry-After; it leads
// when that one resigns.
func TestStandbyWithoutLeader(t *testing.T) {
	c := etcdtest.Start(t, 1)
	cl := c.Client(t)
	s, err := concurrency.NewSession(cl, concurrency.WithTTL(5))
	if err != nil {
		t.Fatal(err)
	}
	other := concurrency.NewElection(s, "/leadertest/leader")
	ctx := context.Background()
	if err := other.Campaign(ctx, "not a daemon's value"); err != nil {
		t.Fatal(err)
	}
	d := startEtcdDaemon(t, c.Endpoints(), 5)
	daemontest.WaitFor(t, "the standby's server", 30*time.Second, func() bool { return d.standby.Load() != nil })
	resp, err := http.Get(d.standby.Load().URL + "/v1/pools")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") != "1" {
		t.Errorf("a standby without a leader: %s, Retry-After %q; want 503 and 1", resp.Status, resp.Header.Get("Retry-After"))
	}
	if err := other.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	<-d.ready
	if d.err != nil {
		t.Fatal(d.err)
	}
}

// TestEtcdQuorumLost: two daemons on a three-member etcd cluster. When two
// members go, the leader stops acting before its lease could expire (it
// can no longer renew it), a submission is refused with 503 and an error
// that says etcd lost its quorum, and when the members return, the other
// daemon leads with the first's jobs and takes new ones.
func TestEtcdQuorumLost(t *testing.T) {
	c := etcdtest.Start(t, 3)
	a, job := leaderWithJob(t, c.Endpoints())
	ctx := context.Background()
	b := startEtcdDaemon(t, c.Endpoints(), 5)
	daemontest.WaitFor(t, "the second daemon standing by", 30*time.Second, func() bool { return b.standby.Load() != nil })

	c.Members[1].Kill()
	c.Members[2].Kill()
	lost := time.Now()
	// It stops acting, and says why, although its run ends only when what
	// it had under way gives up. (That it stops before its lease could
	// expire, and another daemon lead, is TestPartitionedLeader's.)
	daemontest.WaitFor(t, "the leader stopping", time.Minute, func() bool {
		return strings.Contains(a.log.String(), "lost the leadership")
	})
	t.Logf("the leader stopped acting %s after the quorum was lost", time.Since(lost).Round(time.Millisecond))
	if l := a.log.String(); !strings.Contains(l, "no renewal of the lease in etcd answered") && !strings.Contains(l, "the session in etcd ended") {
		t.Errorf("the leader does not say why it stopped:\n%s", l)
	}
	select {
	case <-a.ran:
		if !errors.Is(a.runErr, metasched.ErrLostLeadership) {
			t.Errorf("the leader's run without a quorum: %v, want ErrLostLeadership", a.runErr)
		}
	case <-time.After(time.Minute):
		t.Fatal("the leader's run goes on a minute after etcd lost its quorum")
	}
	var msg string
	daemontest.WaitFor(t, "the standby saying etcd lost its quorum", 30*time.Second, func() bool {
		resp, err := http.Post(b.standby.Load().URL+"/v1/jobs", "application/yaml", strings.NewReader("name: during\ntype: sim\n"))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var e api.APIError
		_ = json.NewDecoder(resp.Body).Decode(&e) // an empty e fails the check of its code below
		if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
			t.Fatalf("a submission without a quorum: %s %+v, want 503 with Retry-After", resp.Status, e)
		}
		msg = e.Error
		return strings.Contains(msg, "etcd has lost its quorum")
	})
	t.Logf("a submission without a quorum: 503 %q", msg)

	for _, m := range c.Members[1:] {
		if err := m.Start(); err != nil {
			t.Fatal(err)
		}
	}
	back := time.Now()
	select {
	case <-b.ready:
	case <-time.After(2 * time.Minute):
		t.Fatal("no daemon leads two minutes after the quorum returned")
	}
	if b.err != nil {
		t.Fatal(b.err)
	}
	t.Logf("the second daemon leads %s after the members returned", time.Since(back).Round(time.Millisecond))
	next, err := b.d.Submit(ctx, jobfile.Decode([]byte("name: after\ntype: etl\ntasks: 10\ntask_ops: 1.0e9\ntask_bytes: 0\n")))
	if err != nil {
		t.Fatalf("a submission once the quorum returned: %v", err)
	}
	for _, id := range []string{job.ID, next.ID} {
		daemontest.WaitFor(t, "job "+id+" done", time.Minute, func() bool {
			j, err := b.d.Job(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			return j.State == api.Done
		})
	}
}
