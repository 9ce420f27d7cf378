package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
)

// The OpenAPI document passes Redocly CLI's recommended ruleset (the rules
// `redocly lint` applies by default) with no error and no warning. The
// rules are checked here, in Go, so that the tests need no Node: each is a
// small function over the document, after Redocly's own (its
// packages/core/src/rules), for the rules that the ruleset turns on for an
// OpenAPI 3.1 document (and nullable-type-sibling, on for 3.0 only), as of
// Redocly CLI 2.47 (packages/core/src/config/recommended.ts).
// info-license-strict is the rule that was info-license-url before
// Redocly CLI 2.
//
// What these checks cannot do as Redocly does:
//
//   - struct: Redocly checks the document against its own model of
//     OpenAPI; kin-openapi's loading and validation (openapi3.T.Validate)
//     stand in for it.
//   - no-invalid-media-type-examples, no-invalid-parameter-examples and
//     no-invalid-schema-examples: Redocly validates examples with Ajv
//     (JSON Schema 2020-12 for OpenAPI 3.1); here kin-openapi's schema
//     validator does, which differs from Ajv in corner cases (formats,
//     discriminators, unevaluated* keywords). Redocly's default
//     (allowAdditionalProperties: false) that an example holds no property
//     its schema does not define is checked for the objects whose schema
//     (or its allOf, anyOf and oneOf) lists properties and says nothing of
//     additional, pattern or unevaluated ones.
//   - no-unresolved-refs: only local references ("#/...") are followed; a
//     reference to another file is reported as unresolved.
//   - The webhooks, and the 3.2 rules (spec-example-values,
//     spec-discriminator-defaultMapping, spec-no-invalid-encoding-
//     combinations, spec-no-invalid-tag-parents, spec-querystring-
//     parameters) are left out: the document is 3.1 and has no webhooks.
//
// operation-tag-defined, off in the ruleset, is checked as well: every tag
// of an operation is one of the document's tags.

// redoclyRule is one rule of the ruleset.
type redoclyRule struct {
	name     string
	severity string // Redocly's: error or warn; off: not in the ruleset, checked as well
	check    func(*lintDoc) []lintProblem
}

// lintProblem is a problem a rule finds: where (a JSON pointer), and what.
type lintProblem struct {
	where, msg string
}

// redoclyRecommended is Redocly CLI's recommended ruleset for OpenAPI 3.1
// (packages/core/src/config/recommended.ts: rules and oas3_1Rules), every
// rule that is not off.
var redoclyRecommended = []redoclyRule{
	{"struct", "error", lintStruct},
	{"no-unresolved-refs", "error", lintUnresolvedRefs},
	{"info-license", "warn", lintInfoLicense},
	{"info-license-strict", "warn", lintInfoLicenseStrict},
	{"no-ambiguous-paths", "warn", lintAmbiguousPaths},
	{"no-duplicated-enum-values", "warn", lintDuplicatedEnumValues},
	{"no-duplicated-tag-names", "warn", lintDuplicatedTagNames},
	{"no-empty-servers", "error", lintEmptyServers},
	{"no-enum-type-mismatch", "error", lintEnumTypeMismatch},
	{"no-example-value-and-externalValue", "error", lintExampleValueAndExternalValue},
	{"no-identical-paths", "error", lintIdenticalPaths},
	{"no-invalid-media-type-examples", "warn", lintMediaTypeExamples},
	{"no-invalid-parameter-examples", "warn", lintParameterExamples},
	{"no-invalid-schema-examples", "warn", lintSchemaExamples},
	{"no-mixed-number-range-constraints", "warn", lintMixedNumberRange},
	{"no-path-trailing-slash", "error", lintPathTrailingSlash},
	{"no-required-schema-properties-undefined", "warn", lintRequiredPropertiesUndefined},
	{"no-schema-type-mismatch", "error", lintSchemaTypeMismatch},
	{"no-server-example.com", "warn", lintServerExample},
	{"no-server-trailing-slash", "error", lintServerTrailingSlash},
	{"no-server-variables-empty-enum", "error", lintServerVariablesEmptyEnum},
	{"no-undefined-server-variable", "error", lintUndefinedServerVariable},
	{"no-unsafe-markdown", "warn", lintUnsafeMarkdown},
	{"no-unused-components", "warn", lintUnusedComponents},
	{"nullable-type-sibling", "error", lintNullableTypeSibling},
	{"operation-2xx-response", "warn", func(d *lintDoc) []lintProblem { return lintResponseCode(d, '2') }},
	{"operation-4xx-response", "warn", func(d *lintDoc) []lintProblem { return lintResponseCode(d, '4') }},
	{"operation-operationId", "warn", lintOperationID},
	{"operation-operationId-unique", "error", lintOperationIDUnique},
	{"operation-operationId-url-safe", "error", lintOperationIDURLSafe},
	{"operation-parameters-unique", "error", lintParametersUnique},
	{"operation-summary", "error", lintOperationSummary},
	{"path-declaration-must-exist", "error", lintPathDeclaration},
	{"path-not-include-query", "error", lintPathQuery},
	{"path-parameters-defined", "error", lintPathParametersDefined},
	{"security-defined", "error", lintSecurityDefined},
	{"security-scopes-defined", "warn", lintSecurityScopesDefined},
	{"spec-components-invalid-map-name", "error", lintComponentNames},
	{"spec-ref-siblings", "warn", lintRefSiblings},
	{"tag-description", "warn", lintTagDescription},
	{"operation-tag-defined", "off", lintOperationTagDefined},
}

func TestOpenAPIRedocly(t *testing.T) {
	d := newLintDoc(t, OpenAPI)
	for _, r := range redoclyRecommended {
		for _, p := range r.check(d) {
			t.Errorf("Redocly rule %s (%s): %s: %s", r.name, r.severity, p.where, p.msg)
		}
	}
}

// Every rule finds the problem it is about, in a copy of the document
// given one.
func TestOpenAPIRedoclyRulesFind(t *testing.T) {
	op := func(doc map[string]any, path, method string) map[string]any {
		return lintObj(doc, "paths", path, method)
	}
	addPath := func(doc map[string]any, path string) {
		lintObj(doc, "paths")[path] = map[string]any{"get": lintCopy(op(doc, "/v1/pools", "get"))}
	}
	mutations := map[string]func(doc map[string]any){
		"struct": func(doc map[string]any) { delete(lintObj(doc, "info"), "title") },
		"no-unresolved-refs": func(doc map[string]any) {
			lintObj(doc, "components", "schemas", "JobList", "properties", "jobs", "items")["$ref"] = "#/components/schemas/Nope"
		},
		"info-license": func(doc map[string]any) { delete(lintObj(doc, "info"), "license") },
		"info-license-strict": func(doc map[string]any) {
			lintObj(doc, "info")["license"] = map[string]any{"name": "Apache License 2.0"}
		},
		"no-ambiguous-paths": func(doc map[string]any) { addPath(doc, "/v1/{kind}/j-1/cancel") },
		"no-duplicated-enum-values": func(doc map[string]any) {
			s := lintObj(doc, "components", "schemas", "JobState")
			s["enum"] = append(s["enum"].([]any), "queued")
		},
		"no-duplicated-tag-names": func(doc map[string]any) {
			doc["tags"] = append(doc["tags"].([]any), map[string]any{"name": "jobs", "description": "Again."})
		},
		"no-empty-servers": func(doc map[string]any) { doc["servers"] = []any{} },
		"no-enum-type-mismatch": func(doc map[string]any) {
			s := lintObj(doc, "components", "schemas", "JobState")
			s["enum"] = append(s["enum"].([]any), 7.0)
		},
		"no-example-value-and-externalValue": func(doc map[string]any) {
			mt := lintObj(op(doc, "/v1/switches", "post"), "requestBody", "content", "application/json")
			mt["examples"] = map[string]any{"both": map[string]any{"value": mt["example"], "externalValue": "https://grid.test/switch.json"}}
			delete(mt, "example")
		},
		"no-identical-paths": func(doc map[string]any) { addPath(doc, "/v1/tokens/{id}") },
		"no-invalid-media-type-examples": func(doc map[string]any) {
			lintObj(op(doc, "/v1/switches", "post"), "requestBody", "content", "application/json")["example"] = map[string]any{"from": "a", "to": "b", "colour": "red"}
		},
		"no-invalid-parameter-examples": func(doc map[string]any) {
			op(doc, "/v1/jobs", "get")["parameters"].([]any)[0].(map[string]any)["example"] = []any{"lost"}
		},
		"no-invalid-schema-examples": func(doc map[string]any) {
			lintObj(doc, "components", "schemas", "Job", "properties", "id")["example"] = 7.0
		},
		"no-mixed-number-range-constraints": func(doc map[string]any) {
			lintObj(doc, "components", "schemas")["Odd"] = map[string]any{"type": "number", "minimum": 0.0, "exclusiveMinimum": 0.0}
		},
		"no-path-trailing-slash": func(doc map[string]any) { addPath(doc, "/v1/pools/") },
		"no-required-schema-properties-undefined": func(doc map[string]any) {
			s := lintObj(doc, "components", "schemas", "APIError")
			s["required"] = append(s["required"].([]any), "nope")
		},
		"no-schema-type-mismatch": func(doc map[string]any) {
			lintObj(doc, "components", "schemas")["Odd"] = map[string]any{"type": "object", "items": map[string]any{"type": "string"}}
		},
		"no-server-example.com":    func(doc map[string]any) { doc["servers"] = []any{map[string]any{"url": "https://api.example.com/v1"}} },
		"no-server-trailing-slash": func(doc map[string]any) { doc["servers"] = []any{map[string]any{"url": "https://grid.test/"}} },
		"no-server-variables-empty-enum": func(doc map[string]any) {
			doc["servers"] = []any{map[string]any{"url": "https://{host}", "variables": map[string]any{"host": map[string]any{"default": "a", "enum": []any{}}}}}
		},
		"no-undefined-server-variable": func(doc map[string]any) { doc["servers"] = []any{map[string]any{"url": "https://{host}:8080"}} },
		"no-unsafe-markdown": func(doc map[string]any) {
			op(doc, "/v1/pools", "get")["description"] = `See [the pools](javascript:alert(1)).`
		},
		"no-unused-components": func(doc map[string]any) {
			lintObj(doc, "components", "schemas")["Unused"] = map[string]any{"type": "string"}
		},
		"nullable-type-sibling": func(doc map[string]any) {
			doc["openapi"] = "3.0.3"
			lintObj(doc, "components", "schemas", "Job", "properties", "id")["nullable"] = true
			delete(lintObj(doc, "components", "schemas", "Job", "properties", "id"), "type")
		},
		"operation-2xx-response": func(doc map[string]any) { delete(lintObj(op(doc, "/healthz", "get"), "responses"), "200") },
		"operation-4xx-response": func(doc map[string]any) {
			rs := lintObj(op(doc, "/v1/pools", "get"), "responses")
			for code := range rs {
				if code[0] == '4' {
					delete(rs, code)
				}
			}
		},
		"operation-operationId": func(doc map[string]any) { delete(op(doc, "/v1/pools", "get"), "operationId") },
		"operation-operationId-unique": func(doc map[string]any) {
			op(doc, "/v1/pools", "get")["operationId"] = op(doc, "/v1/vms", "get")["operationId"]
		},
		"operation-operationId-url-safe": func(doc map[string]any) {
			op(doc, "/v1/pools", "get")["operationId"] = "list pools"
		},
		"operation-parameters-unique": func(doc map[string]any) {
			o := op(doc, "/v1/jobs", "get")
			o["parameters"] = append(o["parameters"].([]any), o["parameters"].([]any)[0])
		},
		"operation-summary":           func(doc map[string]any) { op(doc, "/v1/pools", "get")["summary"] = "" },
		"path-declaration-must-exist": func(doc map[string]any) { addPath(doc, "/v1/pools/{}") },
		"path-not-include-query":      func(doc map[string]any) { addPath(doc, "/v1/pools?active=true") },
		"path-parameters-defined": func(doc map[string]any) {
			op(doc, "/v1/jobs/{id}", "get")["parameters"].([]any)[0] = map[string]any{"name": "job", "in": "path", "required": true, "schema": map[string]any{"type": "string"}}
		},
		"security-defined": func(doc map[string]any) {
			op(doc, "/v1/pools", "get")["security"] = []any{map[string]any{"apikey": []any{}}}
		},
		"security-scopes-defined": func(doc map[string]any) {
			lintObj(doc, "components", "securitySchemes")["oauth"] = map[string]any{"type": "oauth2", "flows": map[string]any{
				"clientCredentials": map[string]any{"tokenUrl": "https://grid.test/token", "scopes": map[string]any{"read": "Read."}}}}
			op(doc, "/v1/pools", "get")["security"] = []any{map[string]any{"oauth": []any{"write"}}}
		},
		"spec-components-invalid-map-name": func(doc map[string]any) {
			s := lintObj(doc, "components", "schemas")
			s["Job List"] = s["JobList"]
		},
		"spec-ref-siblings": func(doc map[string]any) {
			lintObj(op(doc, "/v1/pools", "get"), "responses", "401")["headers"] = map[string]any{}
		},
		"tag-description":       func(doc map[string]any) { delete(doc["tags"].([]any)[0].(map[string]any), "description") },
		"operation-tag-defined": func(doc map[string]any) { op(doc, "/v1/pools", "get")["tags"] = []any{"nope"} },
	}
	for _, r := range redoclyRecommended {
		mutate, ok := mutations[r.name]
		if !ok {
			t.Errorf("rule %s: no problem made up for it", r.name)
			continue
		}
		var doc map[string]any
		if err := json.Unmarshal(OpenAPI, &doc); err != nil {
			t.Fatal(err)
		}
		mutate(doc)
		b, err := json.Marshal(doc)
		if err != nil {
			t.Fatal(err)
		}
		ps := r.check(newLintDoc(t, b))
		if len(ps) == 0 {
			t.Errorf("rule %s finds nothing in a document made to break it", r.name)
			continue
		}
		t.Logf("%s: %s: %s", r.name, ps[0].where, ps[0].msg)
	}
}

// An example's properties that its schema does not define are found, in
// nested objects and arrays too, unless the schema allows others.
func TestOpenAPIRedoclyExtraProperties(t *testing.T) {
	var s openapi3.Schema
	if err := json.Unmarshal([]byte(`{"type":"object","properties":{
		"a":{"type":"object","properties":{"b":{"type":"integer"}}},
		"l":{"type":"array","items":{"allOf":[{"properties":{"x":{}}},{"properties":{"y":{}}}]}},
		"m":{"type":"object","additionalProperties":{"type":"integer"}}}}`), &s); err != nil {
		t.Fatal(err)
	}
	ex := map[string]any{"a": map[string]any{"b": 1.0, "c": 2.0}, "d": 3.0,
		"l": []any{map[string]any{"x": 1.0, "y": 2.0}, map[string]any{"z": 3.0}}, "m": map[string]any{"any": 4.0}}
	got := lintExtraProperties(ex, &s, "", map[*openapi3.Schema]bool{})
	if want := []string{"/a/c", "/d", "/l/1/z"}; !slices.Equal(got, want) {
		t.Errorf("extra properties %q, want %q", got, want)
	}
}

// lintDoc is a document as the rules read it: its JSON, every node of it
// that OpenAPI gives a type (the nodes Redocly visits), its references,
// and kin-openapi's model of it.
type lintDoc struct {
	raw     map[string]any
	version string // "3.0" or "3.1"
	nodes   []*lintNode
	refs    []lintRef
	kin     *openapi3.T // nil when kin-openapi cannot load the document
	kinErr  error       // why it cannot, or why it does not validate
}

// lintNode is one node of the document: its type (Operation, Schema, ...),
// where it is, its key in the object that holds it (a path, a component's
// name, a status code), and its parent.
type lintNode struct {
	kind   string
	ptr    string
	key    string
	v      map[string]any
	parent *lintNode
}

// lintRef is a reference object ("$ref") where a node of kind is expected.
type lintRef struct {
	kind, ptr, ref string
	v              map[string]any
}

func newLintDoc(t *testing.T, data []byte) *lintDoc {
	t.Helper()
	d := &lintDoc{}
	if err := json.Unmarshal(data, &d.raw); err != nil {
		t.Fatalf("the document is not JSON: %v", err)
	}
	d.version = "3.1"
	if v, _ := d.raw["openapi"].(string); strings.HasPrefix(v, "3.0") {
		d.version = "3.0"
	}
	d.visit("Root", "#", "", d.raw, nil)

	l := openapi3.NewLoader()
	if d.kin, d.kinErr = l.LoadFromData(data); d.kinErr != nil {
		d.kin = nil
	} else {
		d.kinErr = d.kin.Validate(context.Background(), openapi3.DisableExamplesValidation(), openapi3.EnableMultiError())
	}
	return d
}

// lintPtr is the pointer of a key under ptr.
func lintPtr(ptr string, key any) string {
	s := fmt.Sprint(key)
	return ptr + "/" + strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

// lintMethods are the operations of a path item.
var lintMethods = []string{"get", "put", "post", "delete", "options", "head", "patch", "trace"}

// visit walks the node v of kind at ptr, and what it holds.
func (d *lintDoc) visit(kind, ptr, key string, v any, parent *lintNode) {
	m, ok := v.(map[string]any)
	if !ok {
		return // struct's
	}
	if ref, ok := m["$ref"].(string); ok {
		d.refs = append(d.refs, lintRef{kind: kind, ptr: ptr, ref: ref, v: m})
		if kind != "Schema" {
			return
		}
		// An OpenAPI 3.1 schema's siblings of its $ref apply too.
	}
	n := &lintNode{kind: kind, ptr: ptr, key: key, v: m, parent: parent}
	d.nodes = append(d.nodes, n)
	each := func(field, kind string) { // a map of nodes
		if mm, ok := m[field].(map[string]any); ok {
			for _, k := range slices.Sorted(maps.Keys(mm)) {
				d.visit(kind, lintPtr(lintPtr(ptr, field), k), k, mm[k], n)
			}
		}
	}
	list := func(field, kind string) { // a list of nodes
		if l, ok := m[field].([]any); ok {
			for i, e := range l {
				d.visit(kind, lintPtr(lintPtr(ptr, field), i), strconv.Itoa(i), e, n)
			}
		}
	}
	one := func(field, kind string) {
		if e, ok := m[field]; ok {
			d.visit(kind, lintPtr(ptr, field), field, e, n)
		}
	}
	switch kind {
	case "Root":
		one("info", "Info")
		list("servers", "Server")
		each("paths", "PathItem")
		one("components", "Components")
		list("security", "SecurityRequirement")
		list("tags", "Tag")
		one("externalDocs", "ExternalDocs")
	case "Info":
		one("license", "License")
		one("contact", "Contact")
	case "Server":
		each("variables", "ServerVariable")
	case "Components":
		each("schemas", "Schema")
		each("responses", "Response")
		each("parameters", "Parameter")
		each("examples", "Example")
		each("requestBodies", "RequestBody")
		each("headers", "Header")
		each("securitySchemes", "SecurityScheme")
		each("links", "Link")
		each("callbacks", "Callback")
		each("pathItems", "PathItem")
	case "PathItem":
		list("servers", "Server")
		list("parameters", "Parameter")
		for _, meth := range lintMethods {
			one(meth, "Operation")
		}
	case "Operation":
		list("parameters", "Parameter")
		one("requestBody", "RequestBody")
		each("responses", "Response")
		each("callbacks", "Callback")
		list("security", "SecurityRequirement")
		list("servers", "Server")
		one("externalDocs", "ExternalDocs")
	case "Callback":
		for _, k := range slices.Sorted(maps.Keys(m)) {
			if !strings.HasPrefix(k, "x-") {
				d.visit("PathItem", lintPtr(ptr, k), k, m[k], n)
			}
		}
	case "Parameter", "Header":
		one("schema", "Schema")
		each("content", "MediaType")
		each("examples", "Example")
	case "RequestBody":
		each("content", "MediaType")
	case "Response":
		each("headers", "Header")
		each("content", "MediaType")
		each("links", "Link")
	case "MediaType":
		one("schema", "Schema")
		each("examples", "Example")
		each("encoding", "Encoding")
	case "Encoding":
		each("headers", "Header")
	case "Tag":
		one("externalDocs", "ExternalDocs")
	case "Schema":
		for _, f := range []string{"items", "not", "additionalProperties", "contains", "propertyNames", "if", "then", "else",
			"unevaluatedItems", "unevaluatedProperties", "contentSchema"} {
			one(f, "Schema")
		}
		for _, f := range []string{"allOf", "anyOf", "oneOf", "prefixItems"} {
			list(f, "Schema")
		}
		for _, f := range []string{"properties", "patternProperties", "dependentSchemas", "$defs"} {
			each(f, "Schema")
		}
		one("externalDocs", "ExternalDocs")
	}
}

// of lists the nodes of a kind.
func (d *lintDoc) of(kind string) []*lintNode {
	var out []*lintNode
	for _, n := range d.nodes {
		if n.kind == kind {
			out = append(out, n)
		}
	}
	return out
}

// resolve follows a local reference to what it points at.
func (d *lintDoc) resolve(ref string) (any, bool) {
	if ref == "#" {
		return d.raw, true
	}
	rest, ok := strings.CutPrefix(ref, "#/")
	if !ok {
		return nil, false
	}
	var cur any = d.raw
	for _, tok := range strings.Split(rest, "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		switch c := cur.(type) {
		case map[string]any:
			if cur, ok = c[tok]; !ok {
				return nil, false
			}
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(c) {
				return nil, false
			}
			cur = c[i]
		default:
			return nil, false
		}
	}
	return cur, true
}

// deref is v, or what its chain of references points at (nil if it does
// not resolve).
func (d *lintDoc) deref(v any) map[string]any {
	for range 32 {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		ref, ok := m["$ref"].(string)
		if !ok {
			return m
		}
		if v, ok = d.resolve(ref); !ok {
			return nil
		}
	}
	return nil
}

// lintEmpty says whether a field is missing or empty (JavaScript's falsy
// values: "", 0, false, null).
func lintEmpty(m map[string]any, field string) bool {
	switch v := m[field].(type) {
	case nil:
		return true
	case string:
		return v == ""
	case float64:
		return v == 0 || math.IsNaN(v)
	case bool:
		return !v
	}
	return false
}

func lintStruct(d *lintDoc) []lintProblem {
	if d.kinErr != nil {
		return []lintProblem{{"#", "kin-openapi: " + d.kinErr.Error()}}
	}
	return nil
}

func lintUnresolvedRefs(d *lintDoc) []lintProblem {
	var ps []lintProblem
	for _, r := range d.refs {
		if _, ok := d.resolve(r.ref); !ok {
			ps = append(ps, lintProblem{r.ptr, fmt.Sprintf("$ref %q does not resolve", r.ref)})
		}
	}
	return ps
}

func lintInfoLicense(d *lintDoc) []lintProblem {
	var ps []lintProblem
	for _, n := range d.of("Info") {
		if _, ok := n.v["license"]; !ok {
			ps = append(ps, lintProblem{n.ptr, "Info object should contain `license` field"})
		}
	}
	return ps
}

func lintInfoLicenseStrict(d *lintDoc) []lintProblem {
	var ps []lintProblem
	for _, n := range d.of("License") {
		fields := []string{"url", "identifier"}
		if d.version == "3.0" {
			fields = fields[:1]
		}
		has := false
		for _, f := range fields {
			if _, ok := n.v[f]; ok {
				has = true
				if lintEmpty(n.v, f) {
					ps = append(ps, lintProblem{lintPtr(n.ptr, f), "is empty"})
				}
			}
		}
		if !has {
			ps = append(ps, lintProblem{n.ptr, fmt.Sprintf("License object should contain one of the fields: %s", strings.Join(fields, ", "))})
		}
	}
	return ps
}

// lintPaths lists the paths of the document, sorted.
func (d *lintDoc) lintPaths() []string {
	paths, _ := d.raw["paths"].(map[string]any)
	return slices.Sorted(maps.Keys(paths))
}

func lintAmbiguousPaths(d *lintDoc) []lintProblem {
	isVar := regexp.MustCompile(`^\{.+?\}$`)
	ambiguous := func(a, b string) bool {
		pa, pb := strings.Split(a, "/"), strings.Split(b, "/")
		if len(pa) != len(pb) {
			return false
		}
		av, bv, same := 0, 0, true
		for i := range pa {
			va, vb := isVar.MatchString(pa[i]), isVar.MatchString(pb[i])
			if va || vb {
				if va {
					av++
				}
				if vb {
					bv++
				}
				continue
			}
			if pa[i] != pb[i] {
				same = false
			}
		}
		return same && av == bv
	}
	var ps []lintProblem
	var seen []string
	for _, p := range d.lintPaths() {
		for _, s := range seen {
			if ambiguous(s, p) {
				ps = append(ps, lintProblem{lintPtr("#/paths", p), fmt.Sprintf("paths %s and %s are ambiguous", s, p)})
				break
			}
		}
		seen = append(seen, p)
	}
	return ps
}

// lintJSEqual compares two JSON values as JavaScript's === would, objects
// and arrays by their contents.
func lintJSEqual(a, b any) bool { return reflect.DeepEqual(a, b) }

func lintDuplicatedEnumValues(d *lintDoc) []lintProblem {
	var ps []lintProblem
	for _, n := range d.of("Schema") {
		enum, ok := n.v["enum"].([]any)
		if !ok {
			continue
		}
		for i, v := range enum {
			if slices.ContainsFunc(enum[:i], func(w any) bool { return lintJSEqual(v, w) }) {
				ps = append(ps, lintProblem{lintPtr(lintPtr(n.ptr, "enum"), i), fmt.Sprintf("duplicated enum value %v", v)})
			}
		}
	}
	return ps
}

func lintDuplicatedTagNames(d *lintDoc) []lintProblem {
	var ps []lintProblem
	seen := map[string]bool{}
	for _, n := range d.of("Tag") {
		name, _ := n.v["name"].(string)
		if seen[name] {
			ps = append(ps, lintProblem{n.ptr, fmt.Sprintf("duplicate tag name %q", name)})
		}
		seen[name] = true
	}
	return ps
}

func lintEmptyServers(d *lintDoc) []lintProblem {
	s, ok := d.raw["servers"]
	if !ok {
		return []lintProblem{{"#/openapi", "servers must be present"}}
	}
	if l, ok := s.([]any); !ok || len(l) == 0 {
		return []lintProblem{{"#/servers", "servers must be a non-empty array"}}
	}
	return nil
}

// lintTypeOf is a JSON value's type as Redocly's matchesJsonSchemaType
// reads it.
func lintMatchesType(v any, typ string, nullable bool) bool {
	if nullable && v == nil {
		return true
	}
	switch typ {
	case "array":
		_, ok := v.([]any)
		return ok
	case "object":
		_, ok := v.(map[string]any)
		return ok
	case "null":
		return v == nil
	case "integer":
		f, ok := v.(float64)
		return ok && f == math.Trunc(f) && !math.IsInf(f, 0)
	case "number":
		_, ok := v.(float64)
		return ok
	case "string":
		_, ok := v.(string)
		return ok
	case "boolean":
		_, ok := v.(bool)
		return ok
	}
	return false
}

func lintEnumTypeMismatch(d *lintDoc) []lintProblem {
	var ps []lintProblem
	for _, n := range d.of("Schema") {
		enum, ok := n.v["enum"].([]any)
		if !ok || n.v["type"] == nil {
			continue
		}
		nullable, _ := n.v["nullable"].(bool)
		var types []string
		switch t := n.v["type"].(type) {
		case string:
			types = []string{t}
		case []any:
			for _, e := range t {
				s, _ := e.(string)
				types = append(types, s)
			}
		}
		for i, v := range enum {
			if !slices.ContainsFunc(types, func(typ string) bool { return lintMatchesType(v, typ, nullable) }) {
				ps = append(ps, lintProblem{lintPtr(lintPtr(n.ptr, "enum"), i), fmt.Sprintf("enum value %v is not of the type %v", v, n.v["type"])})
			}
		}
	}
	return ps
}

func lintExampleValueAndExternalValue(d *lintDoc) []lintProblem {
	var ps []lintProblem
	for _, n := range d.of("Example") {
		if !lintEmpty(n.v, "value") && !lintEmpty(n.v, "externalValue") {
			ps = append(ps, lintProblem{n.ptr, "an Example object has either value or externalValue"})
		}
	}
	return ps
}

func lintIdenticalPaths(d *lintDoc) []lintProblem {
	vars := regexp.MustCompile(`\{.+?\}`)
	var ps []lintProblem
	seen := map[string]string{}
	for _, p := range d.lintPaths() {
		id := vars.ReplaceAllString(p, "{VARIABLE}")
		if s, ok := seen[id]; ok {
			ps = append(ps, lintProblem{lintPtr("#/paths", p), fmt.Sprintf("%s and %s differ only by their parameters' names", s, p)})
			continue
		}
		seen[id] = p
	}
	return ps
}

func lintMixedNumberRange(d *lintDoc) []lintProblem {
	var ps []lintProblem
	for _, n := range d.of("Schema") {
		for _, b := range [][2]string{{"maximum", "exclusiveMaximum"}, {"minimum", "exclusiveMinimum"}} {
			_, inclusive := n.v[b[0]].(float64)
			_, exclusive := n.v[b[1]].(float64)
			if inclusive && exclusive {
				ps = append(ps, lintProblem{lintPtr(n.ptr, b[1]), fmt.Sprintf("both %s and %s", b[0], b[1])})
			}
		}
	}
	return ps
}

func lintPathTrailingSlash(d *lintDoc) []lintProblem {
	var ps []lintProblem
	for _, n := range d.of("PathItem") {
		if strings.HasSuffix(n.key, "/") && n.key != "/" && n.parent != nil && n.parent.kind != "Components" {
			ps = append(ps, lintProblem{n.ptr, "a trailing slash"})
		}
	}
	return ps
}

// lintHasProperty says whether a schema defines a property: itself, one of
// its allOf, or every one of its anyOf or oneOf.
func (d *lintDoc) lintHasProperty(s any, name string, depth int) bool {
	m, ok := s.(map[string]any)
	if !ok || depth > 32 {
		return false
	}
	if props, ok := m["properties"].(map[string]any); ok {
		if _, ok := props[name]; ok {
			return true
		}
	}
	if _, ok := m["$ref"].(string); ok {
		if t := d.deref(m); t != nil && d.lintHasProperty(t, name, depth+1) {
			return true
		}
	}
	if l, ok := m["allOf"].([]any); ok && slices.ContainsFunc(l, func(b any) bool { return d.lintHasProperty(b, name, depth+1) }) {
		return true
	}
	for _, f := range []string{"anyOf", "oneOf"} {
		if l, ok := m[f].([]any); ok && len(l) > 0 && !slices.ContainsFunc(l, func(b any) bool { return !d.lintHasProperty(b, name, depth+1) }) {
			return true
		}
	}
	return false
}

func lintRequiredPropertiesUndefined(d *lintDoc) []lintProblem {
	var ps []lintProblem
	for _, n := range d.of("Schema") {
		req, ok := n.v["required"].([]any)
		if !ok {
			continue
		}
		// The schema that composes this one (allOf, anyOf, oneOf), if any.
		var root *lintNode
		for c := n; c.parent != nil && c.parent.kind == "Schema"; c = c.parent {
			parts := strings.Split(strings.TrimPrefix(c.ptr, c.parent.ptr+"/"), "/")
			if len(parts) != 2 || (parts[0] != "allOf" && parts[0] != "anyOf" && parts[0] != "oneOf") {
				break
			}
			root = c.parent
		}
		for i, r := range req {
			name, _ := r.(string)
			if d.lintHasProperty(n.v, name, 0) || root != nil && d.lintHasProperty(root.v, name, 0) {
				continue
			}
			ps = append(ps, lintProblem{lintPtr(lintPtr(n.ptr, "required"), i), fmt.Sprintf("required property %q is not defined", name)})
		}
	}
	return ps
}

func lintSchemaTypeMismatch(d *lintDoc) []lintProblem {
	var ps []lintProblem
	for _, n := range d.of("Schema") {
		if _, ok := n.v["items"]; ok && n.v["type"] == "object" {
			ps = append(ps, lintProblem{lintPtr(n.ptr, "items"), "an object schema with items"})
		}
		if _, ok := n.v["properties"]; ok && n.v["type"] == "array" {
			ps = append(ps, lintProblem{lintPtr(n.ptr, "properties"), "an array schema with properties"})
		}
	}
	return ps
}

func lintServerExample(d *lintDoc) []lintProblem {
	re := regexp.MustCompile(`^(.*[/.])?(example\.com|localhost)([/:?].*|$)`)
	var ps []lintProblem
	for _, n := range d.of("Server") {
		if u, _ := n.v["url"].(string); u != "" && re.MatchString(u) {
			ps = append(ps, lintProblem{lintPtr(n.ptr, "url"), fmt.Sprintf("%s points to example.com or localhost", u)})
		}
	}
	return ps
}

func lintServerTrailingSlash(d *lintDoc) []lintProblem {
	var ps []lintProblem
	for _, n := range d.of("Server") {
		if u, _ := n.v["url"].(string); strings.HasSuffix(u, "/") && u != "/" {
			ps = append(ps, lintProblem{lintPtr(n.ptr, "url"), fmt.Sprintf("%s has a trailing slash", u)})
		}
	}
	return ps
}

func lintServerVariablesEmptyEnum(d *lintDoc) []lintProblem {
	var ps []lintProblem
	for _, n := range d.of("ServerVariable") {
		if n.parent.parent == nil || n.parent.parent.kind != "Root" {
			continue // the rule reads the root's servers
		}
		enum, ok := n.v["enum"].([]any)
		if !ok {
			continue
		}
		if len(enum) == 0 {
			ps = append(ps, lintProblem{n.ptr, "enum is empty"})
		}
		if !lintEmpty(n.v, "default") && !slices.ContainsFunc(enum, func(e any) bool { return lintJSEqual(e, n.v["default"]) }) {
			ps = append(ps, lintProblem{n.ptr, fmt.Sprintf("enum does not hold the default %v", n.v["default"])})
		}
	}
	return ps
}

func lintUndefinedServerVariable(d *lintDoc) []lintProblem {
	re := regexp.MustCompile(`\{[^}]+\}`)
	var ps []lintProblem
	for _, n := range d.of("Server") {
		u, _ := n.v["url"].(string)
		if u == "" {
			continue
		}
		vars, _ := n.v["variables"].(map[string]any)
		inURL := map[string]bool{}
		for _, m := range re.FindAllString(u, -1) {
			name := m[1 : len(m)-1]
			inURL[name] = true
			if _, ok := vars[name]; !ok {
				ps = append(ps, lintProblem{lintPtr(n.ptr, "url"), fmt.Sprintf("variable %s is not defined in variables", name)})
			}
		}
		for _, name := range slices.Sorted(maps.Keys(vars)) {
			if !inURL[name] {
				ps = append(ps, lintProblem{lintPtr(lintPtr(n.ptr, "variables"), name), fmt.Sprintf("variable %s is not in the url", name)})
			}
		}
	}
	return ps
}

var lintUnsafe = []struct {
	re   *regexp.Regexp
	what string
}{
	{regexp.MustCompile(`(?i)<script\b`), "a <script> tag"},
	{regexp.MustCompile(`(?i)<[a-z][^>]*\bon[a-z]+\s*=`), "an HTML event handler attribute"},
	{regexp.MustCompile(`(?i)(?:\]\(\s*|\b(?:href|src)\s*=\s*["']?\s*)javascript:`), "a javascript: URL"},
}

func lintUnsafeMarkdown(d *lintDoc) []lintProblem {
	var ps []lintProblem
	for _, n := range d.nodes {
		desc, ok := n.v["description"].(string)
		if !ok {
			continue
		}
		for _, u := range lintUnsafe {
			if u.re.MatchString(desc) {
				ps = append(ps, lintProblem{lintPtr(n.ptr, "description"), "the Markdown holds " + u.what})
			}
		}
	}
	for _, r := range d.refs { // a reference's own description (3.1)
		if desc, ok := r.v["description"].(string); ok {
			for _, u := range lintUnsafe {
				if u.re.MatchString(desc) {
					ps = append(ps, lintProblem{lintPtr(r.ptr, "description"), "the Markdown holds " + u.what})
				}
			}
		}
	}
	return ps
}

func lintUnusedComponents(d *lintDoc) []lintProblem {
	used := map[string]bool{}
	for _, r := range d.refs {
		used[r.ref] = true
	}
	var ps []lintProblem
	comps, _ := d.raw["components"].(map[string]any)
	for _, kind := range []string{"schemas", "parameters", "responses", "examples", "requestBodies", "headers"} {
		m, _ := comps[kind].(map[string]any)
		for _, name := range slices.Sorted(maps.Keys(m)) {
			if p := lintPtr(lintPtr("#/components", kind), name); !used[p] {
				ps = append(ps, lintProblem{p, fmt.Sprintf("component %s is never used", name)})
			}
		}
	}
	schemes := map[string]bool{}
	for _, n := range d.of("SecurityRequirement") {
		for k := range n.v {
			schemes[k] = true
		}
	}
	m, _ := comps["securitySchemes"].(map[string]any)
	for _, name := range slices.Sorted(maps.Keys(m)) {
		if !schemes[name] {
			ps = append(ps, lintProblem{lintPtr("#/components/securitySchemes", name), fmt.Sprintf("security scheme %s is never used", name)})
		}
	}
	return ps
}

// nullable-type-sibling is on for OpenAPI 3.0 (where nullable is a
// keyword) only.
func lintNullableTypeSibling(d *lintDoc) []lintProblem {
	if d.version != "3.0" {
		return nil
	}
	var ps []lintProblem
	for _, n := range d.of("Schema") {
		if _, ok := n.v["nullable"]; ok {
			if _, ok := n.v["type"]; !ok {
				ps = append(ps, lintProblem{lintPtr(n.ptr, "nullable"), "nullable without a type"})
			}
		}
	}
	return ps
}

func lintResponseCode(d *lintDoc, class byte) []lintProblem {
	re := regexp.MustCompile(`^` + string(class) + `[0-9Xx]{2}$`)
	var ps []lintProblem
	for _, n := range d.of("Operation") {
		if !strings.HasPrefix(n.ptr, "#/paths/") {
			continue
		}
		rs, _ := n.v["responses"].(map[string]any)
		if !slices.ContainsFunc(slices.Collect(maps.Keys(rs)), func(code string) bool { return re.MatchString(code) || class == '2' && code == "default" }) {
			ps = append(ps, lintProblem{lintPtr(n.ptr, "responses"), fmt.Sprintf("no %cXX response", class)})
		}
	}
	return ps
}

func lintOperationID(d *lintDoc) []lintProblem {
	var ps []lintProblem
	for _, n := range d.of("Operation") {
		if lintEmpty(n.v, "operationId") {
			ps = append(ps, lintProblem{n.ptr, "no operationId"})
		}
	}
	return ps
}

func lintOperationIDUnique(d *lintDoc) []lintProblem {
	var ps []lintProblem
	seen := map[string]string{}
	for _, n := range d.of("Operation") {
		id, _ := n.v["operationId"].(string)
		if id == "" {
			continue
		}
		if s, ok := seen[id]; ok {
			ps = append(ps, lintProblem{lintPtr(n.ptr, "operationId"), fmt.Sprintf("operationId %s is also %s's", id, s)})
		}
		seen[id] = n.ptr
	}
	return ps
}

func lintOperationIDURLSafe(d *lintDoc) []lintProblem {
	re := regexp.MustCompile(`^[A-Za-z0-9\-._~:/?#\[\]@!$&'()*+,;=]*$`)
	var ps []lintProblem
	for _, n := range d.of("Operation") {
		if id, _ := n.v["operationId"].(string); id != "" && !re.MatchString(id) {
			ps = append(ps, lintProblem{lintPtr(n.ptr, "operationId"), fmt.Sprintf("operationId %q has characters not valid in a URL", id)})
		}
	}
	return ps
}

// lintParams lists the parameters of a path item or an operation, their
// references followed.
func (d *lintDoc) lintParams(n *lintNode) []map[string]any {
	l, _ := n.v["parameters"].([]any)
	var out []map[string]any
	for _, p := range l {
		if m := d.deref(p); m != nil {
			out = append(out, m)
		}
	}
	return out
}

func lintParametersUnique(d *lintDoc) []lintProblem {
	var ps []lintProblem
	for _, n := range slices.Concat(d.of("PathItem"), d.of("Operation")) {
		seen := map[string]bool{}
		for i, p := range d.lintParams(n) {
			id := fmt.Sprintf("%v %v", p["in"], p["name"])
			if seen[id] {
				ps = append(ps, lintProblem{lintPtr(lintPtr(n.ptr, "parameters"), i), fmt.Sprintf("parameter %v in %v twice", p["name"], p["in"])})
			}
			seen[id] = true
		}
	}
	return ps
}

func lintOperationSummary(d *lintDoc) []lintProblem {
	var ps []lintProblem
	for _, n := range d.of("Operation") {
		if lintEmpty(n.v, "summary") {
			ps = append(ps, lintProblem{n.ptr, "no summary"})
		}
	}
	return ps
}

func lintPathDeclaration(d *lintDoc) []lintProblem {
	var ps []lintProblem
	for _, n := range d.of("PathItem") {
		if strings.Contains(n.key, "{}") {
			ps = append(ps, lintProblem{n.ptr, "an empty path parameter {}"})
		}
	}
	return ps
}

func lintPathQuery(d *lintDoc) []lintProblem {
	var ps []lintProblem
	for _, p := range d.lintPaths() {
		if strings.Contains(p, "?") {
			ps = append(ps, lintProblem{lintPtr("#/paths", p), "a query in the path"})
		}
	}
	return ps
}

func lintPathParametersDefined(d *lintDoc) []lintProblem {
	tmpl := regexp.MustCompile(`\{([a-zA-Z0-9_.-]+)\}+`)
	var ps []lintProblem
	for _, item := range d.of("PathItem") {
		if item.parent == nil || item.parent.kind == "Components" {
			continue
		}
		inPath := map[string]bool{}
		for _, m := range tmpl.FindAllStringSubmatch(item.key, -1) {
			inPath[m[1]] = true
		}
		pathLevel := map[string]bool{}
		for i, p := range d.lintParams(item) {
			if name, _ := p["name"].(string); p["in"] == "path" && name != "" {
				pathLevel[name] = true
				if !inPath[name] {
					ps = append(ps, lintProblem{lintPtr(lintPtr(item.ptr, "parameters"), i), fmt.Sprintf("path parameter %s is not in the path %s", name, item.key)})
				}
			}
		}
		for _, op := range d.of("Operation") {
			if op.parent != item {
				continue
			}
			defined := maps.Clone(pathLevel)
			for i, p := range d.lintParams(op) {
				if name, _ := p["name"].(string); p["in"] == "path" && name != "" {
					defined[name] = true
					if !inPath[name] {
						ps = append(ps, lintProblem{lintPtr(lintPtr(op.ptr, "parameters"), i), fmt.Sprintf("path parameter %s is not in the path %s", name, item.key)})
					}
				}
			}
			for _, name := range slices.Sorted(maps.Keys(inPath)) {
				if !defined[name] {
					ps = append(ps, lintProblem{lintPtr(op.ptr, "parameters"), fmt.Sprintf("the operation does not define the path parameter {%s}", name)})
				}
			}
		}
	}
	return ps
}

func lintSecurityDefined(d *lintDoc) []lintProblem {
	comps, _ := d.raw["components"].(map[string]any)
	schemes, _ := comps["securitySchemes"].(map[string]any)
	var ps []lintProblem
	for _, n := range d.of("SecurityRequirement") {
		for _, name := range slices.Sorted(maps.Keys(n.v)) {
			if _, ok := schemes[name]; !ok {
				ps = append(ps, lintProblem{lintPtr(n.ptr, name), fmt.Sprintf("no security scheme %s", name)})
			}
		}
	}
	if _, ok := d.raw["security"]; !ok {
		for _, op := range d.of("Operation") {
			if _, ok := op.v["security"]; !ok {
				ps = append(ps, lintProblem{op.ptr, "no security, here or at the root"})
			}
		}
	}
	return ps
}

func lintSecurityScopesDefined(d *lintDoc) []lintProblem {
	comps, _ := d.raw["components"].(map[string]any)
	schemes, _ := comps["securitySchemes"].(map[string]any)
	var ps []lintProblem
	for _, n := range d.of("SecurityRequirement") {
		for _, name := range slices.Sorted(maps.Keys(n.v)) {
			s := d.deref(schemes[name])
			if s == nil || s["type"] != "oauth2" {
				continue
			}
			defined := map[string]bool{}
			flows := d.deref(s["flows"])
			for _, f := range flows {
				scopes, _ := d.deref(f)["scopes"].(map[string]any)
				for sc := range scopes {
					defined[sc] = true
				}
			}
			used, _ := n.v[name].([]any)
			for i, sc := range used {
				if s, _ := sc.(string); !defined[s] {
					ps = append(ps, lintProblem{lintPtr(lintPtr(n.ptr, name), i), fmt.Sprintf("scope %v is not defined in the scheme %s", sc, name)})
				}
			}
		}
	}
	return ps
}

func lintComponentNames(d *lintDoc) []lintProblem {
	re := regexp.MustCompile(`^[a-zA-Z0-9.\-_]+$`)
	comps, _ := d.raw["components"].(map[string]any)
	var ps []lintProblem
	for _, kind := range []string{"schemas", "parameters", "responses", "examples", "requestBodies", "headers", "securitySchemes", "links", "callbacks"} {
		m, _ := comps[kind].(map[string]any)
		for _, name := range slices.Sorted(maps.Keys(m)) {
			if !re.MatchString(name) {
				ps = append(ps, lintProblem{lintPtr(lintPtr("#/components", kind), name), fmt.Sprintf("the name %q does not match %s", name, re)})
			}
		}
	}
	return ps
}

func lintRefSiblings(d *lintDoc) []lintProblem {
	var ps []lintProblem
	for _, r := range d.refs {
		if r.kind == "PathItem" || r.kind == "Schema" && d.version != "3.0" {
			continue
		}
		for _, k := range slices.Sorted(maps.Keys(r.v)) {
			if k == "$ref" || d.version != "3.0" && (k == "summary" || k == "description") {
				continue
			}
			ps = append(ps, lintProblem{lintPtr(r.ptr, k), fmt.Sprintf("%s beside $ref", k)})
		}
	}
	return ps
}

func lintTagDescription(d *lintDoc) []lintProblem {
	var ps []lintProblem
	for _, n := range d.of("Tag") {
		if lintEmpty(n.v, "description") {
			ps = append(ps, lintProblem{n.ptr, fmt.Sprintf("tag %v has no description", n.v["name"])})
		}
	}
	return ps
}

func lintOperationTagDefined(d *lintDoc) []lintProblem {
	defined := map[string]bool{}
	for _, n := range d.of("Tag") {
		if name, ok := n.v["name"].(string); ok {
			defined[name] = true
		}
	}
	var ps []lintProblem
	for _, n := range d.of("Operation") {
		tags, ok := n.v["tags"].([]any)
		if !ok {
			ps = append(ps, lintProblem{n.ptr, "no tags"})
			continue
		}
		for i, tag := range tags {
			if s, _ := tag.(string); !defined[s] {
				ps = append(ps, lintProblem{lintPtr(lintPtr(n.ptr, "tags"), i), fmt.Sprintf("tag %v is not one of the document's tags", tag)})
			}
		}
	}
	return ps
}

// The examples' rules validate with kin-openapi's model of the document.

// lintContext is whom an example stands for: a request, a response, or
// neither (a schema's own example).
type lintContext int

const (
	lintNeither lintContext = iota
	lintRequest
	lintResponse
)

// lintValidate validates an example against a schema as Redocly's rules
// do: the schema's constraints, and no property the schema does not
// define (lintExtraProperties).
func (d *lintDoc) lintValidate(where string, example any, s *openapi3.Schema, c lintContext) []lintProblem {
	opts := []openapi3.SchemaValidationOption{openapi3.MultiErrors()}
	if d.version != "3.0" {
		opts = append(opts, openapi3.EnableJSONSchema2020())
	}
	switch c {
	case lintRequest:
		opts = append(opts, openapi3.VisitAsRequest())
	case lintResponse:
		opts = append(opts, openapi3.VisitAsResponse())
	}
	var ps []lintProblem
	if err := s.VisitJSON(example, opts...); err != nil {
		ps = append(ps, lintProblem{where, "the example does not match the schema: " + lintSchemaErr(err)})
	}
	for _, e := range lintExtraProperties(example, s, "", map[*openapi3.Schema]bool{}) {
		ps = append(ps, lintProblem{where, "the example has a property its schema does not define: " + e})
	}
	return ps
}

// lintSchemaErr words kin-openapi's complaints about a value, without the
// schema and the value it prints by default.
func lintSchemaErr(err error) string {
	var me openapi3.MultiError
	if errors.As(err, &me) {
		var out []string
		for _, e := range me {
			out = append(out, lintSchemaErr(e))
		}
		return strings.Join(out, "; ")
	}
	var se *openapi3.SchemaError
	if errors.As(err, &se) {
		return schemaError(se)
	}
	return err.Error()
}

// lintExtraProperties lists the properties of v, an example of s, that s
// does not define (Redocly's allowAdditionalProperties: false), where s
// lists properties and allows no others by additionalProperties,
// patternProperties or unevaluatedProperties.
func lintExtraProperties(v any, s *openapi3.Schema, at string, seen map[*openapi3.Schema]bool) []string {
	if s == nil || seen[s] {
		return nil
	}
	props := map[string]*openapi3.Schema{}
	open := false
	var collect func(s *openapi3.Schema, depth int)
	collect = func(s *openapi3.Schema, depth int) {
		if s == nil || depth > 16 {
			return
		}
		for k, p := range s.Properties {
			if p != nil && props[k] == nil {
				props[k] = p.Value
			}
		}
		if s.AdditionalProperties.Has != nil || s.AdditionalProperties.Schema != nil || len(s.PatternProperties) > 0 ||
			s.UnevaluatedProperties.Has != nil || s.UnevaluatedProperties.Schema != nil {
			open = true
		}
		for _, l := range []openapi3.SchemaRefs{s.AllOf, s.AnyOf, s.OneOf} {
			for _, r := range l {
				if r != nil {
					collect(r.Value, depth+1)
				}
			}
		}
	}
	collect(s, 0)
	var out []string
	switch x := v.(type) {
	case map[string]any:
		for _, k := range slices.Sorted(maps.Keys(x)) {
			p, ok := props[k]
			if !ok {
				if !open && len(props) > 0 {
					out = append(out, at+"/"+k)
				}
				continue
			}
			seen[s] = true
			out = append(out, lintExtraProperties(x[k], p, at+"/"+k, seen)...)
			delete(seen, s)
		}
	case []any:
		if s.Items != nil {
			for i, e := range x {
				out = append(out, lintExtraProperties(e, s.Items.Value, at+"/"+strconv.Itoa(i), seen)...)
			}
		}
	}
	return out
}

// lintMediaTypes calls f with every media type of the document that is not
// a reference (those are met where they are defined), and whom it stands
// for.
func (d *lintDoc) lintMediaTypes(f func(where string, mt *openapi3.MediaType, c lintContext)) {
	content := func(where string, c openapi3.Content, lc lintContext) {
		for _, k := range slices.Sorted(maps.Keys(c)) {
			if c[k] != nil {
				f(lintPtr(lintPtr(where, "content"), k), c[k], lc)
			}
		}
	}
	d.lintParameters(func(where string, p *openapi3.Parameter) { content(where, p.Content, lintRequest) })
	body := func(where string, r *openapi3.RequestBodyRef) {
		if r != nil && r.Ref == "" && r.Value != nil {
			content(where, r.Value.Content, lintRequest)
		}
	}
	resp := func(where string, r *openapi3.ResponseRef) {
		if r != nil && r.Ref == "" && r.Value != nil {
			content(where, r.Value.Content, lintResponse)
		}
	}
	d.lintKinOperations(func(where string, op *openapi3.Operation) {
		body(lintPtr(where, "requestBody"), op.RequestBody)
		if op.Responses != nil {
			m := op.Responses.Map()
			for _, code := range slices.Sorted(maps.Keys(m)) {
				resp(lintPtr(lintPtr(where, "responses"), code), m[code])
			}
		}
	})
	if c := d.kin.Components; c != nil {
		for _, k := range slices.Sorted(maps.Keys(c.RequestBodies)) {
			body(lintPtr("#/components/requestBodies", k), c.RequestBodies[k])
		}
		for _, k := range slices.Sorted(maps.Keys(c.Responses)) {
			resp(lintPtr("#/components/responses", k), c.Responses[k])
		}
	}
}

// lintKinOperations calls f with every operation under paths.
func (d *lintDoc) lintKinOperations(f func(where string, op *openapi3.Operation)) {
	if d.kin.Paths == nil {
		return
	}
	paths := d.kin.Paths.Map()
	for _, p := range slices.Sorted(maps.Keys(paths)) {
		ops := paths[p].Operations()
		for _, m := range slices.Sorted(maps.Keys(ops)) {
			f(lintPtr(lintPtr("#/paths", p), strings.ToLower(m)), ops[m])
		}
	}
}

// lintParameters calls f with every parameter that is not a reference.
func (d *lintDoc) lintParameters(f func(where string, p *openapi3.Parameter)) {
	list := func(where string, l openapi3.Parameters) {
		for i, r := range l {
			if r != nil && r.Ref == "" && r.Value != nil {
				f(lintPtr(lintPtr(where, "parameters"), i), r.Value)
			}
		}
	}
	if d.kin.Paths != nil {
		paths := d.kin.Paths.Map()
		for _, p := range slices.Sorted(maps.Keys(paths)) {
			list(lintPtr("#/paths", p), paths[p].Parameters)
		}
	}
	d.lintKinOperations(func(where string, op *openapi3.Operation) { list(where, op.Parameters) })
	if c := d.kin.Components; c != nil {
		for _, k := range slices.Sorted(maps.Keys(c.Parameters)) {
			if r := c.Parameters[k]; r != nil && r.Ref == "" && r.Value != nil {
				f(lintPtr("#/components/parameters", k), r.Value)
			}
		}
	}
}

// lintExamples validates the example, or each of the examples, of a media
// type or a parameter.
func (d *lintDoc) lintExamples(where string, example any, examples openapi3.Examples, s *openapi3.SchemaRef, c lintContext) []lintProblem {
	if s == nil || s.Value == nil {
		return nil
	}
	if example != nil {
		return d.lintValidate(lintPtr(where, "example"), example, s.Value, c)
	}
	var ps []lintProblem
	for _, k := range slices.Sorted(maps.Keys(examples)) {
		if e := examples[k]; e != nil && e.Value != nil && e.Value.Value != nil {
			ps = append(ps, d.lintValidate(lintPtr(lintPtr(lintPtr(where, "examples"), k), "value"), e.Value.Value, s.Value, c)...)
		}
	}
	return ps
}

func lintMediaTypeExamples(d *lintDoc) []lintProblem {
	if d.kin == nil {
		return nil // struct's
	}
	var ps []lintProblem
	d.lintMediaTypes(func(where string, mt *openapi3.MediaType, c lintContext) {
		ps = append(ps, d.lintExamples(where, mt.Example, mt.Examples, mt.Schema, c)...)
	})
	return ps
}

func lintParameterExamples(d *lintDoc) []lintProblem {
	if d.kin == nil {
		return nil
	}
	var ps []lintProblem
	d.lintParameters(func(where string, p *openapi3.Parameter) {
		if p.Example != nil {
			ps = append(ps, d.lintExamples(where, p.Example, nil, p.Schema, lintRequest)...)
		}
		for _, k := range slices.Sorted(maps.Keys(p.Examples)) {
			if e := p.Examples[k]; e != nil && e.Value != nil && e.Value.Value != nil && p.Schema != nil && p.Schema.Value != nil {
				ps = append(ps, d.lintValidate(lintPtr(lintPtr(lintPtr(where, "examples"), k), "value"), e.Value.Value, p.Schema.Value, lintRequest)...)
			}
		}
	})
	return ps
}

func lintSchemaExamples(d *lintDoc) []lintProblem {
	if d.kin == nil {
		return nil
	}
	var ps []lintProblem
	seen := map[*openapi3.Schema]bool{}
	var walk func(where string, r *openapi3.SchemaRef)
	walk = func(where string, r *openapi3.SchemaRef) {
		if r == nil || r.Ref != "" || r.Value == nil || seen[r.Value] {
			return // a reference: met where it is defined
		}
		s := r.Value
		seen[s] = true
		for i, e := range s.Examples {
			ps = append(ps, d.lintValidate(lintPtr(lintPtr(where, "examples"), i), e, s, lintNeither)...)
		}
		if s.Example != nil {
			ps = append(ps, d.lintValidate(lintPtr(where, "example"), s.Example, s, lintNeither)...)
		}
		for _, k := range slices.Sorted(maps.Keys(s.Properties)) {
			walk(lintPtr(lintPtr(where, "properties"), k), s.Properties[k])
		}
		for f, l := range map[string]openapi3.SchemaRefs{"allOf": s.AllOf, "anyOf": s.AnyOf, "oneOf": s.OneOf, "prefixItems": s.PrefixItems} {
			for i, e := range l {
				walk(lintPtr(lintPtr(where, f), i), e)
			}
		}
		for f, e := range map[string]*openapi3.SchemaRef{"items": s.Items, "not": s.Not, "additionalProperties": s.AdditionalProperties.Schema,
			"contains": s.Contains, "propertyNames": s.PropertyNames, "if": s.If, "then": s.Then, "else": s.Else} {
			walk(lintPtr(where, f), e)
		}
	}
	if c := d.kin.Components; c != nil {
		for _, k := range slices.Sorted(maps.Keys(c.Schemas)) {
			walk(lintPtr("#/components/schemas", k), c.Schemas[k])
		}
	}
	d.lintParameters(func(where string, p *openapi3.Parameter) { walk(lintPtr(where, "schema"), p.Schema) })
	d.lintMediaTypes(func(where string, mt *openapi3.MediaType, _ lintContext) { walk(lintPtr(where, "schema"), mt.Schema) })
	sort.Slice(ps, func(i, j int) bool { return ps[i].where < ps[j].where })
	return ps
}

// lintObj is the object at keys under v (nil if there is none).
func lintObj(v any, keys ...string) map[string]any {
	for _, k := range keys {
		m, _ := v.(map[string]any)
		v = m[k]
	}
	m, _ := v.(map[string]any)
	return m
}

// lintCopy is a deep copy of a JSON value.
func lintCopy[T any](v T) T {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	var out T
	if err := json.Unmarshal(b, &out); err != nil {
		panic(err)
	}
	return out
}
