package httpapi

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	hp "github.com/metasched/metasched/hypervisorproxy"
	"github.com/metasched/metasched/internal/httpsrv"
	"github.com/metasched/metasched/metasched/api"
	co "github.com/metasched/metasched/metasched/coordinator"
	"github.com/metasched/metasched/metasched/dashboard"
	"github.com/metasched/metasched/selection"
)

// The OpenAPI document (openapi.json, embedded as OpenAPI) must describe
// exactly the routes of Routes, with schemas that match the Go wire types
// and status codes that the server really answers.

// openapiMethods are the operation keys of a path item.
var openapiMethods = []string{"get", "put", "post", "delete", "options", "head", "patch", "trace"}

// openapiDoc parses OpenAPI.
func openapiDoc(t *testing.T) map[string]any {
	t.Helper()
	var doc map[string]any
	dec := json.NewDecoder(bytes.NewReader(OpenAPI))
	dec.UseNumber()
	if err := dec.Decode(&doc); err != nil {
		t.Fatalf("openapi.json is not JSON: %v", err)
	}
	if dec.More() {
		t.Fatal("openapi.json has more than one JSON value")
	}
	return doc
}

// openapiObj reads the object at the keys, failing the test when one is
// missing or not an object.
func openapiObj(t *testing.T, v any, keys ...string) map[string]any {
	t.Helper()
	cur := v
	for i, k := range keys {
		m, ok := cur.(map[string]any)
		if !ok {
			t.Fatalf("%s: not an object", strings.Join(keys[:i], "."))
		}
		if cur, ok = m[k]; !ok {
			t.Fatalf("%s: missing", strings.Join(keys[:i+1], "."))
		}
	}
	m, ok := cur.(map[string]any)
	if !ok {
		t.Fatalf("%s: not an object", strings.Join(keys, "."))
	}
	return m
}

// openapiPath turns a route's ServeMux pattern into its OpenAPI path and
// method: "GET /{$}" is ("GET", "/"), a trailing "{x...}" is "{x}".
func openapiPath(pattern string) (method, path string) {
	method, path, _ = strings.Cut(pattern, " ")
	if strings.HasSuffix(path, "/{$}") {
		path = strings.TrimSuffix(path, "{$}")
	}
	if i := strings.LastIndex(path, "{"); i >= 0 && strings.HasSuffix(path, "...}") {
		path = path[:i] + "{" + strings.TrimSuffix(path[i+1:], "...}") + "}"
	}
	return method, path
}

// openapiOp is one operation of the document.
type openapiOp struct {
	key  string // "METHOD path"
	path string
	item map[string]any // the path item
	op   map[string]any
}

func openapiOps(t *testing.T, doc map[string]any) []openapiOp {
	t.Helper()
	var out []openapiOp
	for path, item := range openapiObj(t, doc, "paths") {
		pi, ok := item.(map[string]any)
		if !ok {
			t.Fatalf("paths.%s: not an object", path)
		}
		for _, m := range openapiMethods {
			if o, ok := pi[m]; ok {
				op, ok := o.(map[string]any)
				if !ok {
					t.Fatalf("paths.%s.%s: not an object", path, m)
				}
				out = append(out, openapiOp{key: strings.ToUpper(m) + " " + path, path: path, item: pi, op: op})
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].key < out[j].key })
	return out
}

// openapiResolve follows a local "$ref" ("#/a/b") to what it points at.
func openapiResolve(doc map[string]any, ref string) (any, bool) {
	p, ok := strings.CutPrefix(ref, "#/")
	if !ok {
		return nil, false
	}
	var cur any = doc
	for _, k := range strings.Split(p, "/") {
		k = strings.ReplaceAll(strings.ReplaceAll(k, "~1", "/"), "~0", "~")
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = m[k]; !ok {
			return nil, false
		}
	}
	return cur, true
}

// openapiDeref resolves v while it is a {"$ref": ...} object.
func openapiDeref(t *testing.T, doc map[string]any, v map[string]any) map[string]any {
	t.Helper()
	for range 10 {
		ref, ok := v["$ref"].(string)
		if !ok {
			return v
		}
		r, ok := openapiResolve(doc, ref)
		if !ok {
			t.Fatalf("$ref %q does not resolve", ref)
		}
		if v, ok = r.(map[string]any); !ok {
			t.Fatalf("$ref %q: not an object", ref)
		}
	}
	t.Fatal("$ref chain too long")
	return nil
}

func TestOpenAPIDocument(t *testing.T) {
	doc := openapiDoc(t)
	if v, _ := doc["openapi"].(string); !strings.HasPrefix(v, "3.") {
		t.Errorf("openapi %q, want 3.x", v)
	}
	info := openapiObj(t, doc, "info")
	if info["title"] != "metasched" {
		t.Errorf("info.title %v, want metasched", info["title"])
	}
	if v, _ := info["version"].(string); v == "" {
		t.Error("info.version is empty")
	}
	if d, _ := info["description"].(string); !strings.Contains(d, "Bearer") || !strings.Contains(d, SessionCookie) || !strings.Contains(d, CSRFHeader) {
		t.Errorf("info.description does not say how to authenticate (Bearer, %s, %s): %q", SessionCookie, CSRFHeader, d)
	}
	schemes := openapiObj(t, doc, "components", "securitySchemes")
	if b := openapiObj(t, schemes, "bearer"); b["type"] != "http" || b["scheme"] != "bearer" {
		t.Errorf("securitySchemes.bearer %v, want http bearer", b)
	}
	if s := openapiObj(t, schemes, "session"); s["type"] != "apiKey" || s["in"] != "cookie" || s["name"] != SessionCookie {
		t.Errorf("securitySchemes.session %v, want an apiKey in cookie %s", s, SessionCookie)
	}
	var global []map[string][]string
	if b, err := json.Marshal(doc["security"]); err != nil || json.Unmarshal(b, &global) != nil {
		t.Fatalf("security %v: not a list of requirements", doc["security"])
	}
	want := []map[string][]string{{"bearer": {}}, {"session": {}}}
	if !reflect.DeepEqual(global, want) {
		t.Errorf("security %v, want %v", global, want)
	}
}

// The document's operations are the routes of Routes, each complete.
func TestOpenAPIRoutes(t *testing.T) {
	doc := openapiDoc(t)
	ops := openapiOps(t, doc)

	public := map[string]bool{}
	for _, rt := range Routes {
		m, p := openapiPath(rt.Pattern)
		k := m + " " + p
		if _, dup := public[k]; dup {
			t.Errorf("route %s twice in Routes", k)
		}
		public[k] = (rt.Access == Public)
	}
	inDoc := map[string]bool{}
	for _, o := range ops {
		inDoc[o.key] = true
	}
	var missing, extra []string
	for k := range public {
		if !inDoc[k] {
			missing = append(missing, k)
		}
	}
	for k := range inDoc {
		if _, ok := public[k]; !ok {
			extra = append(extra, k)
		}
	}
	sort.Strings(missing)
	sort.Strings(extra)
	if len(missing) > 0 {
		t.Errorf("routes of Routes the document does not describe: %s", strings.Join(missing, ", "))
	}
	if len(extra) > 0 {
		t.Errorf("operations of the document that are no route of Routes: %s", strings.Join(extra, ", "))
	}

	ids := map[string]string{}
	for _, o := range ops {
		id, _ := o.op["operationId"].(string)
		switch {
		case id == "":
			t.Errorf("%s: no operationId", o.key)
		case ids[id] != "":
			t.Errorf("%s: operationId %q is also %s's", o.key, id, ids[id])
		default:
			ids[id] = o.key
		}
		if s, _ := o.op["summary"].(string); strings.TrimSpace(s) == "" {
			t.Errorf("%s: no summary", o.key)
		}
		resps, _ := o.op["responses"].(map[string]any)
		if len(resps) == 0 {
			t.Errorf("%s: no responses", o.key)
		}
		for code, r := range resps {
			if n, err := strconv.Atoi(code); err != nil || n < 100 || n > 599 {
				t.Errorf("%s: response %q is not a status code", o.key, code)
			}
			rm, ok := r.(map[string]any)
			if !ok {
				t.Errorf("%s: response %s is not an object", o.key, code)
				continue
			}
			if d, _ := openapiDeref(t, doc, rm)["description"].(string); d == "" {
				t.Errorf("%s: response %s has no description", o.key, code)
			}
		}

		// Security: public routes none, the others the global one.
		sec, has := o.op["security"]
		list, isList := sec.([]any)
		if pub, ok := public[o.key]; ok {
			switch {
			case pub && (!has || !isList || len(list) != 0):
				t.Errorf("%s is public: want security: [], got %v", o.key, sec)
			case !pub && has && (!isList || len(list) == 0):
				t.Errorf("%s wants the token: its security %v overrides the global one", o.key, sec)
			case !pub && resps["401"] == nil:
				t.Errorf("%s wants the token: no 401 response", o.key)
			case !pub && o.key[:4] != "GET " && resps["403"] == nil:
				t.Errorf("%s wants the token and changes state: no 403 response (session without %s)", o.key, CSRFHeader)
			}
		}

		// Parameters: every {x} of the path declared in: path, required.
		declared := map[string]bool{}
		var params []any
		if p, ok := o.item["parameters"].([]any); ok {
			params = append(params, p...)
		}
		if p, ok := o.op["parameters"].([]any); ok {
			params = append(params, p...)
		}
		seen := map[string]bool{}
		for _, p := range params {
			pm, ok := p.(map[string]any)
			if !ok {
				t.Errorf("%s: a parameter is not an object", o.key)
				continue
			}
			pm = openapiDeref(t, doc, pm)
			name, _ := pm["name"].(string)
			in, _ := pm["in"].(string)
			if seen[in+" "+name] {
				t.Errorf("%s: parameter %s in %s twice", o.key, name, in)
			}
			seen[in+" "+name] = true
			if _, ok := pm["schema"].(map[string]any); !ok {
				t.Errorf("%s: parameter %s has no schema", o.key, name)
			}
			if in == "path" {
				declared[name] = true
				if pm["required"] != true {
					t.Errorf("%s: path parameter %s is not required: true", o.key, name)
				}
			}
		}
		inPath := map[string]bool{}
		for rest := o.path; ; {
			i := strings.Index(rest, "{")
			if i < 0 {
				break
			}
			j := strings.Index(rest[i:], "}")
			if j < 0 {
				t.Errorf("%s: unbalanced { in the path", o.key)
				break
			}
			inPath[rest[i+1:i+j]] = true
			rest = rest[i+j+1:]
		}
		for p := range inPath {
			if !declared[p] {
				t.Errorf("%s: path parameter {%s} not declared in: path", o.key, p)
			}
		}
		for p := range declared {
			if !inPath[p] {
				t.Errorf("%s: declares path parameter %s that is not in the path", o.key, p)
			}
		}
	}
}

// Every operation gives the 4xx answers the server's checks make: 401 for
// a route that wants a credential, 403 for an operator's route or one that
// changes state (a session without the CSRF header), 404 for a route with
// a path parameter, 400 and 413 for one that reads a body, 400 for one
// that reads query or header parameters; and 431, which Go's HTTP server
// answers itself to a request whose headers are too large, whatever its
// route (TestOpenAPIHeadersTooLarge): the public routes that read nothing
// of the request answer no other.
func TestOpenAPIClientErrors(t *testing.T) {
	doc := openapiDoc(t)
	access := map[string]Access{}
	for _, rt := range Routes {
		m, p := openapiPath(rt.Pattern)
		access[m+" "+p] = rt.Access
	}
	for _, o := range openapiOps(t, doc) {
		resps := openapiObj(t, o.op, "responses")
		want := []string{"431"}
		a := access[o.key]
		if a != Public {
			want = append(want, "401")
		}
		if a == Operator || a == User && !strings.HasPrefix(o.key, "GET ") {
			want = append(want, "403")
		}
		if strings.Contains(o.path, "{") {
			want = append(want, "404")
		}
		if _, ok := o.op["requestBody"]; ok {
			want = append(want, "400", "413")
		}
		params, _ := o.op["parameters"].([]any)
		for _, p := range params {
			if in := openapiDeref(t, doc, p.(map[string]any))["in"]; in == "query" || in == "header" {
				want = append(want, "400")
			}
		}
		for _, code := range want {
			if _, ok := resps[code]; !ok {
				t.Errorf("%s: no %s response", o.key, code)
			}
		}
		if r, _ := resps["431"].(map[string]any); r["$ref"] != "#/components/responses/HeadersTooLarge" {
			t.Errorf("%s: 431 is %v, want the component HeadersTooLarge", o.key, r)
		}
	}
}

// Go's HTTP server answers 431, as the document's HeadersTooLarge says, to
// a request to any route whose headers are over its limit (1 MiB).
func TestOpenAPIHeadersTooLarge(t *testing.T) {
	d := bareDaemon{token: "openapi-test-token", started: time.Now(), reg: prometheus.NewRegistry()}
	srv := httpsrv.New(New(All(d), zerolog.Nop()), httpsrv.Config{Logger: zerolog.Nop()})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	defer func() {
		if err := srv.Close(); err != nil {
			t.Error(err)
		}
		if err := <-served; err != nil && !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("serve: %v", err)
		}
	}()

	want := openapiObj(t, openapiDoc(t), "components", "responses", "HeadersTooLarge", "content", "text/plain")["example"]
	big := strings.Repeat("a", http.DefaultMaxHeaderBytes+8192)
	for _, rt := range Routes {
		method, path := openapiPath(rt.Pattern)
		path = strings.NewReplacer("{id}", "j-000000000001", "{name}", "h1", "{vm}", "vm-1", "{file}", "app.js").Replace(path)
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		if err := c.SetDeadline(time.Now().Add(30 * time.Second)); err != nil {
			t.Fatal(err)
		}
		go func() {
			// The server answers before it has read it all: the rest is
			// refused.
			_, _ = fmt.Fprintf(c, "%s %s HTTP/1.1\r\nHost: metasched\r\nX-Big: %s\r\n\r\n", method, path, big)
		}()
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Errorf("%s %s: %v", method, path, err)
			c.Close()
			continue
		}
		body, err := io.ReadAll(resp.Body)
		c.Close()
		if err != nil {
			t.Errorf("%s %s: read the answer: %v", method, path, err)
			continue
		}
		ct, _, err := mime.ParseMediaType(resp.Header.Get("Content-Type"))
		if err != nil {
			t.Errorf("%s %s: Content-Type %q: %v", method, path, resp.Header.Get("Content-Type"), err)
		}
		if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge || ct != "text/plain" || string(body) != want {
			t.Errorf("%s %s: %d %s %q, want 431 text/plain %q", method, path, resp.StatusCode, ct, body, want)
		}
	}
}

// The query parameters the handlers read, with their types.
func TestOpenAPIQueryParameters(t *testing.T) {
	doc := openapiDoc(t)
	want := map[string]map[string]string{ // operation → parameter → schema type
		"GET /v1/jobs":      {"state": "array", "type": "string", "after": "string", "limit": "integer"},
		"GET /v1/switches":  {"active": "boolean", "before": "string", "limit": "integer"},
		"GET /v1/dashboard": {"history": "boolean"},
	}
	for _, o := range openapiOps(t, doc) {
		got := map[string]string{}
		params, _ := o.op["parameters"].([]any)
		for _, p := range params {
			pm := openapiDeref(t, doc, p.(map[string]any))
			if pm["in"] == "query" {
				s := openapiDeref(t, doc, pm["schema"].(map[string]any))
				typ, _ := s["type"].(string)
				got[pm["name"].(string)] = typ
			}
		}
		w := want[o.key]
		if w == nil {
			w = map[string]string{}
		}
		if !reflect.DeepEqual(got, w) {
			t.Errorf("%s: query parameters %v, want %v", o.key, got, w)
		}
	}
	// The job states of ?state= are the lifecycle's.
	var states []any
	for _, p := range openapiObj(t, doc, "paths", "/v1/jobs", "get")["parameters"].([]any) {
		if pm := p.(map[string]any); pm["name"] == "state" {
			items := openapiDeref(t, doc, openapiObj(t, pm, "schema", "items"))
			states, _ = items["enum"].([]any)
		}
	}
	if got := fmt.Sprint(states); got != fmt.Sprint(api.States) {
		t.Errorf("GET /v1/jobs ?state= enum %s, want %s", got, fmt.Sprint(api.States))
	}
}

// The header parameters the handlers read: the Idempotency-Key of POST
// /v1/jobs, whose schema says what idempotencyKey accepts.
func TestOpenAPIHeaderParameters(t *testing.T) {
	doc := openapiDoc(t)
	var key map[string]any
	for _, o := range openapiOps(t, doc) {
		params, _ := o.op["parameters"].([]any)
		for _, p := range params {
			pm := openapiDeref(t, doc, p.(map[string]any))
			if pm["in"] != "header" {
				continue
			}
			if o.key != "POST /v1/jobs" || pm["name"] != api.IdempotencyHeader {
				t.Errorf("%s: header parameter %v, which no handler reads", o.key, pm["name"])
				continue
			}
			key = pm
		}
	}
	if key == nil {
		t.Fatalf("POST /v1/jobs: no %s header parameter", api.IdempotencyHeader)
	}
	s := openapiDeref(t, doc, key["schema"].(map[string]any))
	// A key, or its quoted form (a structured header string).
	if s["type"] != "string" || fmt.Sprint(s["minLength"]) != "1" || fmt.Sprint(s["maxLength"]) != strconv.Itoa(api.MaxIdempotencyKey+2) {
		t.Errorf("%s schema %v, want a string of 1 to %d characters", api.IdempotencyHeader, s, api.MaxIdempotencyKey+2)
	}
	re, err := regexp.Compile(s["pattern"].(string))
	if err != nil {
		t.Fatalf("%s pattern: %v", api.IdempotencyHeader, err)
	}
	for c := range 256 {
		for _, k := range []string{string([]byte{byte(c)}), `"` + string([]byte{byte(c)}) + `"`} {
			if got, want := re.MatchString(k), keyChar(byte(c)); got != want {
				t.Errorf("%s pattern takes %q: %v, the server: %v", api.IdempotencyHeader, k, got, want)
			}
		}
	}
	long := strings.Repeat("k", api.MaxIdempotencyKey)
	for k, want := range map[string]bool{long: true, long + "k": false, `"` + long + `"`: true, `"` + long + `k"`: false, `""`: false, `"k`: false, `k"`: false} {
		if got := re.MatchString(k); got != want {
			t.Errorf("%s pattern takes a key of %d characters (%.3s…): %v, the server: %v", api.IdempotencyHeader, len(k), k, got, want)
		}
		if _, err := idempotencyKey(&http.Request{Header: http.Header{api.IdempotencyHeader: {k}}}); (err == nil) != want {
			t.Errorf("the server takes a key of %d characters (%.3s…): %v, want %v", len(k), k, err == nil, want)
		}
	}
}

// Every "$ref" of the document resolves to a component, and every
// component but the security schemes (which security names) is the target
// of one.
func TestOpenAPIRefs(t *testing.T) {
	doc := openapiDoc(t)
	n := 0
	used := map[string]bool{}
	var walk func(path string, v any)
	walk = func(path string, v any) {
		switch x := v.(type) {
		case map[string]any:
			if ref, ok := x["$ref"]; ok {
				n++
				s, _ := ref.(string)
				used[s] = true
				if !strings.HasPrefix(s, "#/components/") {
					t.Errorf("%s: $ref %v is not a component", path, ref)
				} else if _, ok := openapiResolve(doc, s); !ok {
					t.Errorf("%s: $ref %s does not resolve", path, s)
				}
			}
			for k, e := range x {
				walk(path+"/"+k, e)
			}
		case []any:
			for i, e := range x {
				walk(path+"/"+strconv.Itoa(i), e)
			}
		}
	}
	walk("#", doc)
	if n == 0 {
		t.Error("no $ref in the document")
	}
	for kind, cs := range openapiObj(t, doc, "components") {
		if kind == "securitySchemes" {
			continue
		}
		for name := range cs.(map[string]any) {
			if ref := "#/components/" + kind + "/" + name; !used[ref] {
				t.Errorf("%s is never used", ref)
			}
		}
	}
}

// openapiTypes maps each object schema of components.schemas to the Go
// type it describes. request marks a request body's schema, where a field
// the server defaults may be left out.
var openapiTypes = map[string]struct {
	typ     reflect.Type
	request bool
}{
	"APIError":          {reflect.TypeFor[api.APIError](), false},
	"FieldError":        {reflect.TypeFor[api.FieldError](), false},
	"Health":            {reflect.TypeFor[api.Health](), false},
	"LoginRequest":      {reflect.TypeFor[api.LoginRequest](), true},
	"LoginForm":         {reflect.TypeFor[api.LoginRequest](), true},
	"LoginResult":       {reflect.TypeFor[api.LoginResult](), false},
	"Transition":        {reflect.TypeFor[api.Transition](), false},
	"JobFile":           {reflect.TypeFor[selection.Job](), true},
	"JobFileVM":         {reflect.TypeFor[selection.VM](), true},
	"JobInputFile":      {reflect.TypeFor[selection.InputFile](), true},
	"JobSpec":           {reflect.TypeFor[api.JobSpec](), false},
	"VMShape":           {reflect.TypeFor[api.VMSize](), false},
	"JobVM":             {reflect.TypeFor[api.JobVM](), false},
	"JobLostVM":         {reflect.TypeFor[api.JobLostVM](), false},
	"Job":               {reflect.TypeFor[api.Job](), false},
	"JobList":           {reflect.TypeFor[api.JobList](), false},
	"OutputList":        {reflect.TypeFor[api.OutputList](), false},
	"OutputFile":        {reflect.TypeFor[api.OutputFile](), false},
	"HostRef":           {reflect.TypeFor[api.HostRef](), false},
	"Placement":         {reflect.TypeFor[api.Placement](), false},
	"Plan":              {reflect.TypeFor[api.Plan](), false},
	"ClusterPlan":       {reflect.TypeFor[api.ClusterPlan](), false},
	"Excluded":          {reflect.TypeFor[api.Excluded](), false},
	"PlanResult":        {reflect.TypeFor[api.PlanResult](), false},
	"Rates":             {reflect.TypeFor[api.Rates](), false},
	"Pool":              {reflect.TypeFor[api.Pool](), false},
	"HypervisorVM":      {reflect.TypeFor[api.VM](), false},
	"HostView":          {reflect.TypeFor[api.HostView](), false},
	"ClearRequest":      {reflect.TypeFor[api.ClearRequest](), true},
	"DrainRequest":      {reflect.TypeFor[api.DrainRequest](), true},
	"SwitchList":        {reflect.TypeFor[api.SwitchList](), false},
	"SwitchRequest":     {reflect.TypeFor[api.SwitchRequest](), true},
	"TokenRequest":      {reflect.TypeFor[api.TokenRequest](), true},
	"Token":             {reflect.TypeFor[api.Token](), false},
	"TokenCreated":      {reflect.TypeFor[api.TokenCreated](), false},
	"Principal":         {reflect.TypeFor[api.Principal](), false},
	"SwitchView":        {reflect.TypeFor[api.SwitchView](), false},
	"PolicyPool":        {reflect.TypeFor[api.PolicyPool](), false},
	"PolicyTable":       {reflect.TypeFor[api.PolicyTable](), false},
	"PolicySlice":       {reflect.TypeFor[api.PolicySlice](), false},
	"PolicyView":        {reflect.TypeFor[api.PolicyView](), false},
	"Link":              {reflect.TypeFor[api.Link](), false},
	"Calibration":       {reflect.TypeFor[api.Calibration](), false},
	"CalibrationSite":   {reflect.TypeFor[api.CalibrationSite](), false},
	"CalibrationFigure": {reflect.TypeFor[api.CalibrationFigure](), false},
	"CalibrateRequest":  {reflect.TypeFor[api.CalibrateRequest](), true},
	"Move":              {reflect.TypeFor[api.TuningMove](), false},
	"Shrink":            {reflect.TypeFor[api.TuningShrink](), false},
	"TuningRecord":      {reflect.TypeFor[api.TuningRecord](), false},
	"JobType":           {reflect.TypeFor[api.JobType](), false},
	"ClusterShare":      {reflect.TypeFor[api.ClusterShare](), false},
	"ClusterTasks":      {reflect.TypeFor[api.ClusterTasks](), false},
	"JobSummary":        {reflect.TypeFor[api.JobSummary](), false},
	"JobsOverview":      {reflect.TypeFor[api.JobsOverview](), false},
	"Sample":            {reflect.TypeFor[api.Sample](), false},
	"Dashboard":         {reflect.TypeFor[api.Dashboard](), false},
	"ResizeRequest":     {reflect.TypeFor[api.ResizeRequest](), true},
	"TuningMigration":   {reflect.TypeFor[api.TuningMigration](), false},
	"TuningResize":      {reflect.TypeFor[api.TuningResize](), false},
	"TuningMeasured":    {reflect.TypeFor[api.TuningMeasured](), false},
}

// openapiField is one JSON field of a Go struct.
type openapiField struct {
	name string
	typ  reflect.Type
	omit bool // omitempty or omitzero: the field may be absent
}

// openapiGoFields lists the JSON fields of a struct as encoding/json
// writes them: exported fields by their json tag (or name), embedded
// structs without a tag flattened, "-" skipped.
func openapiGoFields(t reflect.Type) []openapiField {
	var out []openapiField
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		ft := f.Type
		if f.Anonymous && name == "" {
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				out = append(out, openapiGoFields(ft)...)
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		o := strings.Split(opts, ",")
		omit := slices.Contains(o, "omitzero")
		if slices.Contains(o, "omitempty") {
			switch ft.Kind() {
			case reflect.Struct:
			case reflect.Array:
				omit = omit || ft.Len() == 0
			default:
				omit = true
			}
		}
		out = append(out, openapiField{name: name, typ: ft, omit: omit})
	}
	return out
}

// openapiSchemaTypes reads a schema's "type" (a string or a list).
func openapiSchemaTypes(s map[string]any) []string {
	switch x := s["type"].(type) {
	case string:
		return []string{x}
	case []any:
		var out []string
		for _, e := range x {
			if str, ok := e.(string); ok {
				out = append(out, str)
			}
		}
		return out
	}
	return nil
}

var (
	openapiTimeType = reflect.TypeFor[time.Time]()
	// A job's walltime: JSON holds it as a duration string, in a job file
	// and in a job's spec alike.
	openapiDurationTypes = []reflect.Type{reflect.TypeFor[selection.Duration](), reflect.TypeFor[api.Duration]()}
	// openapiSameSchema pairs a type of the job file, which the server
	// parses, with its mirror in a job's spec, which the server answers
	// with: one schema describes both.
	openapiSameSchema = map[reflect.Type]reflect.Type{
		reflect.TypeFor[api.InputFile](): reflect.TypeFor[selection.InputFile](),
	}
)

// openapiCheckType checks that schema s describes values of the Go type
// gt as encoding/json writes them: a struct is a $ref to a component of
// openapiTypes for that very type, a time a date-time string, a slice an
// array of its elements, a map an object of its values.
func openapiCheckType(t *testing.T, doc map[string]any, where string, gt reflect.Type, s map[string]any) {
	t.Helper()
	for gt.Kind() == reflect.Pointer {
		gt = gt.Elem()
	}
	if gt.Kind() == reflect.Struct && gt != openapiTimeType {
		ref, _ := s["$ref"].(string)
		name, ok := strings.CutPrefix(ref, "#/components/schemas/")
		if !ok {
			t.Errorf("%s: the Go type %s wants a $ref to its component schema, got %v", where, gt, s)
			return
		}
		if c, ok := openapiTypes[name]; !ok || c.typ != gt && openapiSameSchema[gt] != c.typ {
			t.Errorf("%s: $ref %s, but the Go type is %s", where, ref, gt)
		}
		return
	}
	s = openapiDeref(t, doc, s)
	var want string
	switch gt.Kind() {
	case reflect.String:
		want = "string"
	case reflect.Bool:
		want = "boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		want = "integer"
	case reflect.Float32, reflect.Float64:
		want = "number"
	case reflect.Slice, reflect.Array:
		want = "array"
		if gt.Kind() == reflect.Slice && gt.Elem().Kind() == reflect.Uint8 { // encoding/json: base64
			want = "string"
			if s["contentEncoding"] != "base64" {
				t.Errorf("%s: bytes, want contentEncoding base64, got %v", where, s["contentEncoding"])
			}
		}
	case reflect.Map:
		want = "object"
	case reflect.Struct: // time.Time
		want = "string"
		if s["format"] != "date-time" {
			t.Errorf("%s: a time, want format date-time, got %v", where, s["format"])
		}
	default:
		t.Errorf("%s: the Go type %s has no JSON schema type here", where, gt)
		return
	}
	if slices.Contains(openapiDurationTypes, gt) {
		want = "string"
	}
	if types := openapiSchemaTypes(s); !slices.Contains(types, want) {
		t.Errorf("%s: type %v, want %s (Go %s)", where, types, want, gt)
		return
	}
	switch gt.Kind() {
	case reflect.Slice, reflect.Array:
		if want == "string" {
			return // bytes
		}
		items, ok := s["items"].(map[string]any)
		if !ok {
			t.Errorf("%s: an array without items", where)
			return
		}
		openapiCheckType(t, doc, where+"[]", gt.Elem(), items)
	case reflect.Map:
		vals, ok := s["additionalProperties"].(map[string]any)
		if !ok {
			t.Errorf("%s: an object of %s without an additionalProperties schema", where, gt.Elem())
			return
		}
		openapiCheckType(t, doc, where+"{}", gt.Elem(), vals)
	}
}

// Each object schema's properties and required fields are the JSON fields
// of its Go type, with the same types.
func TestOpenAPISchemasMatchGo(t *testing.T) {
	doc := openapiDoc(t)
	schemas := openapiObj(t, doc, "components", "schemas")
	for name, v := range schemas {
		s := v.(map[string]any)
		if _, ok := s["properties"]; ok {
			if _, ok := openapiTypes[name]; !ok {
				t.Errorf("components.schemas.%s: an object schema without a Go type in openapiTypes", name)
			}
		}
	}
	for name, c := range openapiTypes {
		v, ok := schemas[name]
		if !ok {
			t.Errorf("components.schemas.%s (Go %s) is missing", name, c.typ)
			continue
		}
		s := v.(map[string]any)
		props, _ := s["properties"].(map[string]any)
		var req []string
		if r, ok := s["required"].([]any); ok {
			for _, e := range r {
				req = append(req, fmt.Sprint(e))
			}
		}
		if s["type"] != "object" || s["additionalProperties"] != false {
			t.Errorf("%s: want type object and additionalProperties false, got %v and %v", name, s["type"], s["additionalProperties"])
		}
		var goNames, goRequired []string
		for _, f := range openapiGoFields(c.typ) {
			goNames = append(goNames, f.name)
			if !f.omit {
				goRequired = append(goRequired, f.name)
			}
			p, ok := props[f.name].(map[string]any)
			if !ok {
				continue // reported below
			}
			openapiCheckType(t, doc, name+"."+f.name, f.typ, p)
		}
		var docNames []string
		for k := range props {
			docNames = append(docNames, k)
		}
		sort.Strings(goNames)
		sort.Strings(docNames)
		if !slices.Equal(goNames, docNames) {
			t.Errorf("%s: properties %v, but the JSON fields of Go %s are %v", name, docNames, c.typ, goNames)
		}
		sort.Strings(goRequired)
		sort.Strings(req)
		if c.request {
			for _, r := range req {
				if !slices.Contains(goNames, r) {
					t.Errorf("%s: requires %s, which Go %s does not have", name, r, c.typ)
				}
			}
		} else if !slices.Equal(goRequired, req) {
			t.Errorf("%s: required %v, but Go %s always writes %v", name, req, c.typ, goRequired)
		}
	}
}

// The enums of the document are the Go constants.
func TestOpenAPIEnums(t *testing.T) {
	doc := openapiDoc(t)
	enum := func(path ...string) []string {
		t.Helper()
		s := openapiDeref(t, doc, openapiObj(t, doc, path...))
		var out []string
		for _, e := range s["enum"].([]any) {
			out = append(out, fmt.Sprint(e))
		}
		sort.Strings(out)
		return out
	}
	sorted := func(xs ...string) []string { return openapiSorted(xs) }
	var states []string
	for _, s := range api.States {
		states = append(states, string(s))
	}
	var algs []string
	for _, a := range selection.Algorithms {
		algs = append(algs, string(a))
	}
	for _, c := range []struct {
		path []string
		want []string
	}{
		{[]string{"components", "schemas", "JobState"}, sorted(states...)},
		{[]string{"components", "schemas", "Transition", "properties", "from"}, sorted(append([]string{""}, states...)...)},
		{[]string{"components", "schemas", "APIError", "properties", "code"}, sorted(api.CodeInvalid, api.CodeUnauthorized, api.CodeForbidden,
			api.CodeNotFound, api.CodeUnknownRoute, api.CodeMethod, api.CodeConflict, api.CodeTooLarge, api.CodeUnsupported, api.CodeKeyReused, api.CodeUnavailable, api.CodeInternal)},
		{[]string{"components", "schemas", "HostView", "properties", "state"}, sorted(api.HostBusy, api.HostIdle, api.HostSwitching, api.HostStranded, api.HostUnreachable, api.HostDraining, api.HostDrained)},
		{[]string{"components", "schemas", "SwitchView", "properties", "phase"}, sorted(string(co.PhaseReleasing), string(co.PhaseReconfiguring),
			string(co.PhaseAdding), string(co.PhaseCommitting), string(co.PhaseCancelling), string(co.PhaseRollingBack), string(co.PhaseDone),
			string(co.PhaseCancelled), string(co.PhaseRolledBack), string(co.PhaseStranded))},
		{[]string{"components", "schemas", "HypervisorVM", "properties", "state"}, sorted(string(api.VMRunning), string(hp.StatePaused),
			string(hp.StateShutoff), string(hp.StateCrashed), string(hp.StateOther), string(hp.StateMissing), string(hp.StateBuilding))},
		{[]string{"components", "schemas", "Plan", "properties", "algorithm"}, sorted(algs...)},
		{[]string{"components", "schemas", "ClusterPlan", "properties", "limit"}, sorted(string("free"), string("uplink"),
			string("path"), string(selection.LimitMasterShare), string("efficiency"), string("tasks"))},
		{[]string{"components", "schemas", "TuningRecord", "properties", "action"}, sorted(api.ActionConsolidate, api.ActionShrink)},
		{[]string{"components", "schemas", "CalibrationFigure", "properties", "kind"}, sorted(api.CalibrationPerf, api.CalibrationLAN, api.CalibrationStart, api.CalibrationLink)},
		{[]string{"components", "schemas", "CalibrationFigure", "properties", "state"}, sorted(api.CalibrationMeasured, api.CalibrationDue,
			api.CalibrationMeasuring, api.CalibrationFailed)},
		{[]string{"components", "schemas", "Link", "properties", "via"}, sorted(api.ViaAgents, api.ViaVMs)},
	} {
		if got := enum(c.path...); !slices.Equal(got, c.want) {
			t.Errorf("%s: enum %q, want %q", strings.Join(c.path, "."), got, c.want)
		}
	}
}

// The bodies of the operations are the Go types the handlers read and
// answer, with the handlers' success status.
func TestOpenAPIBodies(t *testing.T) {
	doc := openapiDoc(t)
	out0 := func(f any) reflect.Type { return reflect.TypeOf(f).Out(0) }
	jobFile := reflect.TypeFor[selection.Job]()
	// Another success status with the same answer: a repeat with an
	// Idempotency-Key.
	also := map[string]string{"POST /v1/jobs": "200"}
	jobTypes := []string{"application/json", "application/yaml", "application/x-yaml", "text/yaml", "text/x-yaml", "text/plain", "application/octet-stream"}
	for _, c := range []struct {
		op      string
		status  string
		answer  reflect.Type // nil: no JSON answer
		reqType reflect.Type
		reqCTs  []string
	}{
		{"GET /healthz", "200", reflect.TypeFor[api.Health](), nil, nil},
		{"POST /login", "200", reflect.TypeFor[api.LoginResult](), reflect.TypeFor[api.LoginRequest](), []string{"application/json", "application/x-www-form-urlencoded"}},
		{"POST /logout", "204", nil, nil, nil},
		{"POST /v1/jobs", "201", out0(Daemon.Submit), jobFile, jobTypes},
		{"GET /v1/jobs", "200", out0(Daemon.Jobs), nil, nil},
		{"GET /v1/jobs/{id}", "200", out0(Daemon.Job), nil, nil},
		{"POST /v1/jobs/{id}/cancel", "200", out0(Daemon.Cancel), nil, nil},
		{"POST /v1/jobs/{id}/vms/{vm}/resize", "200", out0(Daemon.ResizeVM), reflect.TypeFor[api.ResizeRequest](), []string{"application/json"}},
		{"POST /v1/plan", "200", out0(Daemon.DryRun), jobFile, jobTypes},
		{"GET /v1/pools", "200", out0(Daemon.Pools), nil, nil},
		{"GET /v1/hosts", "200", out0(Daemon.Hosts), nil, nil},
		{"POST /v1/hosts/{name}/clear", "200", out0(Daemon.ClearHost), reflect.TypeFor[api.ClearRequest](), []string{"application/json"}},
		{"POST /v1/hosts/{name}/drain", "200", out0(Daemon.DrainHost), reflect.TypeFor[api.DrainRequest](), []string{"application/json"}},
		{"POST /v1/hosts/{name}/undrain", "200", out0(Daemon.UndrainHost), nil, nil},
		{"GET /v1/vms", "200", out0(Daemon.VMs), nil, nil},
		{"GET /v1/switches", "200", out0(Daemon.Switches), nil, nil},
		{"POST /v1/switches", "202", out0(Daemon.RequestSwitch), reflect.TypeFor[api.SwitchRequest](), []string{"application/json"}},
		{"GET /v1/policy", "200", out0(Daemon.Policy), nil, nil},
		{"GET /v1/links", "200", out0(Daemon.Links), nil, nil},
		{"GET /v1/tuning", "200", out0(Daemon.Tuning), nil, nil},
		{"GET /v1/calibration", "200", out0(Daemon.Calibration), nil, nil},
		{"POST /v1/calibrate", "202", out0(Daemon.Calibrate), reflect.TypeFor[api.CalibrateRequest](), []string{"application/json"}},
		{"GET /v1/dashboard", "200", out0((*dashboard.Board).State), nil, nil},
	} {
		method, path, _ := strings.Cut(c.op, " ")
		op := openapiObj(t, doc, "paths", path, strings.ToLower(method))
		resps := openapiObj(t, op, "responses")
		for code := range resps {
			if code[0] == '2' && code != c.status && code != also[c.op] {
				t.Errorf("%s: success %s, want only %s", c.op, code, strings.TrimSuffix(c.status+" and "+also[c.op], " and "))
			}
		}
		successes := []string{c.status}
		if a := also[c.op]; a != "" {
			successes = append(successes, a)
		}
		for _, status := range successes {
			r, ok := resps[status].(map[string]any)
			if !ok {
				t.Errorf("%s: no %s response", c.op, status)
				continue
			}
			r = openapiDeref(t, doc, r)
			content, _ := r["content"].(map[string]any)
			if c.answer == nil {
				if len(content) != 0 {
					t.Errorf("%s: %s has content %v, want none", c.op, status, content)
				}
			} else if mt, ok := content["application/json"].(map[string]any); !ok {
				t.Errorf("%s: %s has no application/json content", c.op, status)
			} else {
				openapiCheckType(t, doc, c.op+" "+status, c.answer, mt["schema"].(map[string]any))
			}
		}
		rb, hasBody := op["requestBody"].(map[string]any)
		if c.reqType == nil {
			if hasBody {
				t.Errorf("%s: a requestBody, but the handler reads none", c.op)
			}
			continue
		}
		if !hasBody {
			t.Errorf("%s: no requestBody", c.op)
			continue
		}
		rb = openapiDeref(t, doc, rb)
		rcontent, _ := rb["content"].(map[string]any)
		var cts []string
		for ct, mt := range rcontent {
			cts = append(cts, ct)
			openapiCheckType(t, doc, c.op+" body "+ct, c.reqType, mt.(map[string]any)["schema"].(map[string]any))
		}
		sort.Strings(cts)
		if want := openapiSorted(c.reqCTs); !slices.Equal(cts, want) {
			t.Errorf("%s: body content types %v, want %v", c.op, cts, want)
		}
		if c.reqType == jobFile {
			for _, ct := range c.reqCTs {
				if !acceptedType(ct) {
					t.Errorf("%s: documents %s, which the server refuses", c.op, ct)
				}
			}
		}
	}
}

func openapiSorted(xs []string) []string {
	xs = slices.Clone(xs)
	sort.Strings(xs)
	return xs
}

// bareDaemon is a daemon without grid or store: it has a token, a version,
// a start and a registry; any other method panics (its Daemon is nil).
type bareDaemon struct {
	Daemon
	token   string
	started time.Time
	reg     *prometheus.Registry
}

func (d bareDaemon) Token() string                  { return d.token }
func (d bareDaemon) Version() string                { return "test" }
func (d bareDaemon) Started() time.Time             { return d.started }
func (d bareDaemon) Registry() *prometheus.Registry { return d.reg }
func (d bareDaemon) SessionRevoked(string) bool     { return false }
func (d bareDaemon) Authenticate(tok string) (api.Principal, bool) {
	return api.Principal{Name: api.OperatorName, Role: api.RoleOperator}, tok == d.token
}
func (d bareDaemon) Principal(name string) (api.Principal, string, bool) {
	return api.Principal{Name: api.OperatorName, Role: api.RoleOperator}, "", name == api.OperatorName
}
func (d bareDaemon) SessionKey(string) string            { return "" }
func (d bareDaemon) CredentialsChanged() <-chan struct{} { return nil }

// The server serves the document without a token, and answers the status
// codes the document gives (CheckOpenAPI holds each answer to it), for the
// requests a daemon without grid or store answers: the public routes,
// authentication, and request checks made before the handler asks the
// daemon anything.
func TestOpenAPIServed(t *testing.T) {
	// The handler itself.
	rec := httptest.NewRecorder()
	serveOpenAPI(rec, httptest.NewRequest(http.MethodGet, "/v1/openapi.json", nil))
	if rec.Code != http.StatusOK || !bytes.Equal(rec.Body.Bytes(), OpenAPI) {
		t.Errorf("serveOpenAPI: %d, %d bytes, want 200 and the %d bytes of OpenAPI", rec.Code, rec.Body.Len(), len(OpenAPI))
	}
	if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
		t.Errorf("serveOpenAPI: Content-Type %q, want application/json", ct)
	}

	// The daemon's whole server.
	d := bareDaemon{token: "openapi-test-token", started: time.Now(), reg: prometheus.NewRegistry()}
	s := New(All(d), zerolog.Nop())
	srv := httptest.NewServer(CheckOpenAPI(t, s))
	defer srv.Close()
	session := s.newSession(time.Now().Add(time.Hour), api.OperatorName, "")

	type req struct {
		method, path string
		bearer       bool
		cookie       bool
		header       http.Header
		ctype        string
		body         []byte
		status       int
		code         string // the APIError code of an error
		off          bool   // a request the document refuses (OffDocument): a bad one, or a body over 1 MiB
	}
	big := bytes.Repeat([]byte("#"), api.MaxBodyBytes+1)
	reqs := []req{
		{method: "GET", path: "/v1/openapi.json", status: 200},
		{method: "GET", path: "/healthz", status: 200},
		{method: "GET", path: "/metrics", status: 200},
		{method: "GET", path: "/metrics", header: http.Header{"Accept": {"application/vnd.google.protobuf; proto=io.prometheus.client.MetricFamily; encoding=delimited"}}, status: 200},
		{method: "GET", path: "/", status: 200},
		{method: "GET", path: "/assets/app.js", status: 200},
		{method: "GET", path: "/assets/no-such-file.js", status: 404, code: api.CodeNotFound},
		{method: "POST", path: "/logout", status: 204},
		{method: "POST", path: "/login", ctype: "application/json", body: []byte(`{"token":"openapi-test-token"}`), status: 200},
		{method: "POST", path: "/login", ctype: "application/x-www-form-urlencoded",
			body: []byte(url.Values{"token": {"openapi-test-token"}}.Encode()), status: 303},
		{method: "POST", path: "/login", ctype: "application/json", body: []byte(`{"token":"wrong"}`), status: 401, code: api.CodeUnauthorized},
		{method: "POST", path: "/login", ctype: "application/json", body: []byte(`{"tok":"x"}`), status: 400, code: api.CodeInvalid, off: true},
		{method: "POST", path: "/login", ctype: "image/png", body: []byte("x"), status: 415, code: api.CodeUnsupported, off: true},
		{method: "POST", path: "/login", ctype: "application/json", body: big, status: 413, code: api.CodeTooLarge, off: true},
		{method: "POST", path: "/v1/jobs", bearer: true, ctype: "image/png", body: []byte("x"), status: 415, code: api.CodeUnsupported},
		{method: "POST", path: "/v1/jobs", bearer: true, ctype: "application/yaml", body: big, status: 413, code: api.CodeTooLarge, off: true},
		{method: "POST", path: "/v1/jobs", bearer: true, header: http.Header{api.IdempotencyHeader: {"not a key"}},
			ctype: "application/yaml", body: []byte("x"), status: 400, code: api.CodeInvalid, off: true},
		{method: "POST", path: "/v1/plan", bearer: true, ctype: "text/csv", body: []byte("x"), status: 415, code: api.CodeUnsupported},
		{method: "POST", path: "/v1/plan", bearer: true, ctype: "application/json", body: big, status: 413, code: api.CodeTooLarge, off: true},
		{method: "GET", path: "/v1/jobs?limit=many", bearer: true, status: 400, code: api.CodeInvalid, off: true},
		{method: "GET", path: "/v1/jobs?state=lost", bearer: true, status: 400, code: api.CodeInvalid, off: true},
		{method: "GET", path: "/v1/switches?active=maybe", bearer: true, status: 400, code: api.CodeInvalid, off: true},
		{method: "GET", path: "/v1/dashboard?history=maybe", bearer: true, status: 400, code: api.CodeInvalid, off: true},
		{method: "POST", path: "/v1/switches", bearer: true, ctype: "application/json", body: []byte(`{"from":1}`), status: 400, code: api.CodeInvalid, off: true},
		{method: "POST", path: "/v1/switches", bearer: true, ctype: "application/json", body: big, status: 413, code: api.CodeTooLarge, off: true},
		{method: "POST", path: "/v1/hosts/h1/clear", bearer: true, ctype: "application/json", body: []byte(`{"pol":"x"}`), status: 400, code: api.CodeInvalid, off: true},
		{method: "POST", path: "/v1/hosts/h1/clear", bearer: true, ctype: "application/json", body: big, status: 413, code: api.CodeTooLarge, off: true},
		{method: "POST", path: "/v1/calibrate", bearer: true, ctype: "application/json", body: []byte(`{"sites":"a"}`), status: 400, code: api.CodeInvalid, off: true},
		{method: "POST", path: "/v1/calibrate", bearer: true, ctype: "application/json", body: []byte(`{"site":7}`), status: 400, code: api.CodeInvalid, off: true},
		{method: "POST", path: "/v1/calibrate", bearer: true, ctype: "application/json", body: big, status: 413, code: api.CodeTooLarge, off: true},
	}
	// Every private route: 401 without a token, and 403 for a session
	// request that changes state without the CSRF header.
	for _, rt := range Routes {
		if rt.Access == Public {
			continue
		}
		method, path := openapiPath(rt.Pattern)
		p := strings.NewReplacer("{id}", "j-000000000001", "{name}", "h1").Replace(path)
		reqs = append(reqs, req{method: method, path: p, status: 401, code: api.CodeUnauthorized})
		reqs = append(reqs, req{method: method, path: p, header: http.Header{"Authorization": {"Bearer wrong"}},
			status: 401, code: api.CodeUnauthorized})
		if method != http.MethodGet && method != http.MethodHead {
			reqs = append(reqs, req{method: method, path: p, cookie: true, status: 403, code: api.CodeForbidden})
		}
	}

	client := &http.Client{
		Timeout:       30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	for _, rq := range reqs {
		what := fmt.Sprintf("%s %s", rq.method, rq.path)
		if rq.cookie {
			what += " (session)"
		}
		var body io.Reader
		if rq.body != nil {
			body = bytes.NewReader(rq.body)
		}
		r, err := http.NewRequest(rq.method, srv.URL+rq.path, body)
		if err != nil {
			t.Fatal(err)
		}
		for k, vs := range rq.header {
			r.Header[k] = vs
		}
		if rq.bearer {
			r.Header.Set("Authorization", "Bearer "+d.Token())
		}
		if rq.cookie {
			r.AddCookie(&http.Cookie{Name: SessionCookie, Value: session})
		}
		if rq.ctype != "" {
			r.Header.Set("Content-Type", rq.ctype)
		}
		if rq.off {
			MarkOffDocument(r)
		}
		resp, err := client.Do(r)
		if err != nil {
			t.Errorf("%s: %v", what, err)
			continue
		}
		got, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Errorf("%s: read the answer: %v", what, err)
			continue
		}
		if resp.StatusCode != rq.status {
			t.Errorf("%s: %d %s, want %d", what, resp.StatusCode, bytes.TrimSpace(got), rq.status)
			continue
		}
		if rq.path == "/v1/openapi.json" && !bytes.Equal(got, OpenAPI) {
			t.Errorf("%s: the answer is not OpenAPI (%d bytes, want %d)", what, len(got), len(OpenAPI))
		}
		if rq.code != "" {
			var e api.APIError
			if err := json.Unmarshal(got, &e); err != nil || e.Code != rq.code {
				t.Errorf("%s: %s, want code %s", what, got, rq.code)
			}
		}
	}
}
