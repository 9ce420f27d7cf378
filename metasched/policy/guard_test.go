package policy

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

var t0 = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

func guardInputs() Inputs {
	return Inputs{Pools: []PoolInput{
		{Name: "render", Jobs: 4, Waiting: 2, Servers: 6, Idle: 0, Arrival: 1, Service: 0.1, HoldingCost: 2},
		{Name: "sim", Jobs: 1, Waiting: 0, Servers: 5, Idle: 4, Arrival: 0.2, Service: 0.2, HoldingCost: 1},
		{Name: "etl", Jobs: 0, Waiting: 0, Servers: 5, Idle: 5, Arrival: 0.2, Service: 0.2, HoldingCost: 1},
	}, SwitchRate: 0.5}
}

// TestGuardNeedWaiting: no pool without a job waiting for hosts receives
// one; a pool with one may.
func TestGuardNeedWaiting(t *testing.T) {
	in := guardInputs()
	held := Guard{NeedWaiting: true}.Held(in, nil, t0)
	for a := range 3 {
		for b := range 3 {
			want := a != b && b != 0
			if got := held[a][b] != ""; got != want {
				t.Errorf("held[%d][%d] = %q, want held %v", a, b, held[a][b], want)
			}
		}
	}
	if !strings.Contains(held[0][1], "no job of sim waits") {
		t.Errorf("why: %q", held[0][1])
	}
	if h := (Guard{}).Held(in, nil, t0); h != nil {
		t.Errorf("no guard: %v, want nil", h)
	}
}

// TestGuardCooldown: a switch a→b in flight holds every switch b→a; a
// host switched a→b does not go back within the cooldown (Cooling), and
// b→a is held only when every host of b came from a lately.
func TestGuardCooldown(t *testing.T) {
	g := Guard{Cooldown: time.Minute}
	in := guardInputs()
	moves := []Move{{Host: "h1", From: "sim", To: "render", Started: t0}}
	held := g.Held(in, moves, t0.Add(time.Second))
	if !strings.Contains(held[0][1], "still in flight") || held[1][0] != "" {
		t.Errorf("in flight: render→sim %q, sim→render %q", held[0][1], held[1][0])
	}
	done := []Move{
		{Host: "h1", From: "sim", To: "render", Started: t0, Ended: t0.Add(time.Second)},
		{Host: "h2", From: "etl", To: "render", Started: t0, Ended: t0.Add(2 * time.Second)},
		{Host: "h3", From: "sim", To: "render", Started: t0, Ended: t0.Add(3 * time.Second)},
		{Host: "h3", From: "render", To: "etl", Started: t0.Add(4 * time.Second), Ended: t0.Add(5 * time.Second)},
	}
	at := t0.Add(30 * time.Second)
	if got := g.Cooling(done, "render", "sim", at); strings.Join(got, ",") != "h1" {
		t.Errorf("cooling render→sim: %v, want [h1] (h3 left render since)", got)
	}
	if got := g.Cooling(done, "render", "etl", at); strings.Join(got, ",") != "h2" {
		t.Errorf("cooling render→etl: %v, want [h2]", got)
	}
	if got := g.Cooling(done, "render", "sim", t0.Add(61*time.Second)); got != nil {
		t.Errorf("after the cooldown: %v, want none", got)
	}
	if held := g.Held(in, done, at); held != nil {
		t.Errorf("render has hosts of its own: held %v, want nil", held)
	}
	in.Pools[0].Servers = 1
	held = g.Held(in, done, at)
	if !strings.Contains(held[0][1], "every host of render came from sim") {
		t.Errorf("render's only host came from sim: %q", held[0][1])
	}
	if got := (Guard{}).Cooling(done, "render", "sim", at); got != nil {
		t.Errorf("no cooldown: %v", got)
	}
}

// TestEngineHeld: the heuristic chooses among the switches not held, and
// says what it would have done; with every useful switch held it does not
// switch.
func TestEngineHeld(t *testing.T) {
	e, err := New(context.Background(), Config{Name: Heuristic, K: 2}, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	in := guardInputs()
	d, err := e.Decide(in)
	if err != nil || !d.Switch || d.To != 0 {
		t.Fatalf("unguarded: %+v %v, want a switch to render", d, err)
	}
	in.Held = Guard{NeedWaiting: true}.Held(in, nil, t0)
	if d, err = e.Decide(in); err != nil || !d.Switch || d.To != 0 {
		t.Fatalf("render waits: %+v %v, want a switch to render", d, err)
	}
	in.Pools[0].Waiting = 0
	in.Held = Guard{NeedWaiting: true}.Held(in, nil, t0)
	d, err = e.Decide(in)
	if err != nil || d.Switch {
		t.Fatalf("nothing waits: %+v %v, want no switch", d, err)
	}
	if !strings.Contains(d.Why, "is held: no job of render waits") {
		t.Errorf("why: %q", d.Why)
	}
	in.Held = [][]string{{""}}
	if _, err := e.Decide(in); err == nil {
		t.Error("a held matrix of the wrong shape: no error")
	}
}

// TestEngineMoveIdle: with MoveIdle, when the heuristic does not switch,
// an idle host of a pool with nothing waiting goes to the pool whose jobs
// wait; not from a locked pool, nor along a held switch, nor for another
// policy.
func TestEngineMoveIdle(t *testing.T) {
	in := Inputs{Pools: []PoolInput{
		{Name: "render", Jobs: 6, Waiting: 0, Servers: 12, Idle: 3, Arrival: 0.4, Service: 0.05, HoldingCost: 2},
		{Name: "sim", Jobs: 12, Waiting: 10, Servers: 2, Idle: 0, Arrival: 1.7, Service: 0.25, HoldingCost: 1},
	}, SwitchRate: 1}
	plain, err := New(context.Background(), Config{Name: Heuristic, K: 2}, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	if d, err := plain.Decide(in); err != nil {
		t.Fatal(err)
	} else if d.Switch {
		t.Fatalf("the heuristic alone switches (%+v): the test needs a state where it does not", d)
	}
	e, err := New(context.Background(), Config{Name: Heuristic, K: 2, MoveIdle: true}, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	d, err := e.Decide(in)
	if err != nil || !d.Switch || d.From != 0 || d.To != 1 || !strings.Contains(d.Why, "switch an idle host from render to sim") {
		t.Fatalf("idle render host: %+v %v, want render → sim", d, err)
	}
	locked := in
	locked.Locked = []bool{true, false}
	if d, err := e.Decide(locked); err != nil {
		t.Fatal(err)
	} else if d.Switch {
		t.Errorf("render locked: %+v", d)
	}
	held := in
	held.Held = [][]string{{"", "cooldown"}, {"", ""}}
	if d, err := e.Decide(held); err != nil {
		t.Fatal(err)
	} else if d.Switch {
		t.Errorf("render→sim held: %+v", d)
	}
	waiting := in
	waiting.Pools = append([]PoolInput(nil), in.Pools...)
	waiting.Pools[0].Waiting = 1
	if d, err := e.Decide(waiting); err != nil {
		t.Fatal(err)
	} else if d.Switch {
		t.Errorf("a render job waits: %+v", d)
	}
	none, err := New(context.Background(), Config{Name: None, MoveIdle: true}, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	defer none.Close()
	if d, err := none.Decide(in); err != nil {
		t.Fatal(err)
	} else if d.Switch {
		t.Errorf("policy none: %+v", d)
	}
	bad := in
	bad.Pools = append([]PoolInput(nil), in.Pools...)
	bad.Pools[0].Idle = 13
	if _, err := e.Decide(bad); err == nil {
		t.Error("more idle hosts than hosts: no error")
	}
}
