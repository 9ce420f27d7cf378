package policy

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/metasched/metasched/switching"
)

func TestModel(t *testing.T) {
	in := Inputs{
		Pools: []PoolInput{
			{Name: "render", Jobs: 12, Servers: 2, Arrival: 0.5, Service: 0.01, HoldingCost: 2},
			{Name: "build", Jobs: 0, Servers: 1, Arrival: 0, Service: 0, HoldingCost: 1},
		},
		Transit:    [][]int{{0, 1}, {0, 0}},
		SwitchRate: 1e-12,
	}
	m, st, err := Model(in, 6)
	if err != nil {
		t.Fatal(err)
	}
	want := &switching.Model{
		Servers: 4, QueueLimit: 6, Discount: 0.95, UniformizationMode: switching.UniformizationAuto,
		Pools: []switching.Pool{
			{Name: "render", ArrivalRate: 0.5, ServiceRate: 0.01, HoldingCost: 2},
			{Name: "build", ArrivalRate: 0, ServiceRate: MinRate, HoldingCost: 1},
		},
		SwitchRates:  [][]float64{{0, MinRate}, {MinRate, 0}},
		SwitchCosts:  [][]float64{{0, 0}, {0, 0}},
		BlockingAuto: true,
	}
	if diff := cmp.Diff(want, m, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("model (-want +got):\n%s", diff)
	}
	// Queue lengths are kept as they are: a table clamps them itself.
	wantSt := switching.State{Jobs: []int{12, 0}, Servers: []int{2, 1}, Transit: [][]int{{0, 1}, {0, 0}}}
	if diff := cmp.Diff(wantSt, st); diff != "" {
		t.Errorf("state (-want +got):\n%s", diff)
	}
	in.Transit[0][1] = 7
	if st.Transit[0][1] != 1 {
		t.Errorf("the state shares the inputs' transit matrix")
	}
}

func TestModelErrors(t *testing.T) {
	ok := func() Inputs {
		return Inputs{Pools: []PoolInput{
			{Name: "a", Jobs: 1, Servers: 1, Arrival: 1, Service: 1, HoldingCost: 1},
			{Name: "b", Jobs: 1, Servers: 1, Arrival: 1, Service: 1, HoldingCost: 1},
		}, SwitchRate: 1}
	}
	tests := []struct {
		name   string
		change func(*Inputs)
		want   string
	}{
		{"negative jobs", func(in *Inputs) { in.Pools[0].Jobs = -1 }, "pools[0].jobs: must be >= 0, got -1"},
		{"negative servers", func(in *Inputs) { in.Pools[1].Servers = -2 }, "pools[1].servers: must be >= 0, got -2"},
		{"NaN arrival", func(in *Inputs) { in.Pools[0].Arrival = math.NaN() }, "pools[0].arrival: must be a finite number >= 0, got NaN"},
		{"infinite service", func(in *Inputs) { in.Pools[1].Service = math.Inf(1) }, "pools[1].service: must be a finite number >= 0, got +Inf"},
		{"negative cost", func(in *Inputs) { in.Pools[1].HoldingCost = -1 }, "pools[1].holding_cost: must be a finite number >= 0, got -1"},
		{"negative switch rate", func(in *Inputs) { in.SwitchRate = -1 }, "switch_rate: must be a finite number >= 0, got -1"},
		{"transit rows", func(in *Inputs) { in.Transit = [][]int{{0, 0}} }, "transit: must be a 2×2 matrix, got 1 rows"},
		{"transit row", func(in *Inputs) { in.Transit = [][]int{{0, 0}, {0}} }, "transit[1]: must be a row of 2 numbers, got 1"},
		{"transit diagonal", func(in *Inputs) { in.Transit = [][]int{{1, 0}, {0, 0}} }, "transit[0][0]: diagonal must be 0"},
		{"transit negative", func(in *Inputs) { in.Transit = [][]int{{0, -1}, {0, 0}} }, "transit[0][1]: must be >= 0, got -1"},
		{"bad name", func(in *Inputs) { in.Pools[1].Name = "Big Jobs" }, `pools[1].name: must match [a-z0-9-]+, got "Big Jobs"`},
		{"duplicate name", func(in *Inputs) { in.Pools[1].Name = "a" }, `pools[1].name: duplicate name "a"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := ok()
			tt.change(&in)
			_, _, err := Model(in, 6)
			if err == nil {
				t.Fatalf("no error, want %q", tt.want)
			}
			if !errors.Is(err, ErrBadInputs) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q, want ErrBadInputs with %q", err, tt.want)
			}
		})
	}
}

func TestDrift(t *testing.T) {
	base, _, err := Model(Inputs{Pools: []PoolInput{
		{Name: "a", Servers: 1, Arrival: 1, Service: 2, HoldingCost: 1},
		{Name: "b", Servers: 1, Arrival: 0, Service: 1, HoldingCost: 1},
	}, SwitchRate: 0.5}, 6)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		change func(*switching.Model)
		want   string
	}{
		{"same", func(*switching.Model) {}, ""},
		{"within the limit", func(m *switching.Model) { m.Pools[0].ArrivalRate = 1.5 }, ""},
		{"arrival", func(m *switching.Model) { m.Pools[0].ArrivalRate = 1.6 },
			"the arrival rate of a moved +60% (1/s → 1.6/s)"},
		{"the largest change", func(m *switching.Model) { m.Pools[0].ArrivalRate = 1.6; m.Pools[1].ServiceRate = 0.2 },
			"the service rate of b moved -80% (1/host-s → 0.2/host-s)"},
		{"from zero", func(m *switching.Model) { m.Pools[1].ArrivalRate = 1e-3 },
			"the arrival rate of b moved +100000000% (0/s → 0.001/s)"},
		{"switch rate", func(m *switching.Model) { m.SwitchRates = switching.PairMatrix(2, 0.1) },
			"the switch rate moved -80% (0.5/s → 0.1/s)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			live := *base
			live.Pools = append([]switching.Pool(nil), base.Pools...)
			tt.change(&live)
			if got := drift(base, &live, 0.5); got != tt.want {
				t.Errorf("drift = %q, want %q", got, tt.want)
			}
		})
	}
}
