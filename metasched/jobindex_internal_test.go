package metasched

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/metasched/metasched/metasched/lifecycle"
)

// TestDeleteAt: a job leaves the queue at any position, the others keep
// their order, whichever side deleteAt moves.
func TestDeleteAt(t *testing.T) {
	for n := 1; n <= 7; n++ {
		for i := range n {
			var q, want []*liveJob
			for k := range n {
				j := newLiveJob(lifecycle.Job{ID: fmt.Sprintf("j%d", k)}, nil, "", time.Time{})
				q = append(q, j)
				if k != i {
					want = append(want, j)
				}
			}
			got := deleteAt(slices.Clone(q), i)
			if !slices.Equal(got, want) {
				t.Errorf("deleting %d of %d: got %v, want %v", i, n, ids(got), ids(want))
			}
		}
	}
}

func ids(q []*liveJob) []string {
	var out []string
	for _, j := range q {
		out = append(out, j.id())
	}
	return out
}
