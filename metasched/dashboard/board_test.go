package dashboard

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/metasched/metasched/metasched/api"
)

// fakeDaemon records what the dashboard asks of it. Each state the
// dashboard builds reads Now once, so the time a state carries tells which
// build it came from.
type fakeDaemon struct {
	mu     sync.Mutex
	builds int   // calls of Now
	fail   error // RecentJobs' error once set
	final  []int // the arguments of RecentSwitches
}

func (f *fakeDaemon) Instance() string     { return "i-1" }
func (f *fakeDaemon) Version() string      { return "test" }
func (f *fakeDaemon) Started() time.Time   { return time.Unix(0, 0).UTC() }
func (f *fakeDaemon) Types() []api.JobType { return []api.JobType{{Name: "sim"}} }
func (f *fakeDaemon) Pools() []api.Pool    { return []api.Pool{{Name: "sim", Hosts: []string{"h1"}}} }
func (f *fakeDaemon) Hosts() []api.HostView {
	return []api.HostView{{Name: "h1", Pool: "sim", State: api.HostIdle}}
}
func (f *fakeDaemon) Policy() api.PolicyView {
	return api.PolicyView{Configured: "none", InForce: "none"}
}
func (f *fakeDaemon) JobCounts() map[api.State]int {
	return map[api.State]int{api.Done: 2}
}
func (f *fakeDaemon) Sample() api.Sample { return api.Sample{At: time.Unix(1, 0).UTC()} }
func (f *fakeDaemon) History() []api.Sample {
	return []api.Sample{{At: time.Unix(0, 0).UTC()}, f.Sample()}
}

func (f *fakeDaemon) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.builds++
	return time.Unix(int64(f.builds), 0).UTC()
}

func (f *fakeDaemon) RecentJobs(ctx context.Context, n int) ([]api.Job, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail != nil {
		return nil, f.fail
	}
	return []api.Job{{JobHead: api.JobHead{ID: "j-2", State: api.Done}}, {JobHead: api.JobHead{ID: "j-1", State: api.Done}}}, nil
}

func (f *fakeDaemon) RecentSwitches(_ context.Context, final int) ([]api.SwitchView, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.final = append(f.final, final)
	return []api.SwitchView{}, nil
}

func (f *fakeDaemon) Tuning() []api.TuningRecord {
	out := make([]api.TuningRecord, api.DashboardTuning+5)
	for i := range out {
		out[i].Seq = len(out) - i
	}
	return out
}

var _ Daemon = (*fakeDaemon)(nil)

func TestState(t *testing.T) {
	f := &fakeDaemon{}
	b := New(f, nil)
	db, err := b.State(context.Background(), false)
	if err != nil {
		t.Fatal(err)
	}
	if db.Instance != "i-1" || db.Version != "test" || !db.Now.Equal(time.Unix(1, 0)) || len(db.Types) != 1 || len(db.Pools) != 1 || len(db.Hosts) != 1 {
		t.Errorf("state %+v", db)
	}
	want := api.JobsOverview{Counts: map[api.State]int{api.Done: 2},
		Recent: []api.JobSummary{{JobHead: api.JobHead{ID: "j-2", State: api.Done}}, {JobHead: api.JobHead{ID: "j-1", State: api.Done}}}}
	if diff := cmp.Diff(want, db.Jobs); diff != "" {
		t.Errorf("jobs (-want +got):\n%s", diff)
	}
	if len(db.Tuning) != api.DashboardTuning || db.Tuning[0].Seq != api.DashboardTuning+5 {
		t.Errorf("%d tuning records from %d, want the newest %d", len(db.Tuning), db.Tuning[0].Seq, api.DashboardTuning)
	}
	if db.History != nil || !db.Sample.At.Equal(time.Unix(1, 0)) {
		t.Errorf("without history: history %v, sample %v", db.History, db.Sample)
	}
	if db, err = b.State(context.Background(), true); err != nil || len(db.History) != 2 {
		t.Errorf("with history: %d samples (%v)", len(db.History), err)
	}
	if diff := cmp.Diff([]int{api.DashboardSwitches, api.DashboardSwitches}, f.final); diff != "" {
		t.Errorf("RecentSwitches(final) (-want +got):\n%s", diff)
	}
}

// ServeState hands a bad query and a failed build to the server's error
// answers.
func TestServeStateErrors(t *testing.T) {
	f := &fakeDaemon{}
	var failed []error
	b := New(f, func(w http.ResponseWriter, err error) {
		failed = append(failed, err)
		w.WriteHeader(http.StatusTeapot)
	})
	rec := httptest.NewRecorder()
	b.ServeState(rec, httptest.NewRequest("GET", "/v1/dashboard?history=maybe", nil))
	var re *api.RequestError
	if len(failed) != 1 || !errors.As(failed[0], &re) || re.Status != http.StatusBadRequest || re.Code != api.CodeInvalid ||
		len(re.Fields) != 1 || re.Fields[0].Field != "history" {
		t.Errorf("history=maybe: %v", failed)
	}
	f.fail = errors.New("store closed")
	b.ServeState(httptest.NewRecorder(), httptest.NewRequest("GET", "/v1/dashboard", nil))
	if len(failed) != 2 || failed[1] != f.fail {
		t.Errorf("a failed build: %v", failed)
	}
	f.fail = nil
	rec = httptest.NewRecorder()
	b.ServeState(rec, httptest.NewRequest("GET", "/v1/dashboard?history=true", nil))
	var db api.Dashboard
	if err := json.Unmarshal(rec.Body.Bytes(), &db); rec.Code != http.StatusOK || err != nil || len(db.History) != 2 {
		t.Errorf("history=true: %d %s", rec.Code, rec.Body)
	}
}

// stream reads the events of GET /v1/events.
type stream struct {
	resp   *http.Response
	sc     *bufio.Scanner
	cancel context.CancelFunc
}

func openStream(t *testing.T, url string) *stream {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	req, err := http.NewRequestWithContext(ctx, "GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != 200 || ct != "text/event-stream" {
		t.Fatalf("events: %d %s", resp.StatusCode, ct)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	return &stream{resp: resp, sc: sc, cancel: cancel}
}

// next returns the next state, or false at the end of the stream.
func (s *stream) next(t *testing.T) (api.Dashboard, bool) {
	t.Helper()
	event := ""
	for s.sc.Scan() {
		line := s.sc.Text()
		if e, ok := strings.CutPrefix(line, "event: "); ok {
			event = e
		}
		if data, ok := strings.CutPrefix(line, "data: "); ok {
			if event != "state" {
				t.Errorf("data of event %q", event)
			}
			var db api.Dashboard
			if err := json.Unmarshal([]byte(data), &db); err != nil {
				t.Fatalf("event data: %v", err)
			}
			return db, true
		}
	}
	return api.Dashboard{}, false
}

func (s *stream) close() {
	s.cancel()
	s.resp.Body.Close()
}

// Every page gets its own first state with the history; after that one
// build every api.EventEvery serves all of them, and the builds stop when
// the last page goes.
func TestEventsShared(t *testing.T) {
	f := &fakeDaemon{}
	b := New(f, nil)
	srv := httptest.NewServer(http.HandlerFunc(b.ServeEvents))
	defer srv.Close()

	a := openStream(t, srv.URL)
	defer a.close()
	first, ok := a.next(t)
	if !ok || len(first.History) != 2 {
		t.Fatalf("a's first state: %v, %d samples of history", ok, len(first.History))
	}
	c := openStream(t, srv.URL)
	defer c.close()
	cFirst, ok := c.next(t)
	if !ok || len(cFirst.History) != 2 {
		t.Fatalf("c's first state: %v, %d samples of history", ok, len(cFirst.History))
	}
	seenByA := map[time.Time]bool{}
	for _, db := range a.newer(t, "a", 4, first.Now) {
		seenByA[db.Now] = true
	}
	for _, db := range c.newer(t, "c", 2, cFirst.Now) {
		if !seenByA[db.Now] {
			t.Errorf("c got the state of %v, which a did not: not shared", db.Now)
		}
	}
	a.close()
	c.close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		b.mu.Lock()
		idle := len(b.subs) == 0 && b.stop == nil
		b.mu.Unlock()
		if idle {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the broadcast still runs after the last page went")
		}
		time.Sleep(10 * time.Millisecond)
	}
	f.mu.Lock()
	builds := f.builds
	f.mu.Unlock()
	time.Sleep(2 * api.EventEvery)
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.builds != builds {
		t.Errorf("%d builds after the last page went", f.builds-builds)
	}
}

// When the state cannot be built (the daemon is closing), every stream
// ends, and the pages reconnect.
func TestEventsEndOnError(t *testing.T) {
	f := &fakeDaemon{}
	b := New(f, nil)
	srv := httptest.NewServer(http.HandlerFunc(b.ServeEvents))
	defer srv.Close()
	s := openStream(t, srv.URL)
	defer s.close()
	if _, ok := s.next(t); !ok {
		t.Fatal("no first state")
	}
	f.mu.Lock()
	f.fail = errors.New("store closed")
	f.mu.Unlock()
	if db, ok := s.next(t); ok {
		t.Errorf("a state of %v after the daemon failed, want the end of the stream", db.Now)
	}
	// A page that reconnects to a failing daemon gets no state.
	s2 := openStream(t, srv.URL)
	defer s2.close()
	if _, ok := s2.next(t); ok {
		t.Error("a first state from a failing daemon")
	}
}

// newer reads n states, each newer than the one before (the first newer
// than last) and without history.
func (s *stream) newer(t *testing.T, name string, n int, last time.Time) []api.Dashboard {
	t.Helper()
	var out []api.Dashboard
	for range n {
		db, ok := s.next(t)
		if !ok {
			t.Fatalf("%s's stream ended", name)
		}
		if len(db.History) != 0 || !db.Now.After(last) {
			t.Errorf("%s: state of %v after %v with %d samples of history: want a newer one without", name, db.Now, last, len(db.History))
		}
		last = db.Now
		out = append(out, db)
	}
	return out
}

// pipeWriter is the response of an event stream served without a
// network: what ServeEvents writes is read from the pipe.
type pipeWriter struct {
	h http.Header
	w *io.PipeWriter
}

func (p *pipeWriter) Header() http.Header         { return p.h }
func (p *pipeWriter) WriteHeader(int)             {}
func (p *pipeWriter) Write(b []byte) (int, error) { return p.w.Write(b) }
func (p *pipeWriter) Flush()                      {}

// 200 pages watching cost one build of the state per api.EventEvery for
// all of them, besides each page's first state: the builds the daemon
// sees are 200 first states and the broadcast's builds, and every page
// gets the broadcast's states.
func TestEvents200Pages(t *testing.T) {
	const pages, states = 200, 3
	f := &fakeDaemon{}
	b := New(f, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var (
		wg   sync.WaitGroup
		smu  sync.Mutex
		seen = make([][]time.Time, pages) // the Now of each state a page got
	)
	got := func(i int) int {
		smu.Lock()
		defer smu.Unlock()
		return len(seen[i])
	}
	for i := range pages {
		pr, pw := io.Pipe()
		req := httptest.NewRequest("GET", "/v1/events", nil).WithContext(ctx)
		wg.Go(func() {
			defer pw.Close()
			b.ServeEvents(&pipeWriter{h: http.Header{}, w: pw}, req)
		})
		wg.Go(func() {
			defer pr.Close()
			r := bufio.NewReader(pr)
			for got(i) < 1+states {
				line, err := r.ReadString('\n')
				if err != nil {
					t.Errorf("page %d: %v", i, err)
					return
				}
				data, ok := strings.CutPrefix(strings.TrimSuffix(line, "\n"), "data: ")
				if !ok {
					continue
				}
				var db struct {
					Now time.Time `json:"now"`
				}
				if err := json.Unmarshal([]byte(data), &db); err != nil {
					t.Errorf("page %d: %v", i, err)
					return
				}
				smu.Lock()
				seen[i] = append(seen[i], db.Now)
				smu.Unlock()
			}
		})
	}
	// Every page has its first state and three newer ones; then all go.
	deadline := time.Now().Add(2 * time.Minute)
	for {
		done := 0
		for i := range pages {
			if got(i) >= 1+states {
				done++
			}
		}
		if done == pages {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d pages got %d states", done, pages, 1+states)
		}
		time.Sleep(50 * time.Millisecond)
	}
	cancel()
	wg.Wait()
	b.mu.Lock()
	broadcast := b.builds
	b.mu.Unlock()
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.builds != pages+int(broadcast) {
		t.Errorf("%d builds of the state for %d pages and %d broadcasts, want %d", f.builds, pages, broadcast, pages+int(broadcast))
	}
	// Broadcast states: those whose build is not a page's first.
	first := map[time.Time]bool{}
	for i := range pages {
		first[seen[i][0]] = true
	}
	for i := range pages {
		for _, at := range seen[i][1:] {
			if first[at] {
				t.Errorf("page %d got the first state of another page", i)
			}
		}
	}
	t.Logf("%d pages, %d states each after the first: %d broadcast builds", pages, states, broadcast)
}
