package hypervisorproxy_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	hp "github.com/metasched/metasched/hypervisorproxy"
	"github.com/metasched/metasched/hypervisorproxy/client"
	"github.com/metasched/metasched/hypervisorproxy/virt"
	"github.com/metasched/metasched/internal/httpsrv"
	"github.com/metasched/metasched/internal/slowclient"
)

// serveTCP runs an agent for site "lab" of testGrid with Serve, the
// agent's own server, on a port of the system until the test ends; extra
// is appended to the site file.
func serveTCP(t *testing.T, extra string, timeouts httpsrv.Timeouts) (string, *client.Client) {
	t.Helper()
	site, g := labSite(t, t.TempDir(), extra)
	log := zerolog.Nop() // a flood would log a line per connection
	a, err := hp.New(context.Background(), hp.Config{Site: site, Token: testToken, Grid: g, Connect: virt.Connector(log),
		Logger: log, HTTP: timeouts})
	if err != nil {
		t.Fatal(err)
	}
	addr := serveOn(t, a)
	return addr, client.New("http://"+addr, testToken)
}

// 300 slow unauthenticated POST /v1/vms from 127.0.0.1 (each declares a
// body of 100,000 bytes and sends one byte) against the agent's server on a
// port of the system, with the default caps: a valid request from the same
// address succeeds, and the agent has closed the oldest slow connections
// beyond the cap per address instead of holding them all.
func TestSlowClientsDoNotKeepAValidRequestOut(t *testing.T) {
	addr, c := serveTCP(t, "", httpsrv.Timeouts{})
	const slow = 300
	conns := slowclient.Flood(t, slow, addr, "POST", "/v1/vms", slowclient.Options{})

	ctx, cancel := context.WithTimeout(context.Background(), slowclient.Safety)
	defer cancel()
	vm, err := c.Create(ctx, hp.VMSpec{Name: "after-the-flood", Job: "j-1", VCPUs: 1, MemoryMiB: 512})
	if err != nil || vm.Name != "after-the-flood" {
		t.Fatalf("the valid request after %d slow ones: %+v, %v", slow, vm, err)
	}
	closed := slow - httpsrv.DefaultMaxUnprovenPerAddress
	for i, conn := range conns[:closed] {
		if !slowclient.ClosedByServer(conn) {
			t.Fatalf("slow request %d of %d is still held by the agent after %s: the oldest %d beyond the cap of %d per address should be closed",
				i+1, slow, slowclient.Safety, closed, httpsrv.DefaultMaxUnprovenPerAddress)
		}
	}
}

// The caps come from the site file.
func TestSiteCapsUnproven(t *testing.T) {
	addr, c := serveTCP(t, "max_unproven_connections: 6\nmax_unproven_per_address: 4\n", httpsrv.Timeouts{})
	conns := slowclient.Flood(t, 5, addr, "POST", "/v1/vms", slowclient.Options{})
	conns = append(conns, slowclient.Flood(t, 3, addr, "POST", "/v1/vms", slowclient.Options{Local: "127.0.0.2"})...)
	// 5 from .1: the first closed (4 per address); 3 from .2: 7 in all,
	// the oldest (the second from .1) closed.
	for _, i := range []int{0, 1} {
		if !slowclient.ClosedByServer(conns[i]) {
			t.Fatalf("slow request %d is still held", i)
		}
	}
	if _, err := c.Inventory(context.Background()); err != nil {
		t.Fatalf("a valid request: %v", err)
	}
}

// An authenticated request whose body does not arrive within the read
// timeout (shortened here) is dropped: a 400 that says so, and the
// connection closed.
func TestBodyThatNeverArrivesIsDropped(t *testing.T) {
	addr, _ := serveTCP(t, "", httpsrv.Timeouts{Read: 200 * time.Millisecond})
	conn := slowclient.Open(t, addr, "POST", "/v1/vms", slowclient.Options{Header: []string{"Authorization: Bearer " + testToken}})
	if err := conn.SetReadDeadline(time.Now().Add(slowclient.Safety)); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("no answer after the body stalled (%v): the agent holds the connection", err)
	}
	var e hp.APIError
	if err := json.NewDecoder(resp.Body).Decode(&e); err != nil {
		t.Fatalf("answer %d: %v", resp.StatusCode, err)
	}
	resp.Body.Close()
	if resp.StatusCode != 400 || e.Code != "invalid" || !strings.Contains(e.Error, "did not arrive within the server's read timeout") {
		t.Errorf("answer %d %+v, want 400 invalid: the body did not arrive", resp.StatusCode, e)
	}
	if _, err := br.ReadByte(); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("the connection is still open after the answer (%v)", err)
	}
}

func TestSiteCapsErrors(t *testing.T) {
	for extra, want := range map[string]string{
		"max_unproven_connections: 0\n":                                 "site.yaml: max_unproven_connections: must be a whole number within 1 and 1048576, not 0",
		"max_unproven_per_address: -1\n":                                "site.yaml: max_unproven_per_address: must be a whole number within 1 and 1048576, not -1",
		"max_unproven_connections: 8\nmax_unproven_per_address: 9\n":    "site.yaml: max_unproven_per_address: must be at most max_unproven_connections (8), not 9",
		"max_unproven_connections: 2000000\n":                           "site.yaml: max_unproven_connections: must be a whole number within 1 and 1048576, not 2000000",
		"max_unproven_connections: lots\nmax_unproven_per_address: 9\n": "site.yaml: max_unproven_connections: must be",
	} {
		_, err := hp.ParseSite("site.yaml", []byte("site: lab\ntoken_file: token\ninsecure_http: true\ngrid: grid.yaml\n"+extra))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", extra, err, want)
		}
	}
	s, err := hp.ParseSite("site.yaml", []byte("site: lab\ntoken_file: token\ninsecure_http: true\ngrid: grid.yaml\nmax_unproven_per_address: 10\n"))
	if err != nil || s.MaxUnproven != httpsrv.DefaultMaxUnproven || s.MaxUnprovenPerAddress != 10 {
		t.Errorf("defaults: %+v, %v", s, err)
	}
}
