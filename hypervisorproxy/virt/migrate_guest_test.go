package virt_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/rs/zerolog"

	hp "github.com/metasched/metasched/hypervisorproxy"
	"github.com/metasched/metasched/hypervisorproxy/image"
	"github.com/metasched/metasched/hypervisorproxy/libvirtdtest"
	"github.com/metasched/metasched/hypervisorproxy/virt"
)

// BenchmarkLiveMigrationBooted128MiB is one live migration of a booted
// 128 MiB guest (the bundled image, its guest agent answering) between
// two libvirtd daemons on this machine, back and forth; it reports the
// median and maximum of the migration's time and of its downtime, and
// checks after each move that the guest's agent answers on the
// destination (run it with -benchtime 10x).
func BenchmarkLiveMigrationBooted128MiB(b *testing.B) {
	g := startGuestHost(b)
	other := libvirtdtest.StartT(b, libvirtdtest.Options{})
	y, err := virt.Open(context.Background(), other.URI(), virt.Options{Logger: zerolog.Nop()})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = y.Close() }) // the connection to libvirtd: nothing the benchmark measures is lost
	d, err := g.domain("mig-booted", image.Guest{Hostname: "mig-booted"})
	if err != nil {
		b.Fatal(err)
	}
	g.boot(b, d)
	ctx := context.Background()
	from, to := g.h, y
	var took, down []time.Duration
	for b.Loop() {
		st, err := from.Migrate(ctx, d.Name, to, hp.MigrateOptions{URI: freeURI(b)})
		if err != nil {
			b.Fatal(err)
		}
		took, down = append(took, st.Duration), append(down, st.Downtime)
		b.StopTimer()
		actx, cancel := context.WithTimeout(ctx, bootTimeout)
		err = to.WaitAgent(actx, d.Name)
		cancel()
		if err != nil {
			b.Fatalf("after the move the guest's agent does not answer: %v", err)
		}
		b.StartTimer()
		from, to = to, from
	}
	b.StopTimer()
	if err := from.Destroy(ctx, d.Name); err != nil {
		b.Fatal(err)
	}
	slices.Sort(took)
	slices.Sort(down)
	b.ReportMetric(took[len(took)/2].Seconds(), "median-s")
	b.ReportMetric(took[len(took)-1].Seconds(), "max-s")
	b.ReportMetric(float64(down[len(down)/2].Milliseconds()), "median-downtime-ms")
	b.ReportMetric(float64(down[len(down)-1].Milliseconds()), "max-downtime-ms")
}
