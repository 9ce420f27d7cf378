package api

import (
	"encoding/json"
	"fmt"
	"time"
)

// JobSpec is a job as its job file gave it (docs/reference/job-file.md), with
// the defaults filled in: Tasks worker tasks of TaskOps operations each,
// each exchanging TaskBytes with the master. It is the wire form of the
// daemon's job, field for field; the job file itself is parsed by the
// daemon, not here.
type JobSpec struct {
	Name      string  `json:"name"`
	Type      string  `json:"type"`
	Tasks     int     `json:"tasks"`
	TaskOps   float64 `json:"task_ops"`
	TaskBytes float64 `json:"task_bytes"`
	// Efficiency is the minimum worker efficiency θ in (0, 1].
	Efficiency float64  `json:"efficiency"`
	VM         VMSize   `json:"vm"`
	Command    []string `json:"command,omitempty"`
	// Walltime is the longest an attempt of the job may run; 0: the
	// daemon's default.
	Walltime Duration    `json:"walltime,omitempty"`
	Inputs   []InputFile `json:"inputs,omitempty"`
	Outputs  []string    `json:"outputs,omitempty"`
	// Master is the master cluster the job forces; "": the algorithm
	// chooses it.
	Master string `json:"master,omitempty"`
	// Placement is the algorithm that places the job: gramvm, met, mct or
	// olb; "" means gramvm.
	Placement string `json:"placement,omitempty"`
	// Elastic says the job's program survives the loss of a worker VM.
	Elastic bool `json:"elastic,omitempty"`
}

// VMSize is the shape of the VM each machine of a job runs in.
type VMSize struct {
	VCPUs     int `json:"vcpus"`
	MemoryMiB int `json:"memory_mib"`
}

// InputFile is a file of a job's inputs: its path relative to the
// command's working directory and its bytes, given as Content (text),
// Data (any bytes, base64 in JSON) or From (a file of the submitting
// machine, which the client reads and sends as Data).
type InputFile struct {
	Path    string `json:"path"`
	Content string `json:"content,omitempty"`
	Data    []byte `json:"data,omitempty"`
	From    string `json:"from,omitempty"`
}

// MarshalJSON writes {"path", and one of "content", "data" (base64) or
// "from"}: the form the file was given in, as the daemon writes it, so
// that a job reads back the same.
func (in InputFile) MarshalJSON() ([]byte, error) {
	switch {
	case in.From != "":
		return json.Marshal(struct {
			Path string `json:"path"`
			From string `json:"from"`
		}{in.Path, in.From})
	case in.Data != nil:
		return json.Marshal(struct {
			Path string `json:"path"`
			Data []byte `json:"data"`
		}{in.Path, in.Data})
	}
	return json.Marshal(struct {
		Path    string `json:"path"`
		Content string `json:"content"`
	}{in.Path, in.Content})
}

// UnmarshalJSON reads what MarshalJSON writes: "data" given, even empty,
// is Data (not nil), so that the file's form survives a round trip.
func (in *InputFile) UnmarshalJSON(b []byte) error {
	var x struct {
		Path    string  `json:"path"`
		Content string  `json:"content"`
		Data    *[]byte `json:"data"`
		From    string  `json:"from"`
	}
	if err := json.Unmarshal(b, &x); err != nil {
		return err
	}
	*in = InputFile{Path: x.Path, Content: x.Content, From: x.From}
	if x.Data != nil {
		in.Data = *x.Data
		if in.Data == nil {
			in.Data = []byte{}
		}
	}
	return nil
}

// Duration is a time.Duration that JSON holds as its string ("1h30m0s"),
// as a job file gives it.
type Duration time.Duration

// MarshalJSON writes the duration as a string.
func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(time.Duration(d).String())
}

// UnmarshalJSON reads a duration string.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("a duration must be a string like \"10m\": %w", err)
	}
	x, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	*d = Duration(x)
	return nil
}
