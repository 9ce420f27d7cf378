package switching

import (
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/metasched/metasched/internal/yamlx"
)

// modelFields are the fields of a model file (docs/reference/model-files.md,
// "The switching model").
var modelFields = []string{
	"servers", "queue_limit", "discount", "uniformization", "pools",
	"switch_rate", "switch_rates", "switch_cost", "switch_costs",
	"instant_switches", "blocking_cost",
}

var poolFields = []string{"name", "arrival_rate", "service_rate", "holding_cost", "queue_limit"}

// Defaults of the optional fields of a model file.
const (
	defaultDiscount = 0.95
	// defaultInstantRate marks every pair as able to switch when switches are
	// instant and no rates are given (the rates only say which pairs may).
	defaultInstantRate = 1.0
)

// ParseModel decodes a model file (YAML or JSON, see
// docs/reference/model-files.md, "The switching model") strictly: an unknown
// field, a value of the wrong type or out of range is an error. All problems
// of the file are reported together, one per line in document order, each as
// "FILE: FIELD.PATH: problem" with file as FILE.
//
// The result always has M×M SwitchRates and SwitchCosts, and BlockingCosts
// of length M unless BlockingAuto.
func ParseModel(file string, data []byte) (*Model, error) {
	d, root, err := yamlx.Parse(file, data)
	if err != nil {
		return nil, err
	}
	top, ok := root.Map(modelFields...)
	if !ok {
		return nil, d.Err()
	}
	m := &Model{
		Discount:           defaultDiscount,
		UniformizationMode: UniformizationAuto,
		BlockingAuto:       true,
	}
	if n, ok := top.Int("servers", true); ok {
		m.Servers = n
	}
	if n, ok := top.Int("queue_limit", true); ok {
		m.QueueLimit = n
	}
	if x, ok := top.Float("discount", false); ok {
		m.Discount = x
	}
	if v, ok := top.Get("uniformization", false); ok {
		decodeUniformization(v, m)
	}
	if vs, ok := top.Seq("pools", true); ok {
		for _, v := range vs {
			m.Pools = append(m.Pools, decodePool(v))
		}
	}
	if b, ok := top.Bool("instant_switches", false); ok {
		m.InstantSwitches = b
	}
	np := len(m.Pools)

	// switch_rate(s) is required unless switches are instant (or
	// instant_switches is bad: that was reported).
	rates, required := [][]float64(nil), !d.Failed("instant_switches")
	if m.InstantSwitches {
		rates, required = PairMatrix(np, defaultInstantRate), false
	}
	m.SwitchRates = decodePairs(top, "switch_rate", "switch_rates", np, mustBePositive, rates, required)
	m.SwitchCosts = decodePairs(top, "switch_cost", "switch_costs", np, mustBeNonnegative, PairMatrix(np, 0), false)

	if v, ok := top.Get("blocking_cost", false); ok {
		decodeBlocking(v, m)
	}

	// The rules on values live in validateValues, shared with Validate.
	// Values that could not be decoded were reported already.
	type problem struct{ path, msg string }
	var problems []problem
	m.validateValues(func(path, msg string) { problems = append(problems, problem{path, msg}) })
	problems = slices.DeleteFunc(problems, func(p problem) bool { return d.Failed(p.path) })
	for _, p := range problems {
		d.Errorf(p.path, "%s", p.msg)
	}
	if d.Err() == nil {
		if msg := m.validateUniformization(); msg != "" {
			d.Errorf("uniformization", "%s", msg)
		}
	}
	if err := d.Err(); err != nil {
		return nil, err
	}
	return m, nil
}

const uniformizationRule = `must be a number > 0, "auto" or "paper"`

func decodeUniformization(v yamlx.Value, m *Model) {
	if v.IsNumber() {
		if x, ok := v.Float(); ok {
			m.UniformizationMode, m.Uniformization = UniformizationFixed, x
		}
		return
	}
	if k, ok := v.Keyword(UniformizationAuto, UniformizationPaper); ok {
		m.UniformizationMode = k
		return
	}
	v.Errorf(uniformizationRule)
}

func decodePool(v yamlx.Value) Pool {
	var p Pool
	pm, ok := v.Map(poolFields...)
	if !ok {
		return p
	}
	p.Name, _ = pm.Str("name", true)
	p.ArrivalRate, _ = pm.Float("arrival_rate", true)
	p.ServiceRate, _ = pm.Float("service_rate", true)
	p.HoldingCost, _ = pm.Float("holding_cost", true)
	if n, ok := pm.Int("queue_limit", false); ok {
		if n < 2 || n > MaxQueueLimit {
			pm.Errorf("queue_limit", "must be from 2 to %d (this pool's truncation J; leave it out for the model's queue_limit), got %d", MaxQueueLimit, n)
		} else {
			p.QueueLimit = n
		}
	}
	return p
}

// decodePairs decodes a per-pair quantity given either as one number for
// every pair (field one, which must pass rule) or as an M×M matrix (field
// all, checked by validateValues). Without either it returns def, or reports
// the field as missing when required. A matrix is returned even when some
// entries are bad, so that its shape can still be checked.
func decodePairs(top *yamlx.Map, one, all string, np int, rule func(float64) string, def [][]float64, required bool) [][]float64 {
	v1, has1 := top.Get(one, false)
	vm, hasM := top.Get(all, false)
	switch {
	case has1 && hasM:
		top.Errorf(one, "give either %s or %s, not both", one, all)
	case has1:
		if x, ok := v1.Float(); ok {
			if msg := rule(x); msg != "" {
				v1.Errorf("%s", msg)
			} else {
				return PairMatrix(np, x)
			}
		}
	case hasM:
		x, _ := vm.FloatMatrix()
		return x
	case required:
		top.Errorf(one, "missing required field: give %s or %s", one, all)
	}
	if def == nil {
		def = PairMatrix(np, 0) // a placeholder: an error was reported
	}
	return def
}

func blockingRule(np int) string {
	if np < 2 {
		return `must be a number, a list of numbers, "auto" or "lower"`
	}
	return fmt.Sprintf(`must be a number, a list of %d numbers, "auto" or "lower"`, np)
}

func decodeBlocking(v yamlx.Value, m *Model) {
	np := len(m.Pools)
	switch {
	case v.IsNumber():
		m.BlockingAuto = false
		m.BlockingCosts = make([]float64, np)
		if x, ok := v.Float(); ok {
			if msg := mustBeNonnegative(x); msg != "" {
				v.Errorf("%s", msg)
			} else {
				for i := range m.BlockingCosts {
					m.BlockingCosts[i] = x
				}
			}
		}
	case v.IsSeq():
		m.BlockingAuto = false
		m.BlockingCosts, _ = v.Floats()
	default:
		if _, ok := v.Keyword("lower"); ok {
			m.BlockingAuto, m.BlockingLower = false, true
		} else if _, ok := v.Keyword("auto"); !ok {
			v.Errorf("%s", blockingRule(np))
		}
	}
}

// PairMatrix returns an n×n matrix with x off the diagonal and 0 on it:
// the same switch rate or cost for every pair.
func PairMatrix(n int, x float64) [][]float64 {
	a := make([][]float64, n)
	for i := range a {
		a[i] = make([]float64, n)
		for j := range a[i] {
			if i != j {
				a[i][j] = x
			}
		}
	}
	return a
}

// Validate checks a model built in code with the rules of a model file. It
// reports every problem, one per line, as "FIELD.PATH: problem" with the
// field names of the file (pools[1].service_rate, switch_rates[0][2],
// blocking_cost[1]).
func (m *Model) Validate() error {
	var errs []error
	m.validateValues(func(path, msg string) { errs = append(errs, errors.New(path+": "+msg)) })
	if len(errs) == 0 {
		if msg := m.validateUniformization(); msg != "" {
			errs = append(errs, errors.New("uniformization: "+msg))
		}
	}
	return errors.Join(errs...)
}

// validateValues applies the rules on the values of a model, calling bad for
// each problem with its field path (as in a model file) in field order.
// Shapes are checked against the number of pools only when there are at
// least 2 pools.
func (m *Model) validateValues(bad func(path, msg string)) {
	if m.Servers < 1 {
		bad("servers", "must be >= 1")
	}
	if m.QueueLimit < 2 {
		bad("queue_limit", "must be >= 2")
	} else if m.QueueLimit > MaxQueueLimit {
		bad("queue_limit", fmt.Sprintf("must be <= %d, got %d", MaxQueueLimit, m.QueueLimit))
	}
	if !(m.Discount > 0 && m.Discount < 1) {
		bad("discount", "must be > 0 and < 1")
	}
	switch m.UniformizationMode {
	case UniformizationAuto, UniformizationPaper:
	case UniformizationFixed:
		if !(m.Uniformization > 0) || math.IsInf(m.Uniformization, 0) {
			bad("uniformization", uniformizationRule)
		}
	default:
		bad("uniformization", fmt.Sprintf("unknown mode %q: must be %q, %q or %q",
			m.UniformizationMode, UniformizationAuto, UniformizationPaper, UniformizationFixed))
	}

	np := len(m.Pools)
	if np < 2 {
		bad("pools", fmt.Sprintf("must have at least 2 pools, got %d", np))
	}
	seen := map[string]bool{}
	for i, p := range m.Pools {
		at := func(f string) string { return fmt.Sprintf("pools[%d].%s", i, f) }
		switch {
		case !yamlx.IsName(p.Name):
			bad(at("name"), fmt.Sprintf("must match [a-z0-9-]+, got %q", p.Name))
		case seen[p.Name]:
			bad(at("name"), fmt.Sprintf("duplicate name %q", p.Name))
		}
		seen[p.Name] = true
		if msg := mustBeNonnegative(p.ArrivalRate); msg != "" {
			bad(at("arrival_rate"), msg)
		}
		if msg := mustBePositive(p.ServiceRate); msg != "" {
			bad(at("service_rate"), msg)
		}
		if msg := mustBeNonnegative(p.HoldingCost); msg != "" {
			bad(at("holding_cost"), msg)
		}
		if p.QueueLimit != 0 && (p.QueueLimit < 2 || p.QueueLimit > MaxQueueLimit) {
			bad(at("queue_limit"), fmt.Sprintf("must be from 2 to %d (0: the model's queue_limit), got %d", MaxQueueLimit, p.QueueLimit))
		}
	}

	validatePairMatrix(bad, "switch_rates", m.SwitchRates, np)
	validatePairMatrix(bad, "switch_costs", m.SwitchCosts, np)

	if m.BlockingAuto && m.BlockingLower {
		bad("blocking_cost", `may be "auto" or "lower", not both`)
	}
	if !m.BlockingAuto && !m.BlockingLower {
		if np >= 2 && len(m.BlockingCosts) != np {
			bad("blocking_cost", fmt.Sprintf("%s, got a list of %d", blockingRule(np), len(m.BlockingCosts)))
		}
		for i, x := range m.BlockingCosts {
			if msg := mustBeNonnegative(x); msg != "" {
				bad(fmt.Sprintf("blocking_cost[%d]", i), msg)
			}
		}
	}
}

// validatePairMatrix checks an np×np matrix with 0 on the diagonal and
// finite numbers >= 0 elsewhere.
func validatePairMatrix(bad func(path, msg string), name string, x [][]float64, np int) {
	if np >= 2 && len(x) != np {
		bad(name, fmt.Sprintf("must be a %d×%d matrix, got %d rows", np, np, len(x)))
		return
	}
	for a, row := range x {
		if np >= 2 && len(row) != np {
			bad(fmt.Sprintf("%s[%d]", name, a), fmt.Sprintf("must be a row of %d numbers, got %d", np, len(row)))
			continue
		}
		for b, v := range row {
			at := fmt.Sprintf("%s[%d][%d]", name, a, b)
			if a == b {
				if v != 0 {
					bad(at, "diagonal must be 0")
				}
			} else if msg := mustBeNonnegative(v); msg != "" {
				bad(at, msg)
			}
		}
	}
}

// validateUniformization checks a fixed Λ against MaxRate. It needs a model
// whose values passed validateValues.
func (m *Model) validateUniformization() string {
	if m.UniformizationMode != UniformizationFixed {
		return ""
	}
	need := m.MaxRate()
	if m.Uniformization < need*(1-1e-12) {
		return fmt.Sprintf("%g is smaller than the largest total transition rate %g (must be >= %g)",
			m.Uniformization, need, need)
	}
	return ""
}

// mustBeNonnegative returns the problem with a value that must be a finite number
// >= 0, or "".
func mustBeNonnegative(x float64) string {
	switch {
	case math.IsNaN(x) || math.IsInf(x, 0):
		return "must be a finite number"
	case x < 0:
		return "must be >= 0"
	}
	return ""
}

// mustBePositive returns the problem with a value that must be a finite number
// > 0, or "".
func mustBePositive(x float64) string {
	switch {
	case math.IsNaN(x) || math.IsInf(x, 0):
		return "must be a finite number"
	case x <= 0:
		return "must be > 0"
	}
	return ""
}
