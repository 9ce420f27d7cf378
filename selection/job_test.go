package selection

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/metasched/metasched/internal/yamlx"

	"github.com/metasched/metasched/internal/yamlx/yamlxtest"
)

func TestParseJob(t *testing.T) {
	got, err := ParseJob("job.yaml", []byte(`
name: render-42
type: render
tasks: 300
task_ops: 2.0e12
task_bytes: 5.0e7
vm: {vcpus: 2}
command: ["./master", "--tasks", "300"]
walltime: 1h30m
inputs:
  - {path: params.txt, content: "a=1\n"}
  - path: data/in.csv
    content: |
      x,y
      1,2
  - {path: data/in.bin, data: AAEC/w==}
  - {path: empty.bin, data: ""}
  - {path: local.bin, from: ./in.bin}
outputs: [result.txt, logs/summary.json]
master: latam-a
placement: gramvm
elastic: true
`))
	if err != nil {
		t.Fatal(err)
	}
	want := &Job{Name: "render-42", Type: "render", Tasks: 300, TaskOps: 2e12, TaskBytes: 5e7,
		Efficiency: DefaultEfficiency, VM: VM{VCPUs: 2, MemoryMiB: DefaultMemoryMiB},
		Command: []string{"./master", "--tasks", "300"}, Walltime: Duration(90 * time.Minute),
		Inputs: []InputFile{{Path: "params.txt", Content: "a=1\n"}, {Path: "data/in.csv", Content: "x,y\n1,2\n"},
			{Path: "data/in.bin", Data: []byte{0, 1, 2, 255}}, {Path: "empty.bin", Data: []byte{}},
			{Path: "local.bin", From: "./in.bin"}},
		Outputs: []string{"result.txt", "logs/summary.json"}, Master: "latam-a", Placement: PlaceGramVM, Elastic: true}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if err := got.Validate(); err != nil {
		t.Errorf("Validate: %v", err)
	}
	// The spec's JSON holds the walltime as a job file does.
	data, err := json.Marshal(got)
	if err != nil || !strings.Contains(string(data), `"walltime":"1h30m0s"`) || !strings.Contains(string(data), `"elastic":true`) {
		t.Errorf("JSON of the job: %s, %v", data, err)
	}
	var back Job
	if err := json.Unmarshal(data, &back); err != nil || !cmp.Equal(&back, want) {
		t.Errorf("the job's JSON read back: %+v, %v", back, err)
	}
	// JSON is valid YAML: the body of POST /v1/jobs.
	if _, err := ParseJob("job.json", []byte(`{"name":"a","type":"b","tasks":1,"task_ops":1,"task_bytes":0}`)); err != nil {
		t.Errorf("JSON: %v", err)
	}
}

// jobGood is a valid job file, changed by the cases of jobErrorCases.
const jobGood = "name: j\ntype: t\ntasks: 3\ntask_ops: 1e9\ntask_bytes: 1e6\n"

// jobErrorCases are invalid job files and a part of their errors
// (TestParseJobErrors), and seeds of FuzzParseJob.
var jobErrorCases = []struct{ name, text, want string }{
	{"unknown field", jobGood + "priority: 3\n", "job.yaml: priority: unknown field"},
	// The adversary's alias bomb, smaller: a 64 KiB anchor aliased 24
	// times would be 1.5 MiB; aliases may expand a file 4 times (1 MiB for a small one).
	{"alias bomb", jobGood + "command: [&a " + strings.Repeat("x", 64<<10) + strings.Repeat(", *a", 23) + "]\n",
		"job.yaml: its aliases expand the document to 1572"},
	{"too many arguments", jobGood + "command: [p" + strings.Repeat(", a", MaxCommandArgs) + "]\n",
		"job.yaml: command: has 4097 arguments, more than 4096"},
	{"too many bytes of arguments", jobGood + "command: [p, " + strings.Repeat("x", MaxCommandBytes) + "]\n",
		"job.yaml: command: has 262145 bytes of arguments, more than 262144"},
	{"missing tasks", "name: j\ntype: t\ntask_ops: 1\ntask_bytes: 1\n", "job.yaml: tasks: missing required field"},
	{"missing type", "name: j\ntasks: 1\ntask_ops: 1\ntask_bytes: 1\n", "job.yaml: type: missing required field"},
	{"zero tasks", strings.Replace(jobGood, "tasks: 3", "tasks: 0", 1), "job.yaml: tasks: must be an integer >= 1, got 0"},
	{"fractional tasks", strings.Replace(jobGood, "tasks: 3", "tasks: 2.5", 1), "job.yaml: tasks: must be an integer"},
	{"zero ops", strings.Replace(jobGood, "task_ops: 1e9", "task_ops: 0", 1), "job.yaml: task_ops: must be a number > 0"},
	{"negative bytes", strings.Replace(jobGood, "task_bytes: 1e6", "task_bytes: -1", 1), "job.yaml: task_bytes: must be a number >= 0"},
	{"efficiency above 1", jobGood + "efficiency: 1.5\n", "job.yaml: efficiency: must be > 0 and <= 1, got 1.5"},
	{"efficiency zero", jobGood + "efficiency: 0\n", "job.yaml: efficiency: must be > 0 and <= 1, got 0"},
	{"bad type name", strings.Replace(jobGood, "type: t", "type: Render", 1), `job.yaml: type: must match [a-z0-9-]+ (a job type), got "Render"`},
	{"bad job name", strings.Replace(jobGood, "name: j", "name: a b", 1), `job.yaml: name: must be 1 to 128 of`},
	{"vm vcpus", jobGood + "vm: {vcpus: 0}\n", "job.yaml: vm.vcpus: must be an integer >= 1, got 0"},
	{"vm unknown", jobGood + "vm: {cpus: 2}\n", "job.yaml: vm.cpus: unknown field"},
	{"empty command", jobGood + "command: ['']\n", "job.yaml: command[0]: must name the program to run"},
	{"command not strings", jobGood + "command: [1]\n", "job.yaml: command[0]:"},
	// The limits of the model (each would overflow it or a run time).
	{"too many tasks", strings.Replace(jobGood, "tasks: 3", "tasks: 100000000000", 1), "job.yaml: tasks: must be at most 10000000, got 100000000000"},
	{"max int tasks", strings.Replace(jobGood, "tasks: 3", "tasks: 9223372036854775807", 1), "job.yaml: tasks: must be at most 10000000"},
	{"huge ops", strings.Replace(jobGood, "task_ops: 1e9", "task_ops: 1e308", 1), "job.yaml: task_ops: must be from 1 to 1e+18 operations per task, got 1e+308"},
	{"tiny ops", strings.Replace(jobGood, "task_ops: 1e9", "task_ops: 5e-324", 1), "job.yaml: task_ops: must be from 1 to 1e+18"},
	{"huge bytes", strings.Replace(jobGood, "task_bytes: 1e6", "task_bytes: 1e308", 1), "job.yaml: task_bytes: must be at most 1e+15 bytes per task, got 1e+308"},
	{"tiny efficiency", jobGood + "efficiency: 5e-324\n", "job.yaml: efficiency: must be at least 0.01, got 5e-324"},
	{"dot name", strings.Replace(jobGood, "name: j", "name: '.'", 1), `job.yaml: name: must begin with a letter or a digit, got "."`},
	{"dot-dot name", strings.Replace(jobGood, "name: j", "name: '..'", 1), `job.yaml: name: must begin with a letter or a digit, got ".."`},
	{"huge vm", jobGood + "vm: {vcpus: 100000, memory_mib: 1}\n", "job.yaml: vm.vcpus: must be at most 1024, got 100000"},
	{"bad walltime", jobGood + "walltime: soon\n", `job.yaml: walltime: not a duration like 10m or 2h30m: "soon"`},
	{"number walltime", jobGood + "walltime: 600\n", "job.yaml: walltime:"},
	{"zero walltime", jobGood + "walltime: 0s\n", "job.yaml: walltime: must be a duration > 0"},
	{"negative walltime", jobGood + "walltime: -5m\n", "job.yaml: walltime: must be a duration > 0"},
	{"huge walltime", jobGood + "walltime: 100000h\n", "job.yaml: walltime: must be at most 87600h0m0s, got 100000h0m0s"},
	{"absolute input", jobGood + "inputs: [{path: /etc/passwd, content: x}]\n", `job.yaml: inputs[0].path: must be relative to the command's working directory, got "/etc/passwd"`},
	{"escaping output", jobGood + "outputs: [../../etc/shadow]\n", `job.yaml: outputs[0]: must be a clean path inside the working directory (no '.', '..' or '//'), got "../../etc/shadow"`},
	{"unclean output", jobGood + "outputs: [a//b]\n", `job.yaml: outputs[0]: must be a clean path inside the working directory`},
	{"twice output", jobGood + "outputs: [a, a]\n", `job.yaml: outputs[1]: "a" is listed twice`},
	{"input without content", jobGood + "inputs: [{path: a}]\n", "job.yaml: inputs[0].content: missing: give content (text), data (base64) or from (a local file, read by metasched submit)"},
	{"input not base64", jobGood + "inputs: [{path: a, data: 'not base64!'}]\n", "job.yaml: inputs[0].data: not base64 (standard alphabet, padded): illegal base64 data at input byte 3"},
	{"input data and content", jobGood + "inputs: [{path: a, content: x, data: eA==}]\n", "job.yaml: inputs[0].data: give one of content, data and from, not both content and data"},
	{"input content and from", jobGood + "inputs: [{path: a, from: ./a, content: x}]\n", "job.yaml: inputs[0].from: give one of content, data and from, not both content and from"},
	{"input empty from", jobGood + "inputs: [{path: a, from: ''}]\n", "job.yaml: inputs[0].from: must name a local file, got an empty string"},
	{"input data not string", jobGood + "inputs: [{path: a, data: [1]}]\n", "job.yaml: inputs[0].data:"},
	{"input from escaping path", jobGood + "inputs: [{path: ../x, from: ./x}]\n", `job.yaml: inputs[0].path: must be a clean path inside the working directory (no '.', '..' or '//'), got "../x"`},
	{"input unknown field", jobGood + "inputs: [{path: a, content: b, mode: 7}]\n", "job.yaml: inputs[0].mode: unknown field"},
	{"empty output", jobGood + "outputs: ['']\n", "job.yaml: outputs[0]: must not be empty"},
	{"elastic not a boolean", jobGood + "elastic: yes\n", "job.yaml: elastic: must be true or false"},
	{"elastic a number", jobGood + "elastic: 1\n", "job.yaml: elastic: must be true or false"},
	{"elastic a list", jobGood + "elastic: [true]\n", "job.yaml: elastic: must be true or false"},
	{"huge memory", jobGood + "vm: {vcpus: 1, memory_mib: 100000000}\n", "job.yaml: vm.memory_mib: must be at most 16777216, got 100000000"},
	{"unknown placement", jobGood + "placement: best\n", `job.yaml: placement: must be one of gramvm, met, mct, olb, got "best"`},
	{"placement in capitals", jobGood + "placement: MET\n", `job.yaml: placement: must be one of gramvm, met, mct, olb, got "MET"`},
	{"empty placement", jobGood + "placement: ''\n", "job.yaml: placement: must be one of gramvm, met, mct, olb, got an empty string (leave placement out for gramvm)"},
	{"placement not a string", jobGood + "placement: [met]\n", "job.yaml: placement:"},
	{"bad master", jobGood + "master: Latam A\n", `job.yaml: master: must be a cluster's name ([a-z0-9-]+), got "Latam A"`},
	{"empty master", jobGood + "master: ''\n", "job.yaml: master: must name a cluster, got an empty string (leave master out to let the placement choose)"},
	{"master not a string", jobGood + "master: {name: spain}\n", "job.yaml: master:"},
	{"master with a baseline", jobGood + "master: spain\nplacement: mct\n", "job.yaml: master: a baseline placement (mct) places the whole job on the one cluster it chooses: give master only with placement gramvm"},
}

func TestParseJobErrors(t *testing.T) {
	for _, tc := range jobErrorCases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseJob("job.yaml", []byte(tc.text))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want it to contain %q", err, tc.want)
			}
		})
	}
	// Every problem at once, in document order.
	_, err := ParseJob("job.yaml", []byte("name: j\ntype: T\ntasks: 0\ntask_ops: -1\ntask_bytes: 1\n"))
	if err == nil || len(strings.Split(err.Error(), "\n")) != 3 {
		t.Errorf("want 3 problems, got %v", err)
	}
	big := &Job{Name: "j", Type: "t", Tasks: 1, TaskOps: 1, Efficiency: 1, VM: VM{1, 1},
		Inputs: []InputFile{{Path: "a", Content: strings.Repeat("x", MaxInputBytes)}, {Path: "b", Content: "y"}}}
	if err := big.Validate(); err == nil || !strings.Contains(err.Error(), "inputs: the contents must be at most 524288 bytes in all, got 524289") {
		t.Errorf("Validate of too big inputs: %v", err)
	}
	big.Inputs[0] = InputFile{Path: "a", Data: make([]byte, MaxInputBytes)}
	if err := big.Validate(); err == nil || !strings.Contains(err.Error(), "inputs: the contents must be at most 524288 bytes in all, got 524289") {
		t.Errorf("Validate of too big binary inputs: %v", err)
	}
	two := &Job{Name: "j", Type: "t", Tasks: 1, TaskOps: 1, Efficiency: 1, VM: VM{1, 1},
		Inputs: []InputFile{{Path: "a", Content: "x", Data: []byte("y")}}}
	if err := two.Validate(); err == nil || !strings.Contains(err.Error(), "inputs[0]: give one of content, data and from") {
		t.Errorf("Validate of an input given twice: %v", err)
	}
	placed := &Job{Name: "j", Type: "t", Tasks: 1, TaskOps: 1, Efficiency: 1, VM: VM{1, 1}, Master: "spain", Placement: "fastest"}
	if err := placed.Validate(); err == nil || !strings.Contains(err.Error(), `placement: must be one of gramvm, met, mct, olb, got "fastest"`) {
		t.Errorf("Validate of an unknown placement: %v", err)
	}
	placed.Placement = PlaceOLB
	if err := placed.Validate(); err == nil || !strings.Contains(err.Error(), "master: a baseline placement (olb)") {
		t.Errorf("Validate of a master with a baseline: %v", err)
	}
	j := &Job{Name: "j", Type: "t", Tasks: 1, TaskOps: 1, Efficiency: 2, VM: VM{1, 1}}
	if err := j.Validate(); err == nil || !strings.Contains(err.Error(), "efficiency: must be > 0 and <= 1, got 2") {
		t.Errorf("Validate: %v", err)
	}
}

// manyProblems is a job file of n problems: a command of n numbers.
func manyProblems(n int) []byte {
	return []byte(jobGood + "command: [" + strings.Repeat("1, ", n-1) + "1]\n")
}

// A job file with more problems than yamlx.MaxProblems reports that many
// and the count of the others: a body of the API (1 MiB) can hold half a
// million, which took minutes to list.
func TestParseJobManyProblems(t *testing.T) {
	_, err := ParseJob("job.yaml", manyProblems(1000))
	lines := strings.Split(fmt.Sprint(err), "\n")
	if len(lines) != yamlx.MaxProblems+1 || lines[0] != "job.yaml: command[0]: must be a string" ||
		lines[len(lines)-1] != fmt.Sprintf("job.yaml: and %d more problems", 1000-yamlx.MaxProblems) {
		t.Errorf("%d lines: %s … %s", len(lines), lines[0], lines[len(lines)-1])
	}
	if err := yamlxtest.CheckError("job.yaml", err); err != nil {
		t.Error(err)
	}
}

// BenchmarkParseJobManyProblems decodes a job file of 1 MiB with a
// problem in every 3 bytes (the largest body of POST /v1/jobs).
func BenchmarkParseJobManyProblems(b *testing.B) {
	data := manyProblems((1<<20 - len(jobGood) - 12) / 3)
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if _, err := ParseJob("job.yaml", data); err == nil {
			b.Fatal("no error")
		}
	}
}

// TestShape: the shape tells apart jobs whose plans may differ, and only
// those: the name, type and command do not change a plan.
func TestShape(t *testing.T) {
	base := Job{Name: "a", Type: "p", Tasks: 4, TaskOps: 1e9, TaskBytes: 1e6, Efficiency: 0.8, VM: VM{VCPUs: 1, MemoryMiB: 1024}}
	same := base
	same.Name, same.Type, same.Command = "b", "q", []string{"true"}
	if base.Shape() != same.Shape() {
		t.Errorf("name, type and command change the shape: %q, %q", base.Shape(), same.Shape())
	}
	for what, change := range map[string]func(j *Job){
		"tasks":      func(j *Job) { j.Tasks = 5 },
		"task_ops":   func(j *Job) { j.TaskOps = 2e9 },
		"task_bytes": func(j *Job) { j.TaskBytes = 0 },
		"efficiency": func(j *Job) { j.Efficiency = 0.9 },
		"vcpus":      func(j *Job) { j.VM.VCPUs = 2 },
		"memory":     func(j *Job) { j.VM.MemoryMiB = 2048 },
		"placement":  func(j *Job) { j.Placement = PlaceMET },
		"master":     func(j *Job) { j.Master = "c1" },
	} {
		j := base
		change(&j)
		if j.Shape() == base.Shape() {
			t.Errorf("%s: the shape %q does not change", what, j.Shape())
		}
	}
}

// ParseJobFields lists the top-level fields a file gave, in the job
// file's order whatever the file's, and none of those it left to their
// defaults; a file with problems lists none.
func TestParseJobFields(t *testing.T) {
	for _, tc := range []struct {
		body string
		want []string
	}{
		{"{name: j, type: sim, tasks: 3, task_ops: 1.0e9, task_bytes: 0}", []string{"name", "type", "tasks", "task_ops", "task_bytes"}},
		{"vm: {vcpus: 2}\nname: j\ntype: sim\ntasks: 3\ntask_ops: 1.0e9\ntask_bytes: 0\nelastic: false\n",
			[]string{"name", "type", "tasks", "task_ops", "task_bytes", "vm", "elastic"}},
		{`{"name": "j", "type": "sim", "tasks": 3, "task_ops": 1e9, "task_bytes": 0, "vm": {}}`, []string{"name", "type", "tasks", "task_ops", "task_bytes", "vm"}},
	} {
		j, given, err := ParseJobFields("job.yaml", []byte(tc.body))
		if err != nil {
			t.Fatalf("%s: %v", tc.body, err)
		}
		if diff := cmp.Diff(tc.want, given); diff != "" {
			t.Errorf("%s: fields given (-want +got):\n%s", tc.body, diff)
		}
		want, err := ParseJob("job.yaml", []byte(tc.body))
		if err != nil {
			t.Fatal(err)
		}
		if !cmp.Equal(want, j) {
			t.Errorf("%s: ParseJobFields's job %+v, ParseJob's %+v", tc.body, j, want)
		}
	}
	if j, given, err := ParseJobFields("job.yaml", []byte("{name: j, vm: 2}")); err == nil || j != nil || given != nil {
		t.Errorf("a bad file: %v, %v, %v; want an error alone", j, given, err)
	}
}
