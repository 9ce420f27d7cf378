package hypervisorproxy

import (
	"testing"
	"time"
)

// A VM being migrated whose domain is on neither host for the moment the
// inventory looks (the source undefined it; the agent has not noted the
// destination yet) is migrating, not missing: the daemon took a missing
// VM of a running job for one destroyed outside it, and requeued the job
// in the middle of a migration of a disk VM (whose source's overlay is
// deleted before the migration returns).
func TestInventoryMigratingVM(t *testing.T) {
	a := &Agent{site: &Site{}}
	v := &vm{spec: VMSpec{Name: "w1", Host: "a-2", VCPUs: 1, MemoryMiB: 512}, boot: time.Minute, agent: 30 * time.Second}
	if got := a.vmLocked(v, nil); got.State != StateMissing || got.BootSeconds != 60 || got.AgentSeconds != 30 {
		t.Errorf("a VM on no host, not moving: %+v, want missing", got)
	}
	v.moving = "a-1"
	if got := a.vmLocked(v, nil); got.State != StateMigrating || got.Host != "a-2" {
		t.Errorf("a moving VM on no host: %+v, want migrating from a-2", got)
	}
	live := map[string]Domain{"w1": {Name: "w1", State: StateRunning, VCPUs: 1, MemoryMiB: 512}}
	if got := a.vmLocked(v, live); got.State != StateRunning {
		t.Errorf("a moving VM still on its source: %+v, want running", got)
	}
}
