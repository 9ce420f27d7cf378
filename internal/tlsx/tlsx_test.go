package tlsx_test

import (
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/metasched/metasched/internal/tlsx"
	"github.com/metasched/metasched/internal/tlsx/tlsxtest"
)

func newPKI(t *testing.T, _ time.Time) *tlsxtest.PKI { return tlsxtest.New(t) }

func source(t *testing.T, f tlsx.Files, kind tlsx.Kind) *tlsx.Source {
	t.Helper()
	s, err := tlsx.NewSource(f, kind, zerolog.Nop(), nil)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// serve serves, over TLS with s's certificate and client certificates
// required, an answer that names the client's identity; it returns the
// server's address.
func serve(t *testing.T, s *tlsx.Source) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, ok := tlsx.PeerIdentity(r.TLS)
		if !ok {
			http.Error(w, "no identity", http.StatusForbidden)
			return
		}
		io.WriteString(w, id.String())
	}), TLSConfig: s.ServerConfig(tls.RequireAndVerifyClientCert), ErrorLog: nil}
	go func() { _ = srv.Serve(tls.NewListener(ln, srv.TLSConfig)) }() // returns when the cleanup closes it; the requests report failures
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String()
}

func get(c *tls.Config, addr string) (string, error) {
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: c}, Timeout: time.Minute}
	resp, err := hc.Get("https://" + addr + "/")
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return "", errors.New(resp.Status + ": " + string(b))
	}
	return string(b), err
}

func TestIdentityRoundTrip(t *testing.T) {
	p := newPKI(t, time.Now())
	for _, id := range []tlsx.Identity{tlsx.Daemon(), tlsx.Agent("spain"), tlsx.Client("alice", tlsx.RoleUser), tlsx.Client("ops-1", tlsx.RoleOperator)} {
		r := tlsx.Request{Identity: id}
		if id.Kind != tlsx.KindClient {
			r.Hosts = []string{"localhost", "127.0.0.1"}
		}
		f := p.Issue(t, "x", r)
		s := source(t, f, id.Kind)
		if got := s.Identity(); got != id {
			t.Errorf("issued %v, read %v", id, got)
		}
	}
}

func TestIssueRefusesBadInput(t *testing.T) {
	p := newPKI(t, time.Now())
	for _, tc := range []struct {
		r    tlsx.Request
		want string
	}{
		{tlsx.Request{Identity: tlsx.Agent("")}, "site: must be"},
		{tlsx.Request{Identity: tlsx.Agent("a:b")}, "site: must be"},
		{tlsx.Request{Identity: tlsx.Client("alice", "root")}, "role: must be user or operator"},
		{tlsx.Request{Identity: tlsx.Client("alice", tlsx.RoleUser), Hosts: []string{"x"}}, "a client certificate names no hosts"},
		{tlsx.Request{Identity: tlsx.Daemon(), Hosts: []string{"bad host"}}, `host: "bad host" is neither`},
		{tlsx.Request{Identity: tlsx.Identity{Kind: "admin"}}, "kind: must be"},
	} {
		_, err := p.CA.Issue(tc.r)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: error %v, want one with %q", tc.r, err, tc.want)
		}
	}
}

// TestMutual: an agent's server accepts the daemon's client certificate;
// the daemon's client accepts the agent of the site it calls and refuses
// another site's, a certificate of another CA, an expired one and one
// that does not name the address dialled, each with a message that says
// so.
func TestMutual(t *testing.T) {
	now := time.Now()
	p := newPKI(t, now)
	daemon := source(t, p.Issue(t, "daemon", tlsx.Request{Identity: tlsx.Daemon()}), tlsx.KindDaemon)
	spain := source(t, p.Issue(t, "agent-spain", tlsx.Request{Identity: tlsx.Agent("spain"), Hosts: []string{"127.0.0.1"}}), tlsx.KindAgent)
	addr := serve(t, spain)

	got, err := get(daemon.ClientConfig(tlsx.Agent("spain"), "127.0.0.1"), addr)
	if err != nil || got != "the daemon" {
		t.Fatalf("daemon → spain: %q, %v; want \"the daemon\"", got, err)
	}
	if _, err := get(daemon.ClientConfig(tlsx.Agent("latam-a"), "127.0.0.1"), addr); err == nil ||
		!strings.Contains(err.Error(), "is the agent of site spain, not the agent of site latam-a") {
		t.Errorf("daemon → spain as latam-a: %v", err)
	}

	other := newPKI(t, now)
	rogue := source(t, other.Issue(t, "agent-spain", tlsx.Request{Identity: tlsx.Agent("spain"), Hosts: []string{"127.0.0.1"}}), tlsx.KindAgent)
	if _, err := get(daemon.ClientConfig(tlsx.Agent("spain"), "127.0.0.1"), serve(t, rogue)); err == nil ||
		!strings.Contains(err.Error(), "not signed by the CA this side trusts") {
		t.Errorf("daemon → spain of another CA: %v", err)
	}
	// The agent refuses a daemon of another CA.
	rogueDaemon := source(t, other.Issue(t, "daemon", tlsx.Request{Identity: tlsx.Daemon()}), tlsx.KindDaemon)
	if _, err := get(rogueDaemon.ClientConfig(tlsx.Agent("spain"), "127.0.0.1"), addr); err == nil {
		t.Error("the agent accepted a daemon certificate of another CA")
	}

	old := source(t, p.Issue(t, "agent-old", tlsx.Request{Identity: tlsx.Agent("spain"), Hosts: []string{"127.0.0.1"}, Now: now, ValidFor: 24 * time.Hour}), tlsx.KindAgent)
	oldAddr := serve(t, old)
	later, err := tlsx.NewSource(daemon.Files(), tlsx.KindDaemon, zerolog.Nop(), func() time.Time { return now.Add(48 * time.Hour) })
	if err != nil {
		t.Fatal(err)
	}
	if _, err := get(later.ClientConfig(tlsx.Agent("spain"), "127.0.0.1"), oldAddr); err == nil || !strings.Contains(err.Error(), "expired on") {
		t.Errorf("daemon → an expired certificate: %v", err)
	}

	local := source(t, p.Issue(t, "agent-local", tlsx.Request{Identity: tlsx.Agent("spain"), Hosts: []string{"localhost"}}), tlsx.KindAgent)
	if _, err := get(daemon.ClientConfig(tlsx.Agent("spain"), "127.0.0.1"), serve(t, local)); err == nil ||
		!strings.Contains(err.Error(), `is for [localhost], not for "127.0.0.1"`) {
		t.Errorf("daemon → a certificate of another host: %v", err)
	}
}

func TestSourceRefusesBadFiles(t *testing.T) {
	now := time.Now()
	p := newPKI(t, now)
	good := p.Issue(t, "agent", tlsx.Request{Identity: tlsx.Agent("spain")})
	expired := p.Issue(t, "expired", tlsx.Request{Identity: tlsx.Agent("spain"), Now: now.Add(-48 * time.Hour), ValidFor: time.Hour})
	other := newPKI(t, now).Issue(t, "agent", tlsx.Request{Identity: tlsx.Agent("spain")})
	for _, tc := range []struct {
		name string
		f    tlsx.Files
		kind tlsx.Kind
		want string
	}{
		{"missing", tlsx.Files{Cert: good.Cert + ".none", Key: good.Key, CA: good.CA}, tlsx.KindAgent, "cert_file"},
		{"expired", expired, tlsx.KindAgent, "the certificate expired on"},
		{"other CA", tlsx.Files{Cert: other.Cert, Key: other.Key, CA: good.CA}, tlsx.KindAgent, "not signed by the CA of ca_file"},
		{"key of another", tlsx.Files{Cert: good.Cert, Key: expired.Key, CA: good.CA}, tlsx.KindAgent, "private key does not match"},
		{"another kind", good, tlsx.KindDaemon, "the certificate is the agent of site spain's, not a daemon's"},
		{"no CA", tlsx.Files{Cert: good.Cert, Key: good.Key, CA: good.Key}, tlsx.KindAgent, "no PEM certificate"},
	} {
		_, err := tlsx.NewSource(tc.f, tc.kind, zerolog.Nop(), nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one with %q", tc.name, err, tc.want)
		}
	}
}

// TestRotation: a server's certificate replaced in its files is served
// at the next handshake, without a restart; files that cannot be used
// leave the previous ones in use.
func TestRotation(t *testing.T) {
	p := newPKI(t, time.Now())
	f := p.Issue(t, "agent", tlsx.Request{Identity: tlsx.Agent("spain"), Hosts: []string{"127.0.0.1"}})
	s := source(t, f, tlsx.KindAgent)
	addr := serve(t, s)
	daemon := source(t, p.Issue(t, "daemon", tlsx.Request{Identity: tlsx.Daemon()}), tlsx.KindDaemon)
	serial := func() string {
		t.Helper()
		c, err := tls.Dial("tcp", addr, daemon.ClientConfig(tlsx.Agent("spain"), "127.0.0.1"))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		return c.ConnectionState().PeerCertificates[0].SerialNumber.String()
	}
	first := serial()
	// A key that is not the certificate's: the old pair stays.
	bad, err := p.CA.Issue(tlsx.Request{Identity: tlsx.Agent("spain"), Hosts: []string{"127.0.0.1"}, Now: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	tlsxtest.Write(t, f.Key, bad.Key)
	if got := serial(); got != first {
		t.Fatalf("a mismatched key pair was taken: serial %s, want %s", got, first)
	}
	tlsxtest.Write(t, f.Cert, bad.Cert)
	if got := serial(); got == first {
		t.Fatal("the rotated certificate was not served")
	}
}
