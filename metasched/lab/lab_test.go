package lab

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	hp "github.com/metasched/metasched/hypervisorproxy"

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
	// Each host takes the VMs of its grid entry's cores, whatever jobs
	// run side by side.
	quota := 0.0
	for _, s := range spec.Sites {
		if !s.Sized {
			t.Errorf("site %s: its hosts offer the whole machine", s.Name)
		}
		quota += float64(s.Hosts*s.Cores) * s.CPUQuota
		line := s.hostLine(s.Name+"-1", "qemu:///system", RealGridPool)
		site, err := hp.ParseSite("site.yaml", []byte("site: "+s.Name+"\ntoken_file: token\ninsecure_http: true\nhosts:\n"+line))
		if err != nil {
			t.Fatalf("%v\n%s", err, line)
		}
		if h := site.Hosts[0]; h.CPUs != s.Cores || h.MemoryMiB != s.MemoryMiB {
			t.Errorf("site %s: a host's share is %d CPUs and %d MiB, want %d and %d", s.Name, h.CPUs, h.MemoryMiB, s.Cores, s.MemoryMiB)
		}
	}
	if quota > 1.5 {
		t.Errorf("the VMs' quotas add up to %g cores: more than the machine can give besides the daemons", quota)
	}
	job := RealGridJob{Tasks: 120, TaskOps: 3e7, TaskBytes: 131072}
	small := 0
	for _, r := range RealGridRuns {
		rj := job.For(r, 3e7)
		j, err := selection.ParseJob("job.yaml", []byte(rj.File(r)))
		if err != nil {
			t.Fatalf("run %s: %v\n%s", r.Name, err, rj.File(r))
		}
		tasks, ops := 120, 3e7
		if r.Tasks > 0 {
			tasks, ops = r.Tasks, 3e7*r.Compute
			small++
		}
		if j.PlacementOrDefault() != r.Placement || j.Master != r.Master || !j.Elastic || j.Tasks != tasks || j.TaskOps != ops {
			t.Errorf("run %s: the job file gives %+v, want %d tasks of %g", r.Name, j, tasks, ops)
		}
	}
	if small < 2 {
		t.Errorf("%d runs of a small job, want at least 2", small)
	}
	// A run of no placement (the demo's jobs): the daemon's default.
	j, err := selection.ParseJob("job.yaml", []byte(job.File(Run{Name: "demo-1"})))
	if err != nil {
		t.Fatalf("a run of no placement: %v\n%s", err, job.File(Run{Name: "demo-1"}))
	}
	if j.Placement != "" || j.Master != "" || j.PlacementOrDefault() != selection.PlaceGramVM {
		t.Errorf("a run of no placement: the job file gives placement %q, master %q", j.Placement, j.Master)
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
		{Run: "gramvm", Placement: "gramvm", Master: "spain", Job: "j-1", PredictedS: 15.4, StartEndS: 2.4, MeasuredS: 17.2, Ratio: 17.2 / 15.4, ProgramS: 16, ProgramRatio: 16 / 13.0,
			Clusters: []api.ClusterTasks{{Name: "spain", TasksPredicted: 61.4, TasksDone: n(60)}, {Name: "latam-a", TasksPredicted: 29.3, TasksDone: n(30)}}},
		{Run: "met", Placement: "met", Master: "spain", Job: "j-2", PredictedS: 30, MeasuredS: 33, Ratio: 1.1,
			Clusters: []api.ClusterTasks{{Name: "spain", TasksPredicted: 120}}},
	}
	var b bytes.Buffer
	if err := WriteCSV(&b, rows); err != nil {
		t.Fatal(err)
	}
	want := `run,placement,master,job,predicted_s,start_end_s,measured_s,ratio,program_s,program_ratio,tasks_predicted_spain,tasks_done_spain,tasks_predicted_latam-a,tasks_done_latam-a
gramvm,gramvm,spain,j-1,15.400,2.400,17.200,1.117,16.000,1.231,61.4,60,29.3,30
met,met,spain,j-2,30.000,0.000,33.000,1.100,0.000,0.000,120.0,,0,0
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

// A spec's own grid file is the daemon's, checked: it must parse, and
// every site must be one of its clusters; without one, the daemon's is
// the one GridFile derives.
func TestSpecGrid(t *testing.T) {
	spec := RealGridSpec("/images/guest")
	if got := spec.gridFile(); got != spec.GridFile() {
		t.Errorf("without a grid file of its own the daemon's is\n%s", got)
	}
	own := `clusters:
  - {name: latam-a, machines: 2, cores: 1, memory_mib: 1024, perf: 3e7, lan_mbps: 50, uplink_mbps: 1}
  - {name: latam-b, machines: 2, cores: 1, memory_mib: 1024, perf: 3e7, lan_mbps: 50, uplink_mbps: 2}
  - {name: spain, machines: 3, cores: 1, memory_mib: 1024, perf: 6e7, lan_mbps: 100, uplink_mbps: 8}
links:
  - {between: [latam-a, spain], mbps: 1, latency_ms: 1}
  - {between: [latam-b, spain], mbps: 2, latency_ms: 1}
`
	spec.Grid = own
	if err := spec.check(); err != nil {
		t.Fatal(err)
	}
	if spec.gridFile() != own {
		t.Errorf("the daemon's grid file is not the spec's own:\n%s", spec.gridFile())
	}
	for name, grid := range map[string]string{
		"not a grid":      "clusters: 3\n",
		"a site missing":  strings.ReplaceAll(own, "latam-b", "latam-c"),
		"no links at all": "clusters: []\n",
	} {
		spec.Grid = grid
		err := spec.check()
		if err == nil || !strings.Contains(err.Error(), "lab: grid: ") {
			t.Errorf("%s: error %v does not name the grid", name, err)
		}
	}
	spec.Grid = strings.ReplaceAll(own, "latam-b", "latam-c")
	if err := spec.check(); err == nil || !strings.Contains(err.Error(), `sites[1] "latam-b" is none of its clusters`) {
		t.Errorf("a site missing from the grid file: %v", err)
	}
}

// Each site's VMs take their addresses from a range of their own, the
// i-th site's 10.77.(i+1).10 to .99.
func TestAddresses(t *testing.T) {
	l := &Lab{spec: RealGridSpec("/images/guest")}
	for i, s := range l.spec.Sites {
		first, last, ok := l.Addresses(s.Name)
		want := fmt.Sprintf("10.77.%d.10-10.77.%d.99", i+1, i+1)
		if got := first.String() + "-" + last.String(); !ok || got != want {
			t.Errorf("site %s: %s (%t), want %s", s.Name, got, ok, want)
		}
	}
	if _, _, ok := l.Addresses("nowhere"); ok {
		t.Error("a site not in the lab has addresses")
	}
}
