package switching

import (
	"bufio"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
)

// Table is a policy given by one action per state of a model's space: the
// optimal policy of a solve, or a table loaded from a file. Queue lengths
// beyond a pool's truncation are clamped to J_i−1.
type Table struct {
	Model     *Model
	Space     *Space
	Criterion Criterion
	Horizon   int
	Actions   []int8 // indexed like Space
}

var _ Policy = (*Table)(nil)

// Decide looks the state up. A state outside the table's space (another
// number of servers, or servers in transit on a pair the model cannot
// switch) gets NoAction.
func (t *Table) Decide(s State) Action {
	idx, to, ok := t.Space.lookup(s)
	if !ok {
		return NoAction
	}
	return t.Space.unmap(Action(t.Actions[idx]), to)
}

// tableMagic opens every table file, after gunzip. Version 1 files were
// written when the space counted servers in transit by pair, not by lane:
// they read only where the two agree (no two pairs share a lane).
const (
	tableMagic      = "metasched-policy-table 2\n"
	tableMagicPairs = "metasched-policy-table 1\n"
)

type tableHeader struct {
	Criterion Criterion `json:"criterion"`
	Horizon   int       `json:"horizon,omitempty"`
	States    int       `json:"states"`
	// Symmetric: the exchangeable pools the table's space lumps (none in
	// tables written before it could).
	Symmetric [][]int         `json:"symmetric_pools,omitempty"`
	Model     json.RawMessage `json:"model"`
}

// WriteTable saves a table: gzip of a magic line, a JSON header line holding
// the model in the model-file format, then one byte per state.
func WriteTable(w io.Writer, t *Table) error {
	model, err := json.Marshal(ModelFile(t.Model))
	if err != nil {
		return fmt.Errorf("encode table model: %w", err)
	}
	hdr, err := json.Marshal(tableHeader{Criterion: t.Criterion, Horizon: t.Horizon, States: len(t.Actions),
		Symmetric: t.Space.Symmetric, Model: model})
	if err != nil {
		return fmt.Errorf("encode table header: %w", err)
	}
	zw := gzip.NewWriter(w)
	bw := bufio.NewWriter(zw)
	bw.WriteString(tableMagic)
	bw.Write(hdr)
	bw.WriteByte('\n')
	for _, a := range t.Actions {
		bw.WriteByte(byte(a))
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("write table: %w", err)
	}
	if err := zw.Close(); err != nil {
		return fmt.Errorf("write table: %w", err)
	}
	return nil
}

// ErrBadTable is returned for a file that is not a valid policy table.
var ErrBadTable = errors.New("not a valid policy table")

// ReadTable loads a table saved by WriteTable, refusing a space of more
// than maxStates states (0: no limit) and any action that is not available
// in its state.
func ReadTable(r io.Reader, maxStates int) (*Table, error) {
	zr, err := gzip.NewReader(r)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadTable, err)
	}
	br := bufio.NewReader(zr)
	magic := make([]byte, len(tableMagic))
	if _, err := io.ReadFull(br, magic); err != nil || string(magic) != tableMagic && string(magic) != tableMagicPairs {
		return nil, fmt.Errorf("%w: missing header", ErrBadTable)
	}
	byPair := string(magic) == tableMagicPairs
	line, err := br.ReadBytes('\n')
	if err != nil {
		return nil, fmt.Errorf("%w: header: %w", ErrBadTable, err)
	}
	var hdr tableHeader
	if err := json.Unmarshal(line, &hdr); err != nil {
		return nil, fmt.Errorf("%w: header: %w", ErrBadTable, err)
	}
	m, err := ParseModel("table model", hdr.Model)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadTable, err)
	}
	if hdr.Criterion != Average && hdr.Criterion != Discounted {
		return nil, fmt.Errorf("%w: criterion %q", ErrBadTable, hdr.Criterion)
	}
	if hdr.Horizon < 0 || hdr.Horizon > 0 && hdr.Criterion != Discounted {
		return nil, fmt.Errorf("%w: horizon %d with criterion %s: a solve's horizon is > 0 and discounted, or none",
			ErrBadTable, hdr.Horizon, hdr.Criterion)
	}
	newSpace := NewSpace
	if hdr.Symmetric != nil {
		newSpace = NewSymmetricSpace
	}
	s, err := newSpace(m, maxStates)
	if errors.Is(err, ErrTooLarge) {
		return nil, err
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadTable, err)
	}
	if !slices.EqualFunc(hdr.Symmetric, s.Symmetric, slices.Equal) {
		return nil, fmt.Errorf("%w: header lumps pools %v, the model's exchangeable pools are %v", ErrBadTable, hdr.Symmetric, s.Symmetric)
	}
	if hdr.States != s.States && byPair {
		return nil, fmt.Errorf("%w: a version 1 table, whose %d states count the servers in transit by pair; this version counts them by lane (%d states): solve the model again",
			ErrBadTable, hdr.States, s.States)
	}
	if hdr.States != s.States {
		return nil, fmt.Errorf("%w: header says %d states, the model has %d", ErrBadTable, hdr.States, s.States)
	}
	t := &Table{Model: m, Space: s, Criterion: hdr.Criterion, Horizon: hdr.Horizon, Actions: make([]int8, s.States)}
	buf := make([]byte, s.B)
	for c := range s.Configs {
		if _, err := io.ReadFull(br, buf); err != nil {
			return nil, fmt.Errorf("%w: actions: %w", ErrBadTable, err)
		}
		ok := s.available(c)
		for j, b := range buf {
			if !ok[b] {
				return nil, fmt.Errorf("%w: action %d is not available in state %d", ErrBadTable, b, c*s.B+j)
			}
			t.Actions[c*s.B+j] = int8(b)
		}
	}
	if _, err := br.ReadByte(); err != io.EOF {
		return nil, fmt.Errorf("%w: trailing data", ErrBadTable)
	}
	return t, nil
}

// ModelFile returns the model in the model-file format (for YAML or JSON
// encoding): ParseModel of its encoding gives the same model back.
func ModelFile(m *Model) map[string]any {
	out := map[string]any{
		"servers":     m.Servers,
		"queue_limit": m.QueueLimit,
		"discount":    m.Discount,
	}
	switch m.UniformizationMode {
	case UniformizationFixed:
		out["uniformization"] = m.Uniformization
	default:
		out["uniformization"] = m.UniformizationMode
	}
	pools := make([]map[string]any, len(m.Pools))
	for i, p := range m.Pools {
		pools[i] = map[string]any{"name": p.Name, "arrival_rate": p.ArrivalRate, "service_rate": p.ServiceRate, "holding_cost": p.HoldingCost}
		if p.QueueLimit > 0 {
			pools[i]["queue_limit"] = p.QueueLimit
		}
	}
	out["pools"] = pools
	out["switch_rates"] = m.SwitchRates
	out["switch_costs"] = m.SwitchCosts
	out["instant_switches"] = m.InstantSwitches
	switch {
	case m.BlockingAuto:
		out["blocking_cost"] = "auto"
	case m.BlockingLower:
		out["blocking_cost"] = "lower"
	default:
		out["blocking_cost"] = m.BlockingCosts
	}
	return out
}
