package client

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/metasched/metasched/metasched/api"
)

// DefaultTimeout bounds a whole call (connection, request and answer) with
// the HTTP client New makes.
const DefaultTimeout = 30 * time.Second

// maxAnswer bounds the body of an answer read into memory (a job's logs
// are the largest).
const maxAnswer = 64 << 20

// Client talks to a metasched daemon, or to any of the daemons of one grid
// on etcd (NewMany).
type Client struct {
	bases []string
	cur   *atomic.Int32 // the daemon that last answered (shared by copies)
	token string
	http  *http.Client
}

// New returns a client of the daemon at base (http://HOST:PORT) that
// presents token, with an HTTP client that gives up after DefaultTimeout.
func New(base, token string) *Client {
	return NewMany([]string{base}, token)
}

// NewMany returns a client of the daemons of one grid at bases, whose
// state is in etcd (any of them answers: a standby forwards to the
// leader). A call goes to the daemon that answered last; when it cannot
// be reached (the connection fails: nothing was sent), or answers 503 (a
// standby with no leader, a daemon stopping) to a read or a submission
// with an idempotency key, the call goes to the next, each daemon once.
func NewMany(bases []string, token string) *Client {
	c := &Client{cur: &atomic.Int32{}, token: token, http: &http.Client{Timeout: DefaultTimeout}}
	for _, b := range bases {
		c.bases = append(c.bases, strings.TrimRight(b, "/"))
	}
	return c
}

// WithHTTPClient returns a copy of c that uses hc.
func (c *Client) WithHTTPClient(hc *http.Client) *Client {
	d := *c
	d.http = hc
	return &d
}

// Base returns the address of the daemon that answered last (the first,
// before any answered).
func (c *Client) Base() string { return c.bases[int(c.cur.Load())%len(c.bases)] }

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
// with status 400 and the problem of each field. It is SubmitWith with a
// random idempotency key: a submission whose answer is lost is sent again
// and makes one job.
func (c *Client) Submit(ctx context.Context, jobFile []byte) (api.Job, error) {
	s, err := c.SubmitWith(ctx, jobFile, SubmitOptions{})
	return s.Job, err
}

// DefaultSubmitAttempts is SubmitOptions.Attempts when it is not set.
const DefaultSubmitAttempts = 3

// SubmitOptions tunes SubmitWith.
type SubmitOptions struct {
	// IdempotencyKey is sent as the Idempotency-Key header (see
	// api.IdempotencyHeader): a submission sent again with it, by this
	// client's retries or by a later call, gets the job the first made.
	// Empty: a random key for this call, so that its own retries make one
	// job.
	IdempotencyKey string
	// Attempts bounds the requests of one submission: the first and the
	// retries of one whose answer was lost (the connection failed or timed
	// out, or the daemon answered 502, 503 or 504), each with the same
	// key. 0 means DefaultSubmitAttempts; 1 sends once.
	Attempts int
}

// Submitted is what SubmitWith returns.
type Submitted struct {
	Job api.Job
	// Created is false when the daemon answered with the job an earlier
	// request with the same key made (200): a retry of a submission that
	// had been recorded although its answer was lost.
	Created bool
	// Attempts is how many requests were sent.
	Attempts int
}

// SubmitWith submits a job file with an idempotency key, sending it again
// with the same key while its answer is lost (up to opt.Attempts requests,
// 200 ms apart and doubling). The same key with another body is a
// *RemoteError with status 422 and code api.CodeKeyReused.
func (c *Client) SubmitWith(ctx context.Context, jobFile []byte, opt SubmitOptions) (Submitted, error) {
	key := opt.IdempotencyKey
	if key == "" {
		key = newKey()
	}
	attempts := opt.Attempts
	if attempts <= 0 {
		attempts = DefaultSubmitAttempts
	}
	hdr := http.Header{api.IdempotencyHeader: {key}}
	pause := 200 * time.Millisecond
	var out Submitted
	for {
		out.Attempts++
		var status int
		err := c.send(ctx, http.MethodPost, "/v1/jobs", nil, hdr, jobFile, &out.Job, &status)
		if err == nil {
			out.Created = status == http.StatusCreated
			return out, nil
		}
		if out.Attempts >= attempts || !retriable(err) {
			return out, err
		}
		if ctx.Err() != nil {
			return out, fmt.Errorf("POST /v1/jobs: %w (after: %w)", ctx.Err(), err)
		}
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return out, fmt.Errorf("POST /v1/jobs: %w (after: %w)", ctx.Err(), err)
		case <-t.C:
		}
		pause *= 2
	}
}

// retriable tells a submission whose answer was lost, which the same key
// can send again: a failed or timed-out connection, or a gateway's or a
// stopping daemon's 502, 503 or 504.
func retriable(err error) bool {
	var re *RemoteError
	if errors.As(err, &re) {
		switch re.Status {
		case http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
			return true
		}
		return false
	}
	var unreachable *transportError
	return errors.As(err, &unreachable)
}

// newKey is a random idempotency key: 128 bits as a UUID (version 4).
func newKey() string {
	var b [16]byte
	rand.Read(b[:]) // never fails (crypto/rand)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// JobsQuery selects jobs: those in any of States (none: every state), of
// Type (empty: every type), with IDs after After, at most Limit of them
// (0: the daemon's page size).
type JobsQuery struct {
	States []api.State
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

// ResizeVM changes the current vCPUs and memory of a job's VM live (a
// zero field is left as it is) and returns the VM as its agent reports it
// afterwards.
func (c *Client) ResizeVM(ctx context.Context, job, vm string, r api.ResizeRequest) (api.VM, error) {
	body, err := json.Marshal(r)
	if err != nil {
		return api.VM{}, err
	}
	var out api.VM
	err = c.do(ctx, http.MethodPost, "/v1/jobs/"+url.PathEscape(job)+"/vms/"+url.PathEscape(vm)+"/resize", nil, body, &out)
	return out, err
}

// Logs returns a job's output as the daemon keeps it.
func (c *Client) Logs(ctx context.Context, id string) ([]byte, error) {
	var out []byte
	err := c.do(ctx, http.MethodGet, "/v1/jobs/"+url.PathEscape(id)+"/logs", nil, nil, &out)
	return out, err
}

// Outputs lists the output files of a finished job's last attempt.
func (c *Client) Outputs(ctx context.Context, id string) (api.OutputList, error) {
	var out api.OutputList
	err := c.do(ctx, http.MethodGet, "/v1/jobs/"+url.PathEscape(id)+"/outputs", nil, nil, &out)
	return out, err
}

// Output returns the bytes of the output file name (a path of the job
// file's outputs, its slashes kept) of a finished job's last attempt.
func (c *Client) Output(ctx context.Context, id, name string) ([]byte, error) {
	parts := strings.Split(name, "/")
	for i, p := range parts {
		parts[i] = url.PathEscape(p)
	}
	var out []byte
	err := c.do(ctx, http.MethodGet, "/v1/jobs/"+url.PathEscape(id)+"/outputs/"+strings.Join(parts, "/"), nil, nil, &out)
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

// DrainHost takes a host out of its pool's service for maintenance: its
// jobs finish on it, or with move have their VMs moved to other hosts.
func (c *Client) DrainHost(ctx context.Context, name string, move bool) (api.HostView, error) {
	body, err := json.Marshal(api.DrainRequest{Move: move})
	if err != nil {
		return api.HostView{}, err
	}
	var out api.HostView
	err = c.do(ctx, http.MethodPost, "/v1/hosts/"+url.PathEscape(name)+"/drain", nil, body, &out)
	return out, err
}

// UndrainHost returns a drained host to its pool.
func (c *Client) UndrainHost(ctx context.Context, name string) (api.HostView, error) {
	var out api.HostView
	err := c.do(ctx, http.MethodPost, "/v1/hosts/"+url.PathEscape(name)+"/undrain", nil, nil, &out)
	return out, err
}

// Backup writes a consistent copy of the daemon's store to w (a file that
// "metasched store restore" puts back).
func (c *Client) Backup(ctx context.Context, w io.Writer) error {
	return c.do(ctx, http.MethodGet, "/v1/backup", nil, nil, w)
}

// VMs returns every VM of the grid.
func (c *Client) VMs(ctx context.Context) ([]api.VM, error) {
	var out []api.VM
	err := c.do(ctx, http.MethodGet, "/v1/vms", nil, nil, &out)
	return out, err
}

// SwitchesQuery selects switches: only those in flight and the stranded
// ones not cleared (Active), started before the switch Before, at most Limit
// of them (0: the daemon's page size).
type SwitchesQuery struct {
	Active bool
	Before string
	Limit  int
}

func (q SwitchesQuery) values() url.Values {
	v := url.Values{}
	if q.Active {
		v.Set("active", "true")
	}
	if q.Before != "" {
		v.Set("before", q.Before)
	}
	if q.Limit > 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	return v
}

// Switches returns a page of the switches of hosts between pools that q
// selects, newest first, as far as the daemon keeps them; SwitchList.Next,
// when set, is the Before of the next page.
func (c *Client) Switches(ctx context.Context, q SwitchesQuery) (api.SwitchList, error) {
	var out api.SwitchList
	err := c.do(ctx, http.MethodGet, "/v1/switches", q.values(), nil, &out)
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
func (c *Client) Links(ctx context.Context) ([]api.Link, error) {
	var out []api.Link
	err := c.do(ctx, http.MethodGet, "/v1/links", nil, nil, &out)
	return out, err
}

// Tuning returns the daemon's bandwidth-tuning records, newest first:
// every candidate evaluated, and for those carried out their migrations,
// resizes and measured figures.
func (c *Client) Tuning(ctx context.Context) ([]api.TuningRecord, error) {
	var out []api.TuningRecord
	err := c.do(ctx, http.MethodGet, "/v1/tuning", nil, nil, &out)
	return out, err
}

// Calibration returns the figures the daemon measures of its sites in
// VMs, with their ages and when each is due.
func (c *Client) Calibration(ctx context.Context) (api.Calibration, error) {
	var out api.Calibration
	err := c.do(ctx, http.MethodGet, "/v1/calibration", nil, nil, &out)
	return out, err
}

// Calibrate asks the daemon to measure the figures of a site (of every
// site it can calibrate: site empty) as soon as their hosts are idle; the
// answer is the calibration with those figures due.
func (c *Client) Calibrate(ctx context.Context, site string) (api.Calibration, error) {
	body, err := json.Marshal(api.CalibrateRequest{Site: site})
	if err != nil {
		return api.Calibration{}, err
	}
	var out api.Calibration
	err = c.do(ctx, http.MethodPost, "/v1/calibrate", nil, body, &out)
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

// transportError is a request that got no answer: the daemon could not
// be reached, or the connection failed or timed out.
type transportError struct{ err error }

func (e *transportError) Error() string { return e.err.Error() }
func (e *transportError) Unwrap() error { return e.err }

// do sends one request. body, when not nil, is sent as is; out is a
// *[]byte for the raw answer, or what the JSON answer decodes into.
// CreateToken makes an API token of a role (an operator's): the answer
// holds the token, shown this once.
func (c *Client) CreateToken(ctx context.Context, name, role string) (api.TokenCreated, error) {
	body, err := json.Marshal(api.TokenRequest{Name: name, Role: role})
	if err != nil {
		return api.TokenCreated{}, err
	}
	var out api.TokenCreated
	err = c.do(ctx, http.MethodPost, "/v1/tokens", nil, body, &out)
	return out, err
}

// Tokens lists the API tokens (an operator's).
func (c *Client) Tokens(ctx context.Context) ([]api.Token, error) {
	var out []api.Token
	err := c.do(ctx, http.MethodGet, "/v1/tokens", nil, nil, &out)
	return out, err
}

// RevokeToken revokes the API token name (an operator's).
func (c *Client) RevokeToken(ctx context.Context, name string) error {
	return c.do(ctx, http.MethodDelete, "/v1/tokens/"+url.PathEscape(name), nil, nil, nil)
}

func (c *Client) do(ctx context.Context, method, path string, query url.Values, body []byte, out any) error {
	return c.send(ctx, method, path, query, nil, body, out, nil)
}

// send is do with more headers, and the answer's status in *status when
// status is not nil. With several daemons, it tries them in turn (see
// NewMany).
func (c *Client) send(ctx context.Context, method, path string, query url.Values, header http.Header, body []byte, out any, status *int) error {
	first := int(c.cur.Load())
	var err error
	for i := range len(c.bases) {
		n := (first + i) % len(c.bases)
		var next bool
		next, err = c.sendTo(ctx, c.bases[n], method, path, query, header, body, out, status)
		if !next || i == len(c.bases)-1 {
			if !next {
				c.cur.Store(int32(n))
			}
			return err
		}
	}
	return err
}

// sendTo is send to one daemon; next says the call may go to another
// daemon of the grid instead: it could not reach this one, or this one
// answered 503 to a call that may be sent again.
func (c *Client) sendTo(ctx context.Context, base, method, path string, query url.Values, header http.Header, body []byte, out any, status *int) (next bool, err error) {
	u := base + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return false, fmt.Errorf("%s %s: %w", method, path, err)
	}
	if body != nil {
		req.Header.Set("Content-Type", contentType(body))
	}
	switch out.(type) {
	case *[]byte, io.Writer:
	default:
		req.Header.Set("Accept", "application/json")
	}
	if path != "/healthz" && c.token != "" { // none: a client certificate proves the caller
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	for k, vs := range header {
		req.Header[k] = vs
	}
	resp, err := c.http.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		var op *net.OpError
		return errors.As(err, &op) && op.Op == "dial" && ctx.Err() == nil,
			&transportError{fmt.Errorf("cannot reach the metasched daemon at %s: %s %s: %w", base, method, path, err)}
	}
	again := method == http.MethodGet || method == http.MethodHead || req.Header.Get(api.IdempotencyHeader) != ""
	if resp.StatusCode == http.StatusServiceUnavailable && again && len(c.bases) > 1 {
		defer resp.Body.Close()
		data, _ := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
		return true, decodeError(resp.StatusCode, data)
	}
	return false, c.answer(resp, method, path, out, status)
}

// answer reads the daemon's answer into out.
func (c *Client) answer(resp *http.Response, method, path string, out any, status *int) error {
	defer resp.Body.Close()
	if status != nil {
		*status = resp.StatusCode
	}
	if w, ok := out.(io.Writer); ok && resp.StatusCode >= 200 && resp.StatusCode <= 299 {
		// A stream of any size (a backup): copied as it comes, and short
		// of its Content-Length when the daemon broke it off.
		if _, err := io.Copy(w, resp.Body); err != nil {
			return &transportError{fmt.Errorf("%s %s: read the answer: %w", method, path, err)}
		}
		return nil
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer+1))
	if err != nil {
		return &transportError{fmt.Errorf("%s %s: read the answer: %w", method, path, err)}
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
