package virt_test

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"libvirt.org/go/libvirt"

	hp "github.com/metasched/metasched/hypervisorproxy"
	"github.com/metasched/metasched/hypervisorproxy/domxml"
	"github.com/metasched/metasched/hypervisorproxy/image"
	"github.com/metasched/metasched/hypervisorproxy/libvirtdtest"
	"github.com/metasched/metasched/hypervisorproxy/qga"
	"github.com/metasched/metasched/hypervisorproxy/virt"
	"github.com/metasched/metasched/internal/taskfarmtest"
)

// bootTimeout bounds a boot to the guest agent's answer. It is a bound
// against a guest that never comes up, not a measure: on two loaded
// cores a guest answers in 4 to 10 s (BenchmarkBootToAgent measures it).
const bootTimeout = 3 * time.Minute

// guestHost is a private libvirtd with the bundled image where its QEMU
// processes (uid 65534) can read it, in a directory they can write
// consoles and sockets to.
type guestHost struct {
	d    *libvirtdtest.Daemon
	h    *virt.Host
	img  *image.Image
	kern string
	rd   string
	dir  string // owned by the daemon's user
}

// startGuestHost starts a daemon and builds the bundled image into its
// directory (from the user's cache, where it is built once per set of
// inputs).
func startGuestHost(tb testing.TB) *guestHost {
	tb.Helper()
	if err := libvirtdtest.Check(); err != nil {
		tb.Fatal(err)
	}
	d := libvirtdtest.StartT(tb, libvirtdtest.Options{})
	g := &guestHost{d: d, dir: filepath.Join(d.Dir(), "guests")}
	if err := os.Mkdir(g.dir, 0o755); err != nil {
		tb.Fatal(err)
	}
	if err := os.Chown(g.dir, 65534, 65534); err != nil {
		tb.Fatal(err)
	}
	// The image is copied out of the cache while the build holds the
	// cache's lock: a rebuild elsewhere cannot replace it half-way.
	res, err := image.Build(context.Background(), image.Options{Out: filepath.Join(g.dir, "image"), TaskFarm: taskfarmtest.Binary(tb)})
	if err != nil {
		tb.Fatal(err)
	}
	g.img, g.kern, g.rd = res.Image, res.Image.KernelPath(), res.Image.InitrdPath()
	g.h, err = virt.Open(context.Background(), d.URI(), virt.Options{Logger: zerolog.Nop()})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = g.h.Close() }) // the connection to libvirtd: nothing the test checks is lost
	return g
}

// domain is a 128 MiB, 1-vCPU guest booting the image with its console
// in the guests directory.
func (g *guestHost) domain(name string, guest image.Guest) (domxml.Domain, error) {
	cmdline, err := g.img.GuestCmdline(guest)
	if err != nil {
		return domxml.Domain{}, err
	}
	return domxml.Domain{
		Name: name, VCPUs: 1, MemoryMiB: 128, Job: "boot", Pool: "guests",
		Kernel: g.kern, Initrd: g.rd, Cmdline: cmdline,
		ConsoleLog: filepath.Join(g.dir, name+".console"), GuestAgent: true,
	}, nil
}

// boot creates the guest and waits for its agent; it returns the time
// from the create call to the agent's first answer.
func (g *guestHost) boot(tb testing.TB, d domxml.Domain) time.Duration {
	tb.Helper()
	start := time.Now()
	if _, err := g.h.CreateDomain(context.Background(), d); err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), bootTimeout)
	defer cancel()
	if err := g.h.WaitAgent(ctx, d.Name); err != nil {
		tb.Fatalf("%v\nconsole:\n%s", err, g.console(d.Name))
	}
	return time.Since(start)
}

// libvirtDesc reads a domain's XML from libvirt (GetXMLDesc) with
// domxml.Parse.
func (g *guestHost) libvirtDesc(tb testing.TB, name string) domxml.Desc {
	tb.Helper()
	conn, err := libvirt.NewConnect(g.d.URI())
	if err != nil {
		tb.Fatal(err)
	}
	defer conn.Close() // the connection to libvirtd: nothing the test checks is lost
	dom, err := conn.LookupDomainByName(name)
	if err != nil {
		tb.Fatal(err)
	}
	defer dom.Free() // the domain's handle: nothing the test checks is lost
	x, err := dom.GetXMLDesc(0)
	if err != nil {
		tb.Fatal(err)
	}
	desc, err := domxml.Parse(x)
	if err != nil {
		tb.Fatalf("%v\n%s", err, x)
	}
	return desc
}

// console is the end of a guest's console.
func (g *guestHost) console(name string) string {
	b, err := os.ReadFile(filepath.Join(g.dir, name+".console"))
	if err != nil {
		return err.Error()
	}
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

// run runs a shell line in the guest and returns its output; it fails
// the test unless the line exits 0.
func (g *guestHost) run(tb testing.TB, name, line string) string {
	tb.Helper()
	st, err := g.h.GuestExec(context.Background(), name, qga.Exec{Path: "/bin/sh", Args: []string{"-c", line}, CaptureOutput: true})
	if err != nil {
		tb.Fatal(err)
	}
	if st.ExitCode != 0 || st.Signal != 0 {
		tb.Fatalf("%q in %s: exit %d, signal %d, stderr %q", line, name, st.ExitCode, st.Signal, st.Stderr)
	}
	return string(st.Stdout)
}

// noGuests checks that the daemon has no domain and no QEMU process.
func (g *guestHost) noGuests(tb testing.TB) {
	tb.Helper()
	if got := domainNames(tb, g.h); len(got) != 0 {
		tb.Errorf("domains left: %v", got)
	}
	pids, err := g.d.GuestPIDs()
	if err != nil || len(pids) != 0 {
		tb.Errorf("QEMU processes left: %v, %v", pids, err)
	}
}

// A guest boots the bundled image under TCG with 128 MiB, its agent
// answers, and programs run in it through guest-exec: uname -r is the
// image's kernel, not the host's; the host name and /etc/hosts come from
// the command-line keys; exit codes and standard error come back. A
// wrong kernel path is refused with libvirt's reason and leaves nothing.
func TestBootGuest(t *testing.T) {
	g := startGuestHost(t)
	ctx := context.Background()

	t.Run("boots and runs programs", func(t *testing.T) {
		d, err := g.domain("boot-1", image.Guest{Hostname: "boot-1", Hosts: []image.Host{{Name: "peer", Addr: mustAddr("10.9.0.7")}}})
		if err != nil {
			t.Fatal(err)
		}
		took := g.boot(t, d)
		t.Logf("guest agent answered %.1f s after the create call", took.Seconds())

		// libvirt's description of the running guest reads back as defined,
		// with the agent's socket libvirt chose.
		desc := g.libvirtDesc(t, "boot-1")
		if desc.Kernel != d.Kernel || desc.Initrd != d.Initrd || desc.Cmdline != d.Cmdline ||
			desc.ConsoleLog != d.ConsoleLog || !desc.GuestAgent || !strings.HasPrefix(desc.AgentSocket, g.d.Dir()+"/") {
			t.Errorf("libvirt's description: %+v", desc)
		}

		st, err := g.h.GuestExec(ctx, "boot-1", qga.Exec{Path: "/bin/uname", Args: []string{"-r"}, CaptureOutput: true})
		if err != nil {
			t.Fatal(err)
		}
		host, err := os.ReadFile("/proc/sys/kernel/osrelease")
		if err != nil {
			t.Fatal(err)
		}
		got := strings.TrimSpace(string(st.Stdout))
		if !st.Exited || st.ExitCode != 0 || got != g.img.KernelRelease {
			t.Errorf("uname -r in the guest: %+v, want %s", st, g.img.KernelRelease)
		}
		if got == strings.TrimSpace(string(host)) {
			t.Errorf("uname -r in the guest is the host's %s", host)
		}
		if out := g.run(t, "boot-1", "hostname; cat /etc/hosts"); out != "boot-1\n127.0.0.1 localhost\n127.0.1.1 boot-1\n10.9.0.7 peer\n" {
			t.Errorf("host name and hosts:\n%s", out)
		}
		modules := g.run(t, "boot-1", "cut -d' ' -f1 /proc/modules")
		for _, m := range []string{"virtio_console", "virtio_net"} {
			if !slices.Contains(strings.Fields(modules), m) {
				t.Errorf("module %s not loaded: %s", m, modules)
			}
		}
		st, err = g.h.GuestExec(ctx, "boot-1", qga.Exec{Path: "/bin/sh", Args: []string{"-c", "echo oops >&2; exit 3"}, CaptureOutput: true})
		if err != nil || st.ExitCode != 3 || string(st.Stderr) != "oops\n" {
			t.Errorf("exit 3: %+v, %v", st, err)
		}
		if _, err := g.h.GuestExec(ctx, "boot-1", qga.Exec{Path: "/no/such/program"}); err == nil ||
			!strings.Contains(err.Error(), "/no/such/program") {
			t.Errorf("missing program: %v", err)
		}
		if console := g.console("boot-1"); !strings.Contains(console, "metasched-init: guest agent on /dev/vport") {
			t.Errorf("console lacks the init's lines:\n%s", console)
		}
		if err := g.h.Destroy(ctx, "boot-1"); err != nil {
			t.Fatal(err)
		}
		if _, err := g.h.AgentCommand(ctx, "boot-1", qga.Ping(), time.Second); !errors.Is(err, hp.ErrNotFound) {
			t.Errorf("agent of a destroyed guest: %v, want ErrNotFound", err)
		}
		g.noGuests(t)
	})

	t.Run("wrong kernel path", func(t *testing.T) {
		d, err := g.domain("boot-2", image.Guest{})
		if err != nil {
			t.Fatal(err)
		}
		d.Kernel = filepath.Join(g.dir, "no-such-vmlinuz")
		_, err = g.h.CreateDomain(ctx, d)
		if err == nil || !strings.Contains(err.Error(), "start boot-2 on ") || !strings.Contains(err.Error(), d.Kernel) {
			t.Errorf("wrong kernel: %v, want the start's error naming %s", err, d.Kernel)
		}
		t.Logf("wrong kernel: %v", err)
		g.noGuests(t)
	})

	t.Run("invalid domain", func(t *testing.T) {
		d, err := g.domain("boot-3", image.Guest{})
		if err != nil {
			t.Fatal(err)
		}
		d.Kernel, d.Type = "vmlinuz", "test"
		_, err = g.h.CreateDomain(ctx, d)
		if !errors.Is(err, hp.ErrInvalid) || !strings.Contains(err.Error(), `type: must be qemu on `) {
			t.Errorf("test type on a qemu host: %v", err)
		}
		d.Type = ""
		if _, err = g.h.CreateDomain(ctx, d); !errors.Is(err, hp.ErrInvalid) ||
			!strings.Contains(err.Error(), `kernel: must be a clean absolute path, not "vmlinuz"`) {
			t.Errorf("relative kernel: %v", err)
		}
		g.noGuests(t)
	})

	t.Run("no agent channel", func(t *testing.T) {
		if _, err := g.h.Create(ctx, hp.VMSpec{Name: "bios", VCPUs: 1, MemoryMiB: 64}, hp.VMLimits{}); err != nil {
			t.Fatal(err)
		}
		err := g.h.WaitAgent(ctx, "bios")
		if !errors.Is(err, hp.ErrUnsupported) {
			t.Errorf("WaitAgent on a guest without an agent channel: %v, want ErrUnsupported at once", err)
		}
		if err := g.h.Destroy(ctx, "bios"); err != nil {
			t.Fatal(err)
		}
		g.noGuests(t)
	})
}

// BenchmarkBootToAgent is a guest booted from the create call to its
// agent's first answer, destroyed after; it reports the median and the
// maximum (run it with -benchtime 10x).
func BenchmarkBootToAgent(b *testing.B) {
	g := startGuestHost(b)
	var took []time.Duration
	i := 0
	for b.Loop() {
		i++
		name := fmt.Sprintf("bench-%d", i)
		d, err := g.domain(name, image.Guest{Hostname: name})
		if err != nil {
			b.Fatal(err)
		}
		took = append(took, g.boot(b, d))
		b.StopTimer()
		if err := g.h.Destroy(context.Background(), name); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	slices.Sort(took)
	b.ReportMetric(took[len(took)/2].Seconds(), "median-s")
	b.ReportMetric(took[len(took)-1].Seconds(), "max-s")
}

// BenchmarkGuestExec is one guest-exec round trip: /bin/true started in
// a booted guest and its exit read back.
func BenchmarkGuestExec(b *testing.B) {
	g := startGuestHost(b)
	d, err := g.domain("exec-1", image.Guest{})
	if err != nil {
		b.Fatal(err)
	}
	g.boot(b, d)
	for b.Loop() {
		st, err := g.h.GuestExec(context.Background(), "exec-1", qga.Exec{Path: "/bin/true"})
		if err != nil || st.ExitCode != 0 {
			b.Fatal(st, err)
		}
	}
	b.StopTimer()
	if err := g.h.Destroy(context.Background(), "exec-1"); err != nil {
		b.Fatal(err)
	}
}

func mustAddr(s string) netip.Addr { return netip.MustParseAddr(s) }
