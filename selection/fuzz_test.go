package selection

import (
	"encoding/json"
	"math"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/metasched/metasched/internal/yamlx/yamlxtest"
)

// FuzzParseJob decodes job files (and the bodies of POST /v1/jobs): a file
// is either refused, with every problem naming the file and a field or a
// line, or gives a job that passes Validate, whose numbers are finite and
// within the documented limits, and that comes back the same from its JSON
// encoding.
func FuzzParseJob(f *testing.F) {
	f.Add([]byte(jobGood))
	f.Add([]byte(`{"name":"a","type":"b","tasks":1,"task_ops":1,"task_bytes":0}`))
	f.Add([]byte(jobGood + "efficiency: 0.5\nvm: {vcpus: 2, memory_mib: 512}\ncommand: [./master, --tasks, '3']\n"))
	f.Add([]byte(jobGood + "elastic: true\n"))
	f.Add([]byte(`{"name":"a","type":"b","tasks":1,"task_ops":1,"task_bytes":0,"elastic":false}`))
	f.Add([]byte(jobGood + "inputs: [{path: a.bin, data: AAEC/w==}, {path: e, data: ''}, {path: t, content: x}, {path: l, from: ./l.bin}]\n"))
	for _, tc := range jobErrorCases {
		f.Add([]byte(tc.text))
	}
	data, err := os.ReadFile("../examples/job-render.yaml")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(data)
	f.Fuzz(func(t *testing.T, data []byte) {
		j, err := ParseJob("job.yaml", data)
		if err != nil {
			if j != nil {
				t.Errorf("ParseJob returned a job with the error %v", err)
			}
			if err := yamlxtest.CheckError("job.yaml", err); err != nil {
				t.Fatal(err)
			}
			return
		}
		if err := j.Validate(); err != nil {
			t.Fatalf("Validate of a parsed job: %v", err)
		}
		checkJobLimits(t, j)
		js, err := json.Marshal(j)
		if err != nil {
			t.Fatalf("encode a parsed job: %v", err)
		}
		back, err := ParseJob("job.json", js)
		if err != nil {
			t.Fatalf("the job's own encoding is refused: %v\n%s", err, js)
		}
		if diff := cmp.Diff(j, back); diff != "" {
			t.Fatalf("job after a round trip through JSON (-parsed +again):\n%s", diff)
		}
	})
}

// checkJobLimits fails the test when a number of j is not finite or out of
// the limits the package documents.
func checkJobLimits(t *testing.T, j *Job) {
	t.Helper()
	in := func(x, lo, hi float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) && x >= lo && x <= hi }
	for _, c := range []struct {
		field string
		ok    bool
		v     any
	}{
		{"tasks", j.Tasks >= 1 && j.Tasks <= MaxTasks, j.Tasks},
		{"task_ops", in(j.TaskOps, MinTaskOps, MaxTaskOps), j.TaskOps},
		{"task_bytes", in(j.TaskBytes, 0, MaxTaskBytes), j.TaskBytes},
		{"efficiency", in(j.Efficiency, MinEfficiency, 1), j.Efficiency},
		{"vm.vcpus", j.VM.VCPUs >= 1 && j.VM.VCPUs <= MaxVCPUs, j.VM.VCPUs},
		{"vm.memory_mib", j.VM.MemoryMiB >= 1 && j.VM.MemoryMiB <= MaxMemoryMiB, j.VM.MemoryMiB},
		{"name", validJobName(j.Name) && isAlnum(rune(j.Name[0])), j.Name},
		{"command", len(j.Command) == 0 || strings.TrimSpace(j.Command[0]) != "", j.Command},
	} {
		if !c.ok {
			t.Errorf("accepted job has %s %v, out of its limits", c.field, c.v)
		}
	}
}
