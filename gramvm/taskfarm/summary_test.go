package taskfarm

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func goodSummary() *Summary {
	return &Summary{Tasks: 10, Done: 10, Reissued: 1, TaskOps: 1e6, TaskBytes: 4096, InputBytes: 4064, ResultBytes: 32,
		BytesMoved: 41234, WallSeconds: 3.5,
		Workers: []Worker{
			{Name: "j-1-a1-w1", Site: "a", Address: "10.77.1.11", Procs: 2, Tasks: 6},
			{Name: "j-1-a1-w2", Site: "b", Address: "10.77.2.11", Procs: 1, Tasks: 4},
			{Name: "j-1-a1-w3", Site: "b", Address: "10.77.2.12", Procs: 1, Tasks: 0, Lost: true, LostInFlight: 1},
		},
		Sites: map[string]SiteTotals{"a": {Workers: 1, Tasks: 6}, "b": {Workers: 2, Lost: 1, Tasks: 4}},
	}
}

func TestParseSummary(t *testing.T) {
	data, err := json.Marshal(goodSummary())
	if err != nil {
		t.Fatal(err)
	}
	s, err := ParseSummary(data)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(goodSummary(), s); d != "" {
		t.Errorf("round trip (-want +got):\n%s", d)
	}
	if d := cmp.Diff(map[string]int{"a": 6, "b": 4}, s.TasksBySite()); d != "" {
		t.Errorf("TasksBySite (-want +got):\n%s", d)
	}
}

// badSummaries are summaries that ParseSummary refuses, each with the field
// its error names; FuzzParseSummary starts from them.
var badSummaries = []struct {
	name, field string
	edit        func(*Summary)
	raw         string
}{
	{name: "not json", field: "invalid character", raw: "{tasks: 1}"},
	{name: "unknown field", field: "unknown field", raw: `{"tasks": 1, "color": "red"}`},
	{name: "trailing", field: "data after", raw: `{"tasks": 0, "sites": {}} {}`},
	{name: "negative tasks", field: "tasks", edit: func(s *Summary) { s.Tasks = -1 }},
	{name: "done above tasks", field: "done", edit: func(s *Summary) { s.Done = 11 }},
	{name: "negative reissued", field: "reissued", edit: func(s *Summary) { s.Reissued = -2 }},
	{name: "negative duplicates", field: "duplicates", edit: func(s *Summary) { s.Duplicates = -2 }},
	{name: "negative ops", field: "task_ops", edit: func(s *Summary) { s.TaskOps = -1 }},
	{name: "negative input", field: "input_bytes", edit: func(s *Summary) { s.InputBytes = -1 }},
	{name: "negative moved", field: "bytes_moved", edit: func(s *Summary) { s.BytesMoved = -1 }},
	{name: "negative wall", field: "wall_seconds", edit: func(s *Summary) { s.WallSeconds = -1 }},
	{name: "worker without name", field: "workers[1].name", edit: func(s *Summary) { s.Workers[1].Name = "" }},
	{name: "worker twice", field: "workers[1].name", edit: func(s *Summary) { s.Workers[1].Name = s.Workers[0].Name }},
	{name: "negative procs", field: "workers[0].procs", edit: func(s *Summary) { s.Workers[0].Procs = -1 }},
	{name: "negative worker tasks", field: "workers[0].tasks", edit: func(s *Summary) { s.Workers[0].Tasks = -1 }},
	{name: "workers above done", field: "workers[1].tasks", edit: func(s *Summary) { s.Workers[1].Tasks = 5 }},
	{name: "workers below done", field: "workers: their tasks add up to 9", edit: func(s *Summary) { s.Workers[1].Tasks = 3; s.Sites["b"] = SiteTotals{Workers: 2, Lost: 1, Tasks: 3} }},
	{name: "negative lost", field: "workers[2].lost_in_flight", edit: func(s *Summary) { s.Workers[2].LostInFlight = -1 }},
	{name: "site missing", field: "sites", edit: func(s *Summary) { delete(s.Sites, "b") }},
	{name: "site wrong", field: "sites.b", edit: func(s *Summary) { s.Sites["b"] = SiteTotals{Workers: 2, Tasks: 4} }},
	{name: "site renamed", field: "sites.a", edit: func(s *Summary) { delete(s.Sites, "a"); s.Sites["c"] = SiteTotals{Workers: 1, Tasks: 6} }},
}

func badBytes(t testing.TB, raw string, edit func(*Summary)) []byte {
	if raw != "" {
		return []byte(raw)
	}
	s := goodSummary()
	edit(s)
	data, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func TestParseSummaryBad(t *testing.T) {
	for _, c := range badSummaries {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseSummary(badBytes(t, c.raw, c.edit))
			if !errors.Is(err, ErrSummary) || !strings.Contains(err.Error(), c.field) {
				t.Errorf("err = %v, want ErrSummary naming %q", err, c.field)
			}
		})
	}
	if _, err := ParseSummary([]byte(strings.Repeat(" ", MaxSummaryBytes+1))); !errors.Is(err, ErrSummary) {
		t.Errorf("oversized: err = %v", err)
	}
}

// FuzzParseSummary: any bytes give a summary that adds up or ErrSummary.
func FuzzParseSummary(f *testing.F) {
	good, err := json.Marshal(goodSummary())
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	for _, c := range badSummaries {
		f.Add(badBytes(f, c.raw, c.edit))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := ParseSummary(data)
		if err != nil {
			if !errors.Is(err, ErrSummary) {
				t.Fatalf("err = %v, not ErrSummary", err)
			}
			return
		}
		if err := s.Check(); err != nil {
			t.Fatalf("parsed summary does not check: %v", err)
		}
	})
}
