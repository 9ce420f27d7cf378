// Package client is the Go client of a site agent's HTTP API (package
// hypervisorproxy, Agent.Handler). Errors the agent answers with are
// *hypervisorproxy.RemoteError values that wrap the agent's sentinel
// errors, so that
//
//	c := client.New("http://127.0.0.1:9101", token)
//	_, err := c.Resize(ctx, "vm-1", hypervisorproxy.Resize{VCPUs: 3})
//	if errors.Is(err, hypervisorproxy.ErrUnsupported) { ... }
//
// works as it would against an in-process agent.
//
// The design is described in docs/reference/http.md of the
// repository, "The agent's client: hypervisorproxy/client".
package client

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	hp "github.com/metasched/metasched/hypervisorproxy"
	"github.com/metasched/metasched/internal/tlsx"
)

// Client talks to one agent.
type Client struct {
	base  string
	token string
	http  *http.Client
	epoch int64 // the leader epoch every request carries (0: none)
}

// New returns a client of the agent at base (http://HOST:PORT) that
// presents token.
func New(base, token string) *Client {
	return &Client{base: strings.TrimRight(base, "/"), token: token, http: &http.Client{}}
}

// NewTLS returns a client of the agent of site at base (https://HOST:PORT)
// that presents the certificate of src (the daemon's, or an operator's
// client) and accepts only that agent's: signed by src's CA, naming the
// host of base and the site. No token is sent.
func NewTLS(base string, src *tlsx.Source, site string) (*Client, error) {
	u, err := url.Parse(base)
	if err != nil || u.Scheme != "https" || u.Host == "" {
		return nil, fmt.Errorf("agent address: must be https://HOST:PORT, not %q", base)
	}
	cfg := src.ClientConfig(tlsx.Agent(site), u.Hostname())
	// A connection the pool no longer keeps resumes its TLS session
	// instead of a full handshake with certificates.
	cfg.ClientSessionCache = tls.NewLRUClientSessionCache(idleConns)
	tr := &http.Transport{Proxy: nil, TLSClientConfig: cfg,
		MaxIdleConnsPerHost: idleConns, IdleConnTimeout: 90 * time.Second, TLSHandshakeTimeout: 30 * time.Second}
	return &Client{base: strings.TrimRight(base, "/"), http: &http.Client{Transport: tr}}, nil
}

// idleConns is how many connections to an agent stay open once idle: as
// many as the daemon's claims carried out at once may use together (64 a
// round, each creating its VMs on their sites at once). With 16, a
// round's claims opened a new connection each, with a full TLS handshake:
// 40% of the daemon's CPU with ten agents over TLS at 1,000 hosts.
const idleConns = 64

// WithHTTPClient returns a copy of c that uses hc.
func (c *Client) WithHTTPClient(hc *http.Client) *Client {
	d := *c
	d.http = hc
	return &d
}

// WithLeaderEpoch returns a copy of c whose requests carry the leading
// daemon's epoch (hypervisorproxy.LeaderEpochHeader): the agent refuses
// them once it has seen a higher one (a later leader's).
func (c *Client) WithLeaderEpoch(epoch int64) *Client {
	d := *c
	d.epoch = epoch
	return &d
}

// Base returns the agent's address.
func (c *Client) Base() string { return c.base }

// Healthz checks that the agent answers and returns its site.
func (c *Client) Healthz(ctx context.Context) (string, error) {
	var out struct {
		Site string `json:"site"`
	}
	err := c.do(ctx, http.MethodGet, "/healthz", nil, &out)
	return out.Site, err
}

// Inventory returns the site's hosts and VMs.
func (c *Client) Inventory(ctx context.Context) (hp.Inventory, error) {
	var out hp.Inventory
	err := c.do(ctx, http.MethodGet, "/v1/inventory", nil, &out)
	return out, err
}

// VM returns one managed VM.
func (c *Client) VM(ctx context.Context, name string) (hp.VM, error) {
	var out hp.VM
	err := c.do(ctx, http.MethodGet, "/v1/vms/"+url.PathEscape(name), nil, &out)
	return out, err
}

// Create creates and starts a VM.
func (c *Client) Create(ctx context.Context, spec hp.VMSpec) (hp.VM, error) {
	var out hp.VM
	err := c.do(ctx, http.MethodPost, "/v1/vms", spec, &out)
	return out, err
}

// Resize changes a VM's vCPUs and memory live.
func (c *Client) Resize(ctx context.Context, name string, r hp.Resize) (hp.VM, error) {
	var out hp.VM
	err := c.do(ctx, http.MethodPost, "/v1/vms/"+url.PathEscape(name)+"/resize", r, &out)
	return out, err
}

// Migrate moves a VM to another host of the site.
func (c *Client) Migrate(ctx context.Context, name, host string) (hp.Migration, error) {
	var out hp.Migration
	err := c.do(ctx, http.MethodPost, "/v1/vms/"+url.PathEscape(name)+"/migrate", hp.MigrateRequest{Host: host}, &out)
	return out, err
}

// Destroy stops and undefines a VM.
func (c *Client) Destroy(ctx context.Context, name string) error {
	return c.do(ctx, http.MethodDelete, "/v1/vms/"+url.PathEscape(name), nil, nil)
}

// Reconfigure moves a host to another pool.
func (c *Client) Reconfigure(ctx context.Context, host string, r hp.Reconfigure) (hp.Reconfigured, error) {
	var out hp.Reconfigured
	err := c.do(ctx, http.MethodPost, "/v1/hosts/"+url.PathEscape(host)+"/reconfigure", r, &out)
	return out, err
}

// Probe asks the agent to measure its throughput to another agent.
func (c *Client) Probe(ctx context.Context, r hp.ProbeRequest) (hp.Probe, error) {
	var out hp.Probe
	err := c.do(ctx, http.MethodPost, "/v1/probe", r, &out)
	return out, err
}

// GuestExec starts a program inside a VM through its guest agent.
func (c *Client) GuestExec(ctx context.Context, vm string, e hp.GuestExec) (hp.GuestProcess, error) {
	var out hp.GuestProcess
	err := c.do(ctx, http.MethodPost, "/v1/vms/"+url.PathEscape(vm)+"/guest/exec", e, &out)
	return out, err
}

// GuestExecStatus reads the state of a program GuestExec started; the
// guest agent forgets it once it has reported its exit.
func (c *Client) GuestExecStatus(ctx context.Context, vm string, pid int) (hp.GuestExecStatus, error) {
	var out hp.GuestExecStatus
	err := c.do(ctx, http.MethodGet, "/v1/vms/"+url.PathEscape(vm)+"/guest/exec/"+strconv.Itoa(pid), nil, &out)
	return out, err
}

// GuestWriteFile replaces a file inside a VM (its directory must exist)
// and gives it mode (permission bits).
func (c *Client) GuestWriteFile(ctx context.Context, vm, path string, data []byte, mode os.FileMode) error {
	q := url.Values{"path": {path}, "mode": {strconv.FormatUint(uint64(mode), 8)}}
	return c.send(ctx, http.MethodPut, "/v1/vms/"+url.PathEscape(vm)+"/guest/file?"+q.Encode(),
		bytes.NewReader(data), "application/octet-stream", nil)
}

// GuestReadFile reads at most max bytes (0: hypervisorproxy.MaxGuestRead)
// of a file inside a VM from offset; a missing file is an error wrapping
// hypervisorproxy.ErrNotFound.
func (c *Client) GuestReadFile(ctx context.Context, vm, path string, offset int64, max int) (hp.GuestFileChunk, error) {
	q := url.Values{"path": {path}, "offset": {strconv.FormatInt(offset, 10)}, "max": {strconv.Itoa(max)}}
	var out hp.GuestFileChunk
	err := c.do(ctx, http.MethodGet, "/v1/vms/"+url.PathEscape(vm)+"/guest/file?"+q.Encode(), nil, &out)
	return out, err
}

func (c *Client) do(ctx context.Context, method, path string, in, out any) error {
	if in == nil {
		return c.send(ctx, method, path, nil, "", out)
	}
	data, err := json.Marshal(in)
	if err != nil {
		return err
	}
	return c.send(ctx, method, path, bytes.NewReader(data), "application/json", out)
}

// send makes one request with body (of contentType) and decodes the
// JSON answer into out.
func (c *Client) send(ctx context.Context, method, path string, body io.Reader, contentType string, out any) error {
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, body)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	if c.epoch > 0 {
		req.Header.Set(hp.LeaderEpochHeader, strconv.FormatInt(c.epoch, 10))
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	if resp.StatusCode >= 300 {
		return fmt.Errorf("%s %s: %w", method, path, hp.DecodeError(resp.StatusCode, data))
	}
	if out == nil || resp.StatusCode == http.StatusNoContent {
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("%s %s: the answer: %w", method, path, err)
	}
	return nil
}
