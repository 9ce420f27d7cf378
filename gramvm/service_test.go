package gramvm_test

import (
	"context"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/metasched/metasched/gramvm"
	"github.com/metasched/metasched/graph"
	"github.com/metasched/metasched/selection"
)

func paperGrid(t *testing.T) *graph.Grid {
	t.Helper()
	data, err := os.ReadFile("../examples/grid-paper.yaml")
	if err != nil {
		t.Fatal(err)
	}
	g, err := graph.ParseGrid("grid-paper.yaml", data)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func TestPlanPlacesOneVMPerMachine(t *testing.T) {
	s, err := gramvm.New(paperGrid(t), 0)
	if err != nil {
		t.Fatal(err)
	}
	job := &selection.Job{Name: "render", Type: "render", Tasks: 1000, TaskOps: 1e11, TaskBytes: 1e6, Efficiency: 0.8, VM: selection.VM{VCPUs: 1, MemoryMiB: 1024}}
	all := slices.Concat(hosts("latam-a", "render", 3), hosts("latam-b", "render", 5), hosts("spain", "render", 8))
	free := gramvm.FreeHosts(all, "render", job.VM)
	pl, err := s.Plan(context.Background(), job, free, selection.Options{Master: -1})
	if err != nil {
		t.Fatal(err)
	}
	if !pl.Plan.Feasible || len(pl.Workers)+1 != pl.Plan.Machines || pl.Master.Site != pl.Plan.Master {
		t.Fatalf("placement = %+v", pl)
	}
	seen := map[string]bool{pl.Master.Host: true}
	perSite := map[string]int{}
	for _, w := range pl.Workers {
		if seen[w.Host] {
			t.Errorf("host %s used twice", w.Host)
		}
		seen[w.Host] = true
		perSite[w.Site]++
	}
	for _, cp := range pl.Plan.Clusters {
		if perSite[cp.Name] != cp.Machines {
			t.Errorf("cluster %s: %d workers placed, %d planned", cp.Name, perSite[cp.Name], cp.Machines)
		}
	}
	// Fewer free hosts: the plan uses only those.
	free["spain"] = free["spain"][:2]
	pl, err = s.Plan(context.Background(), job, free, selection.Options{Master: -1})
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range append(pl.Workers, pl.Master) {
		if w.Site == "spain" && w.Host != "spain-0" && w.Host != "spain-1" {
			t.Errorf("placed on %s, which is not free", w.Host)
		}
	}
	// Nothing free: infeasible is a result.
	pl, err = s.Plan(context.Background(), job, map[string][]string{}, selection.Options{Master: -1})
	if err != nil || pl.Plan.Feasible || len(pl.Workers) != 0 {
		t.Errorf("nothing free: %+v, %v", pl, err)
	}
}

func TestObserveLinks(t *testing.T) {
	s, err := gramvm.New(paperGrid(t), 0.5)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	if err := s.Observe("spain", "latam-a", 4, at); err != nil {
		t.Fatal(err)
	}
	if err := s.Observe("latam-a", "spain", 8, at.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	links := s.Links()
	want := gramvm.Link{Between: [2]string{"latam-a", "spain"}, ConfiguredMbps: 6, MeasuredMbps: 6, MeasuredAt: at.Add(time.Minute), Samples: 2, Via: gramvm.ViaAgents}
	if diff := cmp.Diff(want, links[1]); diff != "" {
		t.Errorf("link (-want +got):\n%s", diff)
	}
	if links[0].Samples != 0 || links[0].MeasuredMbps != 0 {
		t.Errorf("an unmeasured link: %+v", links[0])
	}
	for _, tc := range []struct {
		a, b string
		mbps float64
		want error
	}{
		{"latam-a", "mars", 5, gramvm.ErrNotFound},
		{"latam-a", "spain", 0, gramvm.ErrInvalid},
		{"latam-a", "spain", -3, gramvm.ErrInvalid},
	} {
		if err := s.Observe(tc.a, tc.b, tc.mbps, at); !errors.Is(err, tc.want) {
			t.Errorf("Observe(%s, %s, %g) = %v, want %v", tc.a, tc.b, tc.mbps, err, tc.want)
		}
	}
	job := &selection.Job{Name: "j", Type: "p", Tasks: 10, TaskOps: 1e9, TaskBytes: 1e5, Efficiency: 0.8, VM: selection.VM{VCPUs: 1, MemoryMiB: 64}}
	free := gramvm.FreeHosts(slices.Concat(hosts("latam-a", "p", 3), hosts("spain", "p", 8)), "p", job.VM)
	pl, err := s.Plan(context.Background(), job, free, selection.Options{Master: -1})
	if err != nil {
		t.Fatal(err)
	}
	if len(pl.Measured) != 1 || !strings.Contains(pl.Measured[0], "latam-a-spain: 6 Mbit/s measured") {
		t.Errorf("plan's measured links = %q", pl.Measured)
	}
	if _, err := gramvm.New(paperGrid(t), 2); err == nil {
		t.Error("alpha 2 accepted")
	}
}
