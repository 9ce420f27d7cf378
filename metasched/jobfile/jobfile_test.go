package jobfile

import (
	"crypto/sha256"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.yaml.in/yaml/v3"

	"github.com/metasched/metasched/metasched/api"
	"github.com/metasched/metasched/selection"
)

const base = "name: bad\ntype: sim\ntasks: 20\ntask_ops: 1.0e10\ntask_bytes: 0\n"

// badFiles are bodies that are no valid job file, with the fields their
// answer names in order ("" for a problem of the whole body) and a text
// the first problem holds: the server's answers to them (its tests of bad
// job files) come from here.
var badFiles = []struct {
	name, body string
	fields     []string
	problem    string
}{
	{"yaml syntax", "name: bad\ntype: [sim\ntasks: 20\n", []string{""}, "line "},
	{"unknown field", base + "colour: red\n", []string{"colour"}, "unknown field"},
	{"tasks 0", strings.Replace(base, "tasks: 20", "tasks: 0", 1), []string{"tasks"}, ">= 1"},
	{"missing field", "name: bad\ntype: sim\ntasks: 20\ntask_bytes: 0\n", []string{"task_ops"}, "missing"},
	{"several problems", "name: bad\ntype: sim\ntasks: 0\ntask_ops: 1.0e10\ntask_bytes: 0\nefficiency: 2\nvm: {vcpus: 0, memory_mib: 1024}\n",
		[]string{"tasks", "efficiency", "vm.vcpus"}, ">= 1"},
	{"json wrong type", `{"name":"bad","type":"sim","tasks":"many","task_ops":1e10,"task_bytes":0}`, []string{"tasks"}, ""},
	{"json syntax", `{"name":"bad","type":"sim",`, []string{""}, ""},
	{"unknown key with a line break", `{"name":"bad","type":"sim","tasks":20,"task_ops":1e10,"task_bytes":0,"a\nb: c":1}`, []string{"a\nb: c"}, "unknown field"},
	{"not a mapping", "- a\n- b\n", []string{""}, "mapping"},
	{"two documents", base + "---\n" + base, []string{""}, "one document"},
	{"empty body", "", []string{""}, "empty"},
	{"blank body", " \n\t\n", []string{""}, "empty"},
	{"null vm", base + "vm: null\n", []string{"vm"}, "mapping"},
	{"a file of the submitting machine", base + "inputs: [{path: a, content: b}, {path: in.bin, from: /etc/hostname}]\n",
		[]string{"inputs[1].from"}, `"/etc/hostname" is a file of the submitting machine`},
}

func TestDecodeBadFiles(t *testing.T) {
	for _, tc := range badFiles {
		t.Run(tc.name, func(t *testing.T) {
			r := Decode([]byte(tc.body))
			if r.Job != nil || r.Err == nil {
				t.Fatalf("job %+v, error %v; want the error alone", r.Job, r.Err)
			}
			if r.Err.Status != 400 || r.Err.Code != api.CodeInvalid || r.Err.Msg != "the job is not valid" {
				t.Errorf("answer %d %s %q, want 400 invalid \"the job is not valid\"", r.Err.Status, r.Err.Code, r.Err.Msg)
			}
			var fields []string
			for _, f := range r.Err.Fields {
				fields = append(fields, f.Field)
			}
			if diff := cmp.Diff(tc.fields, fields); diff != "" {
				t.Errorf("fields named (-want +got):\n%s", diff)
			}
			if !strings.Contains(r.Err.Fields[0].Problem, tc.problem) {
				t.Errorf("problem %q, want it to hold %q", r.Err.Fields[0].Problem, tc.problem)
			}
			if r.BodyHash != sha256.Sum256([]byte(tc.body)) {
				t.Error("the body's hash is not the hash of the bytes sent")
			}
		})
	}
}

func TestDecode(t *testing.T) {
	for _, tc := range []struct {
		body    string
		vmGiven bool
	}{
		{base, false},
		{base + "vm: {vcpus: 2}\n", true},
		{`{"name":"j","type":"etl","tasks":3,"task_ops":1e9,"task_bytes":0,"vm":{}}`, true},
		{`{"name":"j","type":"etl","tasks":3,"task_ops":1e9,"task_bytes":0,"command":["true"]}`, false},
	} {
		r := Decode([]byte(tc.body))
		if r.Err != nil {
			t.Fatalf("%s: %v", tc.body, r.Err)
		}
		want, err := selection.ParseJob("body", []byte(tc.body))
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, r.Job); diff != "" {
			t.Errorf("%s: job (-ParseJob +Decode):\n%s", tc.body, diff)
		}
		if r.VMGiven != tc.vmGiven {
			t.Errorf("%s: VMGiven %t, want %t", tc.body, r.VMGiven, tc.vmGiven)
		}
	}
}

// FuzzDecode: whatever the body, Decode answers a job that passes the
// job's rules or a 400 naming each problem, never both and never a panic;
// the hash is the body's, and VMGiven says what a second parse of the
// body into a map (the daemon's way before it decoded once) said.
func FuzzDecode(f *testing.F) {
	for _, tc := range badFiles {
		f.Add([]byte(tc.body))
	}
	f.Add([]byte(base))
	f.Add([]byte(base + "vm: {vcpus: 2, memory_mib: 2048}\nwalltime: 1h\ninputs: [{path: a, data: AAEC}]\noutputs: [r.txt]\n"))
	f.Fuzz(func(t *testing.T, body []byte) {
		r := Decode(body)
		if r.BodyHash != sha256.Sum256(body) {
			t.Fatal("the body's hash is not the hash of the bytes sent")
		}
		if (r.Job == nil) == (r.Err == nil) {
			t.Fatalf("job %+v and error %v: want exactly one", r.Job, r.Err)
		}
		if r.Err != nil {
			if r.Err.Status != 400 || r.Err.Code != api.CodeInvalid || len(r.Err.Fields) == 0 ||
				slices.ContainsFunc(r.Err.Fields, func(f api.FieldError) bool { return f.Problem == "" }) {
				t.Fatalf("answer %+v: want 400 invalid with a problem for each field", r.Err)
			}
			return
		}
		if err := r.Job.Validate(); err != nil {
			t.Fatalf("the job decoded breaks the job's rules: %v", err)
		}
		var raw map[string]any
		if yaml.Unmarshal(body, &raw) == nil {
			if _, has := raw["vm"]; has != r.VMGiven {
				t.Fatalf("VMGiven %t, but the body's map says %t", r.VMGiven, has)
			}
		}
	})
}
