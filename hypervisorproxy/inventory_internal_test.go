package hypervisorproxy

import (
	"context"
	"fmt"
	"sync"
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

// gateGuests is a GuestHypervisor whose boots wait to be let through, and
// which counts the boots under way.
type gateGuests struct {
	Hypervisor
	mu          sync.Mutex
	now, most   int
	let         chan struct{}
	createdSeen chan struct{}
}

func (g *gateGuests) CreateGuest(ctx context.Context, spec VMSpec, b Boot, lim VMLimits) (Domain, error) {
	g.mu.Lock()
	g.now++
	g.most = max(g.most, g.now)
	g.mu.Unlock()
	g.createdSeen <- struct{}{}
	return Domain{Name: spec.Name}, nil
}

func (g *gateGuests) WaitAgent(ctx context.Context, name string) error {
	<-g.let
	g.mu.Lock()
	g.now--
	g.mu.Unlock()
	return nil
}

func (g *gateGuests) WaitCloudInit(ctx context.Context, name string) error { return nil }

// max_concurrent_boots: the site's boots beyond it wait their turn.
func TestMaxConcurrentBoots(t *testing.T) {
	a := &Agent{site: &Site{BootTimeout: time.Minute}, boots: make(chan struct{}, 2)}
	g := &gateGuests{let: make(chan struct{}), createdSeen: make(chan struct{}, 5)}
	var wg sync.WaitGroup
	for i := range 5 {
		wg.Go(func() {
			if _, _, err := a.bootGuest(t.Context(), g, VMSpec{Name: fmt.Sprintf("vm-%d", i)}, Boot{ConsoleLog: "/nonexistent"}, VMLimits{}); err != nil {
				t.Error(err)
			}
		})
	}
	// Two boots start; each let through makes room for one more.
	<-g.createdSeen
	<-g.createdSeen
	for range 3 {
		g.let <- struct{}{}
		<-g.createdSeen
	}
	g.let <- struct{}{}
	g.let <- struct{}{}
	wg.Wait()
	if g.most != 2 {
		t.Errorf("at most %d boots at once, want 2", g.most)
	}
}
