package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/metasched/metasched/metasched/api"
	"github.com/metasched/metasched/metasched/lab"
)

func TestWriteColumns(t *testing.T) {
	var b bytes.Buffer
	long := strings.Repeat("cluster-name, ", 12) + "last"
	writeColumns(&b, []string{"A", "LONGER HEAD", "LIST"}, [][]string{{"x", "1", "short"}, {"yyyy", "22", long}})
	want := "A     LONGER HEAD  LIST\n" +
		"x     1            short\n" +
		"yyyy  22           cluster-name, cluster-name, cluster-name, cluster-name, cluster-name, cluster-name, cluster-name,\n" +
		"                   cluster-name, cluster-name, cluster-name, cluster-name, cluster-name, last\n"
	if diff := cmp.Diff(want, b.String()); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	checkWidth(t, b.String())
	if got := breakList("a+b+c", 3); !cmp.Equal(got, []string{"a+", "b+c"}) {
		t.Errorf("breakList = %q", got)
	}
}

// The real grid's table (experiment realgrid, demo-vms) fits in 120
// columns with the longest run name and three sites.
func TestPrintRowsWidth(t *testing.T) {
	n := func(i int) *int { return &i }
	var rows []lab.Row
	for _, r := range lab.RealGridRuns {
		rows = append(rows, lab.Row{Run: r.Name, Master: "latam-a", PredictedS: 1234.5, StartEndS: 12.3, MeasuredS: 1300.2, Ratio: 1.05,
			ProgramS: 1100, ProgramRatio: 0.98, Clusters: []api.ClusterTasks{
				{Name: "latam-a", TasksPredicted: 40, TasksDone: n(41)}, {Name: "latam-b", TasksPredicted: 40, TasksDone: n(39)},
				{Name: "spain", TasksPredicted: 40, TasksDone: n(40)}}})
	}
	var b bytes.Buffer
	printRows(&b, rows)
	checkWidth(t, b.String())
	if !strings.Contains(b.String(), "0.98        latam-a 40/41,\n") || !strings.Contains(b.String(), " latam-b 40/39, spain 40/40\n") {
		t.Errorf("table:\n%s", b.String())
	}
}
