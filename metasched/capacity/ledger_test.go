package capacity

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/metasched/metasched/internal/deptest"
)

var t0 = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

// Promises add up per host, and go with their VM as an inventory lists
// it, as it is dropped or destroyed, or with their job.
func TestPromises(t *testing.T) {
	l := NewLedger()
	vm := Use{VCPUs: 2, MemoryMiB: 512}
	l.Promise("j1", vm, Spot{"j1-0", "h1"}, Spot{"j1-1", "h1"}, Spot{"j1-2", "h2"})
	l.Promise("j1", Use{VCPUs: 9, MemoryMiB: 9}, Spot{"j1-0", "h1"}) // promised already: kept as it was
	l.Promise("j2", vm, Spot{"j2-0", "h2"})
	want := map[string]Use{"h1": {4, 1024}, "h2": {4, 1024}}
	if diff := cmp.Diff(want, l.Promised()); diff != "" {
		t.Fatalf("promised (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"j1", "j2"}, l.Jobs()); diff != "" {
		t.Errorf("jobs (-want +got):\n%s", diff)
	}
	l.Seen("j1-0")
	l.Seen("not-promised")
	if got := l.On("h1"); got != (Use{2, 512}) {
		t.Errorf("h1 after an inventory listed j1-0: %+v", got)
	}
	l.Destroyed(t0, "j2-0")
	l.Drop("j1-1")
	if diff := cmp.Diff(map[string]Use{"h2": {2, 512}}, l.Promised()); diff != "" {
		t.Errorf("promised (-want +got):\n%s", diff)
	}
	l.DropJob("j1")
	if got, jobs := l.Promised(), l.Jobs(); len(got) != 0 || len(jobs) != 0 {
		t.Errorf("after the last job's promises went: %v, jobs %v", got, jobs)
	}
	if l.On("h2") != (Use{}) {
		t.Error("h2 keeps a promise")
	}
}

// A VM is in the lifecycle's hands until each Take is released; a
// destroyed VM is gone for DestroyedFor, noted again when destroyed
// again.
func TestHandsAndDestroyed(t *testing.T) {
	l := NewLedger()
	l.Take("a", "b")
	l.Take("a")
	l.Release("a")
	if !l.InHand("a") || !l.InHand("b") || l.Handled() != 2 {
		t.Fatalf("after two takes and one release: a %v b %v, %d", l.InHand("a"), l.InHand("b"), l.Handled())
	}
	l.Release("a", "b")
	if l.InHand("a") || l.Handled() != 0 {
		t.Fatal("released VMs still in hand")
	}
	if !func() bool { l.Take("c"); defer l.Release("c"); return l.Gone("c") }() {
		t.Error("a VM being destroyed is not gone")
	}
	l.Destroyed(t0, "d", "e")
	l.Destroyed(t0.Add(DestroyedFor/2), "e")
	if !l.Gone("d") || !l.Gone("e") || l.Gone("f") {
		t.Errorf("gone: d %v e %v f %v", l.Gone("d"), l.Gone("e"), l.Gone("f"))
	}
	l.Destroyed(t0.Add(DestroyedFor + time.Second))
	if l.Gone("d") || !l.Gone("e") {
		t.Errorf("a minute on: d gone %v (noted once, expired), e gone %v (noted again)", l.Gone("d"), l.Gone("e"))
	}
	l.Destroyed(t0.Add(2*DestroyedFor), "x")
	if l.Gone("e") || len(l.destroyed) != 1 || len(l.destroyedQ) != 1 {
		t.Errorf("the notes left: %v, queue %v", l.destroyed, l.destroyedQ)
	}
}

// Missed counts the inventories in a row that missed a VM: one listed
// (not missed) starts again from zero.
func TestMissed(t *testing.T) {
	l := NewLedger()
	for i, tc := range []struct {
		missed []string
		want   []int
	}{
		{[]string{"a", "b"}, []int{1, 1}},
		{[]string{"a", "b", "c"}, []int{2, 2, 1}},
		{[]string{"a", "c"}, []int{3, 2}},
		{[]string{"b"}, []int{1}},
		{nil, []int{}},
		{[]string{"a"}, []int{1}},
	} {
		if diff := cmp.Diff(tc.want, l.Missed(tc.missed)); diff != "" {
			t.Errorf("inventory %d (-want +got):\n%s", i, diff)
		}
	}
}

// The ledger takes values from its caller and depends on nothing of
// the daemon's.
func TestDeps(t *testing.T) {
	deptest.Allow(t, "github.com/metasched/metasched/metasched/capacity", false,
		deptest.Rule{Path: "github.com/metasched/metasched/metasched/capacity"})
}
