package sim_test

import (
	"context"
	"fmt"
	"testing"

	hp "github.com/metasched/metasched/hypervisorproxy"
	"github.com/metasched/metasched/hypervisorproxy/sim"
	"github.com/rs/zerolog"
)

// BenchmarkInventory: the inventory of a site of 34 simulated hosts
// holding two VMs each, as the daemon asks every site for it at every
// refresh.
func BenchmarkInventory(b *testing.B) {
	ctx := context.Background()
	var hosts []hp.SiteHost
	for i := range 34 {
		hosts = append(hosts, hp.SiteHost{Name: fmt.Sprint("h", i), URI: fmt.Sprintf("sim:///h%d?cpus=8&memory_mib=16384", i), Pool: "render"})
	}
	a, err := hp.New(ctx, hp.Config{Site: &hp.Site{Site: "a", Hosts: hosts, MigrationPorts: [2]int{49152, 49215}},
		Token: "t", Connect: sim.Connector(nil), Logger: zerolog.Nop()})
	if err != nil {
		b.Fatal(err)
	}
	defer a.Close() // closes the simulated hosts: nothing the benchmark measures is lost
	for i := range 68 {
		if _, err := a.CreateVM(ctx, hp.VMSpec{Name: fmt.Sprint("vm-", i), Host: fmt.Sprint("h", i%34), Pool: "render", VCPUs: 1, MemoryMiB: 1024}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		inv, err := a.Inventory(ctx)
		if err != nil || len(inv.Hosts) != 34 {
			b.Fatal(len(inv.Hosts), err)
		}
	}
}
