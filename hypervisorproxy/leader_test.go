package hypervisorproxy_test

import (
	"context"
	"errors"
	"net/http"
	"testing"

	hp "github.com/metasched/metasched/hypervisorproxy"
)

// TestAgentFollowsLeader: requests carrying a leader's epoch are served
// until a higher epoch has been seen; then the lower one is refused
// (stale_leader, ErrStaleLeader in the client) and changes nothing, also
// after the agent restarts on its data directory. A request without an
// epoch (an operator's) is served; a bad epoch is a 400.
func TestAgentFollowsLeader(t *testing.T) {
	dir := t.TempDir()
	h := startAgent(t, dir, "data_dir: data\n")
	ctx := context.Background()
	old, leader := h.client.WithLeaderEpoch(5), h.client.WithLeaderEpoch(9)
	if _, err := old.Create(ctx, hp.VMSpec{Name: "v1", VCPUs: 1, MemoryMiB: 256, Pool: "render"}); err != nil {
		t.Fatalf("the first leader's create: %v", err)
	}
	if _, err := leader.Inventory(ctx); err != nil {
		t.Fatalf("the next leader's inventory: %v", err)
	}
	if err := old.Destroy(ctx, "v1"); !errors.Is(err, hp.ErrStaleLeader) {
		t.Fatalf("the old leader's destroy after the next leader spoke: %v, want ErrStaleLeader", err)
	}
	if _, err := h.client.VM(ctx, "v1"); err != nil {
		t.Errorf("the VM the old leader could not destroy: %v", err)
	}
	h.stop()

	h = startAgent(t, dir, "data_dir: data\n")
	old = h.client.WithLeaderEpoch(5)
	if _, err := old.Create(ctx, hp.VMSpec{Name: "v2", VCPUs: 1, MemoryMiB: 256, Pool: "render"}); !errors.Is(err, hp.ErrStaleLeader) {
		t.Errorf("the old leader's create after the agent restarted: %v, want ErrStaleLeader", err)
	}
	if err := h.client.WithLeaderEpoch(9).Destroy(ctx, "v1"); err != nil {
		t.Errorf("the leader's destroy: %v", err)
	}
	if _, err := h.client.Inventory(ctx); err != nil {
		t.Errorf("a request without an epoch: %v", err)
	}
	for _, bad := range []string{"-1", "0", "nine", "9.5"} {
		req, err := http.NewRequest("GET", h.srv.URL+"/v1/inventory", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+testToken)
		req.Header.Set(hp.LeaderEpochHeader, bad)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("epoch %q: %d, want 400", bad, resp.StatusCode)
		}
	}
}
