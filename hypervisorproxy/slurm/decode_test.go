package slurm

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var hostlistCases = []struct {
	in   string
	want []string
}{
	{"", nil},
	{"n1", []string{"n1"}},
	{"n[1-3,7]", []string{"n1", "n2", "n3", "n7"}},
	{"gpu[08-10],login", []string{"gpu08", "gpu09", "gpu10", "login"}},
	{"rack[1-2]-n[1-2]", []string{"rack1-n1", "rack1-n2", "rack2-n1", "rack2-n2"}},
	{"n[5]x", []string{"n5x"}},
}

var badHostlists = map[string]string{
	"n[1-3":            `a '[' without its ']'`,
	"n[3-1]":           `"3-1" is not a number or a range a-b with a <= b`,
	"n[a-b]":           `"a-b" is not a number`,
	"n[1--2]":          `is not a number`,
	"n1,,n2":           "an empty name",
	"n]1":              `"n]1" is not a host name`,
	"n[0-99999]":       "more than 65536 names",
	"a[0-999]b[0-999]": "more than 65536 names",
	"n[+1]":            `"+1" is not a number`,
}

func TestExpandHostlist(t *testing.T) {
	for _, c := range hostlistCases {
		got, err := ExpandHostlist(c.in)
		if err != nil || !cmp.Equal(got, c.want) {
			t.Errorf("ExpandHostlist(%q) = %q, %v; want %q", c.in, got, err, c.want)
		}
	}
	for in, want := range badHostlists {
		if _, err := ExpandHostlist(in); err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), in) {
			t.Errorf("ExpandHostlist(%q): %v, want an error naming the list and %q", in, err, want)
		}
	}
}

const nodesDoc = `{"meta": {"plugin": {"type": "openapi/v0.0.38"}}, "errors": [], "nodes": [
 {"name": "n1", "address": "10.0.0.1", "cpus": 4, "real_memory": 8000, "alloc_cpus": 2, "alloc_memory": 100,
  "state": "mixed", "state_flags": ["DRAIN"], "partitions": ["batch", "all"], "reason": "metasched: moving to x"},
 {"name": "n2", "address": "", "cpus": 2, "real_memory": 1000, "state": "down", "state_flags": ["not_responding"], "partitions": []},
 {"name": "n3", "cpus": 2, "real_memory": 1000, "state": "idle", "state_flags": ["NOT_RESPONDING"]}
]}`

const jobsDoc = `{"meta": {"plugin": {"type": "openapi/v0.0.38"}}, "errors": [], "jobs": [
 {"job_id": 7, "name": "metasched:j1", "job_state": "RUNNING", "user_name": "root", "partition": "batch", "nodes": "n[1-2]", "time_limit": 5},
 {"job_id": 8, "name": "users-own", "job_state": "PENDING", "state_reason": "Resources", "partition": "batch", "nodes": "", "time_limit": 0}
]}`

func TestParse(t *testing.T) {
	nodes, err := ParseNodes([]byte(nodesDoc))
	if err != nil {
		t.Fatal(err)
	}
	want := []Node{
		{Name: "n1", Address: "10.0.0.1", CPUs: 4, MemoryMiB: 8000, AllocCPUs: 2, AllocMemoryMiB: 100, State: "mixed",
			Flags: []string{"DRAIN"}, Partitions: []string{"batch", "all"}, Reason: "metasched: moving to x"},
		{Name: "n2", Address: "n2", CPUs: 2, MemoryMiB: 1000, State: "down", Flags: []string{"NOT_RESPONDING"}, Partitions: []string{}},
		{Name: "n3", Address: "n3", CPUs: 2, MemoryMiB: 1000, State: "idle", Flags: []string{"NOT_RESPONDING"}},
	}
	if diff := cmp.Diff(want, nodes); diff != "" {
		t.Errorf("nodes (-want +got):\n%s", diff)
	}
	if nodes[2].Down() {
		t.Errorf("an idle node only flagged NOT_RESPONDING is down")
	}
	if !nodes[0].Drain() || !nodes[0].Busy() || nodes[0].Down() || !nodes[1].Down() || nodes[1].Busy() {
		t.Errorf("states: n1 drain %v busy %v down %v; n2 down %v busy %v", nodes[0].Drain(), nodes[0].Busy(), nodes[0].Down(), nodes[1].Down(), nodes[1].Busy())
	}
	jobs, err := ParseJobs([]byte(jobsDoc))
	if err != nil {
		t.Fatal(err)
	}
	wantJobs := []Job{
		{ID: 7, Name: "metasched:j1", State: "RUNNING", User: "root", Partition: "batch", Nodes: []string{"n1", "n2"}, TimeLimitMinutes: 5},
		{ID: 8, Name: "users-own", State: "PENDING", Reason: "Resources", Partition: "batch"},
	}
	if diff := cmp.Diff(wantJobs, jobs); diff != "" {
		t.Errorf("jobs (-want +got):\n%s", diff)
	}
	if own, ok := jobs[0].Own(); !ok || own != "j1" {
		t.Errorf("job 7 Own() = %q, %v", own, ok)
	}
	if _, ok := jobs[1].Own(); ok || !jobs[1].Active() {
		t.Errorf("job 8: Slurm's own and active")
	}
}

// badDocs are documents ParseNodes (nodes: true) or ParseJobs refuse, with
// what the error names.
var badDocs = []struct {
	nodes bool
	in    string
	want  string
}{
	{true, `not json`, "sinfo --json: invalid character"},
	{true, `{"errors": [{"error": "Unable to contact slurm controller", "errno": 1, "source": "x"}], "nodes": []}`, "Slurm reports an error: Unable to contact slurm controller"},
	{true, `{"meta": {"plugin": {"type": "openapi/dbv0.0.38"}}, "nodes": []}`, `meta.plugin.type "openapi/dbv0.0.38"`},
	{true, `{"jobs": []}`, "no nodes field"},
	{true, `{"nodes": [{"cpus": 1, "real_memory": 1, "state": "idle"}]}`, "nodes[0].name: missing"},
	{true, `{"nodes": [{"name": "a b", "cpus": 1, "real_memory": 1, "state": "idle"}]}`, "nodes[0].name: missing or not a host name"},
	{true, `{"nodes": [{"name": "n", "cpus": 1, "real_memory": 1, "state": "idle"}, {"name": "n", "cpus": 1, "real_memory": 1, "state": "idle"}]}`, `nodes[1].name: "n" twice`},
	{true, `{"nodes": [{"name": "n", "cpus": 1, "real_memory": 1}]}`, "nodes[0].state: missing"},
	{true, `{"nodes": [{"name": "n", "cpus": 0, "real_memory": 1, "state": "idle"}]}`, "nodes[0].cpus: must be >= 1, got 0"},
	{true, `{"nodes": [{"name": "n", "cpus": 1, "real_memory": 0, "state": "idle"}]}`, "nodes[0].real_memory: must be >= 1"},
	{true, `{"nodes": [{"name": "n", "cpus": 1, "alloc_cpus": 2, "real_memory": 1, "state": "idle"}]}`, "nodes[0].alloc_cpus: must be from 0 to its 1 CPUs, got 2"},
	{true, `{"nodes": [{"name": "n", "cpus": 1, "alloc_memory": -1, "real_memory": 1, "state": "idle"}]}`, "nodes[0].alloc_memory: must be >= 0"},
	{true, `{"nodes": [{"name": "n", "cpus": 1, "real_memory": 1, "state": "idle", "partitions": ["ok", "no,pe"]}]}`, `nodes[0].partitions[1]: "no,pe" is not a partition name`},
	{false, `{"nodes": []}`, "no jobs field"},
	{false, `{"jobs": [{"job_state": "RUNNING"}]}`, "jobs[0].job_id: missing"},
	{false, `{"jobs": [{"job_id": 0, "job_state": "RUNNING"}]}`, "jobs[0].job_id: missing or not >= 1"},
	{false, `{"jobs": [{"job_id": 1}]}`, "jobs[0].job_state: missing"},
	{false, `{"jobs": [{"job_id": 1, "job_state": "RUNNING", "nodes": "n[2-1]"}]}`, `jobs[0].nodes: hostlist "n[2-1]"`},
}

func TestParseBadInput(t *testing.T) {
	for _, c := range badDocs {
		var err error
		if c.nodes {
			_, err = ParseNodes([]byte(c.in))
		} else {
			_, err = ParseJobs([]byte(c.in))
		}
		if !errors.Is(err, ErrBadDocument) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want ErrBadDocument with %q", c.in, err, c.want)
		}
	}
}

func TestPartitionChanges(t *testing.T) {
	nodes := []Node{{Name: "n1", Partitions: []string{"batch", "all"}}, {Name: "n2", Partitions: []string{"batch", "all"}},
		{Name: "n3", Partitions: []string{"all"}}}
	got := PartitionChanges(nodes, map[string][]string{"batch": {"n2", "n1"}, "gpu": {"n3"}, "empty": nil})
	// batch is as wanted; gpu lacks n3; "all" is not metasched's.
	if diff := cmp.Diff(map[string][]string{"gpu": {"n3"}}, got); diff != "" {
		t.Errorf("changes (-want +got):\n%s", diff)
	}
	got = PartitionChanges(nodes, map[string][]string{"batch": {"n1"}})
	if diff := cmp.Diff(map[string][]string{"batch": {"n1"}}, got); diff != "" {
		t.Errorf("changes (-want +got):\n%s", diff)
	}
}
