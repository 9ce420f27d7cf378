package client

import (
	"context"
	"crypto/tls"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/metasched/metasched/internal/tlsx"
	"github.com/metasched/metasched/internal/tlsx/tlsxtest"
)

// TestTLSSessionResumed: a connection to an agent opened after the idle
// ones were closed resumes the TLS session of the one before, instead of
// a full handshake with certificates (40% of the daemon's CPU with ten
// agents when every claim made a new connection).
func TestTLSSessionResumed(t *testing.T) {
	p := tlsxtest.New(t)
	var mu sync.Mutex
	var resumed []bool
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		resumed = append(resumed, r.TLS.DidResume)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"site":"lab"}`))
	}))
	srv.TLS = p.Source(t, tlsx.Agent("lab"), "127.0.0.1").ServerConfig(tls.RequireAndVerifyClientCert)
	srv.StartTLS()
	defer srv.Close()
	c, err := NewTLS(srv.URL, p.Source(t, tlsx.Daemon()), "lab")
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if site, err := c.Healthz(context.Background()); err != nil || site != "lab" {
			t.Fatalf("healthz = %q, %v", site, err)
		}
		c.http.Transport.(*http.Transport).CloseIdleConnections()
	}
	if len(resumed) != 2 || resumed[0] || !resumed[1] {
		t.Errorf("connections resumed: %v, want [false true]", resumed)
	}
}
