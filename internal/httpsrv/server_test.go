package httpsrv_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/metasched/metasched/internal/httpsrv"
	"github.com/metasched/metasched/internal/httpx"
	"github.com/metasched/metasched/internal/slowclient"
	"github.com/metasched/metasched/internal/yamlx"
)

const safety = slowclient.Safety

const token = "s3cret"

// serve runs a Server of h on a port of the system until the test ends.
func serve(t *testing.T, h http.Handler, cfg httpsrv.Config) (*httpsrv.Server, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Logger = zerolog.New(io.Discard)
	srv := httpsrv.New(h, cfg)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	t.Cleanup(func() {
		srv.Close()
		if err := <-done; !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("serve: %v", err)
		}
	})
	return srv, ln.Addr().String()
}

// api is an API behind the bearer token that reads the body and answers
// "ok", or 400 with the error that reading the body gave.
func api() http.Handler {
	return httpx.Bearer(token, func(w http.ResponseWriter, msg string) {
		http.Error(w, msg, http.StatusUnauthorized)
	}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.ReadAll(r.Body); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		io.WriteString(w, "ok")
	}))
}

// slowConn opens a slow POST /v1/vms from local (a loopback IP, "" for
// any), with the token when auth is not empty.
func slowConn(t *testing.T, addr, local, auth string) net.Conn {
	t.Helper()
	o := slowclient.Options{Local: local}
	if auth != "" {
		o.Header = []string{"Authorization: Bearer " + auth}
	}
	return slowclient.Open(t, addr, "POST", "/v1/vms", o)
}

// waitStats polls the server's counts until ok holds (or fails the test
// after the safety bound).
func waitStats(t *testing.T, srv *httpsrv.Server, what string, ok func(httpsrv.Stats) bool) httpsrv.Stats {
	t.Helper()
	end := time.Now().Add(safety)
	for {
		s := srv.Stats()
		if ok(s) {
			return s
		}
		if time.Now().After(end) {
			t.Fatalf("%s: the server counts %+v", what, s)
		}
		time.Sleep(time.Millisecond)
	}
}

// Slow clients from one address: the oldest beyond the cap per address
// are closed once their grace has run out (a sweep closes them: no other
// connection comes), a newcomer with the token gets through, its
// connection is proven and outlives the next flood, and a connection that
// sent the token before its body stalled is never closed for a cap.
func TestOldestUnprovenClosedPerAddress(t *testing.T) {
	const perAddr, slow = 8, 30
	srv, addr := serve(t, api(), httpsrv.Config{Limits: httpsrv.Limits{MaxUnproven: 1000, MaxUnprovenPerAddress: perAddr},
		Timeouts: httpsrv.Timeouts{Grace: 50 * time.Millisecond}})
	authed := slowConn(t, addr, "", token) // proven at once: its body will never come
	waitStats(t, srv, "the authenticated slow connection", func(s httpsrv.Stats) bool { return s.Proven == 1 })
	var conns []net.Conn
	for range slow {
		conns = append(conns, slowConn(t, addr, "", ""))
	}
	waitStats(t, srv, "the slow connections accepted", func(s httpsrv.Stats) bool { return s.Unproven+int(s.Closed) == slow })
	for i, c := range conns[:slow-perAddr] {
		if !slowclient.ClosedByServer(c) {
			t.Fatalf("slow connection %d of %d (one of the oldest) is still open", i, slow)
		}
	}
	if s := srv.Stats(); s.Unproven != perAddr || s.Closed != slow-perAddr || s.Proven != 1 {
		t.Errorf("after %d slow connections: %+v, want %d unproven, %d closed, 1 proven", slow, s, perAddr, slow-perAddr)
	}

	// A valid request from the same address.
	client := &http.Client{Transport: &http.Transport{}}
	t.Cleanup(client.CloseIdleConnections)
	get := func() (reused bool) {
		t.Helper()
		req, err := http.NewRequest("POST", "http://"+addr+"/v1/vms", strings.NewReader("{}"))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+token)
		req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
			GotConn: func(i httptrace.GotConnInfo) { reused = i.Reused }}))
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("the valid request: %v", err)
		}
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 || string(body) != "ok" {
			t.Fatalf("the valid request: %d %q", resp.StatusCode, body)
		}
		return reused
	}
	get()
	// Its connection is proven: another flood does not close it.
	waitStats(t, srv, "the valid request's connection proven", func(s httpsrv.Stats) bool { return s.Proven == 2 })
	for range slow {
		slowConn(t, addr, "", "")
	}
	// Of the 60 slow connections, the 8 newest are left.
	waitStats(t, srv, "the second flood accepted", func(s httpsrv.Stats) bool { return s.Closed == 2*slow-perAddr })
	if !get() {
		t.Error("the proven connection was not reused: the flood closed it")
	}
	if s := srv.Stats(); s.Proven != 2 || s.Unproven != perAddr {
		t.Errorf("after the second flood: %+v, want 2 proven and %d unproven", s, perAddr)
	}
	// The authenticated slow connection is still served: its body arrives.
	if _, err := authed.Write([]byte(strings.Repeat(" ", slowclient.BodyBytes-2) + "}")); err != nil {
		t.Fatal(err)
	}
	if err := authed.SetReadDeadline(time.Now().Add(safety)); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(authed), nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("the authenticated slow connection: %v %v", resp, err)
	}
}

// The cap in all closes at once, whatever their age, the oldest unproven
// connections of the address that holds the most: a flood from one
// address does not close another's connections.
func TestOldestUnprovenClosedInAll(t *testing.T) {
	const total = 10
	srv, addr := serve(t, api(), httpsrv.Config{Limits: httpsrv.Limits{MaxUnproven: total, MaxUnprovenPerAddress: total},
		Timeouts: httpsrv.Timeouts{Grace: time.Hour}})
	var conns []net.Conn
	for _, c := range []struct {
		local string
		n     int
	}{{"127.0.0.1", 9}, {"127.0.0.2", 3}} {
		for range c.n {
			conns = append(conns, slowConn(t, addr, c.local, ""))
			waitStats(t, srv, "the slow connection accepted", func(s httpsrv.Stats) bool { return s.Unproven+int(s.Closed) == len(conns) })
		}
	}
	// 9 from .1, then the third of .2 makes 12: the 2 oldest of .1 go.
	for i, c := range conns[:2] {
		if !slowclient.ClosedByServer(c) {
			t.Fatalf("slow connection %d (the oldest of the address holding the most) is still open", i)
		}
	}
	if s := srv.Stats(); s.Unproven != total || s.Closed != 2 {
		t.Errorf("%+v, want %d unproven and 2 closed", s, total)
	}
}

// A burst of new connections from one address, far over the cap per
// address, is not closed: each proves itself with its request before its
// grace (here an hour) runs out.
func TestBurstIsNotClosed(t *testing.T) {
	const burst = 300
	srv, addr := serve(t, api(), httpsrv.Config{Limits: httpsrv.Limits{MaxUnprovenPerAddress: 8},
		Timeouts: httpsrv.Timeouts{Grace: time.Hour}})
	start := make(chan struct{})
	errs := make(chan error, burst)
	for range burst {
		go func() {
			client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
			req, err := http.NewRequest("POST", "http://"+addr+"/v1/vms", strings.NewReader("{}"))
			<-start
			if err != nil {
				errs <- err
				return
			}
			req.Header.Set("Authorization", "Bearer "+token)
			resp, err := client.Do(req)
			if err == nil {
				_, err = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					err = fmt.Errorf("status %d", resp.StatusCode)
				}
			}
			errs <- err
		}()
	}
	close(start)
	failed := 0
	for range burst {
		if err := <-errs; err != nil {
			failed++
			t.Log(err)
		}
	}
	if s := srv.Stats(); failed > 0 || s.Closed != 0 {
		t.Errorf("%d of %d requests of a burst failed; %+v", failed, burst, s)
	}
}

// A body that does not arrive within the read timeout is dropped: the
// handler's read fails, it answers, and the server closes the connection.
func TestReadTimeoutDropsBody(t *testing.T) {
	_, addr := serve(t, api(), httpsrv.Config{Timeouts: httpsrv.Timeouts{Read: 200 * time.Millisecond}})
	c := slowConn(t, addr, "", token)
	if err := c.SetReadDeadline(time.Now().Add(safety)); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("no answer: %v", err)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 400 || !strings.Contains(string(body), "i/o timeout") {
		t.Errorf("answer %d %q, want 400 and the read timeout", resp.StatusCode, body)
	}
	if _, err := br.ReadByte(); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("the connection is still open after the answer (%v)", err)
	}
}

// The write timeout bounds the writing of an answer, not the handler's
// work before it: a handler that takes longer than the timeout still
// delivers all of its answer.
func TestSlowHandlerKeepsItsAnswer(t *testing.T) {
	const write = 100 * time.Millisecond
	big := strings.Repeat("x", 4<<20)
	_, addr := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(3 * write)
		io.WriteString(w, big)
	}), httpsrv.Config{Timeouts: httpsrv.Timeouts{Write: write}})
	resp, err := http.Get("http://" + addr + "/")
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || len(body) != len(big) {
		t.Fatalf("got %d of %d bytes (%v)", len(body), len(big), err)
	}
}

// A stream's events each get the write timeout: the stream outlives it.
// The same writes as one answer are cut by it.
func TestStreamOutlivesWriteTimeout(t *testing.T) {
	const write, events = 100 * time.Millisecond, 8
	handler := func(stream bool) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if stream {
				httpsrv.Stream(r)
			}
			rc := http.NewResponseController(w)
			for i := range events {
				if i > 0 {
					time.Sleep(write / 2) // the events span 3.5 write timeouts
				}
				if _, err := fmt.Fprintf(w, "event %d\n", i); err != nil || rc.Flush() != nil {
					return
				}
			}
		})
	}
	for _, stream := range []bool{true, false} {
		_, addr := serve(t, handler(stream), httpsrv.Config{Timeouts: httpsrv.Timeouts{Write: write}})
		resp, err := http.Get("http://" + addr + "/events")
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			n++
		}
		resp.Body.Close()
		switch {
		case stream && (n != events || sc.Err() != nil):
			t.Errorf("stream: %d of %d events (%v)", n, events, sc.Err())
		case !stream && n == events:
			t.Errorf("one answer: all %d events over 3.5 write timeouts, want it cut", n)
		}
	}
}

// An idle kept-alive connection is closed after the idle timeout.
func TestIdleTimeout(t *testing.T) {
	_, addr := serve(t, api(), httpsrv.Config{Timeouts: httpsrv.Timeouts{Idle: 100 * time.Millisecond}})
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := fmt.Fprintf(c, "POST /v1/vms HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Length: 2\r\n\r\n{}", token); err != nil {
		t.Fatal(err)
	}
	if err := c.SetReadDeadline(time.Now().Add(safety)); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("%v %v", resp, err)
	}
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		t.Fatal(err)
	}
	if _, err := br.ReadByte(); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("the idle connection is still open (%v)", err)
	}
}

// Prove and Stream do nothing outside a Server: a handler that calls
// them answers in full, to a recorder and under a plain net/http server,
// its request keeps its context, and a Server that runs meanwhile, with
// an unproven connection open, counts none of it.
func TestOutsideAServer(t *testing.T) {
	srv, addr := serve(t, api(), httpsrv.Config{Timeouts: httpsrv.Timeouts{Grace: time.Hour}})
	slowConn(t, addr, "", "") // unproven: a Prove that reached this Server would prove it
	before := waitStats(t, srv, "the slow connection accepted", func(s httpsrv.Stats) bool { return s.Unproven == 1 })
	const events = 3
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		httpsrv.Prove(ctx)
		httpsrv.Stream(r)
		if r.Context() != ctx {
			http.Error(w, "Stream changed the request's context", http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		rc := http.NewResponseController(w)
		for i := range events {
			if _, err := fmt.Fprintf(w, "event %d\n", i); err != nil {
				return
			}
			if err := rc.Flush(); err != nil {
				return
			}
		}
	})
	want := "event 0\nevent 1\nevent 2\n"

	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/events", nil))
	if rec.Code != http.StatusOK || rec.Body.String() != want || !rec.Flushed {
		t.Errorf("to a recorder: %d %q, flushed %v; want 200 %q, flushed", rec.Code, rec.Body, rec.Flushed, want)
	}

	plain := httptest.NewServer(h)
	defer plain.Close()
	resp, err := plain.Client().Get(plain.URL + "/events")
	if err != nil {
		t.Fatalf("under a plain server: %v", err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK || string(body) != want {
		t.Errorf("under a plain server: %d %q (%v); want 200 %q", resp.StatusCode, body, err, want)
	}

	httpsrv.Prove(context.Background())
	if s := srv.Stats(); s != before {
		t.Errorf("the Server's counts went from %+v to %+v: it counted what came through no Server of its", before, s)
	}
}

func TestParseLimits(t *testing.T) {
	for _, tc := range []struct {
		yaml string
		want httpsrv.Limits
		errs string
	}{
		{"{}", httpsrv.Limits{MaxUnproven: 1024, MaxUnprovenPerAddress: 64}, ""},
		{"{max_unproven_connections: 100, max_unproven_per_address: 10}", httpsrv.Limits{MaxUnproven: 100, MaxUnprovenPerAddress: 10}, ""},
		{"{max_unproven_connections: 20}", httpsrv.Limits{MaxUnproven: 20, MaxUnprovenPerAddress: 20}, ""},
		{"{max_unproven_connections: 0}", httpsrv.Limits{MaxUnproven: 1024, MaxUnprovenPerAddress: 64},
			"f.yaml: max_unproven_connections: must be a whole number within 1 and 1048576, not 0"},
		{"{max_unproven_per_address: 2000000}", httpsrv.Limits{MaxUnproven: 1024, MaxUnprovenPerAddress: 64},
			"f.yaml: max_unproven_per_address: must be a whole number within 1 and 1048576, not 2000000"},
		{"{max_unproven_connections: 10, max_unproven_per_address: 11}", httpsrv.Limits{MaxUnproven: 10, MaxUnprovenPerAddress: 10},
			"f.yaml: max_unproven_per_address: must be at most max_unproven_connections (10), not 11"},
		{"{max_unproven_per_address: many}", httpsrv.Limits{MaxUnproven: 1024, MaxUnprovenPerAddress: 64},
			"f.yaml: max_unproven_per_address: must be"},
	} {
		d, root, err := yamlx.Parse("f.yaml", []byte(tc.yaml))
		if err != nil {
			t.Fatal(err)
		}
		m, _ := root.Map(httpsrv.LimitFields...)
		got := httpsrv.ParseLimits(m)
		err = d.Err()
		if got != tc.want || (tc.errs == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), tc.errs) {
			t.Errorf("%s: %+v, %v; want %+v, %q", tc.yaml, got, err, tc.want, tc.errs)
		}
	}
}
