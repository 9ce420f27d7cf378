package selection

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/metasched/metasched/internal/yamlx"
)

// Job is a master-worker job (docs/reference/job-file.md): Tasks worker tasks
// of TaskOps operations each, each exchanging TaskBytes with the master.
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
	// Walltime is the longest an attempt of the job may run (from its
	// VMs' start); 0: the daemon's default. In a job file, a duration
	// like 10m or 2h30m.
	Walltime Duration `json:"walltime,omitempty"`
	// Inputs are files written into every VM of the job, relative to the
	// command's working directory, before the command starts; Outputs are
	// files copied out of the master VM (relative to the same directory)
	// into the job's directory once the command has ended. The guest
	// executor's (as HTCondor's transfer_input_files and
	// transfer_output_files).
	Inputs  []InputFile `json:"inputs,omitempty"`
	Outputs []string    `json:"outputs,omitempty"`
	// Master forces the master cluster (a cluster of the grid, as plan
	// --master does); "": the algorithm chooses it. Only with the gramvm
	// placement: a baseline chooses its one cluster itself.
	Master string `json:"master,omitempty"`
	// Placement is the algorithm that places the job: gramvm (GramVM's
	// hill climbing, the default; "" means it too), or one of the
	// single-cluster baselines met, mct and olb
	// (docs/research/selection.md, "Baselines: MET, MCT, OLB").
	Placement Placement `json:"placement,omitempty"`
	// Elastic says the job's program survives the loss of a worker VM
	// (the project's task farm does: its master gives a lost worker's
	// tasks to the others). The daemon then takes a worker's host away
	// from a running job, or lets a worker VM that disappeared go,
	// without restarting the job; only the loss of its master VM (or of
	// its last worker) restarts it. Default false: any lost VM restarts
	// the job.
	Elastic bool `json:"elastic,omitempty"`
}

// Placement names the algorithm that places a job on the grid.
type Placement string

// The placements of a job file's placement field.
const (
	PlaceGramVM Placement = "gramvm"
	PlaceMET    Placement = "met"
	PlaceMCT    Placement = "mct"
	PlaceOLB    Placement = "olb"
)

// Placements lists every placement, the default first.
var Placements = []Placement{PlaceGramVM, PlaceMET, PlaceMCT, PlaceOLB}

// PlacementOrDefault returns the job's placement, gramvm when it gives
// none.
func (j *Job) PlacementOrDefault() Placement {
	if j.Placement == "" {
		return PlaceGramVM
	}
	return j.Placement
}

// Algorithm is the selection algorithm of a placement: hill climbing for
// gramvm, else the baseline of the same name; "" for an unknown one.
func (p Placement) Algorithm() Algorithm {
	switch p {
	case "", PlaceGramVM:
		return HillClimb
	case PlaceMET:
		return MET
	case PlaceMCT:
		return MCT
	case PlaceOLB:
		return OLB
	}
	return ""
}

// Baseline reports whether the placement is one of the single-cluster
// baselines (met, mct, olb).
func (p Placement) Baseline() bool { return p == PlaceMET || p == PlaceMCT || p == PlaceOLB }

// InputFile is a file of a job's inputs: its path relative to the
// command's working directory and its bytes, given one of three ways:
// Content (text, inline), Data (any bytes; base64 in JSON and YAML), or
// From, a file on the submitting machine (relative to the job file) that
// the client reads and sends as Data: the daemon takes Content or Data
// only.
type InputFile struct {
	Path    string `json:"path"`
	Content string `json:"content,omitempty"`
	Data    []byte `json:"data,omitempty"`
	From    string `json:"from,omitempty"`
}

// Bytes is what the input writes: Data, or Content when Data is nil.
func (in InputFile) Bytes() []byte {
	if in.Data != nil {
		return in.Data
	}
	return []byte(in.Content)
}

// MarshalJSON writes {"path", and one of "content", "data" (base64) or
// "from"}: the form the file was given in, so that it parses back the
// same.
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

// UnmarshalJSON reads what MarshalJSON writes (a stored job).
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

// The limits of a job's command: the arguments, and their bytes in all
// (within Linux's ARG_MAX, with room for the environment).
const (
	MaxCommandArgs  = 4096
	MaxCommandBytes = 256 << 10
)

// The limits of a job's files.
const (
	MaxJobFiles      = 64        // inputs, and outputs
	MaxInputBytes    = 512 << 10 // the contents of all inputs
	MaxJobFilePath   = 255       // bytes of a file's path
	MaxOutputFileLen = 8 << 20   // bytes copied of one output
)

// CheckJobFilePath says what is wrong with a path of a job's inputs or
// outputs: it must be relative to the working directory, clean, inside it
// (no ".."), without NUL, at most MaxJobFilePath bytes; "" when right.
func CheckJobFilePath(p string) string {
	switch {
	case p == "":
		return "must not be empty"
	case len(p) > MaxJobFilePath:
		return fmt.Sprintf("must be at most %d bytes, got %d", MaxJobFilePath, len(p))
	case strings.ContainsRune(p, 0):
		return "must not contain NUL"
	case strings.HasPrefix(p, "/"):
		return fmt.Sprintf("must be relative to the command's working directory, got %q", p)
	case path.Clean(p) != p || p == "." || p == ".." || strings.HasPrefix(p, "../"):
		return fmt.Sprintf("must be a clean path inside the working directory (no '.', '..' or '//'), got %q", p)
	}
	return ""
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
	jobFields = []string{"name", "type", "tasks", "task_ops", "task_bytes", "efficiency", "vm", "command", "walltime", "inputs", "outputs", "master", "placement", "elastic"}
	vmFields  = []string{"vcpus", "memory_mib"}
)

// ParseJob decodes a job file (YAML or JSON, docs/reference/job-file.md)
// strictly, reporting every problem as "FILE: FIELD.PATH: problem", one per
// line in document order. The job's type is checked for its form only: whether
// it names a registered pool is for the daemon to say.
func ParseJob(file string, data []byte) (*Job, error) {
	j, _, err := ParseJobFields(file, data)
	return j, err
}

// ParseJobFields is ParseJob that also lists the top-level fields the file
// gave, in the order of the job file's fields: a field left out has its
// default in the job, which a reader of the job alone cannot tell from the
// same value given (the daemon gives a job without vm its type's VM).
func ParseJobFields(file string, data []byte) (*Job, []string, error) {
	d, root, err := yamlx.Parse(file, data)
	if err != nil {
		return nil, nil, err
	}
	top, ok := root.Map(jobFields...)
	if !ok {
		return nil, nil, d.Err()
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
	if v, ok := top.Get("walltime", false); ok {
		if s, ok := v.Str(); ok {
			w, err := time.ParseDuration(s)
			if err != nil {
				v.Errorf("not a duration like 10m or 2h30m: %q", s)
			} else {
				j.Walltime = Duration(w)
				if w <= 0 {
					j.Walltime = -1 // check names it
				}
			}
		}
	}
	if vs, ok := top.Seq("inputs", false); ok {
		for _, v := range vs {
			if m, ok := v.Map("path", "content", "data", "from"); ok {
				j.Inputs = append(j.Inputs, parseInput(m))
			}
		}
	}
	if vs, ok := top.Seq("outputs", false); ok {
		for _, v := range vs {
			s, _ := v.Str()
			j.Outputs = append(j.Outputs, s)
		}
	}
	if s, ok := top.Str("master", false); ok {
		if s == "" {
			top.Errorf("master", "must name a cluster, got an empty string (leave master out to let the placement choose)")
		}
		j.Master = s
	}
	if s, ok := top.Str("placement", false); ok {
		if s == "" {
			top.Errorf("placement", "must be one of %s, got an empty string (leave placement out for %s)", placementNames(), PlaceGramVM)
		}
		j.Placement = Placement(s)
	}
	j.Elastic, _ = top.Bool("elastic", false)
	j.check(func(path, msg string) {
		if !d.Failed(path) {
			d.Errorf(path, "%s", msg)
		}
	})
	if err := d.Err(); err != nil {
		return nil, nil, err
	}
	var given []string
	for _, f := range jobFields {
		if top.Has(f) {
			given = append(given, f)
		}
	}
	return j, given, nil
}

// parseInput reads an input: its path and exactly one of content, data
// (base64) and from.
func parseInput(m *yamlx.Map) InputFile {
	var in InputFile
	in.Path, _ = m.Str("path", true)
	var given []string
	for _, k := range []string{"content", "data", "from"} {
		if m.Has(k) {
			given = append(given, k)
		}
	}
	switch {
	case len(given) == 0:
		m.Errorf("content", "missing: give content (text), data (base64) or from (a local file, read by metasched submit)")
		return in
	case len(given) > 1:
		m.Errorf(given[1], "give one of content, data and from, not both %s and %s", given[0], given[1])
		return in
	}
	switch given[0] {
	case "content":
		in.Content, _ = m.Str("content", true)
	case "data":
		if s, ok := m.Str("data", true); ok {
			b, err := base64.StdEncoding.DecodeString(s)
			if err != nil {
				m.Errorf("data", "not base64 (standard alphabet, padded): %v", err)
			} else {
				in.Data = b
			}
		}
	case "from":
		if s, ok := m.Str("from", true); ok {
			if s == "" {
				m.Errorf("from", "must name a local file, got an empty string")
			}
			in.From = s
		}
	}
	return in
}

// Shape is what a job's plan depends on besides the grid and its free
// hosts: its tasks and their figures, its VM, its placement and its forced
// master (not its name, type or command). Two jobs of the same shape and
// pool get the same plan on the same hosts: the dispatcher remembers what
// did not fit per shape, and planning reuses a search per shape.
func (j *Job) Shape() string {
	b := make([]byte, 0, 64)
	b = strconv.AppendInt(b, int64(j.Tasks), 10)
	for _, x := range []float64{j.TaskOps, j.TaskBytes, j.Efficiency} {
		b = append(b, '|')
		b = strconv.AppendFloat(b, x, 'g', -1, 64)
	}
	b = append(b, '|')
	b = strconv.AppendInt(b, int64(j.VM.VCPUs), 10)
	b = append(b, '|')
	b = strconv.AppendInt(b, int64(j.VM.MemoryMiB), 10)
	b = append(b, '|')
	b = append(b, j.PlacementOrDefault()...)
	b = append(b, '|')
	b = append(b, j.Master...)
	return string(b)
}

// Validate applies the rules of ParseJob to a job built in code (a request
// body, say): every problem as "FIELD.PATH: problem".
func (j *Job) Validate() error {
	var errs []error
	j.check(func(path, msg string) { errs = append(errs, errors.New(path+": "+msg)) })
	return errors.Join(errs...)
}

// The limits of a job's numbers: what the model's arithmetic and a run
// time in time.Duration hold with room to spare. A plan whose predicted run
// time passes MaxRuntimeSeconds is infeasible.
const (
	MaxTasks          = 10_000_000
	MinTaskOps        = 1
	MaxTaskOps        = 1e18
	MaxTaskBytes      = 1e15
	MinEfficiency     = 0.01
	MaxVCPUs          = 1024
	MaxMemoryMiB      = 16 << 20 // 16 TiB
	MaxRuntimeSeconds = 10 * 365 * 24 * 3600.0
)

func (j *Job) check(bad func(path, msg string)) {
	switch {
	case !validJobName(j.Name):
		bad("name", fmt.Sprintf("must be 1 to 128 of a-z, A-Z, 0-9, '.', '_' and '-', got %q", j.Name))
	case !isAlnum(rune(j.Name[0])):
		bad("name", fmt.Sprintf("must begin with a letter or a digit, got %q", j.Name))
	}
	if !yamlx.IsName(j.Type) {
		bad("type", fmt.Sprintf("must match [a-z0-9-]+ (a job type), got %q", j.Type))
	}
	switch {
	case j.Tasks < 1:
		bad("tasks", fmt.Sprintf("must be an integer >= 1, got %d", j.Tasks))
	case j.Tasks > MaxTasks:
		bad("tasks", fmt.Sprintf("must be at most %d, got %d", MaxTasks, j.Tasks))
	}
	switch {
	case !(j.TaskOps > 0) || math.IsInf(j.TaskOps, 0):
		bad("task_ops", fmt.Sprintf("must be a number > 0 (operations per task), got %g", j.TaskOps))
	case j.TaskOps < MinTaskOps || j.TaskOps > MaxTaskOps:
		bad("task_ops", fmt.Sprintf("must be from %g to %g operations per task, got %g", float64(MinTaskOps), MaxTaskOps, j.TaskOps))
	}
	switch {
	case !(j.TaskBytes >= 0) || math.IsInf(j.TaskBytes, 0):
		bad("task_bytes", fmt.Sprintf("must be a number >= 0 (bytes per task), got %g", j.TaskBytes))
	case j.TaskBytes > MaxTaskBytes:
		bad("task_bytes", fmt.Sprintf("must be at most %g bytes per task, got %g", MaxTaskBytes, j.TaskBytes))
	}
	switch {
	case !(j.Efficiency > 0 && j.Efficiency <= 1):
		bad("efficiency", fmt.Sprintf("must be > 0 and <= 1, got %g", j.Efficiency))
	case j.Efficiency < MinEfficiency:
		bad("efficiency", fmt.Sprintf("must be at least %g, got %g", MinEfficiency, j.Efficiency))
	}
	switch {
	case j.VM.VCPUs < 1:
		bad("vm.vcpus", fmt.Sprintf("must be an integer >= 1, got %d", j.VM.VCPUs))
	case j.VM.VCPUs > MaxVCPUs:
		bad("vm.vcpus", fmt.Sprintf("must be at most %d, got %d", MaxVCPUs, j.VM.VCPUs))
	}
	switch {
	case j.VM.MemoryMiB < 1:
		bad("vm.memory_mib", fmt.Sprintf("must be an integer >= 1, got %d", j.VM.MemoryMiB))
	case j.VM.MemoryMiB > MaxMemoryMiB:
		bad("vm.memory_mib", fmt.Sprintf("must be at most %d, got %d", MaxMemoryMiB, j.VM.MemoryMiB))
	}
	switch {
	case j.Walltime < 0:
		bad("walltime", "must be a duration > 0 (like 10m)")
	case time.Duration(j.Walltime) > MaxRuntimeSeconds*time.Second:
		bad("walltime", fmt.Sprintf("must be at most %s, got %s", time.Duration(MaxRuntimeSeconds*float64(time.Second)), time.Duration(j.Walltime)))
	}
	j.checkPlacement(bad)
	j.checkFiles(bad)
	total := 0
	for i, a := range j.Command {
		if i == 0 && strings.TrimSpace(a) == "" {
			bad("command[0]", "must name the program to run, got an empty string")
		}
		total += len(a)
	}
	switch {
	case len(j.Command) > MaxCommandArgs:
		bad("command", fmt.Sprintf("has %d arguments, more than %d", len(j.Command), MaxCommandArgs))
	case total > MaxCommandBytes:
		bad("command", fmt.Sprintf("has %d bytes of arguments, more than %d", total, MaxCommandBytes))
	}
}

// checkPlacement checks master and placement: a master is a cluster's
// name (whether the grid has it is for the daemon or the plan to say), a
// placement one of Placements, and a forced master goes with gramvm only.
func (j *Job) checkPlacement(bad func(path, msg string)) {
	if j.Master != "" && !yamlx.IsName(j.Master) {
		bad("master", fmt.Sprintf("must be a cluster's name ([a-z0-9-]+), got %q", j.Master))
	}
	if j.Placement != "" && j.Placement.Algorithm() == "" {
		bad("placement", fmt.Sprintf("must be one of %s, got %q", placementNames(), j.Placement))
	}
	if j.Master != "" && j.Placement.Baseline() {
		bad("master", fmt.Sprintf("a baseline placement (%s) places the whole job on the one cluster it chooses: give master only with placement gramvm", j.Placement))
	}
}

// placementNames lists the placements for a message.
func placementNames() string {
	names := make([]string, len(Placements))
	for i, x := range Placements {
		names[i] = string(x)
	}
	return strings.Join(names, ", ")
}

func (j *Job) checkFiles(bad func(path, msg string)) {
	if len(j.Inputs) > MaxJobFiles {
		bad("inputs", fmt.Sprintf("must list at most %d files, got %d", MaxJobFiles, len(j.Inputs)))
	}
	if len(j.Outputs) > MaxJobFiles {
		bad("outputs", fmt.Sprintf("must list at most %d files, got %d", MaxJobFiles, len(j.Outputs)))
	}
	seen := map[string]bool{}
	total := 0
	for i, in := range j.Inputs {
		at := fmt.Sprintf("inputs[%d].path", i)
		if why := CheckJobFilePath(in.Path); why != "" {
			bad(at, why)
		} else if seen[in.Path] {
			bad(at, fmt.Sprintf("%q is listed twice", in.Path))
		}
		seen[in.Path] = true
		if n := btoi(in.Content != "") + btoi(in.Data != nil) + btoi(in.From != ""); n > 1 {
			bad(fmt.Sprintf("inputs[%d]", i), "give one of content, data and from")
		}
		total += len(in.Content) + len(in.Data)
	}
	if total > MaxInputBytes {
		bad("inputs", fmt.Sprintf("the contents must be at most %d bytes in all, got %d", MaxInputBytes, total))
	}
	seen = map[string]bool{}
	for i, p := range j.Outputs {
		at := fmt.Sprintf("outputs[%d]", i)
		if why := CheckJobFilePath(p); why != "" {
			bad(at, why)
		} else if seen[p] {
			bad(at, fmt.Sprintf("%q is listed twice", p))
		}
		seen[p] = true
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

func validJobName(s string) bool {
	if s == "" || len(s) > 128 {
		return false
	}
	for _, r := range s {
		if !isAlnum(r) && r != '.' && r != '_' && r != '-' {
			return false
		}
	}
	return true
}

func isAlnum(r rune) bool {
	return 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9'
}
