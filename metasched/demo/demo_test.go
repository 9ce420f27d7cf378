package demo

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/metasched/metasched/metasched/api"
)

var t0 = time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)

func sw(id, host, from, to, phase string, start, end float64) api.SwitchView {
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	return api.SwitchView{ID: id, Host: host, From: from, To: to, Phase: phase, Final: true, Started: at(start), Updated: at(end)}
}

// TestUndone holds Undone to its definition: the same host back within
// the window, or any host the other way while the first is in flight;
// each switch undone and undoing once; switches not done count for
// nothing.
func TestUndone(t *testing.T) {
	for _, tc := range []struct {
		name     string
		switches []api.SwitchView
		want     []string // "first/then"
	}{
		{"none", nil, nil},
		{"same host back within the window", []api.SwitchView{
			sw("s-1", "h1", "sim", "render", "done", 1, 2),
			sw("s-2", "h1", "render", "sim", "done", 50, 51),
		}, []string{"s-1/s-2"}},
		{"same host back after the window", []api.SwitchView{
			sw("s-1", "h1", "sim", "render", "done", 1, 2),
			sw("s-2", "h1", "render", "sim", "done", 62.5, 63),
		}, nil},
		{"another host back after the first ended: a new demand, not undone", []api.SwitchView{
			sw("s-1", "h1", "sim", "render", "done", 1, 2),
			sw("s-2", "h2", "render", "sim", "done", 30, 31),
		}, nil},
		{"another host the other way while the first is in flight", []api.SwitchView{
			sw("s-1", "h1", "sim", "render", "done", 1, 2),
			sw("s-2", "h2", "render", "sim", "done", 1.5, 2.5),
		}, []string{"s-1/s-2"}},
		{"each undone once, the oldest first", []api.SwitchView{
			sw("s-3", "h1", "render", "sim", "done", 10, 11),
			sw("s-1", "h1", "sim", "render", "done", 1, 2),
			sw("s-2", "h2", "sim", "render", "done", 1.5, 12),
			sw("s-4", "h2", "render", "sim", "done", 20, 21),
		}, []string{"s-1/s-3", "s-2/s-4"}},
		{"a switch not done moved nothing", []api.SwitchView{
			sw("s-1", "h1", "sim", "render", "cancelled", 1, 2),
			sw("s-2", "h1", "render", "sim", "done", 5, 6),
			sw("s-3", "h1", "sim", "render", "rolled_back", 7, 8),
		}, nil},
		{"other pools", []api.SwitchView{
			sw("s-1", "h1", "sim", "render", "done", 1, 2),
			sw("s-2", "h1", "render", "etl", "done", 5, 6),
		}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Undone(tc.switches, UndoWindow, func(id string) string { return "why " + id })
			var ids []string
			for _, p := range got {
				ids = append(ids, p.First.ID+"/"+p.Then.ID)
				if p.FirstWhy != "why "+p.First.ID || p.ThenWhy != "why "+p.Then.ID {
					t.Errorf("reasons %q, %q", p.FirstWhy, p.ThenWhy)
				}
			}
			if strings.Join(ids, " ") != strings.Join(tc.want, " ") {
				t.Errorf("undone %v, want %v", ids, tc.want)
			}
		})
	}
}

// TestSummaryUndone: the summary counts the switches undone and lists each
// pair with why the policy started each switch.
func TestSummaryUndone(t *testing.T) {
	s := Summary{Start: t0, HostsAfter: map[string]int{"render": 8, "sim": 8}}
	var out bytes.Buffer
	s.Print(&out)
	if !strings.Contains(out.String(), "  switches undone within a minute (a host switched back to its pool within 60 s, or a switch the other way started while it was in flight): 0\n") {
		t.Errorf("no count of 0:\n%s", out.String())
	}
	s.Undone = Undone([]api.SwitchView{
		sw("s-000001", "h1", "sim", "render", "done", 1, 2),
		sw("s-000002", "h1", "render", "sim", "done", 40, 41),
	}, UndoWindow, func(id string) string { return "heuristic K=2: decision " + id })
	out.Reset()
	s.Print(&out)
	for _, want := range []string{"in flight): 1\n",
		"    s-000001 h1 sim→render at 1.0–2.0s (heuristic K=2: decision s-000001), undone by s-000002 h1 render→sim at 40.0–41.0s (heuristic K=2: decision s-000002)\n"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("no %q in\n%s", want, out.String())
		}
	}
}
