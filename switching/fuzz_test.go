package switching

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"io"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/metasched/metasched/internal/yamlx/yamlxtest"
)

// FuzzParseModel decodes model files: a file is either refused, with every
// problem naming the file and a field or a line, or gives a model that
// passes Validate, whose rates and costs are finite, and that comes back
// the same from its encoding by ModelFile.
func FuzzParseModel(f *testing.F) {
	for _, tc := range parseModelCases {
		f.Add([]byte(tc.in))
	}
	for _, tc := range parseModelErrorCases {
		f.Add([]byte(tc.in))
	}
	files, err := filepath.Glob("../examples/*.yaml")
	if err != nil {
		f.Fatal(err)
	}
	for _, name := range files {
		data, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		if _, err := ParseModel(name, data); err == nil {
			f.Add(data)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := ParseModel("model.yaml", data)
		if err != nil {
			if m != nil {
				t.Errorf("ParseModel returned a model with the error %v", err)
			}
			if err := yamlxtest.CheckError("model.yaml", err); err != nil {
				t.Fatal(err)
			}
			return
		}
		checkModel(t, m)
	})
}

// checkModel checks a model that ParseModel accepted: Validate passes,
// every number is finite, and its encoding by ModelFile decodes to the
// same model.
func checkModel(t *testing.T, m *Model) {
	t.Helper()
	if err := m.Validate(); err != nil {
		t.Fatalf("Validate of a parsed model: %v", err)
	}
	finite := func(xs ...float64) bool {
		for _, x := range xs {
			if math.IsNaN(x) || math.IsInf(x, 0) {
				return false
			}
		}
		return true
	}
	ok := finite(m.Discount, m.Uniformization, m.MaxRate()) && finite(m.BlockingCosts...)
	for _, p := range m.Pools {
		ok = ok && finite(p.ArrivalRate, p.ServiceRate, p.HoldingCost)
	}
	for i := range m.SwitchRates {
		ok = ok && finite(m.SwitchRates[i]...) && finite(m.SwitchCosts[i]...)
	}
	if !ok {
		t.Fatalf("a parsed model has a number that is not finite: %+v", m)
	}
	js, err := json.Marshal(ModelFile(m))
	if err != nil {
		t.Fatalf("encode a parsed model: %v", err)
	}
	back, err := ParseModel("model.json", js)
	if err != nil {
		t.Fatalf("the model's own encoding is refused: %v\n%s", err, js)
	}
	if diff := cmp.Diff(m, back); diff != "" {
		t.Fatalf("model after a round trip through ModelFile (-parsed +again):\n%s", diff)
	}
}

// fuzzMaxStates bounds the tables FuzzReadTable reads.
const fuzzMaxStates = 1 << 16

// FuzzReadTable reads policy table files. The fuzzed bytes are the table's
// contents, gzipped before reading unless they are gzip already. A table is
// either refused with ErrBadTable or ErrTooLarge, or has an available
// action in every state of its model's space, a horizon its solve could
// have, and is read back the same after WriteTable.
func FuzzReadTable(f *testing.F) {
	good, cases := tableErrorCases(f)
	// A table of a finite-horizon solve, whose header has a horizon.
	sol, err := Solve(context.Background(), engineModels()["two pools"],
		SolveOptions{Criterion: Discounted, Method: ValueIteration, Horizon: 3})
	if err != nil {
		f.Fatal(err)
	}
	var horizon bytes.Buffer
	if err := WriteTable(&horizon, sol.Table); err != nil {
		f.Fatal(err)
	}
	for _, data := range append([][]byte{good, horizon.Bytes()}, func() (out [][]byte) {
		for _, tc := range cases {
			out = append(out, tc.data)
		}
		return out
	}()...) {
		// The contents, which the fuzzer changes best, and the file itself.
		if zr, err := gzip.NewReader(bytes.NewReader(data)); err == nil {
			if plain, err := io.ReadAll(zr); err == nil {
				f.Add(plain)
			}
		}
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if !bytes.HasPrefix(data, []byte{0x1f, 0x8b}) {
			data = gz(string(data))
		}
		tb, err := ReadTable(bytes.NewReader(data), fuzzMaxStates)
		if err != nil {
			if tb != nil {
				t.Errorf("ReadTable returned a table with the error %v", err)
			}
			if !errors.Is(err, ErrBadTable) && !errors.Is(err, ErrTooLarge) {
				t.Fatalf("error %v is neither ErrBadTable nor ErrTooLarge", err)
			}
			return
		}
		checkModel(t, tb.Model)
		if tb.Criterion != Average && tb.Criterion != Discounted {
			t.Errorf("criterion %q", tb.Criterion)
		}
		if tb.Horizon < 0 || tb.Horizon > 0 && tb.Criterion != Discounted {
			t.Errorf("a table of criterion %s with horizon %d: no solve makes one", tb.Criterion, tb.Horizon)
		}
		if len(tb.Actions) != tb.Space.States || tb.Space.States > fuzzMaxStates {
			t.Fatalf("%d actions for %d states (limit %d)", len(tb.Actions), tb.Space.States, fuzzMaxStates)
		}
		for c := range tb.Space.Configs {
			ok := tb.Space.available(c)
			for j := range tb.Space.B {
				idx := c*tb.Space.B + j
				if a := tb.Actions[idx]; a < 0 || int(a) >= len(ok) || !ok[a] {
					t.Fatalf("action %d of state %d is not available there", a, idx)
				}
				if got := tb.Decide(tb.Space.State(idx)); got != Action(tb.Actions[idx]) {
					t.Fatalf("Decide(state %d) = %d, the table holds %d", idx, got, tb.Actions[idx])
				}
			}
		}
		var buf bytes.Buffer
		if err := WriteTable(&buf, tb); err != nil {
			t.Fatalf("WriteTable of a table read: %v", err)
		}
		back, err := ReadTable(&buf, fuzzMaxStates)
		if err != nil {
			t.Fatalf("a table written from one read is refused: %v", err)
		}
		type view struct {
			Model     *Model
			Criterion Criterion
			Horizon   int
			States    int
			Actions   []int8
		}
		v := func(t *Table) view { return view{t.Model, t.Criterion, t.Horizon, t.Space.States, t.Actions} }
		if diff := cmp.Diff(v(tb), v(back)); diff != "" {
			t.Fatalf("table after WriteTable and ReadTable (-read +again):\n%s", diff)
		}
	})
}

// FuzzParseView reads view specs (metasched policy solve --view) of a
// model of 5 servers, 3 pools and J = 8: a spec is refused, or gives a view
// of that model (servers in place summing to N, two different queues on
// the axes, the others fixed within 0..J−1, a size within 1..J) that its
// String reads back the same.
func FuzzParseView(f *testing.F) {
	for _, tc := range viewCases {
		f.Add(tc.spec)
	}
	for _, tc := range viewErrorCases {
		f.Add(tc.spec)
	}
	m := viewModel()
	M, N, J := m.NumPools(), m.Servers, m.QueueLimit
	f.Fuzz(func(t *testing.T, spec string) {
		v, err := ParseView(m, spec)
		if err != nil {
			if err.Error() == "" {
				t.Fatalf("%q: an error without a text", spec)
			}
			return
		}
		sum, ok := 0, len(v.K) == M
		for _, k := range v.K {
			ok = ok && k >= 0 && k <= N
			sum += k
		}
		ok = ok && sum == N && v.Rows != v.Cols && v.Rows >= 0 && v.Rows < M && v.Cols >= 0 && v.Cols < M &&
			v.Size >= 1 && v.Size <= J && len(v.Fixed) == M-2
		for i, j := range v.Fixed {
			ok = ok && i >= 0 && i < M && i != v.Rows && i != v.Cols && j >= 0 && j < J
		}
		if !ok {
			t.Fatalf("%q: view %+v is not a view of %d servers, %d pools, J = %d", spec, v, N, M, J)
		}
		again, err := ParseView(m, v.String())
		if err != nil {
			t.Fatalf("%q: the view's String %q is refused: %v", spec, v.String(), err)
		}
		if diff := cmp.Diff(v, again); diff != "" {
			t.Fatalf("%q: view after String (-parsed +again):\n%s", spec, diff)
		}
	})
}
