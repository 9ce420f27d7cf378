package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"

	"github.com/metasched/metasched/metasched/api"
)

// The OpenAPI document is a contract that the tests hold: kin-openapi (the
// Go standard for OpenAPI 3) loads and validates it, its examples
// included, and CheckOpenAPI holds every request that a test sends through
// the server, and every answer, to it (kin-openapi's request and response
// validation), so that the code and the document cannot drift apart.

// contract is the document as kin-openapi loaded and validated it, and
// its router.
type contract struct {
	doc    *openapi3.T
	router routers.Router
}

// openapiContract loads the contract once.
var openapiContract = sync.OnceValues(func() (*contract, error) {
	doc, err := loadOpenAPI(OpenAPI)
	if err != nil {
		return nil, err
	}
	r, err := gorillamux.NewRouter(doc)
	if err != nil {
		return nil, fmt.Errorf("the document's router: %w", err)
	}
	return &contract{doc: doc, router: r}, nil
})

// loadOpenAPI loads a document with kin-openapi and validates it, every
// example against its schema.
func loadOpenAPI(data []byte) (*openapi3.T, error) {
	l := openapi3.NewLoader()
	doc, err := l.LoadFromData(data)
	if err != nil {
		return nil, fmt.Errorf("load the document: %w", err)
	}
	if err := doc.Validate(context.Background(), openapi3.EnableExamplesValidation(), openapi3.EnableMultiError()); err != nil {
		return nil, fmt.Errorf("the document is not valid: %w", err)
	}
	return doc, nil
}

func init() {
	// The job file's media types other than JSON are read as YAML by the
	// server (a superset of JSON): their schema is the job file's object,
	// and kin-openapi would read text/plain and application/octet-stream
	// as a string, and has no decoder of text/yaml and text/x-yaml. Other
	// bodies of these types (the logs, the outputs) are read as before.
	for _, ct := range []string{"text/plain", "application/octet-stream", "text/yaml", "text/x-yaml"} {
		other := openapi3filter.RegisteredBodyDecoder(ct)
		if other == nil {
			other = openapi3filter.PlainBodyDecoder
		}
		openapi3filter.RegisterBodyDecoder(ct, func(r io.Reader, h http.Header, s *openapi3.SchemaRef, enc openapi3filter.EncodingFn) (any, error) {
			if s != nil && s.Value != nil && s.Value.Type.Is("object") {
				return openapi3filter.YamlBodyDecoder(r, h, s, enc)
			}
			return other(r, h, s, enc)
		})
	}
}

// OffDocument is the header of a request that a test sends knowing that
// the document does not describe it: a bad request, sent to see it
// refused, or one beyond the document, such as a job file without a
// Content-Type. CheckOpenAPI then holds its answer alone to the document,
// and takes the header off before the server sees the request.
const OffDocument = "Metasched-Test-Off-Document"

// MarkOffDocument marks r as a request the document does not describe
// (OffDocument).
func MarkOffDocument(r *http.Request) { r.Header.Set(OffDocument, "1") }

// CheckOpenAPI returns h holding every request it serves, and its answer,
// to the OpenAPI document; a mismatch fails t:
//
//   - a request matches its operation: its path, query and header
//     parameters, and its body when the server read it whole (a request
//     refused before its body is read is held to its answer alone), unless
//     it is marked OffDocument;
//   - the answer's status is one the document gives for the operation,
//     with the headers it requires, a Content-Type it lists, and a body
//     that matches the schema (JSON, text or bytes; the body of a stream
//     is not kept, its Content-Type is checked), or none when it gives
//     none;
//   - a request that is no operation of the document is answered 401
//     unauthorized, 404 unknown_route or 405 bad_method, an APIError.
//
// Credentials are taken as they come: authentication is tested on its
// own. t stops hearing of answers once its cleanups run (after those
// registered after this call, such as the daemon's stop).
func CheckOpenAPI(t testing.TB, h http.Handler) http.Handler {
	t.Helper()
	c, err := openapiContract()
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu       sync.Mutex
		done     bool
		inFlight int
	)
	t.Cleanup(func() {
		// The requests still served (a stream its client has left) are
		// given a moment to end.
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			mu.Lock()
			if inFlight == 0 || time.Now().After(deadline) {
				done = true
				mu.Unlock()
				return
			}
			mu.Unlock()
		}
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, offDoc := r.Header[OffDocument]
		r.Header.Del(OffDocument)
		mu.Lock()
		if done {
			mu.Unlock()
			h.ServeHTTP(w, r)
			return
		}
		inFlight++
		mu.Unlock()
		defer func() {
			mu.Lock()
			inFlight--
			mu.Unlock()
		}()
		seen := r.Clone(context.Background())
		body := &teeBody{ReadCloser: r.Body}
		r.Body = body
		rec := &recorder{ResponseWriter: w}
		h.ServeHTTP(rec, r)
		problems := c.check(exchange{req: seen, offDoc: offDoc, reqBody: body.buf.Bytes(), reqBodyRead: body.eof,
			status: rec.statusCode(), header: rec.finalHeader(), body: rec.body.Bytes(), bodyKept: !rec.stream && !rec.dropped, bodySize: rec.size})
		mu.Lock()
		defer mu.Unlock()
		if !done {
			for _, p := range problems {
				t.Errorf("OpenAPI document: %s", p)
			}
		}
	})
}

// teeBody keeps what the server reads of a request's body.
type teeBody struct {
	io.ReadCloser
	buf bytes.Buffer
	eof bool // read to its end
}

func (b *teeBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.buf.Write(p[:n])
	if err == io.EOF {
		b.eof = true
	}
	return n, err
}

// maxKept bounds the answer's body that a check keeps.
const maxKept = 64 << 20

// recorder passes an answer on and keeps its status, headers and body
// (not a stream's, which its client reads as it comes).
type recorder struct {
	http.ResponseWriter
	status  int
	header  http.Header // as the status was written
	head    []byte      // the first bytes, which net/http sniffs a Content-Type from
	body    bytes.Buffer
	size    int64
	stream  bool
	dropped bool // larger than maxKept
}

func (w *recorder) WriteHeader(code int) {
	if w.status == 0 && code >= 200 {
		w.status = code
		w.header = w.ResponseWriter.Header().Clone()
		mt, _, _ := mime.ParseMediaType(w.header.Get("Content-Type")) // none or a bad one: mt is "", no stream
		w.stream = mt == "text/event-stream"
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *recorder) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	if len(w.head) < 512 {
		w.head = append(w.head, b[:min(len(b), 512-len(w.head))]...)
	}
	w.size += int64(len(b))
	if !w.stream && !w.dropped {
		if w.size > maxKept {
			w.dropped = true
			w.body.Reset()
		} else {
			w.body.Write(b)
		}
	}
	return w.ResponseWriter.Write(b)
}

// Flush implements http.Flusher (the event stream flushes each event).
func (w *recorder) Flush() { _ = http.NewResponseController(w.ResponseWriter).Flush() }

// Unwrap returns the wrapped writer (for http.ResponseController).
func (w *recorder) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *recorder) statusCode() int {
	if w.status == 0 {
		return http.StatusOK // net/http's answer to a handler that wrote nothing
	}
	return w.status
}

// finalHeader is the header the client got: with the Content-Type that
// net/http sniffs for a body when the handler set none.
func (w *recorder) finalHeader() http.Header {
	h := w.header
	if h == nil {
		h = w.ResponseWriter.Header().Clone()
	}
	if _, ok := h["Content-Type"]; !ok && w.size > 0 {
		h = h.Clone()
		h.Set("Content-Type", http.DetectContentType(w.head))
	}
	return h
}

// exchange is a request and its answer.
type exchange struct {
	req         *http.Request // as the server got it; its body is reqBody
	offDoc      bool          // marked OffDocument
	reqBody     []byte        // what the server read of the body
	reqBodyRead bool          // the server read the whole body
	status      int
	header      http.Header
	body        []byte
	bodyKept    bool // body is the whole answer's
	bodySize    int64
}

// schemaError words a schema's complaint about a value without the whole
// schema that kin-openapi prints by default.
func schemaError(e *openapi3.SchemaError) string {
	if p := e.JSONPointer(); len(p) > 0 {
		return fmt.Sprintf("%s: %s", "/"+strings.Join(p, "/"), e.Reason)
	}
	return e.Reason
}

// tails match the paths of the routes whose last parameter takes the rest
// of the path ({name...}), its value the submatch: the document's {name}
// is one segment, so the router gets it with its slashes escaped.
var tails = func() []*regexp.Regexp {
	var out []*regexp.Regexp
	for _, rt := range Routes {
		_, path, _ := strings.Cut(rt.Pattern, " ")
		i := strings.LastIndex(path, "{")
		if i < 0 || !strings.HasSuffix(path, "...}") {
			continue
		}
		prefix := regexp.MustCompile(`\{[^/]*\}`).ReplaceAllString(path[:i], `[^/]+`)
		out = append(out, regexp.MustCompile("^"+prefix+"(.+)$"))
	}
	return out
}()

// check holds an exchange to the document and returns its mismatches.
func (c *contract) check(x exchange) []string {
	ctx := context.Background()
	what := fmt.Sprintf("%s %s (answered %d)", x.req.Method, x.req.URL.RequestURI(), x.status)
	rq := x.req.Clone(ctx)
	rq.Body = io.NopCloser(bytes.NewReader(x.reqBody))
	rq.ContentLength = int64(len(x.reqBody))
	for _, re := range tails {
		p := rq.URL.EscapedPath()
		if m := re.FindStringSubmatchIndex(p); m != nil {
			rq.URL.RawPath = p[:m[2]] + strings.ReplaceAll(p[m[2]:], "/", "%2F")
			break
		}
	}
	route, params, err := c.router.FindRoute(rq)
	if err != nil {
		return c.checkNoRoute(what, x)
	}
	var problems []string
	opts := &openapi3filter.Options{
		AuthenticationFunc:  openapi3filter.NoopAuthenticationFunc,
		SkipSettingDefaults: true,
		MultiError:          true,
		ExcludeRequestBody:  !x.reqBodyRead,
	}
	opts.WithCustomSchemaErrorFunc(schemaError)
	in := &openapi3filter.RequestValidationInput{Request: rq, PathParams: params, Route: route, Options: opts}
	if err := openapi3filter.ValidateRequest(ctx, in); err != nil && !x.offDoc {
		problems = append(problems, fmt.Sprintf("%s: the request does not match %s %s (a test that sends it on purpose marks it %s): %v",
			what, route.Method, route.Path, OffDocument, err))
	}

	ct := x.header.Get("Content-Type")
	mt, _, _ := mime.ParseMediaType(ct) // none or a bad one: mt is "", and the check below reports it
	decodable := openapi3filter.RegisteredBodyDecoder(mt) != nil || strings.HasSuffix(mt, "+json")
	ropts := &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true, ExcludeResponseBody: !x.bodyKept || !decodable}
	ropts.WithCustomSchemaErrorFunc(schemaError)
	out := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: x.status, Header: x.header, Options: ropts}
	out.SetBodyBytes(x.body)
	if err := openapi3filter.ValidateResponse(ctx, out); err != nil {
		problems = append(problems, fmt.Sprintf("%s: the answer does not match %s %s: %v", what, route.Method, route.Path, err))
	} else if r := route.Operation.Responses.Status(x.status); r != nil && r.Value != nil {
		// What kin-openapi leaves to us: a body where the document gives
		// none, and the Content-Type of a body it does not read.
		content := r.Value.Content
		switch {
		case len(content) == 0 && x.bodySize > 0:
			problems = append(problems, fmt.Sprintf("%s: a body of %d bytes (%s), but the document gives none for %d", what, x.bodySize, ct, x.status))
		case len(content) > 0 && ropts.ExcludeResponseBody && content.Get(ct) == nil:
			problems = append(problems, fmt.Sprintf("%s: Content-Type %q, which the document does not list for %d", what, ct, x.status))
		}
	}
	return problems
}

// checkNoRoute holds the answer to a request that is no operation of the
// document: the server's 401, 404 unknown_route or 405 bad_method (with
// Allow), as the document's description says.
func (c *contract) checkNoRoute(what string, x exchange) []string {
	code, ok := map[int]string{http.StatusUnauthorized: api.CodeUnauthorized, http.StatusNotFound: api.CodeUnknownRoute,
		http.StatusMethodNotAllowed: api.CodeMethod}[x.status]
	if !ok {
		return []string{fmt.Sprintf("%s: no operation of the document, and not answered 401, 404 or 405", what)}
	}
	if ct := x.header.Get("Content-Type"); ct != "application/json" {
		return []string{fmt.Sprintf("%s: no operation of the document, answered with Content-Type %q, want an APIError", what, ct)}
	}
	var v any
	if err := json.Unmarshal(x.body, &v); err != nil {
		return []string{fmt.Sprintf("%s: no operation of the document, answered with a body that is not JSON: %v", what, err)}
	}
	var problems []string
	if err := c.doc.Components.Schemas["APIError"].Value.VisitJSON(v, openapi3.EnableJSONSchema2020(), openapi3.VisitAsResponse(),
		openapi3.MultiErrors(), openapi3.SetSchemaErrorMessageCustomizer(schemaError)); err != nil {
		problems = append(problems, fmt.Sprintf("%s: no operation of the document, answered with a body that is no APIError: %v", what, err))
	}
	if m, _ := v.(map[string]any); m["code"] != code {
		problems = append(problems, fmt.Sprintf("%s: no operation of the document, answered with code %v, want %s", what, m["code"], code))
	}
	if x.status == http.StatusMethodNotAllowed && x.header.Get("Allow") == "" {
		problems = append(problems, fmt.Sprintf("%s: 405 without Allow", what))
	}
	return problems
}

// kin-openapi loads the document and finds it valid, every example
// matching its schema; the check is live: an example that does not match
// fails it.
func TestOpenAPIValid(t *testing.T) {
	if _, err := openapiContract(); err != nil {
		t.Fatal(err)
	}
	doc := openapiDoc(t)
	openapiObj(t, doc, "paths", "/v1/jobs", "post", "requestBody", "content", "application/yaml", "example")["tasks"] = "many"
	b, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := loadOpenAPI(b); err == nil || !strings.Contains(err.Error(), "example") {
		t.Errorf("a job file example with tasks \"many\": %v, want an invalid example", err)
	}
}

// The check finds what it should, and nothing else, in exchanges made up
// for it.
func TestOpenAPICheck(t *testing.T) {
	c, err := openapiContract()
	if err != nil {
		t.Fatal(err)
	}
	apiErr := func(code string) string { return `{"error":"no","code":"` + code + `"}` }
	jsonCT := http.Header{"Content-Type": {"application/json"}}
	for _, x := range []struct {
		name         string
		method, url  string
		ctype, body  string
		read, off    bool
		status       int
		header       http.Header
		answer       string
		kept         bool
		wantProblems bool
	}{
		{"an output in a folder", "GET", "/v1/jobs/j-1/outputs/out/a.txt", "", "", false, false, 200,
			http.Header{"Content-Type": {"application/octet-stream"}}, "bytes", true, false},
		{"a job with no field", "GET", "/v1/jobs/j-1", "", "", false, false, 200, jsonCT, `{}`, true, true},
		{"a status the operation does not give", "GET", "/v1/pools", "", "", false, false, 418, jsonCT, apiErr("internal"), true, true},
		{"a Content-Type the operation does not give", "GET", "/healthz", "", "", false, false, 200,
			http.Header{"Content-Type": {"text/html"}}, "<p>ok</p>", true, true},
		{"a body where the document gives none", "POST", "/logout", "", "", false, false, 204,
			http.Header{"Set-Cookie": {"metasched_session=; Max-Age=0"}}, "x", true, true},
		{"a required header missing", "POST", "/logout", "", "", false, false, 204, http.Header{}, "", true, true},
		{"no route, answered", "GET", "/v1/nope", "", "", false, false, 404, jsonCT, apiErr(api.CodeUnknownRoute), true, false},
		{"no route, served", "GET", "/v1/nope", "", "", false, false, 200, jsonCT, `[]`, true, true},
		{"no route, wrong code", "GET", "/v1/nope", "", "", false, false, 404, jsonCT, apiErr(api.CodeNotFound), true, true},
		{"a bad query", "GET", "/v1/jobs?limit=x", "", "", false, false, 400, jsonCT, apiErr(api.CodeInvalid), true, true},
		{"a bad query on purpose", "GET", "/v1/jobs?limit=x", "", "", false, true, 400, jsonCT, apiErr(api.CodeInvalid), true, false},
		{"a bad body read", "POST", "/v1/switches", "application/json", `{"colour":1}`, true, false, 400, jsonCT, apiErr(api.CodeInvalid), true, true},
		{"a bad body left unread", "POST", "/v1/switches", "application/json", `{"colour":1}`, false, false, 401, jsonCT, apiErr(api.CodeUnauthorized), true, false},
		{"a job file as text/plain", "POST", "/v1/plan", "text/plain", "name: a\ntype: sim\ntasks: 1\ntask_ops: 1\ntask_bytes: 0\n", true, false, 503,
			jsonCT, apiErr(api.CodeUnavailable), true, false},
		{"a job file without Content-Type", "POST", "/v1/plan", "", "name: a\ntype: sim\ntasks: 1\ntask_ops: 1\ntask_bytes: 0\n", true, false, 503,
			jsonCT, apiErr(api.CodeUnavailable), true, true},
		{"a stream", "GET", "/v1/events", "", "", false, false, 200, http.Header{"Content-Type": {"text/event-stream"}}, "", false, false},
	} {
		req := httptestRequest(t, x.method, x.url, x.ctype)
		problems := c.check(exchange{req: req, offDoc: x.off, reqBody: []byte(x.body), reqBodyRead: x.read, status: x.status,
			header: x.header, body: []byte(x.answer), bodyKept: x.kept, bodySize: int64(len(x.answer))})
		if (len(problems) > 0) != x.wantProblems {
			t.Errorf("%s: problems %q, want some: %v", x.name, problems, x.wantProblems)
		}
	}
}

// httptestRequest is a request as a server gets it.
func httptestRequest(t *testing.T, method, target, ctype string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(method, "http://metasched"+target, nil)
	if err != nil {
		t.Fatal(err)
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	return req
}
