package metasched

import (
	"testing"
	"time"
)

// The start-and-end estimate is the median of the pool's last
// startEndSamples jobs that reported their program's run time; a job
// without one, or whose program took all of its measured time, is not a
// sample.
func TestStartEndCost(t *testing.T) {
	r := newPoolRates(time.Time{})
	if c, n := r.startEndCost(); c != 0 || n != 0 {
		t.Fatalf("no job yet: %g of %d", c, n)
	}
	r.ran(10, 0)  // no summary
	r.ran(10, 10) // nothing beyond the program
	r.ran(10, 12)
	if c, n := r.startEndCost(); c != 0 || n != 0 {
		t.Fatalf("no sample: %g of %d", c, n)
	}
	r.ran(14, 10) // 4
	r.ran(12, 10) // 2
	if c, n := r.startEndCost(); c != 3 || n != 2 {
		t.Errorf("two samples 4 and 2: %g of %d, want 3 of 2", c, n)
	}
	r.ran(19, 10) // 9
	if c, n := r.startEndCost(); c != 4 || n != 3 {
		t.Errorf("samples 4, 2, 9: %g of %d, want 4 of 3", c, n)
	}
	for range startEndSamples {
		r.ran(101, 100) // 1, pushing the others out
	}
	if c, n := r.startEndCost(); c != 1 || n != startEndSamples {
		t.Errorf("the last %d samples all 1: %g of %d", startEndSamples, c, n)
	}
}
