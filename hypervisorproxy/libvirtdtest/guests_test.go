package libvirtdtest_test

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"libvirt.org/go/libvirt"

	hp "github.com/metasched/metasched/hypervisorproxy"
	"github.com/metasched/metasched/hypervisorproxy/domxml"
	"github.com/metasched/metasched/hypervisorproxy/image"
	"github.com/metasched/metasched/hypervisorproxy/libvirtdtest"
	"github.com/metasched/metasched/hypervisorproxy/netlab"
	"github.com/metasched/metasched/hypervisorproxy/qga"
	"github.com/metasched/metasched/hypervisorproxy/virt"
	"github.com/metasched/metasched/internal/taskfarmtest"
)

// guestBound bounds a boot to the agent's answer, a migration, and a
// command in a guest: bounds against a guest that hangs, not measures
// (a guest boots in 5 to 20 s on two loaded cores).
const guestBound = 3 * time.Minute

// siteHost is a root daemon of the grid, a host of one site.
type siteHost struct {
	t    *testing.T
	name string
	d    *libvirtdtest.Daemon
	h    *virt.Host
}

// startSiteHosts starts root daemons in the grid's namespace, in parallel,
// and opens them.
func startSiteHosts(t *testing.T, g *netlab.Grid, names ...string) map[string]*siteHost {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), libvirtdtest.StartTimeout)
	defer cancel()
	hosts := make([]*siteHost, len(names))
	errs := make([]error, len(names))
	var wg sync.WaitGroup
	for i, n := range names {
		wg.Go(func() {
			d, err := libvirtdtest.Start(ctx, libvirtdtest.Options{Root: true, NetNS: g.Namespace()})
			hosts[i], errs[i] = &siteHost{t: t, name: n, d: d}, err
		})
	}
	wg.Wait()
	out := map[string]*siteHost{}
	for _, s := range hosts {
		if s.d == nil {
			continue
		}
		t.Cleanup(func() {
			if t.Failed() {
				t.Logf("libvirtd %s: log in %s", s.name, s.d.LogPath())
			}
			if err := s.d.Stop(); err != nil {
				t.Error(err)
			}
		})
	}
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	for _, s := range hosts {
		h, err := virt.Open(context.Background(), s.d.URI(), virt.Options{Logger: zerolog.Nop()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := h.Close(); err != nil {
				t.Errorf("close %s: %v", s.name, err)
			}
		})
		s.h = h
		out[s.name] = s
	}
	return out
}

// bridgeGuest is a guest booting the bundled image with a virtio NIC on a
// site's bridge.
type bridgeGuest struct {
	name   string
	addr   netip.Prefix
	mac    string
	bridge string
}

// domainXML is the guest's domain: 128 MiB, 1 vCPU, TCG, direct kernel
// boot with its address and hosts on the command line, a console file and
// the agent's channel, from domxml, plus the bridge interface written here.
func (bg bridgeGuest) domainXML(img *image.Image, dir string, hosts []image.Host) (string, error) {
	cmdline, err := img.GuestCmdline(image.Guest{Hostname: bg.name, Address: bg.addr, Hosts: hosts})
	if err != nil {
		return "", err
	}
	x, err := domxml.Domain{
		Type: "qemu", Name: bg.name, VCPUs: 1, MemoryMiB: 128, Job: "grid", Pool: "guests",
		Kernel: img.KernelPath(), Initrd: img.InitrdPath(), Cmdline: cmdline,
		ConsoleLog: filepath.Join(dir, bg.name+".console"), GuestAgent: true,
	}.XML()
	if err != nil {
		return "", err
	}
	nic := fmt.Sprintf("<interface type='bridge'><source bridge='%s'/><mac address='%s'/><model type='virtio'/></interface>", bg.bridge, bg.mac)
	if strings.Count(x, "</devices>") != 1 {
		return "", fmt.Errorf("domain XML without one </devices>:\n%s", x)
	}
	return strings.Replace(x, "</devices>", nic+"</devices>", 1), nil
}

// boot defines and starts the guest on s and waits for its agent; it
// returns the time from the define call to the agent's first answer.
func (bg bridgeGuest) boot(s *siteHost, xml string) (time.Duration, error) {
	start := time.Now()
	conn, err := libvirt.NewConnect(s.d.URI())
	if err != nil {
		return 0, err
	}
	defer conn.Close() // its error says only how many references were left
	dom, err := conn.DomainDefineXML(xml)
	if err != nil {
		return 0, fmt.Errorf("define %s on %s: %w", bg.name, s.name, err)
	}
	defer dom.Free() // the domain stays defined: freeing the handle loses nothing
	// Daemons sharing a network namespace name their taps vnetN each on
	// its own: two guests started at the same moment on two of them may
	// get the same name, and the second start fails with EBUSY. Only that
	// failure is tried again (the domain is defined, not running).
	for try := 1; ; try++ {
		err := dom.Create()
		if err == nil {
			break
		}
		if try < 5 && strings.Contains(err.Error(), "Unable to create tap device vnet") && strings.Contains(err.Error(), "busy") {
			s.t.Logf("start %s on %s, try %d: %v: trying again", bg.name, s.name, try, err)
			continue
		}
		return 0, fmt.Errorf("start %s on %s: %w", bg.name, s.name, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), guestBound)
	defer cancel()
	if err := s.h.WaitAgent(ctx, bg.name); err != nil {
		return 0, err
	}
	return time.Since(start), nil
}

// sh runs a shell line in a guest and returns its standard output; it
// fails the test unless the line exits 0.
func sh(t *testing.T, s *siteHost, guest, line string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), guestBound)
	defer cancel()
	st, err := s.h.GuestExec(ctx, guest, qga.Exec{Path: "/bin/sh", Args: []string{"-c", line}, CaptureOutput: true})
	if err != nil {
		t.Fatalf("%q in %s on %s: %v", line, guest, s.name, err)
	}
	if st.ExitCode != 0 || st.Signal != 0 {
		t.Fatalf("%q in %s on %s: exit %d, signal %d, stdout %q, stderr %q", line, guest, s.name, st.ExitCode, st.Signal, st.Stdout, st.Stderr)
	}
	return string(st.Stdout)
}

// waitFor is a shell line that waits, at most about 60 s, until cond (a
// shell condition) holds, and fails otherwise.
func waitFor(cond string) string {
	return "i=0; until " + cond + "; do i=$((i+1)); [ $i -gt 600 ] && exit 1; sleep 0.1; done"
}

// Two sites a and b, their bridges joined by a 20 Mbit/s link, a root
// daemon per site and a second one on site a, all in the grid's network
// namespace. A guest of the bundled image boots on each site's first host;
// guest a reaches guest b by name over TCP; guest a live-migrates to the
// other host of site a while a TCP stream to b is open, answers its agent
// there, keeps its address, and the stream goes on and a new connection to
// b by name works.
func TestGuestsAcrossSites(t *testing.T) {
	libvirtdtest.SkipShort(t)
	needDaemons(t)
	if err := netlab.Check(); err != nil {
		t.Fatal(err)
	}
	g := netlab.NewGridT(t, netlab.GridOptions{
		Sites: []string{"a", "b"},
		Links: []netlab.Link{{A: "a", B: "b", Options: netlab.Options{RateMbit: 20}}},
	})
	hosts := startSiteHosts(t, g, "a-1", "a-2", "b-1")

	// The image is copied out of the user's cache (built there once per set
	// of inputs); the root daemons' QEMU reads it where it is.
	dir := t.TempDir()
	res, err := image.Build(context.Background(), image.Options{Out: filepath.Join(dir, "image"), TaskFarm: taskfarmtest.Binary(t)})
	if err != nil {
		t.Fatal(err)
	}
	img := res.Image

	ga := bridgeGuest{name: "ga", addr: netip.MustParsePrefix("10.78.0.11/24"), mac: "52:54:00:78:00:11", bridge: g.Bridge("a")}
	gb := bridgeGuest{name: "gb", addr: netip.MustParsePrefix("10.78.0.12/24"), mac: "52:54:00:78:00:12", bridge: g.Bridge("b")}
	etcHosts := []image.Host{{Name: ga.name, Addr: ga.addr.Addr()}, {Name: gb.name, Addr: gb.addr.Addr()}}
	type placed struct {
		g bridgeGuest
		s *siteHost
	}
	boots := []placed{{ga, hosts["a-1"]}, {gb, hosts["b-1"]}}
	took := make([]time.Duration, len(boots))
	errs := make([]error, len(boots))
	var wg sync.WaitGroup
	for i, b := range boots {
		x, err := b.g.domainXML(img, dir, etcHosts)
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() { took[i], errs[i] = b.g.boot(b.s, x) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	for i, b := range boots {
		t.Logf("%s on %s (bridge %s): guest agent answered %.1f s after the define call (two booted in parallel)",
			b.g.name, b.s.name, b.g.bridge, took[i].Seconds())
	}
	a1, a2, b1 := hosts["a-1"], hosts["a-2"], hosts["b-1"]

	// Guest a reaches guest b by name over TCP.
	sh(t, b1, "gb", "(sleep 900 | nc -l -p 5001 > /tmp/got1) </dev/null >/dev/null 2>&1 &")
	sh(t, a1, "ga", waitFor("echo hello-from-ga | nc gb 5001"))
	if got := sh(t, b1, "gb", waitFor("grep -q hello-from-ga /tmp/got1")+"; cat /tmp/got1"); got != "hello-from-ga\n" {
		t.Errorf("gb received %q, want hello-from-ga", got)
	}

	// The rate between the sites, as seen from the host around a transfer
	// of 4 MiB from ga to gb (the sender's nc exits once its last bytes
	// are sent, not received: an estimate).
	sh(t, b1, "gb", "(sleep 900 | nc -l -p 5003 | wc -c > /tmp/got3) </dev/null >/dev/null 2>&1 &")
	start := time.Now()
	sh(t, a1, "ga", waitFor("dd if=/dev/zero bs=64k count=64 2>/dev/null | nc gb 5003"))
	sent := time.Since(start)
	if got := strings.TrimSpace(sh(t, b1, "gb", waitFor("[ -s /tmp/got3 ]")+"; cat /tmp/got3")); got != strconv.Itoa(64<<16) {
		t.Errorf("gb received %s bytes, want %d", got, 64<<16)
	}
	t.Logf("4 MiB from ga (site a) to gb (site b) over the 20 Mbit/s link: %.2f s, about %.1f Mbit/s",
		sent.Seconds(), float64(64<<16)*8/sent.Seconds()/1e6)

	// An open TCP stream from ga to gb, a line every 0.1 s.
	sh(t, b1, "gb", "(sleep 900 | nc -l -p 5004 > /tmp/stream) </dev/null >/dev/null 2>&1 &")
	sh(t, a1, "ga", "(i=0; while [ $i -lt 9000 ]; do echo $i; i=$((i+1)); sleep 0.1; done | nc gb 5004) </dev/null >/dev/null 2>&1 &")
	sh(t, b1, "gb", waitFor("[ $(wc -l < /tmp/stream) -ge 5 ]"))

	// Live migration of ga to the other host of site a.
	ctx, cancel := context.WithTimeout(context.Background(), guestBound)
	defer cancel()
	port := libvirtdtest.FreePort(t) // the grid's loopback has no other listener
	st, err := a1.h.Migrate(ctx, "ga", a2.h, hp.MigrateOptions{URI: "tcp://127.0.0.1:" + strconv.Itoa(port)})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("live migration of ga from a-1 to a-2: %.2f s, downtime %v, %.0f MiB sent", st.Duration.Seconds(), st.Downtime, st.DataMiB)
	if !st.Live {
		t.Errorf("migration stats %+v: not live", st)
	}
	agentStart := time.Now()
	if err := a2.h.WaitAgent(ctx, "ga"); err != nil {
		t.Fatal(err)
	}
	t.Logf("ga's agent answered on a-2 %v after the migration returned", time.Since(agentStart).Round(time.Millisecond))
	if doms, err := a1.h.Domains(ctx); err != nil || len(doms) != 0 {
		t.Errorf("a-1 after the migration: domains %v, %v, want none", doms, err)
	}
	if got := sh(t, a2, "ga", "hostname; ip -4 -o addr show dev eth0"); !strings.HasPrefix(got, "ga\n") || !strings.Contains(got, "inet "+ga.addr.String()+" ") {
		t.Errorf("ga after the migration: %q, want host name ga and address %s", got, ga.addr)
	}
	// The stream goes on: more lines arrive after the move.
	n := strings.TrimSpace(sh(t, b1, "gb", "wc -l < /tmp/stream"))
	sh(t, b1, "gb", waitFor("[ $(wc -l < /tmp/stream) -ge $(("+n+" + 10)) ]"))
	// And a new connection by name works.
	sh(t, b1, "gb", "(sleep 900 | nc -l -p 5005 > /tmp/got5) </dev/null >/dev/null 2>&1 &")
	sh(t, a2, "ga", waitFor("echo again-from-ga | nc gb 5005"))
	if got := sh(t, b1, "gb", waitFor("grep -q again-from-ga /tmp/got5")+"; cat /tmp/got5"); got != "again-from-ga\n" {
		t.Errorf("gb received %q after the migration, want again-from-ga", got)
	}
	if out := sh(t, b1, "gb", "tail -n 3 /tmp/stream"); out == "" {
		t.Errorf("the stream has no lines")
	} else {
		t.Logf("the stream, after the migration, ends with %q", out)
	}

	for _, p := range []struct {
		s    *siteHost
		name string
	}{{a2, "ga"}, {b1, "gb"}} {
		if err := p.s.h.Destroy(context.Background(), p.name); err != nil {
			t.Error(err)
		}
	}
}
