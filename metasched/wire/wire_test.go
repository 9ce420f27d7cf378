package wire

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/metasched/metasched/gramvm"
	hp "github.com/metasched/metasched/hypervisorproxy"
	"github.com/metasched/metasched/metasched/api"
	"github.com/metasched/metasched/metasched/lifecycle"
	"github.com/metasched/metasched/metasched/policy"
	"github.com/metasched/metasched/selection"
)

// filler sets every exported field of a value, nested ones too, to a value
// of its own: numbers count up (floats with a fraction, so that their
// formatting shows), strings name their count, slices and maps get two
// entries (or none with empty), pointers a value. A field the JSON leaves
// out is set too: the conversion must not trip on it.
type filler struct {
	n     int
	empty bool // slices and maps empty (not nil)
}

var timeType = reflect.TypeFor[time.Time]()

func (f *filler) fill(v reflect.Value) {
	f.n++
	switch v.Kind() {
	case reflect.String:
		v.SetString(fmt.Sprintf("s%d", f.n))
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int64, reflect.Int32:
		v.SetInt(int64(f.n))
	case reflect.Uint8:
		v.SetUint(uint64(f.n))
	case reflect.Float64:
		v.SetFloat(float64(f.n) + 0.25)
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		f.fill(v.Elem())
	case reflect.Slice:
		n := 2
		if f.empty {
			n = 0
		}
		v.Set(reflect.MakeSlice(v.Type(), n, n))
		for i := range n {
			f.fill(v.Index(i))
		}
	case reflect.Array:
		for i := range v.Len() {
			f.fill(v.Index(i))
		}
	case reflect.Map:
		v.Set(reflect.MakeMap(v.Type()))
		if f.empty {
			return
		}
		for range 2 {
			k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
			f.fill(k)
			f.fill(e)
			v.SetMapIndex(k, e)
		}
	case reflect.Struct:
		if v.Type() == timeType {
			v.Set(reflect.ValueOf(time.Date(2026, 11, 29, 12, 0, f.n, 250, time.UTC)))
			return
		}
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				f.fill(v.Field(i))
			}
		}
	case reflect.Func:
		// Options of a computation, not data.
	default:
		panic(fmt.Sprintf("filler: no value for a %s", v.Type()))
	}
}

// zeroFields lists the exported fields of v left zero, by path.
func zeroFields(v reflect.Value, path string) []string {
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			return []string{path}
		}
		return zeroFields(v.Elem(), path)
	case reflect.Slice:
		if v.Len() == 0 {
			return []string{path}
		}
		var out []string
		for i := range v.Len() {
			out = append(out, zeroFields(v.Index(i), fmt.Sprintf("%s[%d]", path, i))...)
		}
		return out
	case reflect.Struct:
		if v.Type() == timeType {
			break
		}
		var out []string
		for i := range v.NumField() {
			if sf := v.Type().Field(i); sf.IsExported() && sf.Type.Kind() != reflect.Func {
				out = append(out, zeroFields(v.Field(i), path+"."+sf.Name)...)
			}
		}
		return out
	}
	if v.IsZero() {
		return []string{path}
	}
	return nil
}

// sameJSON fails the test unless domain and wire encode to the same
// bytes.
func sameJSON(t *testing.T, name string, domain, wire any) {
	t.Helper()
	d, err := json.Marshal(domain)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	w, err := json.Marshal(wire)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if !bytes.Equal(d, w) {
		t.Errorf("%s: the wire form encodes otherwise than the domain's (-domain +wire):\n%s", name, cmp.Diff(string(d), string(w)))
	}
}

// A conversion is checked on three values of each domain type: the zero
// value (nil slices, absent pointers), every field set with empty slices
// and maps, and every field set with two entries in each, nested values
// included.
func TestConversionsEncodeAsTheDomain(t *testing.T) {
	conversions := []struct {
		name    string
		domain  any
		convert func(any) any
	}{
		{"selection.Job", selection.Job{}, func(v any) any { return Spec(v.(selection.Job)) }},
		{"gramvm.Placement", gramvm.Placement{}, func(v any) any { return Placement(v.(gramvm.Placement)) }},
		{"*gramvm.Placement", (*gramvm.Placement)(nil), func(v any) any { return PlacementPtr(v.(*gramvm.Placement)) }},
		{"selection.Plan", selection.Plan{}, func(v any) any { return Plan(v.(selection.Plan)) }},
		{"[]lifecycle.Transition", []lifecycle.Transition(nil), func(v any) any { return Transitions(v.([]lifecycle.Transition)) }},
		{"[]lifecycle.VM", []lifecycle.VM(nil), func(v any) any { return JobVMs(v.([]lifecycle.VM)) }},
		{"[]lifecycle.LostVM", []lifecycle.LostVM(nil), func(v any) any { return LostVMs(v.([]lifecycle.LostVM)) }},
		{"map[lifecycle.State]int", map[lifecycle.State]int(nil), func(v any) any { return JobCounts(v.(map[lifecycle.State]int)) }},
		{"[]hypervisorproxy.VM", []hp.VM(nil), func(v any) any { return VMs(v.([]hp.VM)) }},
		{"[]gramvm.Link", []gramvm.Link(nil), func(v any) any { return Links(v.([]gramvm.Link)) }},
		{"gramvm.TuningDecision", gramvm.TuningDecision{}, func(v any) any { return TuningDecision(v.(gramvm.TuningDecision)) }},
		{"*policy.Slice", (*policy.Slice)(nil), func(v any) any { return PolicySlice(v.(*policy.Slice)) }},
	}
	for _, c := range conversions {
		t.Run(c.name, func(t *testing.T) {
			sameJSON(t, "zero", c.domain, c.convert(c.domain))
			for _, empty := range []bool{true, false} {
				v := reflect.New(reflect.TypeOf(c.domain)).Elem()
				(&filler{empty: empty}).fill(v)
				if !empty {
					if zero := zeroFields(v, c.name); len(zero) > 0 {
						t.Fatalf("the filled value leaves fields zero: %v", zero)
					}
				}
				sameJSON(t, fmt.Sprintf("filled (empty slices %t)", empty), v.Interface(), c.convert(v.Interface()))
			}
		})
	}
}

// A job's input file encodes in the form it was given in (its own
// MarshalJSON): each form is checked, and each reads back the same.
func TestInputFileForms(t *testing.T) {
	for _, in := range []selection.InputFile{
		{Path: "a.txt", Content: "text"},
		{Path: "a.txt"},
		{Path: "b.bin", Data: []byte{0, 1, 0xff}},
		{Path: "b.bin", Data: []byte{}},
		{Path: "c", From: "local/c", Content: "x", Data: []byte("y")},
	} {
		j := selection.Job{Name: "j", Inputs: []selection.InputFile{in}, Walltime: selection.Duration(90 * time.Minute)}
		w := Spec(j)
		sameJSON(t, fmt.Sprintf("%+v", in), j, w)
		b, err := json.Marshal(w)
		if err != nil {
			t.Fatal(err)
		}
		var back api.JobSpec
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatal(err)
		}
		sameJSON(t, fmt.Sprintf("%+v read back", in), j, back)
	}
}

// The command line prints a daemon's plan through DomainPlan: it carries
// every field the wire has.
func TestDomainPlanRoundTrip(t *testing.T) {
	var p selection.Plan
	(&filler{}).fill(reflect.ValueOf(&p).Elem())
	sameJSON(t, "plan", p, DomainPlan(Plan(p)))
	if got := DomainPlan(Plan(p)); got.MasterIndex != -1 || got.Clusters[0].Index != -1 || got.Excluded[0].Index != -1 {
		t.Errorf("the indexes the wire does not carry: %d, %d, %d; want -1", got.MasterIndex, got.Clusters[0].Index, got.Excluded[0].Index)
	}
}

// jsonFields lists the JSON fields of t as encoding/json writes them,
// recursively: "path,options" for each, the nested ones under their
// parent's path. Time is a leaf; so is any type that is not a struct,
// slice, array, map or pointer.
func jsonFields(t reflect.Type, prefix string) []string {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Array || t.Kind() == reflect.Map {
		if t.Kind() == reflect.Map {
			prefix += "{" + t.Key().Kind().String() + "}"
		}
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct || t == timeType {
		return nil
	}
	var out []string
	for i := range t.NumField() {
		sf := t.Field(i)
		tag := sf.Tag.Get("json")
		if tag == "-" || !sf.IsExported() && !sf.Anonymous {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if sf.Anonymous && name == "" {
			out = append(out, jsonFields(sf.Type, prefix)...)
			continue
		}
		if name == "" {
			name = sf.Name
		}
		out = append(out, prefix+name+","+opts)
		out = append(out, jsonFields(sf.Type, prefix+name+".")...)
	}
	slices.Sort(out)
	return out
}

// mirrors pairs each domain type with its wire type.
var mirrors = []struct{ domain, wire reflect.Type }{
	{reflect.TypeFor[selection.Job](), reflect.TypeFor[api.JobSpec]()},
	{reflect.TypeFor[gramvm.Placement](), reflect.TypeFor[api.Placement]()},
	{reflect.TypeFor[lifecycle.Transition](), reflect.TypeFor[api.Transition]()},
	{reflect.TypeFor[lifecycle.VM](), reflect.TypeFor[api.JobVM]()},
	{reflect.TypeFor[lifecycle.LostVM](), reflect.TypeFor[api.JobLostVM]()},
	{reflect.TypeFor[hp.VM](), reflect.TypeFor[api.VM]()},
	{reflect.TypeFor[gramvm.Link](), reflect.TypeFor[api.Link]()},
	{reflect.TypeFor[gramvm.TuningDecision](), reflect.TypeFor[api.TuningDecision]()},
	{reflect.TypeFor[policy.Slice](), reflect.TypeFor[api.PolicySlice]()},
}

// A JSON field added to a domain type, or an option changed, fails here
// until its wire type has it too (the conversion test above would miss a
// field the filler cannot see through a custom MarshalJSON).
func TestMirrorsHaveTheDomainsFields(t *testing.T) {
	for _, m := range mirrors {
		if diff := cmp.Diff(jsonFields(m.domain, ""), jsonFields(m.wire, "")); diff != "" {
			t.Errorf("%s and %s differ in their JSON fields (-domain +wire):\n%s", m.domain, m.wire, diff)
		}
	}
}

// The check of the fields sees a field the mirror lacks, one it has
// besides, a changed option and a nested difference.
func TestJSONFieldsCatchAMissingField(t *testing.T) {
	type inner struct {
		A int `json:"a"`
	}
	type innerMore struct {
		A int `json:"a"`
		B int `json:"b"`
	}
	type domain struct {
		X  string       `json:"x,omitempty"`
		In []*innerMore `json:"in"`
		Y  int          `json:"y"`
	}
	type wire struct {
		X  string  `json:"x"`
		In []inner `json:"in"`
		Z  int     `json:"z"`
	}
	d, w := jsonFields(reflect.TypeFor[domain](), ""), jsonFields(reflect.TypeFor[wire](), "")
	want := []string{"in,", "in.a,", "in.b,", "x,omitempty", "y,"}
	if diff := cmp.Diff(want, d); diff != "" {
		t.Fatalf("jsonFields (-want +got):\n%s", diff)
	}
	if slices.Equal(d, w) {
		t.Fatal("jsonFields does not tell the two types apart")
	}
}
