package httpapi

import (
	"bufio"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
)

// TestInstrument: the route label is the pattern of the innermost
// ServeMux that matched, the code label the status written, and a
// server-sent events handler flushes through the wrapper.
func TestInstrument(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	requests := requestDurations(reg)

	released := make(chan struct{})
	byClient := make(chan bool, 1) // whether the client released the handler
	inner := http.NewServeMux()
	inner.HandleFunc("GET /v1/jobs/{id}", func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "no job "+r.PathValue("id"), http.StatusNotFound)
	})
	inner.HandleFunc("GET /v1/events", func(w http.ResponseWriter, r *http.Request) {
		fl, ok := w.(http.Flusher)
		if !ok {
			http.Error(w, "no flusher", http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "data: one\n\n")
		fl.Flush()
		// The client reads the event before the handler returns, or the
		// flush did not go through.
		select {
		case <-released:
			byClient <- true
		case <-time.After(30 * time.Second):
			byClient <- false
		}
		_, _ = io.WriteString(w, "data: two\n\n")
		if err := http.NewResponseController(w).Flush(); err != nil {
			t.Errorf("flush through the ResponseController: %v", err)
		}
	})
	inner.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "no route", http.StatusNotFound)
	})
	outer := http.NewServeMux()
	outer.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "ok") })
	outer.HandleFunc("POST /v1/things", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusCreated) })
	outer.Handle("/", inner)
	srv := httptest.NewServer(instrument(requests, outer))
	defer srv.Close()
	// A mux without a catch-all: the unmatched request has no pattern.
	bare := http.NewServeMux()
	bare.HandleFunc("GET /only", func(http.ResponseWriter, *http.Request) {})
	bareSrv := httptest.NewServer(instrument(requests, bare))
	defer bareSrv.Close()

	do := func(method, url string) {
		t.Helper()
		req, err := http.NewRequest(method, url, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, err = io.Copy(io.Discard, resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	do("GET", srv.URL+"/healthz")
	do("GET", srv.URL+"/healthz")
	do("POST", srv.URL+"/v1/things")
	do("GET", srv.URL+"/v1/jobs/j-1")
	do("DELETE", srv.URL+"/v1/nothing")
	do("BREW", srv.URL+"/healthz")
	do("GET", bareSrv.URL+"/elsewhere")

	resp, err := http.Get(srv.URL + "/v1/events")
	if err != nil {
		t.Fatal(err)
	}
	first, err := bufio.NewReader(resp.Body).ReadString('\n')
	close(released)
	if err != nil || first != "data: one\n" {
		t.Fatalf("first event %q, %v", first, err)
	}
	_, err = io.Copy(io.Discard, resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if !<-byClient {
		t.Error("the event was not flushed to the client before the handler returned")
	}

	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]uint64{}
	for _, mf := range mfs {
		for _, mt := range mf.GetMetric() {
			var key []string
			for _, l := range mt.GetLabel() {
				key = append(key, l.GetName()+"="+l.GetValue())
			}
			got[strings.Join(key, " ")] = mt.GetHistogram().GetSampleCount()
		}
	}
	want := map[string]uint64{
		"code=200 method=GET route=GET /healthz":      2,
		"code=201 method=POST route=POST /v1/things":  1,
		"code=404 method=GET route=GET /v1/jobs/{id}": 1,
		"code=404 method=DELETE route=/":              1,
		"code=404 method=other route=/":               1, // BREW /healthz: only GET matches, inner's catch-all
		"code=404 method=GET route=unmatched":         1,
		"code=200 method=GET route=GET /v1/events":    1,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("requests by labels (-want +got):\n%s", diff)
	}
}
