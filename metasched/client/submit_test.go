package client

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"sync"
	"testing"

	"github.com/metasched/metasched/metasched/api"
)

// keyServer answers submissions with the statuses of answers in turn (the
// last one again once they run out); a status of 0 drops the connection
// without an answer. It records the idempotency key of every request.
type keyServer struct {
	*httptest.Server
	mu      sync.Mutex
	answers []int
	keys    [][]string
	bodies  []string
}

func newKeyServer(t *testing.T, answers ...int) *keyServer {
	t.Helper()
	k := &keyServer{answers: answers}
	k.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			t.Errorf("the request's body: %v", err)
		}
		k.mu.Lock()
		k.keys = append(k.keys, r.Header.Values(api.IdempotencyHeader))
		k.bodies = append(k.bodies, string(body))
		status := k.answers[min(len(k.keys), len(k.answers))-1]
		k.mu.Unlock()
		switch {
		case status == 0:
			conn, _, err := http.NewResponseController(w).Hijack()
			if err != nil {
				t.Errorf("hijack: %v", err)
				return
			}
			conn.Close() // the request arrived; its answer is lost
		case status >= 300:
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			_ = json.NewEncoder(w).Encode(api.APIError{Error: http.StatusText(status), Code: "x"}) // the client reads the answer: a broken one fails there
		default:
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			_ = json.NewEncoder(w).Encode(testJob) // likewise
		}
	}))
	t.Cleanup(k.Close)
	return k
}

func (k *keyServer) requests() ([][]string, []string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.keys, k.bodies
}

var uuidV4 = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

// TestSubmitKey: Submit sends a random key (a UUID, another every call),
// SubmitWith the one it is given.
func TestSubmitKey(t *testing.T) {
	k := newKeyServer(t, http.StatusCreated)
	c := New(k.URL, testToken)
	ctx := context.Background()
	for range 2 {
		if _, err := c.Submit(ctx, []byte(jobYAML)); err != nil {
			t.Fatal(err)
		}
	}
	s, err := c.SubmitWith(ctx, []byte(jobYAML), SubmitOptions{IdempotencyKey: "my-key"})
	if err != nil || !s.Created || s.Attempts != 1 || s.Job.ID != testJob.ID {
		t.Fatalf("SubmitWith: %+v, %v", s, err)
	}
	keys, _ := k.requests()
	if len(keys) != 3 {
		t.Fatalf("%d requests, want 3", len(keys))
	}
	for i, ks := range keys[:2] {
		if len(ks) != 1 || !uuidV4.MatchString(ks[0]) {
			t.Errorf("Submit %d sent the keys %q, want one random UUID", i, ks)
		}
	}
	if keys[0][0] == keys[1][0] {
		t.Errorf("two submissions sent the same key %s", keys[0][0])
	}
	if got := keys[2]; len(got) != 1 || got[0] != "my-key" {
		t.Errorf("SubmitWith sent %q, want [my-key]", got)
	}
}

// TestSubmitRetry: a submission whose answer is lost (the connection
// dropped, 502, 503, 504) is sent again with the same key and body, up to
// the attempts; a refusal is not, and a repeat the daemon recognised comes
// back as not created.
func TestSubmitRetry(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name     string
		answers  []int
		attempts int
		requests int
		created  bool
		status   int // of the error, 0: no error, -1: a transport error
	}{
		{"answer lost, then the first job", []int{0, http.StatusOK}, 0, 2, false, 0},
		{"unavailable, then created", []int{http.StatusServiceUnavailable, http.StatusBadGateway, http.StatusCreated}, 0, 3, true, 0},
		{"gateway timeouts to the end", []int{http.StatusGatewayTimeout}, 0, DefaultSubmitAttempts, false, http.StatusGatewayTimeout},
		{"connections dropped to the end", []int{0}, 4, 4, false, -1},
		{"one attempt", []int{http.StatusServiceUnavailable, http.StatusCreated}, 1, 1, false, http.StatusServiceUnavailable},
		{"invalid: not sent again", []int{http.StatusBadRequest, http.StatusCreated}, 0, 1, false, http.StatusBadRequest},
		{"key reused: not sent again", []int{http.StatusUnprocessableEntity, http.StatusCreated}, 0, 1, false, http.StatusUnprocessableEntity},
		{"internal: not sent again", []int{http.StatusInternalServerError, http.StatusCreated}, 0, 1, false, http.StatusInternalServerError},
	} {
		t.Run(c.name, func(t *testing.T) {
			k := newKeyServer(t, c.answers...)
			s, err := New(k.URL, testToken).SubmitWith(ctx, []byte(jobYAML), SubmitOptions{Attempts: c.attempts})
			keys, bodies := k.requests()
			if len(keys) != c.requests || s.Attempts != c.requests {
				t.Fatalf("%d requests (%d attempts said), want %d", len(keys), s.Attempts, c.requests)
			}
			for i := range keys {
				if len(keys[i]) != 1 || keys[i][0] != keys[0][0] || bodies[i] != jobYAML {
					t.Errorf("request %d: key %q body %q, want the first's key %q and the job file", i, keys[i], bodies[i], keys[0])
				}
			}
			var re *RemoteError
			switch {
			case c.status == 0:
				if err != nil || s.Created != c.created || s.Job.ID != testJob.ID {
					t.Errorf("%+v, %v; want job %s, created %v", s, err, testJob.ID, c.created)
				}
			case c.status < 0:
				if err == nil || errors.As(err, &re) {
					t.Errorf("error %v, want the failed connection", err)
				}
			case !errors.As(err, &re) || re.Status != c.status:
				t.Errorf("error %v, want the daemon's %d", err, c.status)
			}
		})
	}
}

// TestSubmitRetryCancelled: a cancel during the pause before a retry ends
// the submission at once, with the context's error.
func TestSubmitRetryCancelled(t *testing.T) {
	k := newKeyServer(t, http.StatusServiceUnavailable)
	ctx, cancel := context.WithCancel(context.Background())
	c := New(k.URL, testToken).WithHTTPClient(&http.Client{Transport: cancelAfter{http.DefaultTransport, cancel}})
	_, err := c.SubmitWith(ctx, []byte(jobYAML), SubmitOptions{Attempts: 100})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("error %v, want context.Canceled", err)
	}
	if keys, _ := k.requests(); len(keys) != 1 {
		t.Errorf("%d requests, want 1", len(keys))
	}
}

// cancelAfter cancels a context once a request got its answer.
type cancelAfter struct {
	rt     http.RoundTripper
	cancel context.CancelFunc
}

func (c cancelAfter) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := c.rt.RoundTrip(r)
	c.cancel()
	return resp, err
}
