package hypervisorproxy

import (
	"errors"
	"testing"
)

// A migration takes the lowest free port of the range; when every port is
// taken the next one waits with ErrBusy, and a released port is taken again.
func TestMigrationPorts(t *testing.T) {
	p := newMigrationPorts([2]int{49400, 49401})
	for _, want := range []int{49400, 49401} {
		if got, err := p.take(); err != nil || got != want {
			t.Fatalf("take = %d, %v; want %d", got, err, want)
		}
	}
	if _, err := p.take(); !errors.Is(err, ErrBusy) {
		t.Fatalf("take from a full pool: err = %v, want ErrBusy", err)
	}
	p.release(49400)
	if got, err := p.take(); err != nil || got != 49400 {
		t.Errorf("take after a release = %d, %v; want 49400", got, err)
	}
}
