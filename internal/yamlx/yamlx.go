// Package yamlx decodes YAML (and JSON, which is valid YAML) input files
// strictly, with error messages that name the file and the field path.
//
// Parse turns the bytes of a file into a root Value and a Decoder that
// collects the errors of that file. A Value is one node of the document at a
// field path such as "pools[1].service_rate" or "switch_rates[0][2]"; its
// typed accessors (Int, Float, Str, Bool, Seq, Floats, FloatMatrix, Map)
// record an error on the Decoder when the node has the wrong type, and the
// probes (IsNumber, IsString, IsSeq, IsMap, Keyword) let a caller accept
// alternatives for one field ("a number or a keyword", "a number or a list")
// without recording anything. Value.Map takes the set of known field names:
// an unknown or duplicated key is an error.
//
// Decoding goes on after an error, so that Decoder.Err reports the problems
// of a file at once, one per line in document order, each of the form
//
//	FILE: FIELD.PATH: problem
//
// up to MaxProblems of them, then a line with the count of the others
// ("FILE: and 12 more problems"): a file of a million bad values costs
// linear time and its error stays readable.
//
// A typical decoder:
//
//	d, root, err := yamlx.Parse("model.yaml", data)
//	if err != nil {
//		return err // syntax error or empty document
//	}
//	top, ok := root.Map("servers", "pools")
//	if !ok {
//		return d.Err()
//	}
//	if n, ok := top.Int("servers", true); ok && n < 1 {
//		top.Errorf("servers", "must be >= 1")
//	}
//	…
//	return d.Err()
//
// The design is described in docs/reference/configuration.md of
// the repository, "Rules every input file follows".
package yamlx

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Error is one problem in an input file.
type Error struct {
	File string
	Path string // field path; "" for the file as a whole
	Line int    // 1-based position of the offending node; 0 if unknown
	Col  int
	Msg  string // lowercase, no trailing punctuation
	Err  error  // the underlying error, if any
}

// Error returns "FILE: PATH: MSG", or "FILE: MSG" when there is no path.
func (e *Error) Error() string {
	if e.Path == "" {
		return e.File + ": " + e.Msg
	}
	return e.File + ": " + e.Path + ": " + e.Msg
}

// Unwrap returns the underlying error, if any.
func (e *Error) Unwrap() error { return e.Err }

// MaxProblems is the number of problems Decoder.Err lists; it counts the
// others.
const MaxProblems = 100

// Decoder collects the errors of one file.
type Decoder struct {
	file string
	pos  map[string][2]int // line and column of every node visited, by path
	errs []*Error
	seen map[string]bool // path and message of every error, so that none is repeated
	// bad holds the paths of the values with a problem (not unknown or
	// duplicate keys), badIn those paths and every path above them.
	bad, badIn map[string]bool
}

// Parse parses data as a single YAML or JSON document. It returns the
// decoder for the file and the root of the document. A syntax error
// ("FILE: line N: problem"), an empty document and a second document are
// returned as the error, with no decoder.
func Parse(file string, data []byte) (*Decoder, Value, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, Value{}, &Error{File: file, Msg: "empty document"}
		}
		return nil, Value{}, syntaxError(file, err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err == nil {
		return nil, Value{}, &Error{File: file, Line: extra.Line, Col: extra.Column,
			Msg: fmt.Sprintf("line %d: only one document is allowed", extra.Line)}
	} else if !errors.Is(err, io.EOF) {
		return nil, Value{}, syntaxError(file, err)
	}
	root := &doc
	if doc.Kind == yaml.DocumentNode && len(doc.Content) == 1 {
		root = doc.Content[0]
	}
	if root.Kind == 0 || root.Kind == yaml.DocumentNode || root.ShortTag() == "!!null" {
		return nil, Value{}, &Error{File: file, Msg: "empty document"}
	}
	if n, most := expanded(root, map[*yaml.Node]int64{}), maxExpanded(len(data)); n > most {
		return nil, Value{}, &Error{File: file, Msg: fmt.Sprintf("its aliases expand the document to %d bytes, more than %d (%d times its %d bytes, and at least %d): write the values out, or alias less",
			n, most, ExpansionRatio, len(data), MinExpansion)}
	}
	d := &Decoder{file: file, pos: map[string][2]int{}, seen: map[string]bool{}, bad: map[string]bool{}, badIn: map[string]bool{}}
	return d, d.value(root, ""), nil
}

// A document's aliases may expand it to at most ExpansionRatio times its
// bytes, or MinExpansion bytes for a small one. The decoder follows
// aliases itself (so that every error names the path it is at), so the
// YAML library's own guard against alias bombs never runs: a 0.5 MB value
// aliased 400 times would be 200 MB in the daemon's memory and its store.
const (
	ExpansionRatio = 4
	MinExpansion   = 1 << 20
)

func maxExpanded(size int) int64 { return max(int64(size)*ExpansionRatio, MinExpansion) }

// expanded returns the bytes of n's scalars with every alias expanded
// (and a byte for every other node), each node's once (sizes, by node;
// the library refuses an alias to a node that holds it).
func expanded(n *yaml.Node, sizes map[*yaml.Node]int64) int64 {
	if s, ok := sizes[n]; ok {
		return s
	}
	var s int64
	switch {
	case n.Kind == yaml.AliasNode && n.Alias != nil:
		s = expanded(n.Alias, sizes)
	case n.Kind == yaml.ScalarNode:
		s = int64(len(n.Value)) + 1
	default:
		s = 1
		for _, c := range n.Content {
			s = min(s+expanded(c, sizes), 1<<60) // far beyond any bound: no overflow
		}
	}
	sizes[n] = s
	return s
}

// syntaxError turns a parser error "yaml: line N: problem" into
// "FILE: line N: problem". The YAML library counts lines from 0 in the
// messages of its parser (not of its scanner) and leaves "line 0: " out, so
// the line of those is corrected here. Errors about anchors and aliases have
// no line.
func syntaxError(file string, err error) error {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	line, problem := 0, msg
	if rest, ok := strings.CutPrefix(msg, "line "); ok {
		n, p, _ := strings.Cut(rest, ": ")
		line, _ = strconv.Atoi(n)
		problem = p
	}
	switch {
	case slices.Contains(parserProblems, problem):
		line++
	case strings.Contains(problem, "anchor") || strings.Contains(problem, "alias"):
		return &Error{File: file, Msg: msg, Err: err}
	case line == 0:
		line = 1
	}
	return &Error{File: file, Line: line, Msg: fmt.Sprintf("line %d: %s", line, problem), Err: err}
}

// parserProblems are the problems reported by the parser of
// go.yaml.in/yaml/v3 (parserc.go), as opposed to its scanner.
var parserProblems = []string{
	"did not find expected <stream-start>",
	"did not find expected <document start>",
	"did not find expected node content",
	"did not find expected '-' indicator",
	"did not find expected key",
	"did not find expected ',' or ']'",
	"did not find expected ',' or '}'",
	"found duplicate %YAML directive",
	"found incompatible YAML document",
	"found duplicate %TAG directive",
	"found undefined tag handle",
}

// File returns the file name used in messages.
func (d *Decoder) File() string { return d.file }

// Errorf records a problem at a field path. The error is placed in document
// order at the node of that path, or of its nearest visited ancestor. A
// problem already recorded at the same path is not repeated.
func (d *Decoder) Errorf(path, format string, args ...any) {
	p, ok := d.pos[path]
	for q := path; !ok && q != ""; {
		q = parent(q)
		p, ok = d.pos[q]
	}
	d.errorAt(path, p, fmt.Sprintf(format, args...))
	d.bad[path] = true
	for q := path; !d.badIn[q]; q = parent(q) {
		d.badIn[q] = true
		if q == "" {
			break
		}
	}
}

func (d *Decoder) errorAt(path string, pos [2]int, msg string) {
	key := path + "\x00" + msg
	if d.seen[key] {
		return
	}
	d.seen[key] = true
	d.errs = append(d.errs, &Error{File: d.file, Path: path, Line: pos[0], Col: pos[1], Msg: msg})
}

// Failed reports whether a problem was recorded (with Errorf, or by an
// accessor) about the value at path, one of its ancestors or a value inside
// it; unknown and duplicate keys do not count. Checks that run after
// decoding use it to avoid a second message about a value that could not be
// decoded.
func (d *Decoder) Failed(path string) bool {
	if d.badIn[path] {
		return true // a problem at path or inside it
	}
	for q := path; ; q = parent(q) {
		if d.bad[q] {
			return true // a problem at a value that holds path
		}
		if q == "" {
			return false
		}
	}
}

// Err returns the problems recorded so far, in document order, joined with
// errors.Join (one per line); a single problem is returned as its *Error, and
// none as nil. Beyond MaxProblems, the others are counted in a last
// problem of the file as a whole, "and N more problems".
func (d *Decoder) Err() error {
	if len(d.errs) == 0 {
		return nil
	}
	errs := slices.Clone(d.errs)
	slices.SortStableFunc(errs, func(a, b *Error) int {
		return cmp.Or(cmp.Compare(order(a.Line), order(b.Line)), cmp.Compare(a.Col, b.Col))
	})
	if n := len(errs) - MaxProblems; n > 0 {
		errs = append(errs[:MaxProblems], &Error{File: d.file, Msg: fmt.Sprintf("and %d more problems", n)})
	}
	if len(errs) == 1 {
		return errs[0]
	}
	list := make([]error, len(errs))
	for i, e := range errs {
		list[i] = e
	}
	return errors.Join(list...)
}

// order sorts unknown positions last.
func order(line int) int {
	if line <= 0 {
		return math.MaxInt
	}
	return line
}

// parent returns the path one step up: "a.b[2]" → "a.b" → "a" → "".
func parent(path string) string {
	i := strings.LastIndexAny(path, ".[")
	if i < 0 {
		return ""
	}
	return path[:i]
}

// Field returns the path of field key of the mapping at path.
func Field(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// Index returns the path of element i of the sequence at path.
func Index(path string, i int) string {
	return path + "[" + strconv.Itoa(i) + "]"
}

// Value is one node of a document, at a field path.
type Value struct {
	d    *Decoder
	n    *yaml.Node
	path string
}

func (d *Decoder) value(n *yaml.Node, path string) Value {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	if _, ok := d.pos[path]; !ok {
		d.pos[path] = [2]int{n.Line, n.Column}
	}
	return Value{d, n, path}
}

// Path returns the field path of the value ("" for the root).
func (v Value) Path() string { return v.path }

// Line returns the 1-based line of the value in the file.
func (v Value) Line() int { return v.n.Line }

// Errorf records a problem with this value.
func (v Value) Errorf(format string, args ...any) { v.d.Errorf(v.path, format, args...) }

// IsNumber reports whether the value is an integer or floating-point scalar
// (including .nan and .inf, which Float rejects).
func (v Value) IsNumber() bool {
	t := v.n.ShortTag()
	return v.n.Kind == yaml.ScalarNode && (t == "!!int" || t == "!!float")
}

// IsString reports whether the value is a string scalar.
func (v Value) IsString() bool {
	return v.n.Kind == yaml.ScalarNode && v.n.ShortTag() == "!!str"
}

// IsSeq reports whether the value is a sequence (list).
func (v Value) IsSeq() bool { return v.n.Kind == yaml.SequenceNode }

// IsNull reports whether the value is null (written null, ~ or nothing).
func (v Value) IsNull() bool { return v.n.Kind == yaml.ScalarNode && v.n.ShortTag() == "!!null" }

// IsMap reports whether the value is a mapping.
func (v Value) IsMap() bool { return v.n.Kind == yaml.MappingNode }

// Keyword returns the value if it is a string equal to one of words, without
// recording a problem otherwise.
func (v Value) Keyword(words ...string) (string, bool) {
	if v.IsString() && slices.Contains(words, v.n.Value) {
		return v.n.Value, true
	}
	return "", false
}

// Float returns a finite number (integer or floating-point). Anything else
// (a string, a bool, .nan, .inf, a list…) is a problem "must be a number".
func (v Value) Float() (float64, bool) {
	var x float64
	if !v.IsNumber() || v.n.Decode(&x) != nil || math.IsNaN(x) || math.IsInf(x, 0) {
		v.Errorf("must be a number")
		return 0, false
	}
	return x, true
}

// Int returns an integer. A floating-point number with an integral value
// (3.0, 1e3) is accepted; other numbers are a problem "must be an integer",
// other values "must be a number".
func (v Value) Int() (int, bool) {
	if v.IsNumber() && v.n.ShortTag() == "!!int" {
		var i int
		if v.n.Decode(&i) == nil {
			return i, true
		}
		v.Errorf("must be an integer")
		return 0, false
	}
	x, ok := v.Float()
	if !ok {
		return 0, false
	}
	if x != math.Trunc(x) || math.Abs(x) > 1<<53 {
		v.Errorf("must be an integer")
		return 0, false
	}
	return int(x), true
}

// Str returns a string. Numbers, bools and null are not strings: quote them.
func (v Value) Str() (string, bool) {
	if !v.IsString() {
		v.Errorf("must be a string")
		return "", false
	}
	return v.n.Value, true
}

// Bool returns true or false.
func (v Value) Bool() (bool, bool) {
	var b bool
	if v.n.Kind != yaml.ScalarNode || v.n.ShortTag() != "!!bool" || v.n.Decode(&b) != nil {
		v.Errorf("must be true or false")
		return false, false
	}
	return b, true
}

// Seq returns the elements of a sequence.
func (v Value) Seq() ([]Value, bool) {
	if !v.IsSeq() {
		v.Errorf("must be a list")
		return nil, false
	}
	vs := make([]Value, len(v.n.Content))
	for i, n := range v.n.Content {
		vs[i] = v.d.value(n, Index(v.path, i))
	}
	return vs, true
}

// Floats returns a list of numbers. When some elements are not numbers, it
// reports each of them, returns ok = false and puts 0 in their place.
func (v Value) Floats() ([]float64, bool) {
	if !v.IsSeq() {
		v.Errorf("must be a list of numbers")
		return nil, false
	}
	elems, _ := v.Seq()
	xs := make([]float64, len(elems))
	ok := true
	for i, e := range elems {
		var good bool
		xs[i], good = e.Float()
		ok = ok && good
	}
	return xs, ok
}

// FloatMatrix returns a list of lists of numbers (rows may differ in length:
// the caller checks the shape). Like Floats, it reports every bad element,
// returns ok = false and what it could decode.
func (v Value) FloatMatrix() ([][]float64, bool) {
	if !v.IsSeq() {
		v.Errorf("must be a matrix (a list of lists of numbers)")
		return nil, false
	}
	rows, _ := v.Seq()
	x := make([][]float64, len(rows))
	ok := true
	for i, r := range rows {
		var good bool
		x[i], good = r.Floats()
		ok = ok && good
	}
	return x, ok
}

// Map returns a view of a mapping whose keys must be among fields. Each
// unknown key is a problem "unknown field" and each repeated key "duplicate
// field", at the path of that key; the view holds the known keys only.
func (v Value) Map(fields ...string) (*Map, bool) {
	if !v.IsMap() {
		v.Errorf("must be a mapping")
		return nil, false
	}
	m := &Map{v: v, known: fields, vals: map[string]Value{}}
	seen := map[string]bool{}
	for i := 0; i+1 < len(v.n.Content); i += 2 {
		k, val := v.n.Content[i], v.n.Content[i+1]
		for k.Kind == yaml.AliasNode && k.Alias != nil {
			k = k.Alias
		}
		if k.Kind != yaml.ScalarNode {
			v.d.value(k, v.path).Errorf("keys must be strings")
			continue
		}
		path, pos := Field(v.path, k.Value), [2]int{k.Line, k.Column}
		switch {
		case seen[k.Value]:
			v.d.errorAt(path, pos, "duplicate field")
		case !slices.Contains(fields, k.Value):
			v.d.errorAt(path, pos, "unknown field")
		default:
			v.d.pos[path] = pos // errors about a field sort at its key
			m.vals[k.Value] = v.d.value(val, path)
		}
		seen[k.Value] = true
	}
	return m, true
}

// Map is a mapping with a known set of field names.
type Map struct {
	v     Value
	known []string
	vals  map[string]Value
}

// Path returns the field path of the mapping.
func (m *Map) Path() string { return m.v.path }

// Errorf records a problem at field key of the mapping, present or not.
func (m *Map) Errorf(key, format string, args ...any) {
	m.v.d.Errorf(Field(m.v.path, key), format, args...)
}

// Has reports whether field key is present.
func (m *Map) Has(key string) bool {
	_, ok := m.Get(key, false)
	return ok
}

// Get returns field key if it is present. A required field that is absent is
// a problem "missing required field". Asking for a key that is not among the
// known fields is a programming error and panics.
func (m *Map) Get(key string, required bool) (Value, bool) {
	if !slices.Contains(m.known, key) {
		panic(fmt.Sprintf("yamlx: field %q is not among the known fields of %q", key, m.v.path))
	}
	v, ok := m.vals[key]
	if !ok && required {
		m.Errorf(key, "missing required field")
	}
	return v, ok
}

// Int returns integer field key; ok is false when it is absent or bad.
func (m *Map) Int(key string, required bool) (int, bool) {
	if v, ok := m.Get(key, required); ok {
		return v.Int()
	}
	return 0, false
}

// Float returns number field key; ok is false when it is absent or bad.
func (m *Map) Float(key string, required bool) (float64, bool) {
	if v, ok := m.Get(key, required); ok {
		return v.Float()
	}
	return 0, false
}

// Str returns string field key; ok is false when it is absent or bad.
func (m *Map) Str(key string, required bool) (string, bool) {
	if v, ok := m.Get(key, required); ok {
		return v.Str()
	}
	return "", false
}

// File returns path field key, relative to dir when it is not absolute;
// "" when it is absent or bad (an empty path is an error).
func (m *Map) File(key string, required bool, dir string) string {
	p, ok := m.Str(key, required)
	if !ok {
		return ""
	}
	if p == "" {
		m.Errorf(key, "must not be empty")
		return ""
	}
	if !filepath.IsAbs(p) {
		p = filepath.Join(dir, p)
	}
	return p
}

// Bool returns boolean field key; ok is false when it is absent or bad.
func (m *Map) Bool(key string, required bool) (bool, bool) {
	if v, ok := m.Get(key, required); ok {
		return v.Bool()
	}
	return false, false
}

// Seq returns the elements of list field key; ok is false when it is absent
// or not a list.
func (m *Map) Seq(key string, required bool) ([]Value, bool) {
	if v, ok := m.Get(key, required); ok {
		return v.Seq()
	}
	return nil, false
}

// IsName reports whether s is a name of the input files: one or more of
// a-z, 0-9 and '-'.
func IsName(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if !('a' <= r && r <= 'z' || '0' <= r && r <= '9' || r == '-') {
			return false
		}
	}
	return true
}

// Keys returns the scalar keys of a mapping, in order, for mappings whose
// keys are names chosen by the file (read them with v.Map(keys...), which
// reports duplicates); ok is false (and the problem recorded) when v is
// not a mapping.
func (v Value) Keys() ([]string, bool) {
	if !v.IsMap() {
		v.Errorf("must be a mapping")
		return nil, false
	}
	var keys []string
	for i := 0; i+1 < len(v.n.Content); i += 2 {
		k := v.n.Content[i]
		for k.Kind == yaml.AliasNode && k.Alias != nil {
			k = k.Alias
		}
		if k.Kind == yaml.ScalarNode && !slices.Contains(keys, k.Value) {
			keys = append(keys, k.Value)
		}
	}
	return keys, true
}
