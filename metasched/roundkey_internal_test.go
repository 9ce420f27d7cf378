package metasched

import (
	"fmt"
	"testing"

	"github.com/jonboulle/clockwork"

	hp "github.com/metasched/metasched/hypervisorproxy"
	"github.com/metasched/metasched/metasched/capacity"
)

// keyDaemon is a daemon's hosts alone: n hosts in pool render, serving,
// with a VM's room taken on every third.
func keyDaemon(n int) *Daemon {
	d := &Daemon{hv: hostBook{hosts: map[string]*gridHost{}}, ledger: capacity.NewLedger(), jobs: jobBook{index: newJobIndex()}}
	d.clock = clockwork.NewFakeClock()
	for i := range n {
		name := fmt.Sprintf("c%d-%d", i/34, i%34)
		h := &gridHost{name: name, rec: hostRecord{Site: fmt.Sprintf("c%d", i/34), Pool: "render"}, reachable: true,
			inv: hp.Host{Name: name, State: hp.HostReady, CPUs: 8, MemoryMiB: 16384, FreeVCPUs: 8 - i%3, FreeMemoryMiB: 16384}}
		d.hv.hosts[name] = h
		d.hv.order = append(d.hv.order, name)
	}
	return d
}

// The round's key follows what a round depends on: a host's free
// capacity, its pool, whether it serves, the queues.
func TestRoundKey(t *testing.T) {
	d := keyDaemon(100)
	k := d.roundKeyLocked()
	if d.roundKeyLocked() != k {
		t.Fatal("the key of the same hosts changed")
	}
	for _, change := range []func(){
		func() { d.hv.hosts["c1-3"].inv.FreeVCPUs-- },
		func() { d.hv.hosts["c2-0"].rec.Pool = "sim" },
		func() { d.hv.hosts["c0-7"].reachable = false },
		func() { d.jobs.index.queueGen++ },
		func() {
			d.ledger.Promise("j", capacity.Use{VCPUs: 1, MemoryMiB: 64}, capacity.Spot{VM: "j-0", Host: "c1-4"})
		},
		func() { d.ledger.Seen("j-0") },
	} {
		change()
		if n := d.roundKeyLocked(); n == k {
			t.Error("a change left the key as it was")
		} else {
			k = n
		}
	}
}

// BenchmarkRoundKey: the key of a round over 5,000 hosts.
func BenchmarkRoundKey(b *testing.B) {
	d := keyDaemon(5000)
	b.ReportAllocs()
	for b.Loop() {
		d.roundKeyLocked()
	}
}
