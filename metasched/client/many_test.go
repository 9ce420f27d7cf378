package client

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/metasched/metasched/metasched/api"
)

// TestNewMany: a client of three daemons of one grid. A read goes past the
// one that cannot be reached and the standby with no leader (503) to the
// one that answers, and the next call goes there first; a submission (its
// idempotency key) goes past the 503 too, but a call that may not be sent
// twice (a cancel) does not.
func TestNewMany(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + ln.Addr().String()
	ln.Close()
	var standbyHits, liveHits atomic.Int32
	standby := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		standbyHits.Add(1)
		w.Header().Set("Retry-After", "1")
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte(`{"error": "no daemon leads yet (an election is under way): try again shortly", "code": "unavailable"}`))
	}))
	defer standby.Close()
	live := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		liveHits.Add(1)
		w.Header().Set("Content-Type", "application/json")
		switch r.Method {
		case http.MethodPost:
			w.WriteHeader(http.StatusCreated)
			_, _ = w.Write([]byte(`{"id": "j-000000000001", "name": "a", "type": "sim", "state": "queued"}`))
		default:
			_, _ = w.Write([]byte(`{"jobs": []}`))
		}
	}))
	defer live.Close()
	ctx := context.Background()

	c := NewMany([]string{dead, standby.URL, live.URL}, "token")
	if _, err := c.Jobs(ctx, JobsQuery{}); err != nil {
		t.Fatalf("jobs through three daemons: %v", err)
	}
	if c.Base() != live.URL || standbyHits.Load() != 1 || liveHits.Load() != 1 {
		t.Errorf("base %s, %d calls to the standby, %d to the live daemon; want %s, 1, 1", c.Base(), standbyHits.Load(), liveHits.Load(), live.URL)
	}
	if _, err := c.Jobs(ctx, JobsQuery{}); err != nil || standbyHits.Load() != 1 || liveHits.Load() != 2 {
		t.Errorf("the next call: %v; %d calls to the standby, %d to the live daemon; want 1, 2", err, standbyHits.Load(), liveHits.Load())
	}

	c = NewMany([]string{standby.URL, live.URL}, "token")
	if _, err := c.Submit(ctx, []byte("name: a\ntype: sim\n")); err != nil || liveHits.Load() != 3 {
		t.Errorf("a submission past the standby: %v, %d calls to the live daemon", err, liveHits.Load())
	}
	c = NewMany([]string{standby.URL, live.URL}, "token")
	_, err = c.Cancel(ctx, "j-000000000001")
	var re *RemoteError
	if !errors.As(err, &re) || re.Status != http.StatusServiceUnavailable || re.Code != api.CodeUnavailable || liveHits.Load() != 3 {
		t.Errorf("a cancel through the standby: %v, %d calls to the live daemon; want its 503, and none", err, liveHits.Load())
	}
	c = NewMany([]string{dead, standby.URL}, "token")
	if _, err := c.Jobs(ctx, JobsQuery{}); !errors.As(err, &re) || re.Status != http.StatusServiceUnavailable {
		t.Errorf("no daemon answers but a standby: %v, want its 503", err)
	}
}
