package httpapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/metasched/metasched/metasched"
	"github.com/metasched/metasched/metasched/api"
	"github.com/metasched/metasched/metasched/client"
	"github.com/metasched/metasched/metasched/httpapi"
	"github.com/metasched/metasched/metasched/store"
)

// keyRequest submits body with the Idempotency-Key headers keys (none:
// no header), authenticated by the token or, when cookie is set, by that
// session.
func keyRequest(t *testing.T, td *testDaemon, cookie string, body string, keys ...string) apiAnswer {
	t.Helper()
	return keyRequestMarked(t, td, nil, cookie, body, keys...)
}

// keyRequestMarked is keyRequest with the request changed by mark (offDoc)
// when it is not nil.
func keyRequestMarked(t *testing.T, td *testDaemon, mark func(*http.Request), cookie string, body string, keys ...string) apiAnswer {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, td.addr+"/v1/jobs", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/yaml")
	for _, k := range keys {
		req.Header.Add(api.IdempotencyHeader, k)
	}
	if cookie != "" {
		req.AddCookie(&http.Cookie{Name: httpapi.SessionCookie, Value: cookie})
		req.Header.Set(httpapi.CSRFHeader, "metasched")
	} else {
		req.Header.Set("Authorization", "Bearer "+td.d.Token())
	}
	if mark != nil {
		mark(req)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST /v1/jobs: %v", err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return apiAnswer{status: resp.StatusCode, header: resp.Header, body: data}
}

func (a apiAnswer) job(t *testing.T) api.Job {
	t.Helper()
	var j api.Job
	if err := json.Unmarshal(a.body, &j); err != nil || j.ID == "" {
		t.Fatalf("answer %d is not a job: %v\n%s", a.status, err, a.body)
	}
	return j
}

func storedJobs(t *testing.T, td *testDaemon) int {
	t.Helper()
	js, err := td.d.Store().Jobs(context.Background(), store.JobFilter{})
	if err != nil {
		t.Fatal(err)
	}
	return len(js)
}

// TestIdempotencyKey: the first submission with a key answers 201 with the
// job; a repeat with the same body 200 with that job and no new one; the
// same key with another body 422 naming the header; keys are the caller's
// (the bearer token's, each session's); a malformed key is a 400 naming
// the header; without a key every submission makes a job.
func TestIdempotencyKey(t *testing.T) {
	td := startDaemon(t, metasched.Options{}, func(c *metasched.Config) { c.Policy = metasched.PolicyConfig{Name: "none"} })
	const key = "6f1c2a52-7d0e-4b4e-9a57-0e4f1b6a8c3d"

	first := keyRequest(t, td, "", apiSimJob, key)
	if first.status != http.StatusCreated {
		t.Fatalf("first submission: %d %s, want 201", first.status, first.body)
	}
	j1 := first.job(t)
	again := keyRequest(t, td, "", apiSimJob, key)
	if again.status != http.StatusOK || again.job(t).ID != j1.ID {
		t.Fatalf("repeat: %d %s, want 200 and job %s", again.status, again.body, j1.ID)
	}
	// The quoted form of a structured header string is the same key.
	if a := keyRequest(t, td, "", apiSimJob, `"`+key+`"`); a.status != http.StatusOK || a.job(t).ID != j1.ID {
		t.Errorf("the key quoted: %d %s, want 200 and job %s", a.status, a.body, j1.ID)
	}
	other := keyRequest(t, td, "", strings.Replace(apiSimJob, "tasks: 20", "tasks: 21", 1), key)
	if other.status != http.StatusUnprocessableEntity {
		t.Fatalf("another body: %d %s, want 422", other.status, other.body)
	}
	if e := other.apiErr(t); e.Code != api.CodeKeyReused || len(e.Fields) != 1 || e.Fields[0].Field != api.IdempotencyHeader ||
		!strings.Contains(e.Fields[0].Problem, j1.ID) {
		t.Errorf("another body: %+v, want code %s naming the header and job %s", e, api.CodeKeyReused, j1.ID)
	}
	if n := storedJobs(t, td); n != 1 {
		t.Fatalf("%d jobs after one key's submissions, want 1", n)
	}

	// Another key, and no key at all, make jobs.
	if a := keyRequest(t, td, "", apiSimJob, "another-key"); a.status != http.StatusCreated || a.job(t).ID == j1.ID {
		t.Errorf("another key: %d %s, want 201 and a new job", a.status, a.body)
	}
	for range 2 {
		if a := keyRequest(t, td, "", apiSimJob); a.status != http.StatusCreated {
			t.Errorf("no key: %d %s, want 201", a.status, a.body)
		}
	}
	if n := storedJobs(t, td); n != 4 {
		t.Fatalf("%d jobs, want 4", n)
	}

	// A dashboard session has keys of its own.
	login := cookieRequest(t, td, "POST", "/login", "", false, "application/json", `{"token":"`+td.d.Token()+`"}`)
	cookie := sessionCookie(t, login).Value
	s1 := keyRequest(t, td, cookie, apiSimJob, key)
	if s1.status != http.StatusCreated || s1.job(t).ID == j1.ID {
		t.Fatalf("the session with the token's key: %d %s, want 201 and a job of its own", s1.status, s1.body)
	}
	if a := keyRequest(t, td, cookie, apiSimJob, key); a.status != http.StatusOK || a.job(t).ID != s1.job(t).ID {
		t.Errorf("the session's repeat: %d %s, want 200 and job %s", a.status, a.body, s1.job(t).ID)
	}

	// Malformed keys.
	for _, c := range []struct {
		name    string
		keys    []string
		problem string
	}{
		{"empty", []string{""}, "is empty"},
		{"quotes only", []string{`""`}, "is empty"},
		{"too long", []string{strings.Repeat("k", api.MaxIdempotencyKey+1)}, "256 characters long: at most 255"},
		{"space", []string{"two words"}, `has ' ' at position 4`},
		{"not ascii", []string{"clé"}, "position 3"},
		{"twice", []string{"a", "b"}, "more than once"},
	} {
		a := keyRequestMarked(t, td, offDoc, "", apiSimJob, c.keys...)
		if a.status != http.StatusBadRequest {
			t.Errorf("%s: %d %s, want 400", c.name, a.status, a.body)
			continue
		}
		if e := a.apiErr(t); e.Code != api.CodeInvalid || len(e.Fields) != 1 || e.Fields[0].Field != api.IdempotencyHeader ||
			!strings.Contains(e.Fields[0].Problem, c.problem) {
			t.Errorf("%s: %+v, want the header named with %q", c.name, e, c.problem)
		}
	}
	if n := storedJobs(t, td); n != 5 {
		t.Errorf("%d jobs after the malformed keys, want 5", n)
	}
}

// TestIdempotencyKeyConcurrent: concurrent repeats of one submission with
// one key make one job: one answer is 201, the others 200, all with it.
func TestIdempotencyKeyConcurrent(t *testing.T) {
	td := startDaemon(t, metasched.Options{}, func(c *metasched.Config) { c.Policy = metasched.PolicyConfig{Name: "none"} })
	const n = 32
	answers := make([]apiAnswer, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { answers[i] = keyRequest(t, td, "", apiSimJob, "one-key") })
	}
	wg.Wait()
	created, id := 0, ""
	for i, a := range answers {
		switch a.status {
		case http.StatusCreated:
			created++
		case http.StatusOK:
		default:
			t.Fatalf("request %d: %d %s", i, a.status, a.body)
		}
		j := a.job(t)
		if id == "" {
			id = j.ID
		}
		if j.ID != id {
			t.Errorf("request %d got job %s, another %s", i, j.ID, id)
		}
	}
	if created != 1 {
		t.Errorf("%d answers 201, want 1", created)
	}
	if n := storedJobs(t, td); n != 1 {
		t.Errorf("%d jobs, want 1", n)
	}
}

// TestIdempotencyKeyRetention: a key is kept for the retention on the
// daemon's clock (an injected fake one here), and a submission with it
// after that makes a new job.
func TestIdempotencyKeyRetention(t *testing.T) {
	clock := clockwork.NewFakeClockAt(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	td := startDaemon(t, metasched.Options{Clock: clock}, func(c *metasched.Config) {
		c.Policy = metasched.PolicyConfig{Name: "none"}
		c.IdempotencyRetention = 48 * time.Hour
	})
	first := keyRequest(t, td, "", apiSimJob, "kept")
	if first.status != http.StatusCreated {
		t.Fatalf("first: %d %s", first.status, first.body)
	}
	clock.Advance(48*time.Hour - time.Second)
	if a := keyRequest(t, td, "", apiSimJob, "kept"); a.status != http.StatusOK || a.job(t).ID != first.job(t).ID {
		t.Fatalf("a second before the retention ends: %d %s, want 200 and the first job", a.status, a.body)
	}
	clock.Advance(time.Second)
	later := keyRequest(t, td, "", apiSimJob, "kept")
	if later.status != http.StatusCreated || later.job(t).ID == first.job(t).ID {
		t.Fatalf("after the retention: %d %s, want 201 and a new job", later.status, later.body)
	}
	if n, err := td.d.Store().Keys(context.Background()); err != nil || n != 1 {
		t.Errorf("%d keys in the store (%v), want 1: the expired one dropped", n, err)
	}
}

// loseFirst forwards requests to the daemon and loses the answer of the
// first one, as a timeout or a reset connection would, after the daemon
// has served it.
type loseFirst struct{ n atomic.Int32 }

func (l *loseFirst) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := http.DefaultTransport.RoundTrip(r)
	if l.n.Add(1) == 1 && err == nil {
		_, _ = io.Copy(io.Discard, resp.Body) // the answer is to be lost: whatever it was
		resp.Body.Close()
		return nil, errors.New("connection reset by peer (the test lost the answer)")
	}
	return resp, err
}

// TestClientRetryMakesOneJob: the Go client sends a submission whose
// answer was lost again with the same key, and the daemon answers with the
// job the first request made: one job, not two.
func TestClientRetryMakesOneJob(t *testing.T) {
	td := startDaemon(t, metasched.Options{}, func(c *metasched.Config) { c.Policy = metasched.PolicyConfig{Name: "none"} })
	c := apiClient(td).WithHTTPClient(&http.Client{Transport: &loseFirst{}})
	s, err := c.SubmitWith(context.Background(), []byte(apiSimJob), client.SubmitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if s.Attempts != 2 || s.Created {
		t.Errorf("%d attempts, created %v; want 2 and the first request's job", s.Attempts, s.Created)
	}
	js, err := td.d.Store().Jobs(context.Background(), store.JobFilter{})
	if err != nil || len(js) != 1 || js[0].ID != s.Job.ID {
		t.Fatalf("jobs in the store: %d (%v), want the one job %s", len(js), err, s.Job.ID)
	}
}
