package main

import (
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/metasched/metasched/selection"
)

// jobWithInputs writes a job file whose inputs are text inline, and a
// local file (not text) named with from, relative to the job file.
func jobWithInputs(t *testing.T, inputs string) (dir, job string) {
	t.Helper()
	dir = t.TempDir()
	job = filepath.Join(dir, "job.yaml")
	if err := os.WriteFile(job, []byte(jobFileText+"inputs:\n"+inputs), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir, job
}

// binInput is an input file that is not text: NUL, bytes that are not
// UTF-8, a CR.
var binInput = []byte{0, 1, 0xfe, 0xff, '\r', '\n', 0x80, 0}

// submit reads the files an input names with from and sends their bytes
// as data (base64), the rest of the job file as it was.
func TestSubmitInputsFromFiles(t *testing.T) {
	dir, job := jobWithInputs(t, "  - {path: params.txt, content: \"a=1\\n\"}\n  - {path: data/in.bin, from: in/sample.bin}\n")
	if err := os.Mkdir(filepath.Join(dir, "in"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "in", "sample.bin"), binInput, 0o644); err != nil {
		t.Fatal(err)
	}
	queued := jobRunning
	queued.State = "queued"
	want := "# the render job\nname: render-42\ntype: render\ntasks: 300\ntask_ops: 2.0e11\ntask_bytes: 5.0e7\nvm: {vcpus: 2, memory_mib: 2048}\n" +
		"inputs:\n    - {path: params.txt, content: \"a=1\\n\"}\n    - {path: data/in.bin, data: " + base64.StdEncoding.EncodeToString(binInput) + "}\n"
	f := newFakeDaemon(t, daemonToken, daemonRoute{Method: "POST", Path: "/v1/jobs", Body: &want, Status: 201, Answer: queued})
	code, out, errOut := runDaemonCmd(t, f.URL, daemonToken, "submit", job)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if !strings.HasPrefix(out, queued.ID+" ") {
		t.Errorf("stdout %q", out)
	}
	reqs := f.requests()
	if len(reqs) != 1 {
		t.Fatalf("%d requests, want 1", len(reqs))
	}
	j, err := selection.ParseJob("body", []byte(reqs[0].Body))
	if err != nil {
		t.Fatal(err)
	}
	if len(j.Inputs) != 2 || string(j.Inputs[1].Data) != string(binInput) || j.Inputs[1].From != "" || j.Inputs[0].Content != "a=1\n" {
		t.Errorf("the inputs sent: %+v", j.Inputs)
	}
}

// A bad input is refused before anything is sent, with exit 2 and the
// file and field named.
func TestSubmitInputsFromFilesErrors(t *testing.T) {
	big := filepath.Join(t.TempDir(), "big.bin")
	if err := os.WriteFile(big, make([]byte, selection.MaxInputBytes), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, inputs, want string
	}{
		{"missing", "  - {path: a.bin, from: missing.bin}\n", "inputs[0].from: open DIR/missing.bin: no such file or directory"},
		{"directory", "  - {path: a.bin, from: .}\n", "inputs[0].from: DIR is not a regular file (d---------)"},
		{"too big", "  - {path: a.txt, content: x}\n  - {path: a.bin, from: " + big + "}\n",
			"inputs[1].from: " + big + ": too big: the inputs must be at most 524288 bytes in all, and 524287 are left for this file"},
		{"outside", "  - {path: ../a.bin, from: " + big + "}\n", `inputs[0].path: must be a clean path inside the working directory (no '.', '..' or '//'), got "../a.bin"`},
		{"absolute", "  - {path: /etc/a.bin, from: " + big + "}\n", `inputs[0].path: must be relative to the command's working directory, got "/etc/a.bin"`},
		{"both", "  - {path: a.bin, from: " + big + ", data: eA==}\n", "inputs[0].from: give one of content, data and from, not both data and from"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, job := jobWithInputs(t, tc.inputs)
			f := newFakeDaemon(t, daemonToken)
			code, _, errOut := runDaemonCmd(t, f.URL, daemonToken, "submit", job)
			if code != 2 || !strings.Contains(errOut, job+":") || !strings.Contains(errOut, strings.ReplaceAll(tc.want, "DIR", dir)) {
				t.Errorf("exit %d, stderr %q; want 2 and %q", code, errOut, tc.want)
			}
			if n := len(f.requests()); n != 0 {
				t.Errorf("%d requests sent for a bad job file", n)
			}
		})
	}
}

// The example job with files: submit would send its local input's bytes.
func TestExampleJobFiles(t *testing.T) {
	const file = "../../examples/job-files-guests.yaml"
	body, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	sent, err := inlineInputs(file, body)
	if err != nil {
		t.Fatal(err)
	}
	j, err := selection.ParseJob("body", sent)
	if err != nil {
		t.Fatal(err)
	}
	seed, err := os.ReadFile("../../examples/job-files-seed.bin")
	if err != nil {
		t.Fatal(err)
	}
	if len(j.Inputs) != 2 || j.Inputs[1].Path != "data/seed.bin" || j.Inputs[1].From != "" || string(j.Inputs[1].Data) != string(seed) {
		t.Errorf("the example's inputs as sent: %+v", j.Inputs)
	}
	if !strings.Contains(string(sent), "# A job of serve-guests.yaml's pool farm") || len(j.Command) != 3 {
		t.Errorf("the rest of the example changed on the way:\n%s", sent)
	}
}

// A JSON job file with from stays JSON: the data is a JSON string.
func TestSubmitInputsFromFilesJSON(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "in.bin"), binInput, 0o644); err != nil {
		t.Fatal(err)
	}
	job := filepath.Join(dir, "job.json")
	body := `{"name": "j", "type": "render", "tasks": 3, "task_ops": 1e9, "task_bytes": 0, "inputs": [{"path": "a.bin", "from": "in.bin"}]}`
	sent, err := inlineInputs(job, []byte(body))
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		Inputs []struct{ Path, Data string }
	}
	if err := json.Unmarshal(sent, &v); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, sent)
	}
	if len(v.Inputs) != 1 || v.Inputs[0].Data != base64.StdEncoding.EncodeToString(binInput) {
		t.Errorf("inputs sent: %+v", v.Inputs)
	}
}
