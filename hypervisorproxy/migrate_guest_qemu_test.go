package hypervisorproxy_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	hp "github.com/metasched/metasched/hypervisorproxy"
	"github.com/metasched/metasched/hypervisorproxy/image"
	"github.com/metasched/metasched/hypervisorproxy/libvirtdtest"
	"github.com/metasched/metasched/hypervisorproxy/virt"
	"github.com/metasched/metasched/internal/taskfarmtest"
)

// Guest calls keep working across a live migration of a booted guest
// through the agent: calls made while it moves wait for it and go to the
// host it is on after; a call a migration cuts is guest_agent (the caller
// tries again), never not_found (a VM lost). Before, a call made at the
// end of the migration went to the source host, whose domain had gone,
// and was not_found: the guest executor took it for a lost VM and failed
// the job.
func TestGuestCallsDuringMigration(t *testing.T) {
	ctx := context.Background()
	da, db := twoDaemons(t)
	// The image where both daemons' QEMU processes can read it.
	res, err := image.Build(ctx, image.Options{Out: filepath.Join(da.Dir(), "images", "render"), TaskFarm: taskfarmtest.Binary(t)})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "token"), []byte(testToken), 0o600); err != nil {
		t.Fatal(err)
	}
	lo, hi := libvirtdtest.FreePortRange(t, 4)
	site, err := hp.ParseSite(filepath.Join(dir, "site.yaml"), []byte(fmt.Sprintf(`site: lab
token_file: token
insecure_http: true
data_dir: %q
boot_timeout: %s
migration_ports: %d-%d
images: {render: %q}
hosts:
  - {name: qa, uri: %q, pool: render}
  - {name: qb, uri: %q, pool: render}
`, filepath.Join(da.Dir(), "agent"), goodBootTimeout, lo, hi, res.Dir, da.URI(), db.URI())))
	if err != nil {
		t.Fatal(err)
	}
	log := zerolog.New(zerolog.NewTestWriter(t))
	c := serveAgent(t, hp.Config{Site: site, Token: testToken, Connect: virt.Connector(log), Logger: log}).client
	if _, err := c.Create(ctx, hp.VMSpec{Name: "mover", Host: "qa", VCPUs: 1, MemoryMiB: 256, Image: "render"}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Destroy(context.Background(), "mover") }) // gone already when the test got through

	// Calls one after the other, from before the migration until after.
	var (
		stop     atomic.Bool
		wg       sync.WaitGroup
		calls    atomic.Int64
		mu       sync.Mutex
		failures []error
	)
	wg.Go(func() {
		for !stop.Load() {
			cctx, cancel := context.WithTimeout(ctx, time.Minute)
			p, err := c.GuestExec(cctx, "mover", hp.GuestExec{Path: "/bin/true"})
			if err == nil {
				_, err = c.GuestExecStatus(cctx, "mover", p.PID)
			}
			cancel()
			calls.Add(1)
			if err != nil {
				mu.Lock()
				failures = append(failures, err)
				mu.Unlock()
			}
		}
	})
	time.Sleep(500 * time.Millisecond)
	m, err := c.Migrate(ctx, "mover", "qb")
	time.Sleep(500 * time.Millisecond)
	stop.Store(true)
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("migrated in %.2f s (live %v); %d guest calls meanwhile, %d cut: %v", m.Seconds, m.Live, calls.Load(), len(failures), failures)
	for _, err := range failures {
		if !errors.Is(err, hp.ErrGuestAgent) {
			t.Errorf("a guest call during the migration: %v; want only guest_agent errors (try again)", err)
		}
	}
	if _, err := c.GuestExec(ctx, "mover", hp.GuestExec{Path: "/bin/true"}); err != nil {
		t.Errorf("a guest call after the migration: %v", err)
	}
}
