package slurm

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Node is a Slurm node as sinfo --json reports it.
type Node struct {
	Name    string
	Address string // NodeAddr: where its jobs' commands and peers reach it
	CPUs    int
	// MemoryMiB is its configured memory (RealMemory).
	MemoryMiB int
	// AllocCPUs and AllocMemoryMiB are what running jobs hold on it.
	AllocCPUs, AllocMemoryMiB int
	// State is the base state: idle, mixed, allocated, down, future,
	// unknown or error; Flags are its flags (DRAIN, NOT_RESPONDING,
	// COMPLETING, …), upper case.
	State string
	Flags []string
	// Partitions are the partitions it belongs to, in Slurm's order.
	Partitions []string
	Reason     string
}

// Drain reports whether the node is drained or draining: it takes no new
// job.
func (n Node) Drain() bool { return slices.Contains(n.Flags, "DRAIN") }

// Down reports whether the node cannot run jobs: down, in error, or not
// yet known to the controller. A node only flagged NOT_RESPONDING is not
// down: the controller sets the flag when its slurmd misses a ping (and
// for a moment at every State=RESUME, until the node answers the ping
// that follows), and marks the node down itself after its SlurmdTimeout.
func (n Node) Down() bool {
	return n.State == "down" || n.State == "error" || n.State == "unknown"
}

// Unreachable reports whether the controller cannot reach the node now:
// down, or its slurmd not answering a ping (which may pass).
func (n Node) Unreachable() bool { return n.Down() || slices.Contains(n.Flags, "NOT_RESPONDING") }

// Busy reports whether some job holds part of the node.
func (n Node) Busy() bool {
	return n.AllocCPUs > 0 || n.State == "mixed" || n.State == "allocated" || slices.Contains(n.Flags, "COMPLETING")
}

// Job is a Slurm job as squeue --json reports it.
type Job struct {
	ID    int
	Name  string
	State string // PENDING, RUNNING, COMPLETING, …
	// Reason is why it is in its state (Slurm's state_reason: Resources,
	// Priority, …), "" for none.
	Reason    string
	User      string
	Partition string
	Comment   string
	// Nodes are the nodes it holds (none while pending).
	Nodes []string
	// TimeLimitMinutes is its time limit, 0 for none.
	TimeLimitMinutes int
	// CPUs are the CPUs it holds in all, MemoryMiB its memory per node
	// (0: not given).
	CPUs, MemoryMiB int
}

// AllocPrefix starts the Slurm job name of every allocation metasched
// makes.
const AllocPrefix = "metasched:"

// AllocName is the Slurm job name of metasched job job's allocation.
func AllocName(job string) string { return AllocPrefix + job }

// Own reports whether the job is an allocation of metasched's, and for
// which of its jobs.
func (j Job) Own() (job string, ok bool) { return strings.CutPrefix(j.Name, AllocPrefix) }

// Active reports whether the job holds or may soon hold nodes.
func (j Job) Active() bool {
	switch j.State {
	case "PENDING", "RUNNING", "CONFIGURING", "COMPLETING", "SUSPENDED", "REQUEUED", "RESIZING", "SIGNALING", "STAGE_OUT":
		return true
	}
	return false
}

// MaxDocument bounds the JSON documents ParseNodes and ParseJobs read.
const MaxDocument = 64 << 20

// ErrBadDocument wraps every error of ParseNodes and ParseJobs.
var ErrBadDocument = errors.New("slurm: bad document")

type document struct {
	Meta struct {
		Plugin struct {
			Type string `json:"type"`
		} `json:"plugin"`
	} `json:"meta"`
	Errors []struct {
		Error  string `json:"error"`
		Errno  int    `json:"errno"`
		Source string `json:"source"`
	} `json:"errors"`
	Nodes *[]jsonNode `json:"nodes"`
	Jobs  *[]jsonJob  `json:"jobs"`
}

type jsonNode struct {
	Name        *string  `json:"name"`
	Address     string   `json:"address"`
	CPUs        int      `json:"cpus"`
	RealMemory  int      `json:"real_memory"`
	AllocCPUs   int      `json:"alloc_cpus"`
	AllocMemory int      `json:"alloc_memory"`
	State       *string  `json:"state"`
	StateFlags  []string `json:"state_flags"`
	Partitions  []string `json:"partitions"`
	Reason      string   `json:"reason"`
}

type jsonJob struct {
	ID        *int   `json:"job_id"`
	Name      string `json:"name"`
	State     string `json:"job_state"`
	Reason    string `json:"state_reason"`
	User      string `json:"user_name"`
	Partition string `json:"partition"`
	Comment   string `json:"comment"`
	Nodes     string `json:"nodes"`
	TimeLimit *int   `json:"time_limit"`
	CPUs      int    `json:"cpus"`
	MemoryPN  *int   `json:"memory_per_node"`
}

func decode(what string, data []byte) (*document, error) {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: %s: %s", ErrBadDocument, what, fmt.Sprintf(format, a...))
	}
	if len(data) > MaxDocument {
		return nil, bad("%d bytes, more than the %d read", len(data), MaxDocument)
	}
	var d document
	if err := json.Unmarshal(data, &d); err != nil {
		return nil, bad("%v", err)
	}
	if len(d.Errors) > 0 {
		e := d.Errors[0]
		return nil, bad("Slurm reports an error: %s (errno %d, %s)", e.Error, e.Errno, e.Source)
	}
	if p := d.Meta.Plugin.Type; p != "" && !strings.HasPrefix(p, "openapi/v0.0.") {
		return nil, bad("meta.plugin.type %q: not a Slurm OpenAPI v0.0.x document", p)
	}
	return &d, nil
}

// ParseNodes reads the nodes of an sinfo --json document. Every node has
// a name and a state, positive CPUs and memory, and no allocation beyond
// them.
func ParseNodes(data []byte) ([]Node, error) {
	d, err := decode("sinfo --json", data)
	if err != nil {
		return nil, err
	}
	if d.Nodes == nil {
		return nil, fmt.Errorf("%w: sinfo --json: no nodes field", ErrBadDocument)
	}
	seen := map[string]bool{}
	nodes := make([]Node, 0, len(*d.Nodes))
	for i, j := range *d.Nodes {
		bad := func(field, format string, a ...any) error {
			return fmt.Errorf("%w: sinfo --json: nodes[%d].%s: %s", ErrBadDocument, i, field, fmt.Sprintf(format, a...))
		}
		switch {
		case j.Name == nil || !hostName(*j.Name):
			return nil, bad("name", "missing or not a host name")
		case seen[*j.Name]:
			return nil, bad("name", "%q twice", *j.Name)
		case j.State == nil || *j.State == "":
			return nil, bad("state", "missing")
		case j.CPUs < 1:
			return nil, bad("cpus", "must be >= 1, got %d", j.CPUs)
		case j.RealMemory < 1:
			return nil, bad("real_memory", "must be >= 1, got %d", j.RealMemory)
		case j.AllocCPUs < 0 || j.AllocCPUs > j.CPUs:
			return nil, bad("alloc_cpus", "must be from 0 to its %d CPUs, got %d", j.CPUs, j.AllocCPUs)
		case j.AllocMemory < 0:
			return nil, bad("alloc_memory", "must be >= 0, got %d", j.AllocMemory)
		}
		for k, p := range j.Partitions {
			if !hostName(p) {
				return nil, bad(fmt.Sprintf("partitions[%d]", k), "%q is not a partition name", p)
			}
		}
		seen[*j.Name] = true
		n := Node{Name: *j.Name, Address: j.Address, CPUs: j.CPUs, MemoryMiB: j.RealMemory,
			AllocCPUs: j.AllocCPUs, AllocMemoryMiB: j.AllocMemory, State: strings.ToLower(*j.State),
			Partitions: j.Partitions, Reason: j.Reason}
		if n.Address == "" {
			n.Address = n.Name
		}
		for _, f := range j.StateFlags {
			n.Flags = append(n.Flags, strings.ToUpper(f))
		}
		nodes = append(nodes, n)
	}
	return nodes, nil
}

// ParseJobs reads the jobs of an squeue --json document, their node lists
// expanded.
func ParseJobs(data []byte) ([]Job, error) {
	d, err := decode("squeue --json", data)
	if err != nil {
		return nil, err
	}
	if d.Jobs == nil {
		return nil, fmt.Errorf("%w: squeue --json: no jobs field", ErrBadDocument)
	}
	jobs := make([]Job, 0, len(*d.Jobs))
	for i, j := range *d.Jobs {
		bad := func(field, format string, a ...any) error {
			return fmt.Errorf("%w: squeue --json: jobs[%d].%s: %s", ErrBadDocument, i, field, fmt.Sprintf(format, a...))
		}
		if j.ID == nil || *j.ID < 1 {
			return nil, bad("job_id", "missing or not >= 1")
		}
		if j.State == "" {
			return nil, bad("job_state", "missing")
		}
		nodes, err := ExpandHostlist(j.Nodes)
		if err != nil {
			return nil, bad("nodes", "%v", err)
		}
		reason := j.Reason
		if reason == "None" {
			reason = ""
		}
		job := Job{ID: *j.ID, Name: j.Name, State: strings.ToUpper(j.State), Reason: reason, User: j.User,
			Partition: j.Partition, Comment: j.Comment, Nodes: nodes}
		if j.TimeLimit != nil && *j.TimeLimit > 0 {
			job.TimeLimitMinutes = *j.TimeLimit
		}
		if j.CPUs < 0 {
			return nil, bad("cpus", "must be >= 0, got %d", j.CPUs)
		}
		job.CPUs = j.CPUs
		if j.MemoryPN != nil && *j.MemoryPN > 0 {
			job.MemoryMiB = *j.MemoryPN
		}
		jobs = append(jobs, job)
	}
	return jobs, nil
}

// hostName reports whether s may name a node or a partition: letters,
// digits and . _ - only, not starting with '-'.
func hostName(s string) bool {
	if s == "" || len(s) > 253 || s[0] == '-' {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			return false
		}
	}
	return true
}
