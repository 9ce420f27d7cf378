//go:build linux

package netlab_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/metasched/metasched/hypervisorproxy/netlab"
)

// Environment of the helper process (see TestHelperProcess).
const (
	envRole  = "NETLAB_TEST_HELPER" // "sink" or "source"
	envAddr  = "NETLAB_TEST_ADDR"   // sink: IP to listen on; source: host:port to dial
	envBytes = "NETLAB_TEST_BYTES"  // source: how many bytes to send
)

// transferBytes is the size of the measured transfer.
const transferBytes = 6 << 20

// helperTimeout bounds one measurement.
const helperTimeout = 20 * time.Second

// tolerance is the acceptance rule of the proxy's bandwidth probe test.
const tolerance = 0.15

// TestHelperProcess is not a test: it is the program the tests run inside
// a namespace, by re-executing the test binary with envRole set.
func TestHelperProcess(t *testing.T) {
	role := os.Getenv(envRole)
	if role == "" {
		t.Skip("the program the namespace tests run, not a test of its own")
	}
	var err error
	switch role {
	case "sink":
		err = sink(os.Getenv(envAddr))
	case "source":
		var n int
		if n, err = strconv.Atoi(os.Getenv(envBytes)); err == nil {
			err = source(os.Getenv(envAddr), n)
		}
	default:
		err = fmt.Errorf("unknown role %q", role)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// sink listens on ip, prints "listening PORT", accepts one connection,
// reads it to EOF and prints "received TOTAL FIRST NANOS": the total byte
// count, the bytes of the first read, and the nanoseconds between the end of
// the first read and the end of the last one.
func sink(ip string) error {
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		return err
	}
	defer ln.Close()
	fmt.Printf("listening %d\n", ln.Addr().(*net.TCPAddr).Port)
	conn, err := ln.Accept()
	if err != nil {
		return err
	}
	defer conn.Close()
	buf := make([]byte, 256<<10)
	var total, first int64
	var t0, t1 time.Time
	for {
		n, err := conn.Read(buf)
		if n > 0 {
			now := time.Now()
			if total == 0 {
				t0, first = now, int64(n)
			}
			total += int64(n)
			t1 = now
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
	}
	fmt.Printf("received %d %d %d\n", total, first, t1.Sub(t0).Nanoseconds())
	return nil
}

// source sends n bytes to addr and closes the connection.
func source(addr string, n int) error {
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		return err
	}
	if _, err := conn.Write(make([]byte, n)); err != nil {
		conn.Close()
		return err
	}
	return conn.Close()
}

// helper is a helper process started in a namespace.
type helper struct {
	cmd    *exec.Cmd
	stdout *bufio.Scanner
	stderr *strings.Builder
	once   sync.Once
	err    error
}

// startHelper runs the test binary as role in side i of p. The process is
// killed when ctx ends, and by PID when the test ends.
func startHelper(ctx context.Context, t *testing.T, p *netlab.Pair, i int, role, addr string, n int) *helper {
	t.Helper()
	return startHelperIn(ctx, t, p.Namespace(i), role, addr, n)
}

// startHelperIn runs the test binary as role in network namespace ns.
func startHelperIn(ctx context.Context, t *testing.T, ns, role, addr string, n int) *helper {
	t.Helper()
	cmd := exec.CommandContext(ctx, "ip", "netns", "exec", ns, os.Args[0], "-test.run=^TestHelperProcess$")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	cmd.Env = append(os.Environ(), envRole+"="+role, envAddr+"="+addr, envBytes+"="+strconv.Itoa(n))
	h := &helper{cmd: cmd, stderr: new(strings.Builder)}
	cmd.Stderr = h.stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	h.stdout = bufio.NewScanner(out)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill() // by PID; harmless if it has exited
		_ = h.wait()           // killed: its error is the kill
	})
	return h
}

// line returns the next line printed by h that starts with prefix.
func (h *helper) line(t *testing.T, prefix string) []string {
	t.Helper()
	for h.stdout.Scan() {
		if f := strings.Fields(h.stdout.Text()); len(f) > 0 && f[0] == prefix {
			return f[1:]
		}
	}
	err := h.wait()
	t.Fatalf("helper %v: no %q line: %v, stderr: %s", h.cmd.Args, prefix, err, h.stderr)
	return nil
}

// wait waits for h once and returns the result.
func (h *helper) wait() error {
	h.once.Do(func() { h.err = h.cmd.Wait() })
	return h.err
}

// requireNetlab fails the test when pairs cannot be created here: the test
// command installs iproute2, and CI runs as root.
func requireNetlab(t *testing.T) {
	t.Helper()
	if err := netlab.Check(); err != nil {
		t.Fatal(err)
	}
}

// measure sends transferBytes from side 0 to side 1 of p and returns the
// rate seen by the receiver, in Mbit/s, after its first read.
func measure(t *testing.T, p *netlab.Pair) float64 {
	t.Helper()
	return measureBetween(t, p.Namespace(0), p.Namespace(1), p.Addr(1))
}

// measureBetween sends transferBytes from namespace from to a sink on
// address to in namespace dst and returns the rate seen by the receiver,
// in Mbit/s, after its first read.
func measureBetween(t *testing.T, from, dst, to string) float64 {
	t.Helper()
	// A failing helper must not hang the test: the sink would wait for
	// its connection forever.
	ctx, cancel := context.WithTimeout(t.Context(), helperTimeout)
	defer cancel()
	snk := startHelperIn(ctx, t, dst, "sink", to, 0)
	port := snk.line(t, "listening")[0]
	src := startHelperIn(ctx, t, from, "source", net.JoinHostPort(to, port), transferBytes)
	got := snk.line(t, "received")
	if err := src.wait(); err != nil {
		t.Fatalf("source: %v, stderr: %s", err, src.stderr)
	}
	if err := snk.wait(); err != nil {
		t.Fatalf("sink: %v, stderr: %s", err, snk.stderr)
	}
	var v [3]int64
	for k := range v {
		var err error
		if v[k], err = strconv.ParseInt(got[k], 10, 64); err != nil {
			t.Fatalf("sink printed %q: %v", got, err)
		}
	}
	total, first, nanos := v[0], v[1], v[2]
	if total != transferBytes {
		t.Fatalf("sink received %d bytes, want %d", total, transferBytes)
	}
	if nanos <= 0 {
		t.Fatalf("sink measured %d ns", nanos)
	}
	mbit := float64(total-first) * 8 / (float64(nanos) / 1e9) / 1e6
	t.Logf("%d bytes (first read %d) in %v: %.2f Mbit/s", total, first, time.Duration(nanos), mbit)
	return mbit
}

func TestShapedRate(t *testing.T) {
	requireNetlab(t)
	for _, rate := range []float64{20, 50} {
		t.Run(fmt.Sprintf("%gMbit", rate), func(t *testing.T) {
			p := netlab.NewPairT(t, netlab.Options{RateMbit: rate})
			o := p.Options()
			t.Logf("%s %s <-> %s %s, burst %d, limit %d", p.Namespace(0), p.Addr(0), p.Namespace(1), p.Addr(1), o.BurstBytes, o.LimitBytes)
			got := measure(t, p)
			t.Logf("%.1f%% of the rate, %.1f%% of the expected TCP goodput", 100*got/rate, 100*got/(rate*netlab.GoodputFactor(0)))
			if math.Abs(got-rate) > tolerance*rate {
				t.Errorf("measured %.2f Mbit/s, want %g ± %g%%", got, rate, 100*tolerance)
			}
		})
	}
}

func TestUnshaped(t *testing.T) {
	requireNetlab(t)
	p := netlab.NewPairT(t, netlab.Options{})
	got := measure(t, p)
	if got < 100 {
		t.Errorf("unshaped link measured %.2f Mbit/s, want more than 100", got)
	}
}

func TestClose(t *testing.T) {
	requireNetlab(t)
	ctx := t.Context()
	p, err := netlab.NewPair(ctx, netlab.Options{RateMbit: 10})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Error(err)
		}
	})
	names, err := netlab.Namespaces(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if !slices.Contains(names, p.Namespace(i)) {
			t.Errorf("namespace %s not in ip netns list %q", p.Namespace(i), names)
		}
	}
	if err := p.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	names, err = netlab.Namespaces(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if slices.Contains(names, p.Namespace(i)) {
			t.Errorf("namespace %s still in ip netns list after Close", p.Namespace(i))
		}
	}
	if err := p.Close(); err != nil {
		t.Errorf("second Close: %v, want nil", err)
	}
}

func TestTwoPairs(t *testing.T) {
	requireNetlab(t)
	a := netlab.NewPairT(t, netlab.Options{})
	b := netlab.NewPairT(t, netlab.Options{})
	seenNS := map[string]bool{}
	seenAddr := map[string]bool{}
	for _, p := range []*netlab.Pair{a, b} {
		for i := range 2 {
			ns, addr := p.Namespace(i), p.Addr(i)
			if !strings.HasPrefix(ns, netlab.NamePrefix) {
				t.Errorf("namespace %q lacks prefix %q", ns, netlab.NamePrefix)
			}
			if len(p.Interface(i)) > 15 {
				t.Errorf("interface name %q longer than 15", p.Interface(i))
			}
			if seenNS[ns] || seenAddr[addr] {
				t.Errorf("namespace %s or address %s used twice", ns, addr)
			}
			seenNS[ns], seenAddr[addr] = true, true
		}
	}
	if a.Prefix().Overlaps(b.Prefix()) {
		t.Errorf("subnets %v and %v overlap", a.Prefix(), b.Prefix())
	}
	// The address of side 1 is reachable from side 0.
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	for _, p := range []*netlab.Pair{a, b} {
		if out, err := p.Command(ctx, 0, "ip", "route", "get", p.Addr(1)).CombinedOutput(); err != nil || !strings.Contains(string(out), p.Interface(0)) {
			t.Errorf("ip route get %s in %s: %v: %s", p.Addr(1), p.Namespace(0), err, out)
		}
	}
}

func TestRemoveStale(t *testing.T) {
	requireNetlab(t)
	ctx := t.Context()
	// The pid of a process that has exited and been reaped.
	dead := exec.Command(os.Args[0], "-test.run=^$")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	stale := fmt.Sprintf("%s%d-1-beef-0", netlab.NamePrefix, dead.Process.Pid)
	if out, err := exec.CommandContext(ctx, "ip", "netns", "add", stale).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add %s: %v: %s", stale, err, out)
	}
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "delete", stale).Run() }) // RemoveStale is to have deleted it: this is for when it did not
	live := netlab.NewPairT(t, netlab.Options{})

	removed, err := netlab.RemoveStale(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(removed, stale) {
		t.Errorf("RemoveStale removed %q, not %s", removed, stale)
	}
	names, err := netlab.Namespaces(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(names, stale) {
		t.Errorf("namespace %s still listed", stale)
	}
	for i := range 2 {
		if !slices.Contains(names, live.Namespace(i)) {
			t.Errorf("namespace %s of a live process removed", live.Namespace(i))
		}
	}
}

func TestTBFArgs(t *testing.T) {
	for _, tc := range []struct {
		opts netlab.Options
		want string
	}{
		{netlab.Options{}, ""},
		{netlab.Options{RateMbit: 20}, "tbf rate 20000000bit burst 32768 limit 294912"},
		{netlab.Options{RateMbit: 50}, "tbf rate 50000000bit burst 32768 limit 657768"},
		{netlab.Options{RateMbit: 1000}, "tbf rate 1000000000bit burst 250000 limit 12750000"},
		{netlab.Options{RateMbit: 1, BurstBytes: 4000, LimitBytes: 10000}, "tbf rate 1000000bit burst 4000 limit 10000"},
	} {
		args, err := tc.opts.TBFArgs()
		if err != nil {
			t.Errorf("%+v: %v", tc.opts, err)
			continue
		}
		if got := strings.Join(args, " "); got != tc.want {
			t.Errorf("%+v: got %q, want %q", tc.opts, got, tc.want)
		}
	}
	for _, o := range []netlab.Options{{RateMbit: -1}, {RateMbit: 1, BurstBytes: 100}, {MTU: 10}} {
		if _, err := o.TBFArgs(); err == nil {
			t.Errorf("%+v: no error", o)
		}
	}
}

func TestMain(m *testing.M) {
	code := m.Run()
	if os.Getenv(envRole) == "" && os.Geteuid() == 0 {
		// Report any namespace of this process left behind.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if names, err := netlab.Namespaces(ctx); err == nil {
			prefix := fmt.Sprintf("%s%d-", netlab.NamePrefix, os.Getpid())
			for _, n := range names {
				if strings.HasPrefix(n, prefix) {
					fmt.Fprintf(os.Stderr, "namespace %s left behind\n", n)
					code = 1
				}
			}
		}
	}
	os.Exit(code)
}
