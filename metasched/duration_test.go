package metasched

import (
	"math"
	"testing"
	"time"

	"github.com/metasched/metasched/selection"
)

// TestDuration: a predicted run time converts to a time.Duration without
// overflow, up to the longest plan at the largest time_scale.
func TestDuration(t *testing.T) {
	for _, tc := range []struct {
		seconds float64
		want    time.Duration
	}{
		{0, 0},
		{1.5, 1500 * time.Millisecond},
		{selection.MaxRuntimeSeconds, time.Duration(selection.MaxRuntimeSeconds) * time.Second},
		{selection.MaxRuntimeSeconds * 1e6, math.MaxInt64},
		{math.Inf(1), math.MaxInt64},
	} {
		if got := duration(tc.seconds); got != tc.want {
			t.Errorf("duration(%g) = %v, want %v", tc.seconds, got, tc.want)
		}
	}
}
