package selection

import (
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/metasched/metasched/internal/yamlx"
)

// Job is a master-worker job (docs/design.md, "Job"): Tasks worker tasks of
// TaskOps operations each, each exchanging TaskBytes with the master.
type Job struct {
	Name      string  `json:"name"`
	Type      string  `json:"type"`
	Tasks     int     `json:"tasks"`
	TaskOps   float64 `json:"task_ops"`
	TaskBytes float64 `json:"task_bytes"`
	// Efficiency is the minimum worker efficiency θ in (0, 1]: a worker
	// may wait for data at most 1−θ of its time.
	Efficiency float64  `json:"efficiency"`
	VM         VM       `json:"vm"`
	Command    []string `json:"command,omitempty"`
}

// VM is the shape of the virtual machine each worker (and the master) runs
// in: one VM per machine.
type VM struct {
	VCPUs     int `json:"vcpus"`
	MemoryMiB int `json:"memory_mib"`
}

// Defaults of a job file's optional fields.
const (
	DefaultEfficiency = 0.8
	DefaultVCPUs      = 1
	DefaultMemoryMiB  = 1024
)

var (
	jobFields = []string{"name", "type", "tasks", "task_ops", "task_bytes", "efficiency", "vm", "command"}
	vmFields  = []string{"vcpus", "memory_mib"}
)

// ParseJob decodes a job file (YAML or JSON, docs/design.md "Job") strictly,
// reporting every problem as "FILE: FIELD.PATH: problem", one per line in
// document order. The job's type is checked for its form only: whether it
// names a registered pool is for the daemon to say.
func ParseJob(file string, data []byte) (*Job, error) {
	d, root, err := yamlx.Parse(file, data)
	if err != nil {
		return nil, err
	}
	top, ok := root.Map(jobFields...)
	if !ok {
		return nil, d.Err()
	}
	j := &Job{Efficiency: DefaultEfficiency, VM: VM{VCPUs: DefaultVCPUs, MemoryMiB: DefaultMemoryMiB}}
	j.Name, _ = top.Str("name", true)
	j.Type, _ = top.Str("type", true)
	j.Tasks, _ = top.Int("tasks", true)
	j.TaskOps, _ = top.Float("task_ops", true)
	j.TaskBytes, _ = top.Float("task_bytes", true)
	if x, ok := top.Float("efficiency", false); ok {
		j.Efficiency = x
	}
	if v, ok := top.Get("vm", false); ok {
		if m, ok := v.Map(vmFields...); ok {
			if n, ok := m.Int("vcpus", false); ok {
				j.VM.VCPUs = n
			}
			if n, ok := m.Int("memory_mib", false); ok {
				j.VM.MemoryMiB = n
			}
		}
	}
	if vs, ok := top.Seq("command", false); ok {
		for _, v := range vs {
			s, _ := v.Str()
			j.Command = append(j.Command, s)
		}
	}
	j.check(func(path, msg string) {
		if !d.Failed(path) {
			d.Errorf(path, "%s", msg)
		}
	})
	if err := d.Err(); err != nil {
		return nil, err
	}
	return j, nil
}

// Validate applies the rules of ParseJob to a job built in code (a request
// body, say): every problem as "FIELD.PATH: problem".
func (j *Job) Validate() error {
	var errs []error
	j.check(func(path, msg string) { errs = append(errs, errors.New(path+": "+msg)) })
	return errors.Join(errs...)
}

func (j *Job) check(bad func(path, msg string)) {
	if !validJobName(j.Name) {
		bad("name", fmt.Sprintf("must be 1 to 128 of a-z, A-Z, 0-9, '.', '_' and '-', got %q", j.Name))
	}
	if !yamlx.IsName(j.Type) {
		bad("type", fmt.Sprintf("must match [a-z0-9-]+ (a job type), got %q", j.Type))
	}
	if j.Tasks < 1 {
		bad("tasks", fmt.Sprintf("must be an integer >= 1, got %d", j.Tasks))
	}
	if !(j.TaskOps > 0) || math.IsInf(j.TaskOps, 0) {
		bad("task_ops", fmt.Sprintf("must be a number > 0 (operations per task), got %g", j.TaskOps))
	}
	if !(j.TaskBytes >= 0) || math.IsInf(j.TaskBytes, 0) {
		bad("task_bytes", fmt.Sprintf("must be a number >= 0 (bytes per task), got %g", j.TaskBytes))
	}
	if !(j.Efficiency > 0 && j.Efficiency <= 1) {
		bad("efficiency", fmt.Sprintf("must be > 0 and <= 1, got %g", j.Efficiency))
	}
	if j.VM.VCPUs < 1 {
		bad("vm.vcpus", fmt.Sprintf("must be an integer >= 1, got %d", j.VM.VCPUs))
	}
	if j.VM.MemoryMiB < 1 {
		bad("vm.memory_mib", fmt.Sprintf("must be an integer >= 1, got %d", j.VM.MemoryMiB))
	}
	for i, a := range j.Command {
		if i == 0 && strings.TrimSpace(a) == "" {
			bad("command[0]", "must name the program to run, got an empty string")
		}
	}
}

func validJobName(s string) bool {
	if s == "" || len(s) > 128 {
		return false
	}
	for _, r := range s {
		if !('a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' || r == '.' || r == '_' || r == '-') {
			return false
		}
	}
	return true
}
