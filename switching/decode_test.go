package switching

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// Three valid pools for model files; MaxRate of a model with them, N = 3 and
// slow switches is 0.25 + 0.25 + 3·1 = 3.5.
const decodePools3 = `pools:
  - {name: web, arrival_rate: 0.25, service_rate: 0.5, holding_cost: 2}
  - {name: db, arrival_rate: 0.25, service_rate: 0.25, holding_cost: 1}
  - {name: batch-2, arrival_rate: 0, service_rate: 1, holding_cost: 0.5}
`

const decodeHead = "servers: 3\nqueue_limit: 15\n"

func decodeWantPools3() []Pool {
	return []Pool{
		{Name: "web", ArrivalRate: 0.25, ServiceRate: 0.5, HoldingCost: 2},
		{Name: "db", ArrivalRate: 0.25, ServiceRate: 0.25, HoldingCost: 1},
		{Name: "batch-2", ArrivalRate: 0, ServiceRate: 1, HoldingCost: 0.5},
	}
}

// decodeModel3 is the model of decodeHead + decodePools3 +
// "switch_rate: 0.1" with every default.
func decodeModel3() *Model {
	return &Model{
		Servers:            3,
		QueueLimit:         15,
		Discount:           0.95,
		UniformizationMode: UniformizationAuto,
		Pools:              decodeWantPools3(),
		SwitchRates:        [][]float64{{0, 0.1, 0.1}, {0.1, 0, 0.1}, {0.1, 0.1, 0}},
		SwitchCosts:        [][]float64{{0, 0, 0}, {0, 0, 0}, {0, 0, 0}},
		BlockingAuto:       true,
	}
}

// decodeWith returns decodeModel3 changed by f.
func decodeWith(f func(m *Model)) *Model {
	m := decodeModel3()
	f(m)
	return m
}

// parseModelCases are valid model files and their models
// (TestParseModel), and seeds of FuzzParseModel.
var parseModelCases = []struct {
	name string
	in   string
	want *Model
}{
	{
		name: "full file",
		in: `# every field
servers: 4
queue_limit: 10
discount: 0.9
uniformization: 12.5
pools:
  - name: web
    arrival_rate: 0.111
    service_rate: 0.111
    holding_cost: 2
  - {name: db, arrival_rate: 2.0e-1, service_rate: 1, holding_cost: 0}
  - {name: x9, arrival_rate: 0, service_rate: 3, holding_cost: 1.5}
switch_rates:
  - [0, 0.0909, 0]
  - [1, 0, 2]
  - [0.5, 0.25, 0]
switch_costs: [[0, 1, 2], [3, 0, 4], [5, 6, 0]]
instant_switches: false
blocking_cost: [1, 0, 2.5]
`,
		want: &Model{
			Servers:            4,
			QueueLimit:         10,
			Discount:           0.9,
			UniformizationMode: UniformizationFixed,
			Uniformization:     12.5,
			Pools: []Pool{
				{Name: "web", ArrivalRate: 0.111, ServiceRate: 0.111, HoldingCost: 2},
				{Name: "db", ArrivalRate: 0.2, ServiceRate: 1, HoldingCost: 0},
				{Name: "x9", ArrivalRate: 0, ServiceRate: 3, HoldingCost: 1.5},
			},
			SwitchRates:   [][]float64{{0, 0.0909, 0}, {1, 0, 2}, {0.5, 0.25, 0}},
			SwitchCosts:   [][]float64{{0, 1, 2}, {3, 0, 4}, {5, 6, 0}},
			BlockingCosts: []float64{1, 0, 2.5},
		},
	},
	{
		name: "json",
		in: `{
	"servers": 3,
	"queue_limit": 15,
	"discount": 0.95,
	"uniformization": "paper",
	"pools": [
		{"name": "web", "arrival_rate": 0.25, "service_rate": 0.5, "holding_cost": 2},
		{"name": "db", "arrival_rate": 0.25, "service_rate": 0.25, "holding_cost": 1},
		{"name": "batch-2", "arrival_rate": 0, "service_rate": 1, "holding_cost": 0.5}
	],
	"switch_rate": 0.1,
	"switch_cost": 0.5,
	"instant_switches": false,
	"blocking_cost": "auto"
}
`,
		want: decodeWith(func(m *Model) {
			m.UniformizationMode = UniformizationPaper
			m.SwitchCosts = [][]float64{{0, 0.5, 0.5}, {0.5, 0, 0.5}, {0.5, 0.5, 0}}
		}),
	},
	{
		name: "defaults",
		in:   decodeHead + decodePools3 + "switch_rate: 0.1\n",
		want: decodeModel3(),
	},
	{
		name: "uniformization auto",
		in:   decodeHead + decodePools3 + "switch_rate: 0.1\nuniformization: auto\n",
		want: decodeModel3(),
	},
	{
		name: "uniformization paper",
		in:   decodeHead + decodePools3 + "switch_rate: 0.1\nuniformization: paper\n",
		want: decodeWith(func(m *Model) { m.UniformizationMode = UniformizationPaper }),
	},
	{
		name: "uniformization integer equal to the largest rate",
		in:   decodeHead + decodePools3 + "switch_rate: 0.1\nuniformization: 3.5\n",
		want: decodeWith(func(m *Model) { m.UniformizationMode, m.Uniformization = UniformizationFixed, 3.5 }),
	},
	{
		name: "switch cost for every pair",
		in:   decodeHead + decodePools3 + "switch_rate: 0.1\nswitch_cost: 2\n",
		want: decodeWith(func(m *Model) { m.SwitchCosts = [][]float64{{0, 2, 2}, {2, 0, 2}, {2, 2, 0}} }),
	},
	{
		name: "switch rate matrix with a pair that cannot switch",
		in:   decodeHead + decodePools3 + "switch_rates: [[0, 0, 1], [1, 0, 1], [1, 1, 0]]\n",
		want: decodeWith(func(m *Model) { m.SwitchRates = [][]float64{{0, 0, 1}, {1, 0, 1}, {1, 1, 0}} }),
	},
	{
		name: "blocking cost for every pool",
		in:   decodeHead + decodePools3 + "switch_rate: 0.1\nblocking_cost: 0\n",
		want: decodeWith(func(m *Model) { m.BlockingAuto, m.BlockingCosts = false, []float64{0, 0, 0} }),
	},
	{
		name: "blocking cost per pool",
		in:   decodeHead + decodePools3 + "switch_rate: 0.1\nblocking_cost: [1, 2, 3.5]\n",
		want: decodeWith(func(m *Model) { m.BlockingAuto, m.BlockingCosts = false, []float64{1, 2, 3.5} }),
	},
	{
		name: "blocking cost lower",
		in:   decodeHead + decodePools3 + "switch_rate: 0.1\nblocking_cost: lower\n",
		want: decodeWith(func(m *Model) { m.BlockingAuto, m.BlockingLower = false, true }),
	},
	{
		name: "blocking cost auto",
		in:   decodeHead + decodePools3 + "switch_rate: 0.1\nblocking_cost: auto\n",
		want: decodeModel3(),
	},
	{
		name: "instant switches without rates: every pair may switch",
		in:   decodeHead + decodePools3 + "instant_switches: true\n",
		want: decodeWith(func(m *Model) {
			m.InstantSwitches = true
			m.SwitchRates = [][]float64{{0, 1, 1}, {1, 0, 1}, {1, 1, 0}}
		}),
	},
	{
		name: "a pool's own queue limit",
		in:   decodeHead + decodePoolsWith(1, "{name: db, arrival_rate: 0.25, service_rate: 0.25, holding_cost: 1, queue_limit: 40}") + "switch_rate: 0.1\n",
		want: decodeWith(func(m *Model) { m.Pools[1].QueueLimit = 40 }),
	},
	{
		name: "instant switches with a rate matrix",
		in:   decodeHead + decodePools3 + "instant_switches: true\nswitch_rates: [[0, 1, 0], [1, 0, 0], [0, 0, 0]]\n",
		want: decodeWith(func(m *Model) {
			m.InstantSwitches = true
			m.SwitchRates = [][]float64{{0, 1, 0}, {1, 0, 0}, {0, 0, 0}}
		}),
	},
	{
		name: "two pools",
		in: "servers: 1\nqueue_limit: 2\nswitch_rate: 1\npools:\n" +
			"  - {name: a, arrival_rate: 1, service_rate: 1, holding_cost: 1}\n" +
			"  - {name: b, arrival_rate: 1, service_rate: 1, holding_cost: 1}\n",
		want: &Model{
			Servers:            1,
			QueueLimit:         2,
			Discount:           0.95,
			UniformizationMode: UniformizationAuto,
			Pools:              []Pool{{Name: "a", ArrivalRate: 1, ServiceRate: 1, HoldingCost: 1}, {Name: "b", ArrivalRate: 1, ServiceRate: 1, HoldingCost: 1}},
			SwitchRates:        [][]float64{{0, 1}, {1, 0}},
			SwitchCosts:        [][]float64{{0, 0}, {0, 0}},
			BlockingAuto:       true,
		},
	},
}

func TestParseModel(t *testing.T) {
	for _, tt := range parseModelCases {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseModel("model.yaml", []byte(tt.in))
			if err != nil {
				t.Fatalf("ParseModel: %v", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("model (-want +got):\n%s", diff)
			}
			if err := got.Validate(); err != nil {
				t.Errorf("Validate of a parsed model: %v", err)
			}
		})
	}
}

// decodePoolsWith is decodePools3 with pool i's line replaced.
func decodePoolsWith(i int, line string) string {
	lines := strings.Split(decodePools3, "\n")
	lines[i+1] = "  - " + line
	return strings.Join(lines, "\n")
}

// decodeBase is a model file without its switch rates.
const decodeBase = decodeHead + decodePools3

// parseModelErrorCases are invalid model files and their errors
// (TestParseModelErrors), and seeds of FuzzParseModel.
var parseModelErrorCases = []struct {
	name string
	in   string
	want string // the whole error text
}{
	// The file as a whole.
	{"empty", "", "model.yaml: empty document"},
	{"syntax", "servers: 3\n queue_limit: 15\n", "model.yaml: line 2: mapping values are not allowed in this context"},
	{"not a mapping", "[1, 2]\n", "model.yaml: must be a mapping"},

	// Unknown, duplicated and missing fields.
	{"unknown top-level field", decodeBase + "switch_rate: 0.1\ncolour: red\n", "model.yaml: colour: unknown field"},
	{"unknown pool field", decodeHead + decodePoolsWith(0, "{name: web, arrival_rate: 1, service_rate: 1, holding_cost: 1, foo: 2}") + "switch_rate: 0.1\n",
		"model.yaml: pools[0].foo: unknown field"},
	{"duplicate field", decodeBase + "switch_rate: 0.1\nservers: 4\n", "model.yaml: servers: duplicate field"},
	{"missing servers", "queue_limit: 15\n" + decodePools3 + "switch_rate: 0.1\n", "model.yaml: servers: missing required field"},
	{"missing queue_limit", "servers: 3\n" + decodePools3 + "switch_rate: 0.1\n", "model.yaml: queue_limit: missing required field"},
	{"missing pools", decodeHead + "switch_rate: 0.1\n", "model.yaml: pools: missing required field"},
	{"missing pool name", decodeHead + decodePoolsWith(1, "{arrival_rate: 1, service_rate: 1, holding_cost: 1}") + "switch_rate: 0.1\n",
		"model.yaml: pools[1].name: missing required field"},
	{"missing pool rates", decodeHead + decodePoolsWith(2, "{name: c}") + "switch_rate: 0.1\n",
		"model.yaml: pools[2].arrival_rate: missing required field\n" +
			"model.yaml: pools[2].service_rate: missing required field\n" +
			"model.yaml: pools[2].holding_cost: missing required field"},
	{"missing switch rate", decodeBase, "model.yaml: switch_rate: missing required field: give switch_rate or switch_rates"},

	// Wrong types.
	{"servers string", "servers: three\nqueue_limit: 15\n" + decodePools3 + "switch_rate: 0.1\n", "model.yaml: servers: must be a number"},
	{"servers fraction", "servers: 2.5\nqueue_limit: 15\n" + decodePools3 + "switch_rate: 0.1\n", "model.yaml: servers: must be an integer"},
	{"discount quoted", decodeBase + "switch_rate: 0.1\ndiscount: \"0.9\"\n", "model.yaml: discount: must be a number"},
	{"arrival rate string", decodeHead + decodePoolsWith(1, "{name: db, arrival_rate: fast, service_rate: 1, holding_cost: 1}") + "switch_rate: 0.1\n",
		"model.yaml: pools[1].arrival_rate: must be a number"},
	{"service rate string, no second message", decodeHead + decodePoolsWith(1, "{name: db, arrival_rate: 1, service_rate: abc, holding_cost: 1}") + "switch_rate: 0.1\n",
		"model.yaml: pools[1].service_rate: must be a number"},
	{"service rate nan", decodeHead + decodePoolsWith(1, "{name: db, arrival_rate: 1, service_rate: .nan, holding_cost: 1}") + "switch_rate: 0.1\n",
		"model.yaml: pools[1].service_rate: must be a number"},
	{"name number", decodeHead + decodePoolsWith(0, "{name: 12, arrival_rate: 1, service_rate: 1, holding_cost: 1}") + "switch_rate: 0.1\n",
		"model.yaml: pools[0].name: must be a string"},
	{"pool not a mapping", decodeHead + decodePoolsWith(1, "db") + "switch_rate: 0.1\n", "model.yaml: pools[1]: must be a mapping"},
	{"pools not a list", decodeHead + "pools: 3\nswitch_rate: 0.1\n", "model.yaml: pools: must be a list"},
	{"instant switches not a bool", decodeBase + "instant_switches: yes\n", "model.yaml: instant_switches: must be true or false"},
	{"switch rate string", decodeBase + "switch_rate: slow\n", "model.yaml: switch_rate: must be a number"},
	{"switch rates number", decodeBase + "switch_rates: 0.1\n", "model.yaml: switch_rates: must be a matrix (a list of lists of numbers)"},
	{"switch rates entry string", decodeBase + "switch_rates: [[0, 1, x], [1, 0, 1], [1, 1, 0]]\n", "model.yaml: switch_rates[0][2]: must be a number"},

	// Values out of range.
	{"servers 0", "servers: 0\nqueue_limit: 15\n" + decodePools3 + "switch_rate: 0.1\n", "model.yaml: servers: must be >= 1"},
	{"queue limit 1", "servers: 3\nqueue_limit: 1\n" + decodePools3 + "switch_rate: 0.1\n", "model.yaml: queue_limit: must be >= 2"},
	{"queue limit huge", "servers: 3\nqueue_limit: 70000\n" + decodePools3 + "switch_rate: 0.1\n", "model.yaml: queue_limit: must be <= 65536, got 70000"},
	{"pool queue limit 1", decodeHead + decodePoolsWith(1, "{name: db, arrival_rate: 1, service_rate: 1, holding_cost: 1, queue_limit: 1}") + "switch_rate: 0.1\n",
		"model.yaml: pools[1].queue_limit: must be from 2 to 65536 (this pool's truncation J; leave it out for the model's queue_limit), got 1"},
	{"pool queue limit fraction", decodeHead + decodePoolsWith(0, "{name: web, arrival_rate: 1, service_rate: 1, holding_cost: 1, queue_limit: 2.5}") + "switch_rate: 0.1\n",
		"model.yaml: pools[0].queue_limit: must be an integer"},
	{"discount 1", decodeBase + "switch_rate: 0.1\ndiscount: 1\n", "model.yaml: discount: must be > 0 and < 1"},
	{"discount 0", decodeBase + "switch_rate: 0.1\ndiscount: 0\n", "model.yaml: discount: must be > 0 and < 1"},
	{"uniformization keyword", decodeBase + "switch_rate: 0.1\nuniformization: fast\n", `model.yaml: uniformization: must be a number > 0, "auto" or "paper"`},
	{"uniformization 0", decodeBase + "switch_rate: 0.1\nuniformization: 0\n", `model.yaml: uniformization: must be a number > 0, "auto" or "paper"`},
	{"uniformization list", decodeBase + "switch_rate: 0.1\nuniformization: [1]\n", `model.yaml: uniformization: must be a number > 0, "auto" or "paper"`},
	{"uniformization too small", decodeBase + "switch_rate: 0.1\nuniformization: 0.5\n",
		"model.yaml: uniformization: 0.5 is smaller than the largest total transition rate 3.5 (must be >= 3.5)"},
	{"one pool", "servers: 1\nqueue_limit: 2\nswitch_rate: 1\npools:\n  - {name: a, arrival_rate: 1, service_rate: 1, holding_cost: 1}\n",
		"model.yaml: pools: must have at least 2 pools, got 1"},
	{"bad name", decodeHead + decodePoolsWith(0, "{name: Web, arrival_rate: 1, service_rate: 1, holding_cost: 1}") + "switch_rate: 0.1\n",
		`model.yaml: pools[0].name: must match [a-z0-9-]+, got "Web"`},
	{"duplicate name", decodeHead + decodePoolsWith(2, "{name: web, arrival_rate: 1, service_rate: 1, holding_cost: 1}") + "switch_rate: 0.1\n",
		`model.yaml: pools[2].name: duplicate name "web"`},
	{"negative arrival rate", decodeHead + decodePoolsWith(0, "{name: web, arrival_rate: -1, service_rate: 1, holding_cost: 1}") + "switch_rate: 0.1\n",
		"model.yaml: pools[0].arrival_rate: must be >= 0"},
	{"service rate 0", decodeHead + decodePoolsWith(1, "{name: db, arrival_rate: 1, service_rate: 0, holding_cost: 1}") + "switch_rate: 0.1\n",
		"model.yaml: pools[1].service_rate: must be > 0"},
	{"negative holding cost", decodeHead + decodePoolsWith(2, "{name: c, arrival_rate: 1, service_rate: 1, holding_cost: -2}") + "switch_rate: 0.1\n",
		"model.yaml: pools[2].holding_cost: must be >= 0"},
	{"switch rate 0", decodeBase + "switch_rate: 0\n", "model.yaml: switch_rate: must be > 0"},
	{"switch rate and rates", decodeBase + "switch_rate: 0.1\nswitch_rates: [[0, 1, 1], [1, 0, 1], [1, 1, 0]]\n",
		"model.yaml: switch_rate: give either switch_rate or switch_rates, not both"},
	{"switch rates rows", decodeBase + "switch_rates: [[0, 1, 1], [1, 0, 1]]\n", "model.yaml: switch_rates: must be a 3×3 matrix, got 2 rows"},
	{"switch rates row length", decodeBase + "switch_rates: [[0, 1, 1], [1, 0, 1], [1, 1]]\n", "model.yaml: switch_rates[2]: must be a row of 3 numbers, got 2"},
	{"switch rates diagonal", decodeBase + "switch_rates: [[0, 1, 1], [1, 2, 1], [1, 1, 0]]\n", "model.yaml: switch_rates[1][1]: diagonal must be 0"},
	{"switch rates negative", decodeBase + "switch_rates: [[0, -1, 1], [1, 0, 1], [1, 1, 0]]\n", "model.yaml: switch_rates[0][1]: must be >= 0"},
	{"switch cost negative", decodeBase + "switch_rate: 0.1\nswitch_cost: -1\n", "model.yaml: switch_cost: must be >= 0"},
	{"switch cost and costs", decodeBase + "switch_rate: 0.1\nswitch_cost: 1\nswitch_costs: [[0, 1, 1], [1, 0, 1], [1, 1, 0]]\n",
		"model.yaml: switch_cost: give either switch_cost or switch_costs, not both"},
	{"switch costs diagonal", decodeBase + "switch_rate: 0.1\nswitch_costs: [[1, 1, 1], [1, 0, 1], [1, 1, 0]]\n", "model.yaml: switch_costs[0][0]: diagonal must be 0"},
	{"switch costs rows", decodeBase + "switch_rate: 0.1\nswitch_costs: [[0, 1, 1, 1]]\n", "model.yaml: switch_costs: must be a 3×3 matrix, got 1 rows"},
	{"blocking cost keyword", decodeBase + "switch_rate: 0.1\nblocking_cost: paper\n", `model.yaml: blocking_cost: must be a number, a list of 3 numbers, "auto" or "lower"`},
	{"blocking cost mapping", decodeBase + "switch_rate: 0.1\nblocking_cost: {web: 1}\n", `model.yaml: blocking_cost: must be a number, a list of 3 numbers, "auto" or "lower"`},
	{"blocking cost list length", decodeBase + "switch_rate: 0.1\nblocking_cost: [1, 2]\n",
		`model.yaml: blocking_cost: must be a number, a list of 3 numbers, "auto" or "lower", got a list of 2`},
	{"blocking cost negative", decodeBase + "switch_rate: 0.1\nblocking_cost: -1\n", "model.yaml: blocking_cost: must be >= 0"},
	{"blocking cost list entry", decodeBase + "switch_rate: 0.1\nblocking_cost: [1, -2, x]\n",
		"model.yaml: blocking_cost[1]: must be >= 0\nmodel.yaml: blocking_cost[2]: must be a number"},

	// Everything at once, in document order.
	{
		name: "several errors",
		in: "queue_limit: 1\n" +
			"pools:\n" +
			"  - {name: web, arrival_rate: 1, service_rate: 0, holding_cost: 1, colour: red}\n" +
			"  - {name: web, arrival_rate: x, service_rate: 1, holding_cost: 1}\n" +
			"switch_rates: [[0, 1], [1, 1]]\n" +
			"blocking_cost: nope\n" +
			"servers: 0\n" +
			"servers: 1\n",
		want: strings.Join([]string{
			"model.yaml: queue_limit: must be >= 2",
			"model.yaml: pools[0].service_rate: must be > 0",
			"model.yaml: pools[0].colour: unknown field",
			"model.yaml: pools[1].name: duplicate name \"web\"",
			"model.yaml: pools[1].arrival_rate: must be a number",
			"model.yaml: switch_rates[1][1]: diagonal must be 0",
			`model.yaml: blocking_cost: must be a number, a list of 2 numbers, "auto" or "lower"`,
			"model.yaml: servers: must be >= 1",
			"model.yaml: servers: duplicate field",
		}, "\n"),
	},
}

func TestParseModelErrors(t *testing.T) {
	for _, tt := range parseModelErrorCases {
		t.Run(tt.name, func(t *testing.T) {
			m, err := ParseModel("model.yaml", []byte(tt.in))
			if err == nil {
				t.Fatalf("ParseModel succeeded, want error %q", tt.want)
			}
			if m != nil {
				t.Errorf("ParseModel returned a model with an error")
			}
			if got := err.Error(); got != tt.want {
				t.Errorf("error:\n%s\nwant:\n%s", got, tt.want)
			}
		})
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name   string
		change func(m *Model)
		want   string // "" for a valid model
	}{
		{"valid", func(m *Model) {}, ""},
		{"valid fixed uniformization", func(m *Model) { m.UniformizationMode, m.Uniformization = UniformizationFixed, 3.5 }, ""},
		{"valid blocking costs", func(m *Model) { m.BlockingAuto, m.BlockingCosts = false, []float64{0, 1, 2} }, ""},
		{"valid lower blocking", func(m *Model) { m.BlockingAuto, m.BlockingLower = false, true }, ""},
		{"blocking auto and lower", func(m *Model) { m.BlockingLower = true }, `blocking_cost: may be "auto" or "lower", not both`},
		{"servers", func(m *Model) { m.Servers = 0 }, "servers: must be >= 1"},
		{"queue limit", func(m *Model) { m.QueueLimit = 1 }, "queue_limit: must be >= 2"},
		{"valid pool queue limit", func(m *Model) { m.Pools[2].QueueLimit = 40 }, ""},
		{"pool queue limit", func(m *Model) { m.Pools[2].QueueLimit = 1 }, "pools[2].queue_limit: must be from 2 to 65536 (0: the model's queue_limit), got 1"},
		{"discount", func(m *Model) { m.Discount = 1 }, "discount: must be > 0 and < 1"},
		{"uniformization mode", func(m *Model) { m.UniformizationMode = "" },
			`uniformization: unknown mode "": must be "auto", "paper" or "fixed"`},
		{"uniformization negative", func(m *Model) { m.UniformizationMode, m.Uniformization = UniformizationFixed, -1 },
			`uniformization: must be a number > 0, "auto" or "paper"`},
		{"uniformization too small", func(m *Model) { m.UniformizationMode, m.Uniformization = UniformizationFixed, 0.5 },
			"uniformization: 0.5 is smaller than the largest total transition rate 3.5 (must be >= 3.5)"},
		{"no pools", func(m *Model) { m.Pools = nil; m.SwitchRates = nil; m.SwitchCosts = nil }, "pools: must have at least 2 pools, got 0"},
		{"service rate", func(m *Model) { m.Pools[1].ServiceRate = 0 }, "pools[1].service_rate: must be > 0"},
		{"arrival rate nan", func(m *Model) { m.Pools[0].ArrivalRate = nanValue() }, "pools[0].arrival_rate: must be a finite number"},
		{"empty name", func(m *Model) { m.Pools[2].Name = "" }, `pools[2].name: must match [a-z0-9-]+, got ""`},
		{"duplicate name", func(m *Model) { m.Pools[2].Name = "web" }, `pools[2].name: duplicate name "web"`},
		{"switch rates missing", func(m *Model) { m.SwitchRates = nil }, "switch_rates: must be a 3×3 matrix, got 0 rows"},
		{"switch rates ragged", func(m *Model) { m.SwitchRates[1] = []float64{1, 0} }, "switch_rates[1]: must be a row of 3 numbers, got 2"},
		{"switch rates diagonal", func(m *Model) { m.SwitchRates[1][1] = 1 }, "switch_rates[1][1]: diagonal must be 0"},
		{"switch costs negative", func(m *Model) { m.SwitchCosts[2][0] = -1 }, "switch_costs[2][0]: must be >= 0"},
		{"blocking costs length", func(m *Model) { m.BlockingAuto, m.BlockingCosts = false, nil },
			`blocking_cost: must be a number, a list of 3 numbers, "auto" or "lower", got a list of 0`},
		{"blocking cost negative", func(m *Model) { m.BlockingAuto, m.BlockingCosts = false, []float64{0, -1, 0} },
			"blocking_cost[1]: must be >= 0"},
		{"several", func(m *Model) { m.Servers = 0; m.Pools[0].HoldingCost = -1; m.SwitchCosts[0][0] = 2 },
			"servers: must be >= 1\npools[0].holding_cost: must be >= 0\nswitch_costs[0][0]: diagonal must be 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := decodeModel3()
			tt.change(m)
			err := m.Validate()
			got := ""
			if err != nil {
				got = err.Error()
			}
			if got != tt.want {
				t.Errorf("Validate:\n%s\nwant:\n%s", got, tt.want)
			}
		})
	}
}

func nanValue() float64 {
	zero := 0.0
	return zero / zero
}
