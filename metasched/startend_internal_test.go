package metasched

import (
	"testing"
	"time"
)

// The start-and-end estimate is the median of the pool's last
// startEndSamples jobs with their master at the site asked that reported
// their program's run time; a job without one, or whose program took all
// of its measured time, is not a sample, and a job whose master was
// elsewhere counts only there.
func TestStartEndCost(t *testing.T) {
	r := newPoolRates(time.Time{})
	if c, n := r.startEndCost("a"); c != 0 || n != 0 {
		t.Fatalf("no job yet: %g of %d", c, n)
	}
	r.ran("a", 10, 0)  // no summary
	r.ran("a", 10, 10) // nothing beyond the program
	r.ran("a", 10, 12)
	if c, n := r.startEndCost("a"); c != 0 || n != 0 {
		t.Fatalf("no sample: %g of %d", c, n)
	}
	r.ran("a", 14, 10) // 4
	r.ran("a", 12, 10) // 2
	r.ran("b", 30, 10) // 20, at b
	if c, n := r.startEndCost("a"); c != 3 || n != 2 {
		t.Errorf("two samples 4 and 2: %g of %d, want 3 of 2", c, n)
	}
	if c, n := r.startEndCost("b"); c != 20 || n != 1 {
		t.Errorf("at b, one sample 20: %g of %d", c, n)
	}
	if c, n := r.startEndCost("c"); c != 0 || n != 0 {
		t.Errorf("at c, no sample: %g of %d", c, n)
	}
	r.ran("a", 19, 10) // 9
	if c, n := r.startEndCost("a"); c != 4 || n != 3 {
		t.Errorf("samples 4, 2, 9: %g of %d, want 4 of 3", c, n)
	}
	for range startEndSamples {
		r.ran("a", 101, 100) // 1, pushing the others out
	}
	if c, n := r.startEndCost("a"); c != 1 || n != startEndSamples {
		t.Errorf("the last %d samples all 1: %g of %d", startEndSamples, c, n)
	}
	if c, n := r.startEndCost("b"); c != 20 || n != 1 {
		t.Errorf("at b, after a's: %g of %d, want 20 of 1", c, n)
	}
}
