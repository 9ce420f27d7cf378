package httpapi_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/metasched/metasched/internal/httpsrv"
	"github.com/metasched/metasched/internal/slowclient"
	"github.com/metasched/metasched/metasched"
	"github.com/metasched/metasched/metasched/api"
	"github.com/metasched/metasched/metasched/internal/daemontest"
)

// 300 slow logins from 127.0.0.1 (each declares a body of 100,000 bytes
// and sends one byte) against the daemon's server on a port of the system,
// with the default caps: a valid request from the same address succeeds,
// and the server has closed the oldest slow connections beyond the cap per
// address instead of holding them all.
func TestSlowLoginsDoNotKeepAValidRequestOut(t *testing.T) {
	td := startDaemon(t, metasched.Options{}, nil)
	addr := strings.TrimPrefix(td.addr, "http://")
	const slow = 300
	conns := slowclient.Flood(t, slow, addr, "POST", "/login", slowclient.Options{})

	ctx, cancel := context.WithTimeout(context.Background(), slowclient.Safety)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "GET", td.addr+"/v1/jobs", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+td.d.Token())
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("the valid request after %d slow logins: %v", slow, err)
	}
	var jl api.JobList
	err = json.NewDecoder(resp.Body).Decode(&jl)
	resp.Body.Close()
	if resp.StatusCode != 200 || err != nil {
		t.Fatalf("the valid request after %d slow logins: %d (%v)", slow, resp.StatusCode, err)
	}

	closed := slow - httpsrv.DefaultMaxUnprovenPerAddress
	for i, c := range conns[:closed] {
		if !slowclient.ClosedByServer(c) {
			t.Fatalf("slow login %d of %d is still held by the server after %s: the oldest %d beyond the cap of %d per address should be closed",
				i+1, slow, slowclient.Safety, closed, httpsrv.DefaultMaxUnprovenPerAddress)
		}
	}
}

// A login whose body never arrives is dropped after the default read
// timeout (60 s, on the bubble's clock): the server answers 400 and
// closes the connection.
func TestBodyThatNeverArrivesIsDropped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		td := daemontest.StartInBubble(t, nil, metasched.Options{}, nil, checkOpenAPI(t))
		dial := td.HTTP.Transport.(*http.Transport).DialContext
		c, err := dial(t.Context(), "tcp", "memnet:80")
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := io.WriteString(c, "POST /login HTTP/1.1\r\nHost: memnet\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{"); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		const bound = 5 * time.Minute // on the bubble's clock
		if err := c.SetReadDeadline(start.Add(bound)); err != nil {
			t.Fatal(err)
		}
		br := bufio.NewReader(c)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("no answer %s after the body stalled (%v): the server holds the connection", bound, err)
		}
		var e api.APIError
		if err := json.NewDecoder(resp.Body).Decode(&e); err != nil {
			t.Fatalf("answer %d: %v", resp.StatusCode, err)
		}
		resp.Body.Close()
		if resp.StatusCode != 400 || e.Code != api.CodeInvalid || !strings.Contains(e.Error, "did not arrive within the server's read timeout") {
			t.Errorf("answer %d %+v, want 400 invalid: the body did not arrive", resp.StatusCode, e)
		}
		if waited := time.Since(start); waited != httpsrv.DefaultReadTimeout {
			t.Errorf("dropped after %s, want the read timeout %s", waited, httpsrv.DefaultReadTimeout)
		}
		if _, err := br.ReadByte(); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
			t.Errorf("the connection is still open after the answer (%v)", err)
		}
		td.Stop()
	})
}

// The event stream outlives a short write timeout: each event gets it
// anew.
func TestEventStreamOutlivesWriteTimeout(t *testing.T) {
	const write = 100 * time.Millisecond
	td := startDaemon(t, metasched.Options{HTTP: httpsrv.Timeouts{Write: write}}, nil)
	req, err := http.NewRequest("GET", td.addr+"/v1/events", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+td.d.Token())
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	// Events come every 500 ms: 4 span 15 write timeouts at least.
	const want = 4
	n := 0
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 16<<20)
	for n < want && sc.Scan() {
		if strings.HasPrefix(sc.Text(), "data: ") {
			n++
		}
	}
	if n < want {
		t.Fatalf("the event stream ended after %d events (%v): the write timeout of %s cut it", n, sc.Err(), write)
	}
}
