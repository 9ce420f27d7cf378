package coordinator

import "testing"

func TestSwitchIDNumber(t *testing.T) {
	for _, n := range []int{0, 1, 42, 999999, 1000000, 12345678} {
		id := NewSwitchID(n)
		if got, ok := SwitchIDNumber(id); !ok || got != n {
			t.Errorf("SwitchIDNumber(%q) = %d, %v, want %d, true", id, got, ok, n)
		}
	}
	if id := NewSwitchID(42); id != "s-000042" {
		t.Errorf("NewSwitchID(42) = %q, want s-000042", id)
	}
	for _, id := range []SwitchID{"", "s1", "s-", "s-x", "s-12x", "s- 12", "s--1", "s-+1", "sw-000001", "S-000001"} {
		if n, ok := SwitchIDNumber(id); ok {
			t.Errorf("SwitchIDNumber(%q) = %d, true, want false", id, n)
		}
	}
}
