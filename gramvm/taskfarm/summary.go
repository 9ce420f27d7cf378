package taskfarm

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
)

// SummaryFile is the name of the summary the master writes into its
// working directory when the run ends.
const SummaryFile = "taskfarm-summary.json"

// SummaryLinePrefix starts the line the master prints on its standard
// output with its summary, as JSON.
const SummaryLinePrefix = "taskfarm-summary: "

// MaxSummaryBytes bounds a summary that ParseSummary reads.
const MaxSummaryBytes = 1 << 20

// ErrSummary: a summary that does not decode or does not add up.
var ErrSummary = errors.New("invalid task-farm summary")

// Summary is what the master of a task-farm run reports at its end: every
// task accounted for, per worker VM and per site.
type Summary struct {
	// Tasks is T, the tasks the master held; Done those whose result it
	// accepted (Tasks when the run ended well).
	Tasks int `json:"tasks"`
	Done  int `json:"done"`
	// Reissued counts the tasks given again after the worker that held
	// them was lost; Duplicates the results that came for a task already
	// done (discarded: no task counts twice).
	Reissued   int `json:"reissued"`
	Duplicates int `json:"duplicates"`
	// TaskOps and TaskBytes are the job's Oper and Comm; InputBytes and
	// ResultBytes how TaskBytes splits between the input a worker receives
	// and the result it sends back.
	TaskOps     float64 `json:"task_ops"`
	TaskBytes   float64 `json:"task_bytes"`
	InputBytes  int64   `json:"input_bytes"`
	ResultBytes int64   `json:"result_bytes"`
	// BytesMoved is every byte the master sent to and received from its
	// workers, framing included.
	BytesMoved int64 `json:"bytes_moved"`
	// WallSeconds runs from the master's start to the last result.
	WallSeconds float64 `json:"wall_seconds"`
	// Workers are the worker VMs, in the order they first connected.
	Workers []Worker `json:"workers"`
	// Sites totals the workers by site.
	Sites map[string]SiteTotals `json:"sites"`
}

// Worker is one worker VM of a run: its processes are its connections to
// the master (one per vCPU).
type Worker struct {
	Name    string `json:"name"`
	Site    string `json:"site"`
	Address string `json:"address"`
	Procs   int    `json:"procs"`
	// Tasks counts the results of this VM the master accepted.
	Tasks int `json:"tasks"`
	// Lost is true when the master lost every connection of the VM before
	// the end; LostInFlight counts the tasks it held then (given again).
	Lost         bool `json:"lost,omitempty"`
	LostInFlight int  `json:"lost_in_flight,omitempty"`
}

// SiteTotals are a site's workers and the tasks they did.
type SiteTotals struct {
	Workers int `json:"workers"`
	Lost    int `json:"lost"`
	Tasks   int `json:"tasks"`
}

// ParseSummary decodes a summary and checks that it adds up: the tasks of
// the workers sum to Done, the sites total their workers, Done ≤ Tasks.
func ParseSummary(data []byte) (*Summary, error) {
	if len(data) > MaxSummaryBytes {
		return nil, fmt.Errorf("%w: %d bytes, more than %d", ErrSummary, len(data), MaxSummaryBytes)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var s Summary
	if err := dec.Decode(&s); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrSummary, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("%w: data after the summary", ErrSummary)
	}
	if err := s.Check(); err != nil {
		return nil, err
	}
	return &s, nil
}

// Check reports the first field of s that does not add up.
func (s *Summary) Check() error {
	bad := func(field, format string, a ...any) error {
		return fmt.Errorf("%w: %s: %s", ErrSummary, field, fmt.Sprintf(format, a...))
	}
	finite := func(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) && x >= 0 }
	switch {
	case s.Tasks < 0:
		return bad("tasks", "%d is negative", s.Tasks)
	case s.Done < 0 || s.Done > s.Tasks:
		return bad("done", "%d is not within 0 and tasks (%d)", s.Done, s.Tasks)
	case s.Reissued < 0:
		return bad("reissued", "%d is negative", s.Reissued)
	case s.Duplicates < 0:
		return bad("duplicates", "%d is negative", s.Duplicates)
	case !finite(s.TaskOps):
		return bad("task_ops", "%g is not a finite number ≥ 0", s.TaskOps)
	case !finite(s.TaskBytes):
		return bad("task_bytes", "%g is not a finite number ≥ 0", s.TaskBytes)
	case s.InputBytes < 0 || s.ResultBytes < 0:
		return bad("input_bytes", "%d and result_bytes %d must be ≥ 0", s.InputBytes, s.ResultBytes)
	case s.BytesMoved < 0:
		return bad("bytes_moved", "%d is negative", s.BytesMoved)
	case !finite(s.WallSeconds):
		return bad("wall_seconds", "%g is not a finite number ≥ 0", s.WallSeconds)
	}
	sum := 0
	sites := map[string]SiteTotals{}
	for i, w := range s.Workers {
		f := fmt.Sprintf("workers[%d]", i)
		switch {
		case w.Name == "":
			return bad(f+".name", "empty")
		case w.Procs < 0:
			return bad(f+".procs", "%d is negative", w.Procs)
		case w.Tasks < 0:
			return bad(f+".tasks", "%d is negative", w.Tasks)
		case w.LostInFlight < 0:
			return bad(f+".lost_in_flight", "%d is negative", w.LostInFlight)
		case slices.ContainsFunc(s.Workers[:i], func(o Worker) bool { return o.Name == w.Name }):
			return bad(f+".name", "%q is listed twice", w.Name)
		}
		if w.Tasks > s.Done-sum {
			return bad(f+".tasks", "the workers' tasks add up to more than done (%d)", s.Done)
		}
		sum += w.Tasks
		t := sites[w.Site]
		t.Workers++
		t.Tasks += w.Tasks
		if w.Lost {
			t.Lost++
		}
		sites[w.Site] = t
	}
	if sum != s.Done {
		return bad("workers", "their tasks add up to %d, not done (%d)", sum, s.Done)
	}
	if len(sites) != len(s.Sites) {
		return bad("sites", "%d sites, but the workers are on %d", len(s.Sites), len(sites))
	}
	for name, want := range sites {
		if got, ok := s.Sites[name]; !ok || got != want {
			return bad("sites."+name, "%+v, but its workers total %+v", got, want)
		}
	}
	return nil
}

// TasksBySite is the tasks done per site.
func (s *Summary) TasksBySite() map[string]int {
	out := make(map[string]int, len(s.Sites))
	for name, t := range s.Sites {
		out[name] = t.Tasks
	}
	return out
}
