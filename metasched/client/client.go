package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/metasched/metasched/gramvm"
	hp "github.com/metasched/metasched/hypervisorproxy"
	"github.com/metasched/metasched/metasched/api"
	"github.com/metasched/metasched/metasched/lifecycle"
)

// DefaultTimeout bounds a whole call (connection, request and answer) with
// the HTTP client New makes.
const DefaultTimeout = 30 * time.Second

// maxAnswer bounds the body of an answer read into memory (a job's logs
// are the largest).
const maxAnswer = 64 << 20

// Client talks to one metasched daemon.
type Client struct {
	base  string
	token string
	http  *http.Client
}

// New returns a client of the daemon at base (http://HOST:PORT) that
// presents token, with an HTTP client that gives up after DefaultTimeout.
func New(base, token string) *Client {
	return &Client{base: strings.TrimRight(base, "/"), token: token, http: &http.Client{Timeout: DefaultTimeout}}
}

// WithHTTPClient returns a copy of c that uses hc.
func (c *Client) WithHTTPClient(hc *http.Client) *Client {
	d := *c
	d.http = hc
	return &d
}

// Base returns the daemon's address.
func (c *Client) Base() string { return c.base }

// RemoteError is an error the daemon answered with: the HTTP status, the
// API's error code (api.Code*), its message and, for a rejected
// request body, the problem of each field.
type RemoteError struct {
	Status  int
	Code    string
	Message string
	Fields  []api.FieldError
}

// Error returns the message, then each field problem on its own line,
// indented ("  tasks: must be an integer >= 1, got 0"). A field problem the
// message already states is not repeated.
func (e *RemoteError) Error() string {
	var b strings.Builder
	switch {
	case e.Message != "":
		b.WriteString(e.Message)
	case e.Code != "":
		fmt.Fprintf(&b, "http %d: %s", e.Status, e.Code)
	default:
		fmt.Fprintf(&b, "http %d %s", e.Status, http.StatusText(e.Status))
	}
	for _, f := range e.Fields {
		line := f.Problem
		if f.Field != "" {
			line = f.Field + ": " + f.Problem
		}
		if strings.Contains(e.Message, line) {
			continue
		}
		b.WriteString("\n  ")
		b.WriteString(line)
	}
	return b.String()
}

// decodeError turns an answer outside 2xx into a *RemoteError; a body that
// is not the API's error (a proxy's page, say) becomes the message, cut to
// 200 bytes.
func decodeError(status int, body []byte) *RemoteError {
	var e api.APIError
	if json.Unmarshal(body, &e) == nil && (e.Error != "" || e.Code != "") {
		return &RemoteError{Status: status, Code: e.Code, Message: e.Error, Fields: e.Fields}
	}
	msg := strings.TrimSpace(string(body))
	if len(msg) > 200 {
		cut := 200 // at the start of a letter: the message stays UTF-8
		for cut > 0 && !utf8.RuneStart(msg[cut]) {
			cut--
		}
		msg = msg[:cut] + "…"
	}
	if msg != "" {
		msg = fmt.Sprintf("http %d %s: %s", status, http.StatusText(status), msg)
	}
	return &RemoteError{Status: status, Message: msg}
}

// Healthz checks that the daemon answers (without the token) and returns
// its version and start time.
func (c *Client) Healthz(ctx context.Context) (api.Health, error) {
	var out api.Health
	err := c.do(ctx, http.MethodGet, "/healthz", nil, nil, &out)
	return out, err
}

// Submit submits a job file (its bytes as they are, YAML or JSON) and
// returns the job, queued. A job file the daemon refuses is a *RemoteError
// with status 400 and the problem of each field.
func (c *Client) Submit(ctx context.Context, jobFile []byte) (api.Job, error) {
	var out api.Job
	err := c.do(ctx, http.MethodPost, "/v1/jobs", nil, jobFile, &out)
	return out, err
}

// JobsQuery selects jobs: those in any of States (none: every state), of
// Type (empty: every type), with IDs after After, at most Limit of them
// (0: the daemon's page size).
type JobsQuery struct {
	States []lifecycle.State
	Type   string
	After  string
	Limit  int
}

func (q JobsQuery) values() url.Values {
	v := url.Values{}
	if len(q.States) > 0 {
		s := make([]string, len(q.States))
		for i, st := range q.States {
			s[i] = string(st)
		}
		v.Set("state", strings.Join(s, ","))
	}
	if q.Type != "" {
		v.Set("type", q.Type)
	}
	if q.After != "" {
		v.Set("after", q.After)
	}
	if q.Limit > 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	return v
}

// Jobs returns a page of the jobs q selects, oldest first; JobList.Next,
// when set, is the After of the next page.
func (c *Client) Jobs(ctx context.Context, q JobsQuery) (api.JobList, error) {
	var out api.JobList
	err := c.do(ctx, http.MethodGet, "/v1/jobs", q.values(), nil, &out)
	return out, err
}

// Job returns one job.
func (c *Client) Job(ctx context.Context, id string) (api.Job, error) {
	var out api.Job
	err := c.do(ctx, http.MethodGet, "/v1/jobs/"+url.PathEscape(id), nil, nil, &out)
	return out, err
}

// Cancel cancels a job and returns it as the cancel left it.
func (c *Client) Cancel(ctx context.Context, id string) (api.Job, error) {
	var out api.Job
	err := c.do(ctx, http.MethodPost, "/v1/jobs/"+url.PathEscape(id)+"/cancel", nil, nil, &out)
	return out, err
}

// Logs returns a job's output as the daemon keeps it.
func (c *Client) Logs(ctx context.Context, id string) ([]byte, error) {
	var out []byte
	err := c.do(ctx, http.MethodGet, "/v1/jobs/"+url.PathEscape(id)+"/logs", nil, nil, &out)
	return out, err
}

// Plan asks the daemon where a job file (its bytes as they are) would run
// now, without submitting it.
func (c *Client) Plan(ctx context.Context, jobFile []byte) (api.PlanResult, error) {
	var out api.PlanResult
	err := c.do(ctx, http.MethodPost, "/v1/plan", nil, jobFile, &out)
	return out, err
}

// Pools returns the pools (one per job type) in the configuration's order.
func (c *Client) Pools(ctx context.Context) ([]api.Pool, error) {
	var out []api.Pool
	err := c.do(ctx, http.MethodGet, "/v1/pools", nil, nil, &out)
	return out, err
}

// Hosts returns every host of the grid.
func (c *Client) Hosts(ctx context.Context) ([]api.HostView, error) {
	var out []api.HostView
	err := c.do(ctx, http.MethodGet, "/v1/hosts", nil, nil, &out)
	return out, err
}

// ClearHost returns a stranded host to pool; an empty pool means the
// source pool of the switch that stranded it.
func (c *Client) ClearHost(ctx context.Context, name, pool string) (api.HostView, error) {
	body, err := json.Marshal(api.ClearRequest{Pool: pool})
	if err != nil {
		return api.HostView{}, err
	}
	var out api.HostView
	err = c.do(ctx, http.MethodPost, "/v1/hosts/"+url.PathEscape(name)+"/clear", nil, body, &out)
	return out, err
}

// VMs returns every VM of the grid.
func (c *Client) VMs(ctx context.Context) ([]hp.VM, error) {
	var out []hp.VM
	err := c.do(ctx, http.MethodGet, "/v1/vms", nil, nil, &out)
	return out, err
}

// Switches returns the switches of hosts between pools: only those in
// flight when active, else every one the daemon remembers.
func (c *Client) Switches(ctx context.Context, active bool) ([]api.SwitchView, error) {
	var q url.Values
	if active {
		q = url.Values{"active": {"true"}}
	}
	var out []api.SwitchView
	err := c.do(ctx, http.MethodGet, "/v1/switches", q, nil, &out)
	return out, err
}

// RequestSwitch asks the daemon to switch one host from pool from to pool
// to (an operator's switch); the answer is the switch as it starts.
func (c *Client) RequestSwitch(ctx context.Context, from, to string) (api.SwitchView, error) {
	body, err := json.Marshal(api.SwitchRequest{From: from, To: to})
	if err != nil {
		return api.SwitchView{}, err
	}
	var out api.SwitchView
	err = c.do(ctx, http.MethodPost, "/v1/switches", nil, body, &out)
	return out, err
}

// Policy returns the switching policy in force and its inputs.
func (c *Client) Policy(ctx context.Context) (api.PolicyView, error) {
	var out api.PolicyView
	err := c.do(ctx, http.MethodGet, "/v1/policy", nil, nil, &out)
	return out, err
}

// Links returns the grid's links with their configured and measured
// bandwidths.
func (c *Client) Links(ctx context.Context) ([]gramvm.Link, error) {
	var out []gramvm.Link
	err := c.do(ctx, http.MethodGet, "/v1/links", nil, nil, &out)
	return out, err
}

// Tuning returns the daemon's bandwidth-tuning decisions (resizes and
// migrations of VMs) as the JSON it sent: their type is not fixed yet.
func (c *Client) Tuning(ctx context.Context) (json.RawMessage, error) {
	var out json.RawMessage
	err := c.do(ctx, http.MethodGet, "/v1/tuning", nil, nil, &out)
	return out, err
}

// contentType labels a job file: JSON when it opens with '{' or '[', else
// YAML (of which JSON is a subset, so a mislabelled file still parses).
func contentType(body []byte) string {
	t := bytes.TrimLeft(bytes.TrimPrefix(body, []byte("\xef\xbb\xbf")), " \t\r\n")
	if len(t) > 0 && (t[0] == '{' || t[0] == '[') {
		return "application/json"
	}
	return "application/yaml"
}

// do sends one request. body, when not nil, is sent as is; out is a
// *[]byte for the raw answer, or what the JSON answer decodes into.
func (c *Client) do(ctx context.Context, method, path string, query url.Values, body []byte, out any) error {
	u := c.base + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	if body != nil {
		req.Header.Set("Content-Type", contentType(body))
	}
	if _, raw := out.(*[]byte); !raw {
		req.Header.Set("Accept", "application/json")
	}
	if path != "/healthz" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return fmt.Errorf("cannot reach the metasched daemon at %s: %s %s: %w", c.base, method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer+1))
	if err != nil {
		return fmt.Errorf("%s %s: read the answer: %w", method, path, err)
	}
	if len(data) > maxAnswer {
		return fmt.Errorf("%s %s: the answer is over %d MiB", method, path, maxAnswer>>20)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return decodeError(resp.StatusCode, data)
	}
	switch o := out.(type) {
	case nil:
		return nil
	case *[]byte:
		*o = data
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("%s %s: the answer: %w", method, path, err)
	}
	return nil
}
