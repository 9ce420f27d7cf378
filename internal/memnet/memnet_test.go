package memnet_test

import (
	"errors"
	"io"
	"net"
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"github.com/metasched/metasched/internal/memnet"
)

// TestHTTPInBubble: a server and its client talk over memnet inside a
// synctest bubble, and the bubble's clock advances while the server waits
// for connections.
func TestHTTPInBubble(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ln := memnet.Listen()
		srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			time.Sleep(time.Hour) // fake: returns at once in the bubble
			io.WriteString(w, "hello "+r.URL.Path)
		})}
		done := make(chan error, 1)
		go func() { done <- srv.Serve(ln) }()
		start := time.Now()
		resp, err := ln.Client().Get("http://memnet/x")
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if string(body) != "hello /x" || time.Since(start) != time.Hour {
			t.Errorf("body %q after %s, want \"hello /x\" after 1h", body, time.Since(start))
		}
		srv.Close()
		if err := <-done; !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("serve: %v", err)
		}
		if _, err := ln.Dial(t.Context()); !errors.Is(err, net.ErrClosed) {
			t.Errorf("dial after close: %v, want net.ErrClosed", err)
		}
	})
}
