package hypervisorproxy_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	hp "github.com/metasched/metasched/hypervisorproxy"
	"github.com/metasched/metasched/hypervisorproxy/image"
	"github.com/metasched/metasched/hypervisorproxy/libvirtdtest"
	"github.com/metasched/metasched/hypervisorproxy/virt"
	"github.com/metasched/metasched/internal/taskfarmtest"
)

// BenchmarkProvision is the provisioning of a job's virtual cluster of 1,
// 2 and 4 VMs (1 vCPU, 128 MiB, the bundled image) through the agent's
// API, as the daemon does it: every VM created at once on two QEMU hosts,
// each create answering when its guest agent answers; the time is until
// the last VM answers. It reports the median and the maximum (run it with
// -benchtime 5x).
func BenchmarkProvision(b *testing.B) {
	if err := libvirtdtest.Check(); err != nil {
		b.Skip(err)
	}
	ctx := context.Background()
	var ds [2]*libvirtdtest.Daemon
	var wg sync.WaitGroup
	for i := range ds {
		wg.Go(func() { ds[i] = libvirtdtest.StartT(b, libvirtdtest.Options{}) })
	}
	wg.Wait()
	res, err := image.Build(ctx, image.Options{Out: filepath.Join(ds[0].Dir(), "images", "render"), TaskFarm: taskfarmtest.Binary(b)})
	if err != nil {
		b.Fatal(err)
	}
	dir := b.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "token"), []byte(testToken), 0o600); err != nil {
		b.Fatal(err)
	}
	site, err := hp.ParseSite(filepath.Join(dir, "site.yaml"), fmt.Appendf(nil, `site: lab
token_file: token
insecure_http: true
boot_timeout: %s
images: {render: %q}
hosts:
  - {name: qa, uri: %q, pool: render}
  - {name: qb, uri: %q, pool: render}
`, goodBootTimeout, res.Dir, ds[0].URI(), ds[1].URI()))
	if err != nil {
		b.Fatal(err)
	}
	log := zerolog.Nop()
	c := serveAgent(b, hp.Config{Site: site, Token: testToken, Connect: virt.Connector(log), Logger: log}).client
	for _, n := range []int{1, 2, 4} {
		b.Run(fmt.Sprintf("%dVMs", n), func(b *testing.B) {
			var took []time.Duration
			round := 0
			for b.Loop() {
				round++
				start := time.Now()
				errs := make([]error, n)
				var wg sync.WaitGroup
				for i := range n {
					wg.Go(func() {
						_, errs[i] = c.Create(ctx, hp.VMSpec{Name: fmt.Sprintf("p%d-%d-%d", n, round, i), Job: "bench",
							VCPUs: 1, MemoryMiB: 128, Image: "render"})
					})
				}
				wg.Wait()
				took = append(took, time.Since(start))
				b.StopTimer()
				for i, err := range errs {
					if err != nil {
						b.Fatal(err)
					}
					if err := c.Destroy(ctx, fmt.Sprintf("p%d-%d-%d", n, round, i)); err != nil {
						b.Fatal(err)
					}
				}
				b.StartTimer()
			}
			slices.Sort(took)
			b.ReportMetric(took[len(took)/2].Seconds(), "median-s")
			b.ReportMetric(took[len(took)-1].Seconds(), "max-s")
		})
	}
}
