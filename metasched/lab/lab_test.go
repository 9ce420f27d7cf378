package lab

import (
	"bytes"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/metasched/metasched/graph"
	"github.com/metasched/metasched/metasched/api"
	"github.com/metasched/metasched/selection"
)

// The real grid's files are valid: its grid file parses, its links are
// the lesser of their sites' uplinks, and the job file of every run parses
// with its placement and master.
func TestRealGridFiles(t *testing.T) {
	spec := RealGridSpec("/images/guest")
	if err := spec.check(); err != nil {
		t.Fatal(err)
	}
	g, err := graph.ParseGrid("grid.yaml", []byte(spec.GridFile()))
	if err != nil {
		t.Fatalf("%v\n%s", err, spec.GridFile())
	}
	mbps := map[string]float64{}
	for _, l := range g.Links {
		mbps[l.Between[0]+"-"+l.Between[1]] = l.Mbps
	}
	if d := cmp.Diff(map[string]float64{"latam-a-latam-b": 2, "latam-a-spain": 2, "latam-b-spain": 2}, mbps); d != "" {
		t.Errorf("links (-want +got):\n%s", d)
	}
	quota := 0.0
	for _, s := range spec.Sites {
		quota += float64(s.Hosts) * s.CPUQuota
	}
	if quota > 1.5 {
		t.Errorf("the VMs' quotas add up to %g cores: more than the machine can give besides the daemons", quota)
	}
	job := RealGridJob{Tasks: 120, TaskOps: 3e7, TaskBytes: 131072}
	for _, r := range RealGridRuns {
		j, err := selection.ParseJob("job.yaml", []byte(job.File(r)))
		if err != nil {
			t.Fatalf("run %s: %v\n%s", r.Name, err, job.File(r))
		}
		if j.PlacementOrDefault() != r.Placement || j.Master != r.Master || !j.Elastic || j.Tasks != 120 || j.TaskOps != 3e7 {
			t.Errorf("run %s: the job file gives %+v", r.Name, j)
		}
	}
}

// A bad spec is refused naming every bad field.
func TestSpecRefused(t *testing.T) {
	spec := Spec{Sites: []Site{{Name: "wan", Hosts: 0, CPUQuota: 2}, {Name: "a-very-long-site", Hosts: 1, Cores: 1, MemoryMiB: 64, Perf: 1, LANMbps: 1}},
		Pools: []Pool{{Name: "p", VCPUs: 0, MemoryMiB: 128, Image: "none"}}}
	err := spec.check()
	for _, want := range []string{"sites[0].name", "sites[0].hosts", "sites[0].cpu_quota", "sites[0]: cores", "sites[1].name", "pools[0].vm", "pools[0].image"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v does not name %s", err, want)
		}
	}
}

// The CSV has one row per job and per cluster the tasks predicted and
// done.
func TestWriteCSV(t *testing.T) {
	n := func(i int) *int { return &i }
	rows := []Row{
		{Run: "gramvm", Placement: "gramvm", Master: "spain", Job: "j-1", PredictedS: 15.4, MeasuredS: 17.2, Ratio: 17.2 / 15.4, ProgramS: 16, ProgramRatio: 16 / 15.4,
			Clusters: []api.ClusterTasks{{Name: "spain", TasksPredicted: 61.4, TasksDone: n(60)}, {Name: "latam-a", TasksPredicted: 29.3, TasksDone: n(30)}}},
		{Run: "met", Placement: "met", Master: "spain", Job: "j-2", PredictedS: 30, MeasuredS: 33, Ratio: 1.1,
			Clusters: []api.ClusterTasks{{Name: "spain", TasksPredicted: 120}}},
	}
	var b bytes.Buffer
	if err := WriteCSV(&b, rows); err != nil {
		t.Fatal(err)
	}
	want := `run,placement,master,job,predicted_s,measured_s,ratio,program_s,program_ratio,tasks_predicted_spain,tasks_done_spain,tasks_predicted_latam-a,tasks_done_latam-a
gramvm,gramvm,spain,j-1,15.400,17.200,1.117,16.000,1.039,61.4,60,29.3,30
met,met,spain,j-2,30.000,33.000,1.100,0.000,0.000,120.0,,0,0
`
	if d := cmp.Diff(want, b.String()); d != "" {
		t.Errorf("CSV (-want +got):\n%s", d)
	}
	for _, format := range []string{"svg", "png"} {
		var p bytes.Buffer
		if err := WritePlot(&p, rows, format); err != nil || p.Len() == 0 {
			t.Errorf("plot %s: %d bytes, %v", format, p.Len(), err)
		}
	}
}
