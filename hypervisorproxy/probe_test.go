package hypervisorproxy_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	hp "github.com/metasched/metasched/hypervisorproxy"
	"github.com/metasched/metasched/hypervisorproxy/client"
	"github.com/metasched/metasched/hypervisorproxy/virt"
	"github.com/metasched/metasched/internal/tlsx"
	"github.com/metasched/metasched/internal/tlsx/tlsxtest"
)

// tlsAgent is an agent of testGrid serving its API over TLS (Serve, on a
// port of the system), with a client that presents the daemon's
// certificate.
type tlsAgent struct {
	agent  *hp.Agent
	url    string // https://127.0.0.1:PORT
	client *client.Client
}

// startTLSAgent runs the agent of site ("lab" or "far" of testGrid) with
// a certificate of p for 127.0.0.1 until the test ends.
func startTLSAgent(t testing.TB, p *tlsxtest.PKI, site string) *tlsAgent {
	t.Helper()
	s, g := labSite(t, t.TempDir(), "")
	s.Site, s.TokenFile = site, ""
	log := zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel)
	a, err := hp.New(context.Background(), hp.Config{Site: s, TLS: p.Source(t, tlsx.Agent(site), "127.0.0.1"), Grid: g,
		Connect: virt.Connector(log), Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	ta := &tlsAgent{agent: a, url: "https://" + serveOn(t, a)}
	ta.client = tlsClient(t, ta.url, p.Source(t, tlsx.Daemon()), site)
	return ta
}

// serveOn serves a's API with Serve on a port of 127.0.0.1 until the
// test ends (then it closes a), and returns the address.
func serveOn(t testing.TB, a *hp.Agent) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
		_ = a.Close() // closes the hypervisor connections: nothing the test checks is lost
	})
	return ln.Addr().String()
}

func tlsClient(t testing.TB, url string, src *tlsx.Source, site string) *client.Client {
	t.Helper()
	c, err := client.NewTLS(url, src, site)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// A probe between two agents on loopback over mutual TLS: the request
// names the other agent's site and carries no credential; a target that
// is not the agent of the site named is refused.
func TestAgentProbeLoopback(t *testing.T) {
	p := tlsxtest.New(t)
	a := startTLSAgent(t, p, "lab")
	b := startTLSAgent(t, p, "far")
	pr, err := a.client.Probe(context.Background(), hp.ProbeRequest{Target: b.url, Site: "far", Bytes: 4 << 20})
	if err != nil {
		t.Fatal(err)
	}
	if pr.Bytes <= 3<<20 || pr.Bytes > 4<<20 || pr.Mbps <= 0 || pr.Seconds <= 0 || pr.MeasuredAt.IsZero() {
		t.Errorf("probe = %+v", pr)
	}
	// far's address, but another site's name: far's certificate does not
	// pass for it.
	c := startTLSAgent(t, p, "lab")
	_, err = a.client.Probe(context.Background(), hp.ProbeRequest{Target: c.url, Site: "far"})
	if err == nil || !strings.Contains(err.Error(), "is the agent of site lab, not the agent of site far") {
		t.Errorf("probe of lab's address as far: %v", err)
	}
	for _, bad := range []hp.ProbeRequest{
		{Target: strings.Replace(b.url, "https", "http", 1), Site: "far"},
		{Target: b.url},
		{Target: b.url, Site: "lab"},
	} {
		if _, err := a.client.Probe(context.Background(), bad); !errors.Is(err, hp.ErrInvalid) {
			t.Errorf("probe %+v: err = %v, want ErrInvalid", bad, err)
		}
	}
	// An agent of plain HTTP cannot probe: it would have only a token to
	// show, which it must not pass on.
	plain := startAgent(t, "", "")
	if _, err := plain.client.Probe(context.Background(), hp.ProbeRequest{Target: b.url, Site: "far"}); !errors.Is(err, hp.ErrUnsupported) {
		t.Errorf("probe from a plain agent: err = %v, want ErrUnsupported", err)
	}
}
