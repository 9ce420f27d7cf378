package switching

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestTableRoundTrip(t *testing.T) {
	for name, m := range engineModels() {
		sol, err := Solve(context.Background(), m, SolveOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		if err := WriteTable(&buf, sol.Table); err != nil {
			t.Fatal(err)
		}
		got, err := ReadTable(bytes.NewReader(buf.Bytes()), 0)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if diff := cmp.Diff(sol.Table.Actions, got.Actions); diff != "" {
			t.Errorf("%s: actions differ after a round trip:\n%s", name, diff)
		}
		if got.Criterion != Average || got.Space.States != sol.Table.Space.States {
			t.Errorf("%s: criterion %q, %d states", name, got.Criterion, got.Space.States)
		}
		// Decisions agree state by state through the Policy interface too.
		for idx := range got.Space.States {
			st := got.Space.State(idx)
			if a, b := got.Decide(st), sol.Table.Decide(st); a != b {
				t.Fatalf("%s: state %v: loaded %d, solved %d", name, st, a, b)
			}
		}
	}
}

// gz compresses a table file body.
func gz(body string) []byte {
	var buf bytes.Buffer
	w := gzip.NewWriter(&buf)
	_, _ = w.Write([]byte(body)) // into memory: it cannot fail
	_ = w.Close()                // likewise
	return buf.Bytes()
}

// tableErrorCase is a table file ReadTable refuses, and a part of its
// error.
type tableErrorCase struct {
	name string
	data []byte
	want string
}

// tableErrorCases returns a valid table file (of the two-pool model) and
// invalid ones made from it (TestReadTableErrors; seeds of FuzzReadTable).
func tableErrorCases(t testing.TB) (table []byte, cases []tableErrorCase) {
	t.Helper()
	m := engineModels()["two pools"]
	sol, err := Solve(context.Background(), m, SolveOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var good bytes.Buffer
	if err := WriteTable(&good, sol.Table); err != nil {
		t.Fatal(err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(good.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	var plain bytes.Buffer
	if _, err := plain.ReadFrom(zr); err != nil {
		t.Fatal(err)
	}
	body := plain.String()
	header := body[:strings.Index(body[len(tableMagic):], "\n")+len(tableMagic)+1]
	actions := body[len(header):]

	// A version 1 table of a model whose pairs share lanes: its count of
	// states is by pair.
	three := engineModels()["three pools"]
	threeJSON, err := json.Marshal(ModelFile(three))
	if err != nil {
		t.Fatal(err)
	}
	_, byPair, _ := countStates(three, true, false)
	v1 := fmt.Sprintf("%s{\"criterion\":\"average\",\"states\":%d,\"model\":%s}\n", tableMagicPairs, byPair, threeJSON)

	badAction := []byte(actions)
	// Configuration 0 is (k1, k2, m12, m21) = (0, 0, 0, 2): pool 1 has no
	// server, so switching 1→2 (action 1) is not available there.
	badAction[0] = 1
	return good.Bytes(), []tableErrorCase{
		{"not gzip", []byte("hello"), "not a valid policy table"},
		{"no magic", gz("something else\n"), "missing header"},
		{"bad header", gz(tableMagic + "{not json\n"), "header"},
		{"bad model", gz(tableMagic + `{"criterion":"average","states":1,"model":{"servers":0}}` + "\n"), "table model: servers: must be"},
		{"short", gz(header + actions[:10]), "actions"},
		{"trailing", gz(header + actions + "x"), "trailing data"},
		{"unavailable action", gz(header + string(badAction)), "action 1 is not available in state 0"},
		// A horizon no solve gives, and a model no table holds.
		{"horizon of an average table", gz(strings.Replace(header, `"criterion":"average"`, `"criterion":"average","horizon":2`, 1) + actions),
			"horizon 2 with criterion average"},
		{"negative horizon", gz(strings.Replace(header, `"criterion":"average"`, `"criterion":"discounted","horizon":-1`, 1) + actions), "horizon -1"},
		{"version 1 by pair", gz(v1), "a version 1 table, whose 7680 states count the servers in transit by pair; this version counts them by lane (5376 states)"},
		{"too many servers", gz(strings.Replace(header, `"servers":2`, `"servers":200`, 1) + actions), "servers: 200 servers"},
		{"pools lumped that are not alike", gz(strings.Replace(header, `"criterion":"average"`, `"criterion":"average","symmetric_pools":[[0,1]]`, 1) + actions),
			"header lumps pools [[0 1]], the model's exchangeable pools are []"},
	}
}

func TestReadTableErrors(t *testing.T) {
	good, cases := tableErrorCases(t)
	for _, tc := range cases {
		_, err := ReadTable(bytes.NewReader(tc.data), 0)
		if !errors.Is(err, ErrBadTable) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want ErrBadTable with %q", tc.name, err, tc.want)
		}
	}
	// Where no two pairs share a lane, a version 1 table reads as it was.
	zr, err := gzip.NewReader(bytes.NewReader(good))
	if err != nil {
		t.Fatal(err)
	}
	var plain bytes.Buffer
	if _, err := plain.ReadFrom(zr); err != nil {
		t.Fatal(err)
	}
	old := gz(tableMagicPairs + strings.TrimPrefix(plain.String(), tableMagic))
	if _, err := ReadTable(bytes.NewReader(old), 0); err != nil {
		t.Errorf("version 1 table of two pools: %v", err)
	}
	if _, err := ReadTable(bytes.NewReader(good), 10); !errors.Is(err, ErrTooLarge) {
		t.Errorf("over the state limit: err = %v, want ErrTooLarge", err)
	}
}
