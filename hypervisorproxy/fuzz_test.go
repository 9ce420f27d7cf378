package hypervisorproxy_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	hp "github.com/metasched/metasched/hypervisorproxy"
	"github.com/metasched/metasched/internal/tlsx"
	"github.com/metasched/metasched/internal/tlsx/tlsxtest"
	"github.com/metasched/metasched/internal/yamlx"
	"github.com/metasched/metasched/internal/yamlx/yamlxtest"
)

// FuzzParseSite decodes site files: a file is either refused, with every
// problem naming the file and a field or a line, or gives a site whose
// values are within their documented rules and that comes back the same
// from its own encoding.
func FuzzParseSite(f *testing.F) {
	f.Add([]byte(siteFull))
	f.Add([]byte(siteOK + siteHost))
	f.Add([]byte(siteOK + "grid: g.yaml\npool: render\n"))
	for _, tc := range siteErrorCases {
		f.Add([]byte(tc.yaml))
	}
	files, err := filepath.Glob("../examples/site-*.yaml")
	if err != nil {
		f.Fatal(err)
	}
	for _, name := range files {
		data, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := hp.ParseSite("s.yaml", data)
		if err != nil {
			if s != nil {
				t.Errorf("ParseSite returned a site with the error %v", err)
			}
			if err := yamlxtest.CheckError("s.yaml", err); err != nil {
				t.Fatal(err)
			}
			return
		}
		checkSite(t, s)
		js, err := json.Marshal(siteFile(s))
		if err != nil {
			t.Fatal(err)
		}
		back, err := hp.ParseSite("s.yaml", js)
		if err != nil {
			t.Fatalf("the site's own encoding is refused: %v\n%s", err, js)
		}
		if diff := cmp.Diff(s, back, cmpopts.EquateComparable(netip.Addr{}, netip.Prefix{})); diff != "" {
			t.Fatalf("site after a round trip (-parsed +again):\n%s", diff)
		}
	})
}

// checkSite fails the test when a value of an accepted site breaks the
// rules of a site file.
func checkSite(t *testing.T, s *hp.Site) {
	t.Helper()
	var bad []string
	check := func(ok bool, format string, args ...any) {
		if !ok {
			bad = append(bad, fmt.Sprintf(format, args...))
		}
	}
	check(yamlx.IsName(s.Site), "site %q", s.Site)
	_, port, err := net.SplitHostPort(s.Listen)
	check(err == nil && port != "", "listen %q", s.Listen)
	check((s.TokenFile != "") != (s.TLS != nil), "token_file %q with tls %v", s.TokenFile, s.TLS)
	check(s.TLS != nil || tlsx.Loopback(s.Listen), "plain HTTP on listen %q", s.Listen)
	check(s.SwitchDelay >= 0, "switch_delay %v", s.SwitchDelay)
	check(s.MigrationProgressTimeout > 0, "migration_progress_timeout %v", s.MigrationProgressTimeout)
	check(s.MigrationPorts[0] >= 1 && s.MigrationPorts[0] <= s.MigrationPorts[1] && s.MigrationPorts[1] <= 65535,
		"migration_ports %v", s.MigrationPorts)
	check(s.Pool == "" || yamlx.IsName(s.Pool), "pool %q", s.Pool)
	check(len(s.Hosts) > 0 || s.Grid != "", "neither hosts nor a grid")
	check(s.BootTimeout > 0, "boot_timeout %v", s.BootTimeout)
	check(s.CPUQuota == 0 || (s.CPUQuota >= 0.01 && s.CPUQuota <= 1), "cpu_quota %g", s.CPUQuota)
	if n := s.Network; n != nil {
		check(n.Subnet.Contains(n.First) && n.Subnet.Contains(n.Last) && !n.Last.Less(n.First), "network %v", n)
		check(!n.Gateway.IsValid() || n.Subnet.Contains(n.Gateway) && (n.Gateway.Less(n.First) || n.Last.Less(n.Gateway)), "network gateway %v", n)
	}
	for pool, dir := range s.Images {
		check(yamlx.IsName(pool) && dir != "", "images.%s %q", pool, dir)
	}
	seen := map[string]bool{}
	for i, h := range s.Hosts {
		check(yamlx.IsName(h.Name) && !seen[h.Name], "hosts[%d].name %q", i, h.Name)
		seen[h.Name] = true
		check(h.URI != "", "hosts[%d].uri empty", i)
		check(h.Pool == "" || yamlx.IsName(h.Pool), "hosts[%d].pool %q", i, h.Pool)
		check(h.ImageDir == "" || filepath.IsAbs(h.ImageDir) && filepath.Clean(h.ImageDir) == h.ImageDir, "hosts[%d].image_dir %q", i, h.ImageDir)
		check(h.CPUs >= 0 && h.MemoryMiB >= 0, "hosts[%d] share %d CPUs, %d MiB", i, h.CPUs, h.MemoryMiB)
	}
	if len(bad) > 0 {
		t.Fatalf("accepted site breaks its rules: %v\n%+v", bad, s)
	}
}

// siteFile is the site file of s.
func siteFile(s *hp.Site) map[string]any {
	out := map[string]any{
		"site": s.Site, "listen": s.Listen,
		"switch_delay":               s.SwitchDelay.String(),
		"migration_progress_timeout": s.MigrationProgressTimeout.String(),
		"migration_ports":            fmt.Sprintf("%d-%d", s.MigrationPorts[0], s.MigrationPorts[1]),
		"max_unproven_connections":   s.MaxUnproven,
		"max_unproven_per_address":   s.MaxUnprovenPerAddress,
	}
	for k, v := range map[string]string{"grid": s.Grid, "pool": s.Pool, "data_dir": s.DataDir} {
		if v != "" {
			out[k] = v
		}
	}
	if s.TLS != nil {
		out["tls"] = map[string]string{"cert_file": s.TLS.Cert, "key_file": s.TLS.Key, "ca_file": s.TLS.CA}
	} else {
		out["token_file"], out["insecure_http"] = s.TokenFile, true
	}
	if s.Hosts != nil {
		out["hosts"] = s.Hosts
	}
	out["boot_timeout"] = s.BootTimeout.String()
	if s.MaxConcurrentBoots > 0 {
		out["max_concurrent_boots"] = s.MaxConcurrentBoots
	}
	if s.Images != nil {
		out["images"] = s.Images
	}
	if n := s.Network; n != nil {
		nw := map[string]any{"bridge": n.Bridge, "subnet": n.Subnet.String(), "addresses": n.First.String() + "-" + n.Last.String()}
		if n.Gateway.IsValid() {
			nw["gateway"] = n.Gateway.String()
		}
		if len(n.DNS) > 0 {
			var dns []string
			for _, a := range n.DNS {
				dns = append(dns, a.String())
			}
			nw["dns"] = dns
		}
		out["network"] = nw
	}
	if s.CPUQuota != 0 {
		out["cpu_quota"] = s.CPUQuota
	}
	if s.MigrationTLS {
		out["migration_tls"] = true
	}
	return out
}

// vmName is the rule of a VM's name (domxml's).
var vmName = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9._-]{0,63}$`)

// FuzzAgentAPI sends requests (method, path, body; with the agent's token
// or without one) to the agent's real handler, in the process through
// httptest, on an agent of two test-driver hosts in pool render that runs
// keepSpec. Every answer is a 2xx with a JSON body (or 204), or a 4xx
// whose body is {"error", "code"} with the code of its status (what the
// client decodes into the agent's sentinel errors); never a 5xx. Without
// the token nothing but /healthz answers. After every request the site is
// one a daemon can use: every host in a pool with a pool's name, capacity
// not overcommitted, every VM within its maxima and named by the rule of
// names. The site is then put back as it was.
//
// A probe (POST /v1/probe) that passes its checks would send a stream to
// the target it names: its request's context is cancelled first, so that
// it never leaves the process, and it answers 500 "context canceled".
func FuzzAgentAPI(f *testing.F) {
	for _, tc := range agentBadRequests {
		f.Add(tc.method, tc.path, []byte(tc.body), tc.token != "-")
	}
	for _, s := range [][2]string{
		{"/v1/vms", `{"name":"vm-1","job":"job-1","vcpus":2,"max_vcpus":4,"memory_mib":1024,"max_memory_mib":2048}`},
		{"/v1/vms", `{"name":"vm-2","host":"lab-1","pool":"render","vcpus":1,"memory_mib":512}`},
		{"/v1/vms/keep/resize", `{"vcpus":2,"memory_mib":128}`},
		{"/v1/vms/keep/migrate", `{"host":"lab-1"}`},
		{"/v1/hosts/lab-1/reconfigure", `{"pool":"batch","expect_pool":"render"}`},
		{"/v1/hosts/lab-0/reconfigure", `{"pool":"batch","released":["j"]}`},
		{"/v1/probe", `{"target":"http://127.0.0.1:1","bytes":4096,"timeout":"1s"}`},
	} {
		f.Add("POST", s[0], []byte(s[1]), true)
	}
	f.Add("PUT", "/v1/probe/sink", []byte("metasched bandwidth probe"), true)
	for _, tc := range guestBadRequests {
		f.Add(tc.method, tc.path, []byte(tc.body), true)
	}
	f.Add("POST", "/v1/vms/keep/guest/exec", []byte(`{"path":"/usr/bin/metasched-run","args":["start","/run/metasched/j/1","/tmp","65536"],"env":["METASCHED_ROLE=master"],"input":"aGk=","capture_output":true}`), true)
	f.Add("PUT", "/v1/vms/keep/guest/file?path=/run/metasched/j/1/command&mode=0644", []byte("uname -r"), true)
	f.Add("GET", "/v1/vms/keep/guest/file?path=/run/metasched/j/1/output&offset=0&max=65536", []byte(nil), true)
	f.Add("GET", "/v1/vms/keep/guest/exec/42", []byte(nil), true)
	f.Add("DELETE", "/v1/vms/keep", []byte(nil), true)
	f.Add("GET", "/v1/inventory", []byte(nil), true)
	f.Add("GET", "/healthz", []byte(nil), false)

	h := startAgent(f, "", "")
	ctx := context.Background()
	handler := h.agent.Handler()
	if _, err := h.client.Create(ctx, keepSpec); err != nil {
		f.Fatal(err)
	}
	start, err := h.agent.Inventory(ctx)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, method, target string, body []byte, auth bool) {
		req, err := http.NewRequest(method, "http://agent"+target, bytes.NewReader(body))
		if err != nil || !strings.HasPrefix(target, "/") || path.Clean(req.URL.Path) != req.URL.Path {
			return // not a method or a path, or one the router redirects to its clean form
		}
		u := req.URL
		if auth {
			req.Header.Set("Authorization", "Bearer "+testToken)
		}
		probe := u.Path == "/v1/probe"
		if probe {
			cctx, cancel := context.WithCancel(ctx)
			cancel()
			req = req.WithContext(cctx)
		}
		// The site is put back even when a check fails, so that the
		// next input (and the minimization of a failing one) starts from
		// it.
		defer func() {
			if inv, err := h.agent.Inventory(ctx); err != nil || !sameSite(start, inv) {
				resetSite(t, h)
			}
		}()
		rec := httptest.NewRecorder()
		handler.ServeHTTP(rec, req)
		what := fmt.Sprintf("%s %s %q", method, target, body)
		checkAgentAnswer(t, what, rec, auth || u.Path == "/healthz", probe)
		inv, err := h.agent.Inventory(ctx)
		if err != nil {
			t.Fatal(err)
		}
		checkInventory(t, what, inv)
	})
}

// checkAgentAnswer checks the agent's answer to one request.
func checkAgentAnswer(t *testing.T, what string, rec *httptest.ResponseRecorder, authorized, probe bool) {
	t.Helper()
	body := rec.Body.Bytes()
	switch {
	case !authorized && rec.Code != http.StatusUnauthorized:
		t.Fatalf("%s without the token: %d %s", what, rec.Code, body)
	case rec.Code == http.StatusNoContent:
		return
	case rec.Code >= 200 && rec.Code < 300:
		if !json.Valid(body) {
			t.Fatalf("%s: %d with a body that is not JSON: %s", what, rec.Code, body)
		}
		return
	}
	var e hp.APIError
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&e); err != nil || e.Error == "" || e.Code == "" {
		t.Fatalf("%s: %d is not the agent's error (%v): %s", what, rec.Code, err, body)
	}
	if probe && rec.Code == http.StatusInternalServerError && strings.Contains(e.Error, "context canceled") {
		return // a valid probe, stopped before it sent anything
	}
	if rec.Code >= 500 || rec.Code < 400 {
		t.Fatalf("%s: %d %s", what, rec.Code, body)
	}
	s := hp.Sentinel(e.Code)
	if status, code := hp.Status(s); s == nil || status != rec.Code || code != e.Code {
		t.Fatalf("%s: %d with code %q, which the client reads as %v (%d)", what, rec.Code, e.Code, s, status)
	}
}

// checkInventory fails the test when the site is not one a daemon can use.
func checkInventory(t *testing.T, what string, inv hp.Inventory) {
	t.Helper()
	for _, host := range inv.Hosts {
		if host.State != hp.HostReady || !yamlx.IsName(host.Pool) || host.FreeVCPUs < 0 || host.FreeMemoryMiB < 0 {
			t.Fatalf("after %s: host %s is %s in pool %q with %d vCPUs and %d MiB free", what, host.Name, host.State,
				host.Pool, host.FreeVCPUs, host.FreeMemoryMiB)
		}
		for _, v := range host.VMs {
			if !vmName.MatchString(v.Name) || v.Host != host.Name || v.VCPUs < 1 || v.VCPUs > v.MaxVCPUs ||
				v.MemoryMiB < 1 || v.MemoryMiB > v.MaxMemoryMiB {
				t.Fatalf("after %s: vm %+v on host %s", what, v, host.Name)
			}
		}
	}
}

// sameSite reports whether two inventories have the same hosts, pools and
// VMs of the same sizes.
func sameSite(a, b hp.Inventory) bool {
	if len(a.Hosts) != len(b.Hosts) {
		return false
	}
	for i := range a.Hosts {
		x, y := a.Hosts[i], b.Hosts[i]
		if x.Name != y.Name || x.Pool != y.Pool || len(x.VMs) != len(y.VMs) {
			return false
		}
		for j := range x.VMs {
			if x.VMs[j] != y.VMs[j] {
				return false
			}
		}
	}
	return true
}

// resetSite puts the site of FuzzAgentAPI back: every host in pool render,
// keepSpec alone on lab-0.
func resetSite(t *testing.T, h *harness) {
	t.Helper()
	ctx := context.Background()
	inv, err := h.agent.Inventory(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, host := range inv.Hosts {
		for _, v := range host.VMs {
			if err := h.agent.DestroyVM(ctx, v.Name); err != nil {
				t.Fatalf("reset: destroy %s: %v", v.Name, err)
			}
		}
		if host.Pool != "render" {
			if _, err := h.agent.ReconfigureHost(ctx, host.Name, hp.Reconfigure{Pool: "render"}); err != nil {
				t.Fatalf("reset: host %s back to render: %v", host.Name, err)
			}
		}
	}
	if _, err := h.agent.CreateVM(ctx, keepSpec); err != nil {
		t.Fatalf("reset: %v", err)
	}
}

// FuzzDecodeError decodes the error answers of an agent as its client
// (and so the daemon) reads them: the agent's error keeps its status, code
// and message and matches the sentinel of its code with errors.Is; any
// other body becomes a message of at most 200 bytes of it (and "…"),
// valid UTF-8 when the body is.
func FuzzDecodeError(f *testing.F) {
	for _, tc := range agentBadRequests {
		if code := codeOfStatus(tc.status); code != "" {
			data, err := json.Marshal(hp.APIError{Error: tc.msg, Code: code})
			if err != nil {
				f.Fatal(err)
			}
			f.Add(tc.status, data)
		}
	}
	f.Add(502, []byte("<html>bad gateway</html>\n"))
	f.Add(500, []byte(""))
	f.Add(503, []byte(strings.Repeat("x", 300)))
	f.Add(503, []byte(strings.Repeat("x", 199)+"é"+strings.Repeat("y", 100)))
	f.Add(409, []byte(`{"error":"x","code":"no-such-code"}`))
	f.Fuzz(func(t *testing.T, status int, body []byte) {
		err := hp.DecodeError(status, body)
		if err == nil || err.Error() == "" {
			t.Fatalf("DecodeError(%d, %q) = %v", status, body, err)
		}
		var e hp.APIError
		if json.Unmarshal(body, &e) == nil && e.Error != "" {
			var re *hp.RemoteError
			if !errors.As(err, &re) || re.Status != status || re.Code != e.Code || re.Message != e.Error {
				t.Fatalf("DecodeError(%d, %q) = %#v", status, body, err)
			}
			if s := hp.Sentinel(e.Code); s != nil && !errors.Is(err, s) {
				t.Fatalf("DecodeError(%d, %q) does not match %v", status, body, s)
			}
			return
		}
		if _, msg, _ := strings.Cut(err.Error(), ": "); len(strings.TrimSuffix(msg, "…")) > 200 {
			t.Errorf("the message keeps %d bytes of the body, over 200", len(msg))
		}
		if utf8.Valid(body) && !utf8.ValidString(err.Error()) {
			t.Fatalf("DecodeError(%d, %q): the text %q is not UTF-8, the body was", status, body, err)
		}
	})
}

// codeOfStatus is the agent's error code of a status, "" for none.
func codeOfStatus(status int) string {
	for _, s := range []error{hp.ErrInvalid, hp.ErrNotFound, hp.ErrExists, hp.ErrLimit, hp.ErrUnauthorized} {
		if st, code := hp.Status(s); st == status {
			return code
		}
	}
	return ""
}

// FuzzProbeAnswer probes a sink that answers with the fuzzed status and
// body: the agent's measure is an error, or a count of bytes within what
// it sent over a finite, non-negative time at a finite, non-negative rate
// (GramVM averages it into the link weights that plans use).
func FuzzProbeAnswer(f *testing.F) {
	f.Add(200, []byte(`{"bytes":3072,"seconds":0.001,"total_bytes":4096}`))
	f.Add(200, []byte(`{"bytes":0,"seconds":0,"total_bytes":4096}`))
	f.Add(200, []byte(`{"bytes":1,"seconds":5e-324,"total_bytes":1}`))
	f.Add(200, []byte(`{"bytes":-5,"seconds":-1,"total_bytes":4096}`))
	f.Add(200, []byte(`{"bytes":99999999999,"seconds":1e-300}`))
	f.Add(200, []byte(`not json`))
	f.Add(401, []byte(`{"error":"wrong bearer token","code":"unauthorized"}`))
	f.Add(400, []byte(`{"error":"invalid request: the probe stream exceeds 1073741824 bytes","code":"invalid"}`))
	f.Add(502, []byte(`<html>bad gateway</html>`))
	var answer struct {
		status int
		body   []byte
	}
	var mu sync.Mutex
	pki := tlsxtest.New(f)
	sink := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body) // a sink: only the request's arrival counts
		mu.Lock()
		status, body := answer.status, answer.body
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		w.Write(body)
	}))
	sink.TLS = pki.Source(f, tlsx.Agent("far"), "127.0.0.1").ServerConfig(tls.RequireAndVerifyClientCert)
	sink.StartTLS()
	f.Cleanup(sink.Close)
	h := startTLSAgent(f, pki, "lab")
	const sent = 4096
	f.Fuzz(func(t *testing.T, status int, body []byte) {
		if status < 200 || status > 599 {
			return // not a status an HTTP server can send
		}
		mu.Lock()
		answer.status, answer.body = status, body
		mu.Unlock()
		p, err := h.agent.Probe(context.Background(), hp.ProbeRequest{Target: sink.URL, Site: "far", Bytes: sent, Timeout: "10s"})
		if err != nil {
			return
		}
		finite := func(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) && x >= 0 }
		if p.Bytes < 0 || p.Bytes > sent || !finite(p.Seconds) || !finite(p.Mbps) {
			t.Fatalf("probe with the answer %d %q: %+v", status, body, p)
		}
	})
}
