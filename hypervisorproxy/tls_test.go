package hypervisorproxy_test

import (
	"context"
	"crypto/tls"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	hp "github.com/metasched/metasched/hypervisorproxy"
	"github.com/metasched/metasched/hypervisorproxy/client"
	"github.com/metasched/metasched/internal/tlsx"
	"github.com/metasched/metasched/internal/tlsx/tlsxtest"
)

// rawClient is a client of the agent at url that trusts p's CA and
// presents the certificate pair of files (none when Cert is "").
func rawClient(t *testing.T, p *tlsxtest.PKI, url string, f tlsx.Files) *client.Client {
	t.Helper()
	pool, err := tlsx.CAPool(p.CAFile())
	if err != nil {
		t.Fatal(err)
	}
	cfg := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	if f.Cert != "" {
		pair, err := tls.LoadX509KeyPair(f.Cert, f.Key)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return client.New(url, "").WithHTTPClient(&http.Client{Transport: &http.Transport{TLSClientConfig: cfg}})
}

// Who may call an agent served over TLS: the daemon and an operator's
// client everything; a user's client and another agent nothing but the
// probe sink (403); a client without a certificate, with one of another
// CA or an expired one, nothing (the handshake fails). The daemon refuses
// an agent whose certificate names another site.
func TestAgentTLSAuthentication(t *testing.T) {
	p := tlsxtest.New(t)
	a := startTLSAgent(t, p, "lab")
	ctx := context.Background()
	if _, err := a.client.Inventory(ctx); err != nil {
		t.Fatalf("the daemon's inventory: %v", err)
	}
	op := p.Source(t, tlsx.Client("ops", tlsx.RoleOperator))
	if _, err := rawClient(t, p, a.url, op.Files()).Inventory(ctx); err != nil {
		t.Errorf("an operator's inventory: %v", err)
	}
	for _, id := range []tlsx.Identity{tlsx.Client("alice", tlsx.RoleUser), tlsx.Agent("far")} {
		_, err := rawClient(t, p, a.url, p.Source(t, id).Files()).Inventory(ctx)
		if !errors.Is(err, hp.ErrForbidden) || !strings.Contains(err.Error(), id.String()+" may not call GET /v1/inventory") {
			t.Errorf("%s's inventory: err = %v, want ErrForbidden naming it", id, err)
		}
	}

	expired := p.Issue(t, "daemon-expired", tlsx.Request{Identity: tlsx.Daemon(), Now: time.Now().Add(-48 * time.Hour), ValidFor: time.Hour})
	other := tlsxtest.New(t)
	for _, tc := range []struct {
		name string
		f    tlsx.Files
		want string
	}{
		{"no certificate", tlsx.Files{}, "certificate required"},
		{"another CA", other.Issue(t, "daemon", tlsx.Request{Identity: tlsx.Daemon()}), "unknown certificate authority"},
		{"expired", expired, "expired certificate"},
	} {
		_, err := rawClient(t, p, a.url, tc.f).Inventory(ctx)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want one with %q", tc.name, err, tc.want)
		}
	}

	// The daemon calls lab's address for site far: refused before any
	// request is sent.
	_, err := tlsClient(t, a.url, p.Source(t, tlsx.Daemon()), "far").Inventory(ctx)
	if err == nil || !strings.Contains(err.Error(), "is the agent of site lab, not the agent of site far") {
		t.Errorf("the daemon calling lab as far: %v", err)
	}
	// A daemon of another CA does not trust lab.
	_, err = tlsClient(t, a.url, other.Source(t, tlsx.Daemon()), "lab").Inventory(ctx)
	if err == nil || !strings.Contains(err.Error(), "not signed by the CA this side trusts") {
		t.Errorf("a daemon of another CA: %v", err)
	}
}

// An agent whose certificate files are replaced serves the new
// certificate at the next connection, without a restart.
func TestAgentCertificateRotation(t *testing.T) {
	p := tlsxtest.New(t)
	a := startTLSAgent(t, p, "lab")
	serial := func() string {
		t.Helper()
		pool, err := tlsx.CAPool(p.CAFile())
		if err != nil {
			t.Fatal(err)
		}
		c, err := tls.Dial("tcp", strings.TrimPrefix(a.url, "https://"), &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		return c.ConnectionState().PeerCertificates[0].SerialNumber.String()
	}
	first := serial()
	p.Issue(t, "agent-lab", tlsx.Request{Identity: tlsx.Agent("lab"), Hosts: []string{"127.0.0.1"}})
	if got := serial(); got == first {
		t.Fatal("the agent still serves its first certificate after the files were replaced")
	}
	if _, err := a.client.Inventory(context.Background()); err != nil {
		t.Errorf("the daemon after the rotation: %v", err)
	}
}
