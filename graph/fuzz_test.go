package graph_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/metasched/metasched/graph"
	"github.com/metasched/metasched/internal/yamlx/yamlxtest"
)

// FuzzParseGrid decodes grid files: a file is either refused, with every
// problem naming the file and a field or a line, or gives a grid that
// passes Validate, makes a graph, and comes back the same from its JSON
// encoding.
func FuzzParseGrid(f *testing.F) {
	for _, tc := range parseGridCases {
		f.Add([]byte(tc.in))
	}
	for _, tc := range parseGridErrorCases {
		f.Add([]byte(tc.in))
	}
	files, err := filepath.Glob("../examples/grid-*.yaml")
	if err != nil {
		f.Fatal(err)
	}
	for _, name := range append(files, "../metasched/demo/grid.yaml") {
		data, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		g, err := graph.ParseGrid("grid.yaml", data)
		if err != nil {
			if g != nil {
				t.Errorf("ParseGrid returned a grid with the error %v", err)
			}
			if err := yamlxtest.CheckError("grid.yaml", err); err != nil {
				t.Fatal(err)
			}
			if _, again := graph.ParseGrid("grid.yaml", data); again == nil || again.Error() != err.Error() {
				t.Fatalf("a second parse of the same file: %v, the first: %v", again, err)
			}
			return
		}
		if err := g.Validate(); err != nil {
			t.Fatalf("Validate of a parsed grid: %v", err)
		}
		if _, err := graph.New(g); err != nil {
			t.Fatalf("New of a parsed grid: %v", err)
		}
		js, err := json.Marshal(g)
		if err != nil {
			t.Fatalf("encode a parsed grid: %v", err)
		}
		back, err := graph.ParseGrid("grid.json", js)
		if err != nil {
			t.Fatalf("the grid's own encoding is refused: %v\n%s", err, js)
		}
		if diff := cmp.Diff(g, back); diff != "" {
			t.Fatalf("grid after a round trip through JSON (-parsed +again):\n%s", diff)
		}
	})
}
