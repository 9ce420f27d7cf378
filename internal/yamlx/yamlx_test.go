package yamlx

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestYamlxParseErrors(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"empty", "", "f.yaml: empty document"},
		{"comment only", "# nothing\n", "f.yaml: empty document"},
		{"null document", "---\n", "f.yaml: empty document"},
		{"null scalar", "null\n", "f.yaml: empty document"},
		{"two documents", "a: 1\n---\na: 2\n", "f.yaml: line 2: only one document is allowed"},
		{"bad indentation", "a: 1\n b: 2\n", "f.yaml: line 2: mapping values are not allowed in this context"},
		{"unclosed flow", "a: 1\nb: [1, 2\n", "f.yaml: line 2: did not find expected ',' or ']'"},
		{"tab on first line", "\ta: 1\n", "f.yaml: line 1: found character that cannot start any token"},
		{"unclosed flow at the end", "a: [1, 2\n", "f.yaml: line 2: did not find expected ',' or ']'"},
		{"missing key", "a:\n  b: 1\n c: 2\n", "f.yaml: line 3: did not find expected key"},
		{"missing colon", "a: 1\nb\nc: 2\n", "f.yaml: line 2: could not find expected ':'"},
		{"unknown anchor", "a: *x\n", "f.yaml: unknown anchor 'x' referenced"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, _, err := Parse("f.yaml", []byte(tt.in))
			if err == nil || err.Error() != tt.want {
				t.Fatalf("Parse error = %v, want %q", err, tt.want)
			}
			if d != nil {
				t.Errorf("Parse returned a decoder with an error")
			}
			var e *Error
			if !errors.As(err, &e) || e.File != "f.yaml" {
				t.Errorf("error %v is not an *Error for f.yaml", err)
			}
		})
	}
}

func TestYamlxSyntaxErrorWraps(t *testing.T) {
	_, _, err := Parse("f.yaml", []byte("a: [\n"))
	if err == nil || errors.Unwrap(err) == nil {
		t.Fatalf("syntax error %v does not wrap the parser's error", err)
	}
	if e := err.(*Error); e.Line < 1 {
		t.Errorf("syntax error line = %d", e.Line)
	}
}

// field decodes "v: <in>" and returns the field v of the root mapping.
func field(t *testing.T, in string) (*Decoder, Value) {
	t.Helper()
	d, root, err := Parse("f.yaml", []byte("v: "+in+"\n"))
	if err != nil {
		t.Fatal(err)
	}
	m, ok := root.Map("v")
	if !ok {
		t.Fatal(d.Err())
	}
	v, ok := m.Get("v", true)
	if !ok {
		t.Fatal(d.Err())
	}
	return d, v
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func TestYamlxScalars(t *testing.T) {
	type result struct {
		Val any
		OK  bool
		Err string
	}
	float := func(v Value) (any, bool) { return v.Float() }
	integer := func(v Value) (any, bool) { return v.Int() }
	str := func(v Value) (any, bool) { return v.Str() }
	boolean := func(v Value) (any, bool) { return v.Bool() }
	tests := []struct {
		name string
		in   string
		get  func(Value) (any, bool)
		want result
	}{
		{"float int", "3", float, result{3.0, true, ""}},
		{"float decimal", "0.111", float, result{0.111, true, ""}},
		{"float exponent", "2.0e12", float, result{2.0e12, true, ""}},
		{"float negative", "-1.5", float, result{-1.5, true, ""}},
		{"float string", "abc", float, result{0.0, false, "f.yaml: v: must be a number"}},
		{"float quoted number", `"3"`, float, result{0.0, false, "f.yaml: v: must be a number"}},
		{"float bool", "true", float, result{0.0, false, "f.yaml: v: must be a number"}},
		{"float nan", ".nan", float, result{0.0, false, "f.yaml: v: must be a number"}},
		{"float inf", ".inf", float, result{0.0, false, "f.yaml: v: must be a number"}},
		{"float -inf", "-.inf", float, result{0.0, false, "f.yaml: v: must be a number"}},
		{"float null", "null", float, result{0.0, false, "f.yaml: v: must be a number"}},
		{"float list", "[1]", float, result{0.0, false, "f.yaml: v: must be a number"}},
		{"int", "15", integer, result{15, true, ""}},
		{"int negative", "-2", integer, result{-2, true, ""}},
		{"int integral float", "3.0", integer, result{3, true, ""}},
		{"int exponent", "1e3", integer, result{1000, true, ""}},
		{"int fraction", "2.5", integer, result{0, false, "f.yaml: v: must be an integer"}},
		{"int overflow", "99999999999999999999999", integer, result{0, false, "f.yaml: v: must be an integer"}},
		{"int string", "three", integer, result{0, false, "f.yaml: v: must be a number"}},
		{"string", "web", str, result{"web", true, ""}},
		{"string quoted", `"12"`, str, result{"12", true, ""}},
		{"string number", "12", str, result{"", false, "f.yaml: v: must be a string"}},
		{"string map", "{a: 1}", str, result{"", false, "f.yaml: v: must be a string"}},
		{"bool true", "true", boolean, result{true, true, ""}},
		{"bool false", "false", boolean, result{false, true, ""}},
		{"bool yes", "yes", boolean, result{false, false, "f.yaml: v: must be true or false"}},
		{"bool number", "1", boolean, result{false, false, "f.yaml: v: must be true or false"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, v := field(t, tt.in)
			val, ok := tt.get(v)
			got := result{val, ok, errString(d.Err())}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("v: %s (-want +got):\n%s", tt.in, diff)
			}
		})
	}
}

func TestYamlxAlternatives(t *testing.T) {
	// blocking decodes "a number >= 0, a list of numbers or auto", as a
	// caller would.
	blocking := func(v Value) any {
		switch {
		case v.IsNumber():
			x, _ := v.Float()
			return x
		case v.IsSeq():
			xs, _ := v.Floats()
			return xs
		}
		if k, ok := v.Keyword("auto"); ok {
			return k
		}
		v.Errorf(`must be a number, a list of numbers or "auto"`)
		return nil
	}
	tests := []struct {
		in      string
		want    any
		wantErr string
	}{
		{"2", 2.0, ""},
		{"[1, 2.5, 0]", []float64{1, 2.5, 0}, ""},
		{"auto", "auto", ""},
		{`"auto"`, "auto", ""},
		{"paper", nil, `f.yaml: v: must be a number, a list of numbers or "auto"`},
		{"{a: 1}", nil, `f.yaml: v: must be a number, a list of numbers or "auto"`},
		{"[1, x, true]", []float64{1, 0, 0}, "f.yaml: v[1]: must be a number\nf.yaml: v[2]: must be a number"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			d, v := field(t, tt.in)
			got := blocking(v)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("value (-want +got):\n%s", diff)
			}
			if got := errString(d.Err()); got != tt.wantErr {
				t.Errorf("error = %q, want %q", got, tt.wantErr)
			}
		})
	}
}

func TestYamlxMatrix(t *testing.T) {
	tests := []struct {
		in      string
		want    [][]float64
		wantOK  bool
		wantErr string
	}{
		{"[[0, 1], [2.5, 0]]", [][]float64{{0, 1}, {2.5, 0}}, true, ""},
		{"[[0, 1, 2], [0]]", [][]float64{{0, 1, 2}, {0}}, true, ""},
		{"[]", [][]float64{}, true, ""},
		{"[[0, 1, x], [0, 0, 0]]", [][]float64{{0, 1, 0}, {0, 0, 0}}, false, "f.yaml: v[0][2]: must be a number"},
		{"[[0, 1], 3]", [][]float64{{0, 1}, nil}, false, "f.yaml: v[1]: must be a list of numbers"},
		{"3", nil, false, "f.yaml: v: must be a matrix (a list of lists of numbers)"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			d, v := field(t, tt.in)
			got, ok := v.FloatMatrix()
			if diff := cmp.Diff(tt.want, got); diff != "" || ok != tt.wantOK {
				t.Errorf("FloatMatrix ok = %v, want %v; (-want +got):\n%s", ok, tt.wantOK, diff)
			}
			if got := errString(d.Err()); got != tt.wantErr {
				t.Errorf("error = %q, want %q", got, tt.wantErr)
			}
		})
	}
}

type item struct {
	Name string
	Size int
}

// decodeItems is a small strict decoder of the kind yamlx is for.
func decodeItems(data []byte) (int, []item, error) {
	d, root, err := Parse("f.yaml", data)
	if err != nil {
		return 0, nil, err
	}
	top, ok := root.Map("count", "items")
	if !ok {
		return 0, nil, d.Err()
	}
	count, _ := top.Int("count", true)
	var items []item
	vs, _ := top.Seq("items", true)
	for _, v := range vs {
		var it item
		if m, ok := v.Map("name", "size"); ok {
			it.Name, _ = m.Str("name", true)
			if n, ok := m.Int("size", false); ok {
				if n < 0 {
					m.Errorf("size", "must be >= 0")
				}
				it.Size = n
			}
		}
		items = append(items, it)
	}
	return count, items, d.Err()
}

func TestYamlxMap(t *testing.T) {
	tests := []struct {
		name      string
		in        string
		wantCount int
		wantItems []item
		wantErr   string
	}{
		{
			name:      "valid",
			in:        "count: 2\nitems:\n  - {name: a, size: 1}\n  - name: b\n",
			wantCount: 2,
			wantItems: []item{{"a", 1}, {"b", 0}},
		},
		{
			name:      "json",
			in:        "{\n\t\"count\": 2,\n\t\"items\": [{\"name\": \"a\", \"size\": 1}, {\"name\": \"b\"}]\n}\n",
			wantCount: 2,
			wantItems: []item{{"a", 1}, {"b", 0}},
		},
		{
			name:      "anchors and aliases",
			in:        "count: &n 2\nitems:\n  - &a {name: a, size: *n}\n  - *a\n",
			wantCount: 2,
			wantItems: []item{{"a", 2}, {"a", 2}},
		},
		{
			name:    "not a mapping",
			in:      "[1, 2]\n",
			wantErr: "f.yaml: must be a mapping",
		},
		{
			name:      "unknown top-level field",
			in:        "count: 1\nitems: []\ncolour: red\n",
			wantCount: 1,
			wantItems: nil,
			wantErr:   "f.yaml: colour: unknown field",
		},
		{
			name:      "unknown nested field",
			in:        "count: 1\nitems:\n  - {name: a}\n  - {name: b, foo: 1}\n",
			wantCount: 1,
			wantItems: []item{{"a", 0}, {"b", 0}},
			wantErr:   "f.yaml: items[1].foo: unknown field",
		},
		{
			name:      "duplicate field",
			in:        "count: 1\nitems: []\ncount: 2\n",
			wantCount: 1,
			wantErr:   "f.yaml: count: duplicate field",
		},
		{
			name:      "missing required fields",
			in:        "items:\n  - {size: 1}\n",
			wantErr:   "f.yaml: count: missing required field\nf.yaml: items[0].name: missing required field",
			wantItems: []item{{"", 1}},
		},
		{
			name:      "item not a mapping",
			in:        "count: 1\nitems: [3]\n",
			wantCount: 1,
			wantItems: []item{{}},
			wantErr:   "f.yaml: items[0]: must be a mapping",
		},
		{
			name:      "items not a list",
			in:        "count: 1\nitems: 3\n",
			wantCount: 1,
			wantErr:   "f.yaml: items: must be a list",
		},
		{
			name: "all errors in document order",
			in: "items:\n" +
				"  - {name: a, size: -1}\n" +
				"  - {name: 7, size: x, bar: 0}\n" +
				"count: two\n" +
				"extra: 1\n",
			wantItems: []item{{"a", -1}, {"", 0}},
			wantErr: strings.Join([]string{
				"f.yaml: items[0].size: must be >= 0",
				"f.yaml: items[1].name: must be a string",
				"f.yaml: items[1].size: must be a number",
				"f.yaml: items[1].bar: unknown field",
				"f.yaml: count: must be a number",
				"f.yaml: extra: unknown field",
			}, "\n"),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			count, items, err := decodeItems([]byte(tt.in))
			if got := errString(err); got != tt.wantErr {
				t.Errorf("error:\n%s\nwant:\n%s", got, tt.wantErr)
			}
			if count != tt.wantCount {
				t.Errorf("count = %d, want %d", count, tt.wantCount)
			}
			if diff := cmp.Diff(tt.wantItems, items); diff != "" {
				t.Errorf("items (-want +got):\n%s", diff)
			}
		})
	}
}

func TestYamlxErrorsAreJoinedErrors(t *testing.T) {
	_, _, err := decodeItems([]byte("count: x\nitems: 1\n"))
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("%v: no *Error inside", err)
	}
	want := &Error{File: "f.yaml", Path: "count", Line: 1, Col: 1, Msg: "must be a number"}
	if diff := cmp.Diff(want, e); diff != "" {
		t.Errorf("first error (-want +got):\n%s", diff)
	}
	joined, ok := err.(interface{ Unwrap() []error })
	if !ok || len(joined.Unwrap()) != 2 {
		t.Errorf("%v: want two joined errors", err)
	}
}

func TestYamlxFailedAndErrorf(t *testing.T) {
	d, root, err := Parse("f.yaml", []byte("a:\n  b: [1, x]\nc: 1\nc: 2\nz: 0\n"))
	if err != nil {
		t.Fatal(err)
	}
	top, _ := root.Map("a", "c")
	av, _ := top.Get("a", true)
	am, _ := av.Map("b")
	bv, _ := am.Get("b", true)
	bv.Floats()
	for path, want := range map[string]bool{
		"a.b[1]": true, "a.b": true, "a": true, "a.b[1].z": true,
		"a.b[0]": false, "a.bb": false,
		"c": false, "z": false, // duplicate and unknown keys are not bad values
	} {
		if got := d.Failed(path); got != want {
			t.Errorf("Failed(%q) = %v, want %v", path, got, want)
		}
	}
	// A problem at a path that was never visited sorts at its nearest
	// visited ancestor; the same problem twice is reported once.
	d.Errorf("c.deep[3]", "bad")
	d.Errorf("a.b[1]", "must be a number")
	d.Errorf("a", "first")
	want := "f.yaml: a: first\nf.yaml: a.b[1]: must be a number\nf.yaml: c.deep[3]: bad\n" +
		"f.yaml: c: duplicate field\nf.yaml: z: unknown field"
	if got := errString(d.Err()); got != want {
		t.Errorf("error:\n%s\nwant:\n%s", got, want)
	}
}

func TestYamlxGetUnknownKeyPanics(t *testing.T) {
	_, root, err := Parse("f.yaml", []byte("a: 1\n"))
	if err != nil {
		t.Fatal(err)
	}
	m, _ := root.Map("a")
	defer func() {
		if recover() == nil {
			t.Error("Get of an undeclared key did not panic")
		}
	}()
	m.Get("b", false)
}

func TestYamlxPaths(t *testing.T) {
	got := []string{Field("", "pools"), Index("pools", 1), Field(Index("pools", 1), "service_rate"), Index(Index("switch_rates", 0), 2)}
	want := []string{"pools", "pools[1]", "pools[1].service_rate", "switch_rates[0][2]"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("paths (-want +got):\n%s", diff)
	}
}

// Aliases expand a document at most ExpansionRatio times its bytes (and
// MinExpansion for a small one): a few aliases read, a value aliased
// hundreds of times and nested aliases (billion laughs) are refused before
// any value is read.
func TestYamlxAliasExpansion(t *testing.T) {
	_, v, err := Parse("a.yaml", []byte("base: &b {x: 1, y: [1, 2]}\none: *b\ntwo: *b\n"))
	if err != nil {
		t.Fatalf("a few aliases: %v", err)
	}
	if m, ok := v.Map("base", "one", "two"); !ok || !m.Has("two") {
		t.Errorf("a few aliases: the document does not read")
	}
	big := strings.Repeat("x", 256<<10)
	laughs := "a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]\n"
	for c := 'b'; c <= 'i'; c++ {
		p := string(c - 1)
		laughs += fmt.Sprintf("%c: &%c [*%s, *%s, *%s, *%s, *%s, *%s, *%s, *%s, *%s, *%s]\n", c, c, p, p, p, p, p, p, p, p, p, p)
	}
	for _, tc := range []struct{ name, doc, want string }{
		{"one value aliased 400 times", "cmd: [&a " + big + strings.Repeat(", *a", 399) + "]\n", "a.yaml: its aliases expand the document to 1048"},
		{"billion laughs", laughs, "a.yaml: its aliases expand the document to 4"},
	} {
		_, _, err := Parse("a.yaml", []byte(tc.doc))
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) || !strings.Contains(err.Error(), "write the values out, or alias less") {
			t.Errorf("%s: %v, want %q...", tc.name, err, tc.want)
		}
	}
}
