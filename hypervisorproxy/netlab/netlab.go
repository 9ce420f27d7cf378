//go:build linux

package netlab

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// NamePrefix starts the name of every network namespace and interface the
// package creates, so that leftovers are easy to recognise (see RemoveStale).
const NamePrefix = "ms-"

// Defaults of Options.
const (
	// DefaultMTU is the MTU of the veth link when Options.MTU is 0.
	DefaultMTU = 1500

	// MinBurstBytes is the smallest token bucket used when Options.BurstBytes
	// is 0: about 21 full-size frames.
	MinBurstBytes = 32 << 10

	// BurstTime is how long, at the shaped rate, the default token bucket
	// lasts when it is larger than MinBurstBytes (above 131 Mbit/s).
	BurstTime = 2 * time.Millisecond

	// DefaultQueueLatency is how much data, in time at the shaped rate, the
	// queue in front of the bucket holds when Options.LimitBytes is 0.
	DefaultQueueLatency = 100 * time.Millisecond

	// MinLimitBytes is the smallest default queue: four 64 KiB GSO packets,
	// which tbf splits into frames that must all fit in the queue.
	MinLimitBytes = 256 << 10
)

// commandTimeout bounds every ip/tc command the package runs during cleanup
// and in Check, where no caller context applies.
const commandTimeout = 15 * time.Second

// Options describes the link of a Pair. The zero value is an unshaped link
// with a 1500-byte MTU.
type Options struct {
	// RateMbit shapes the link in both directions (egress of both veth
	// ends) to this many megabits (10^6 bits) per second, counted on
	// Ethernet frames (IP packet plus the 14-byte Ethernet header). 0 means
	// unshaped.
	//
	// TCP payload over a 1500-byte MTU gets about 1448/1514 = 95.6% of it
	// (IP, TCP with timestamps and Ethernet headers); see GoodputFactor.
	RateMbit float64

	// BurstBytes is the size of the tbf token bucket. 0 means
	// max(rate*BurstTime, MinBurstBytes), and at least one full frame.
	BurstBytes int

	// LimitBytes is the size of the queue in front of the bucket. 0 means
	// BurstBytes + max(rate*DefaultQueueLatency, MinLimitBytes).
	LimitBytes int

	// MTU is the MTU of both veth ends. 0 means DefaultMTU.
	MTU int
}

// GoodputFactor returns the fraction of the shaped rate that a bulk TCP
// transfer over IPv4 with timestamps carries as payload on a link of the
// given MTU (0 = DefaultMTU): (mtu-52)/(mtu+14). For 1500 it is about 0.956.
func GoodputFactor(mtu int) float64 {
	if mtu == 0 {
		mtu = DefaultMTU
	}
	return float64(mtu-52) / float64(mtu+14)
}

// withDefaults returns o with every zero field replaced by its default.
func (o Options) withDefaults() (Options, error) {
	if o.RateMbit < 0 {
		return o, fmt.Errorf("netlab: negative rate %v Mbit/s", o.RateMbit)
	}
	if o.BurstBytes < 0 || o.LimitBytes < 0 || o.MTU < 0 {
		return o, errors.New("netlab: negative burst, limit or mtu")
	}
	if o.MTU == 0 {
		o.MTU = DefaultMTU
	}
	if o.MTU < 68 || o.MTU > 65535 {
		return o, fmt.Errorf("netlab: mtu %d out of range 68..65535", o.MTU)
	}
	if o.RateMbit == 0 {
		return o, nil
	}
	rateBytes := o.RateMbit * 1e6 / 8 // per second
	if rateBytes < 1 {
		return o, fmt.Errorf("netlab: rate %v Mbit/s too small", o.RateMbit)
	}
	// A frame larger than the bucket never gets through tbf.
	frame := o.MTU + 18 // Ethernet header and a VLAN tag
	if o.BurstBytes == 0 {
		o.BurstBytes = max(int(rateBytes*BurstTime.Seconds()), MinBurstBytes, frame)
	}
	if o.BurstBytes < frame {
		return o, fmt.Errorf("netlab: burst %d bytes smaller than a frame of %d bytes", o.BurstBytes, frame)
	}
	if o.LimitBytes == 0 {
		o.LimitBytes = o.BurstBytes + max(int(rateBytes*DefaultQueueLatency.Seconds()), MinLimitBytes)
	}
	if o.LimitBytes < frame {
		return o, fmt.Errorf("netlab: limit %d bytes smaller than a frame of %d bytes", o.LimitBytes, frame)
	}
	return o, nil
}

// TBFArgs returns the tc arguments, after "tc qdisc add dev DEV root", that
// shape a link as o says, with defaults applied; nil when o is unshaped.
func (o Options) TBFArgs() ([]string, error) {
	o, err := o.withDefaults()
	if err != nil {
		return nil, err
	}
	if o.RateMbit == 0 {
		return nil, nil
	}
	bits := int64(o.RateMbit*1e6 + 0.5)
	return []string{
		"tbf",
		"rate", strconv.FormatInt(bits, 10) + "bit",
		"burst", strconv.Itoa(o.BurstBytes),
		"limit", strconv.Itoa(o.LimitBytes),
	}, nil
}

// Pair is two network namespaces joined by a veth pair, side 0 and side 1,
// each with its loopback up and one IPv4 address. Create it with NewPair or
// NewPairT and delete it with Close.
type Pair struct {
	opts   Options // with defaults applied
	ns     [2]string
	ifname [2]string
	addr   [2]netip.Addr
	prefix netip.Prefix

	created [2]bool // namespaces made by this pair, to delete

	mu     sync.Mutex
	closed bool
}

// pairCounter numbers the pairs of this process.
var pairCounter atomic.Uint32

// NewPair creates the namespaces, the veth link between them, its addresses
// and its shaping. The namespaces are named NamePrefix + pid-counter-random
// + "-0" or "-1", so that concurrent tests and leftovers of dead processes
// never collide; the addresses are a /30 in 10.0.0.0/8 derived from the pid
// and the counter (unique among the pairs of a process, and among processes
// while pids stay below 32768 and a process holds fewer than 128 pairs).
// Since the link joins only the two namespaces, a clash with another pair's
// addresses would be harmless anyway.
//
// On failure NewPair deletes what it created and returns an error carrying
// the failing command and its output.
func NewPair(ctx context.Context, opts Options) (*Pair, error) {
	var rb [2]byte
	if _, err := rand.Read(rb[:]); err != nil {
		return nil, fmt.Errorf("netlab: random suffix: %w", err)
	}
	return newPair(ctx, opts, os.Getpid(), pairCounter.Add(1), binary.BigEndian.Uint16(rb[:]))
}

// newPair is NewPair with the parts of the names given.
func newPair(ctx context.Context, opts Options, pid int, n uint32, suffix uint16) (*Pair, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	p := &Pair{opts: opts}
	for i := range 2 {
		p.ns[i] = fmt.Sprintf("%s%d-%d-%04x-%d", NamePrefix, pid, n, suffix, i)
		// Interfaces are created directly inside their namespace, so
		// their names only need to be unique there; they share the
		// random part of the namespace names to be recognisable.
		p.ifname[i] = fmt.Sprintf("%s%04x-%d", NamePrefix, suffix, i)
	}
	p.prefix, p.addr = subnetFor(pid, n)

	if err := p.setUp(ctx); err != nil {
		// Only the namespaces created by setUp are deleted: one that
		// existed already is someone else's.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), commandTimeout)
		defer cancel()
		if cerr := p.deleteNamespaces(cctx); cerr != nil {
			err = fmt.Errorf("%w (cleanup: %w)", err, cerr)
		}
		p.closed = true
		return nil, err
	}
	return p, nil
}

// subnetFor returns the /30 of pair n of process pid and its two host
// addresses.
func subnetFor(pid int, n uint32) (netip.Prefix, [2]netip.Addr) {
	idx := (uint32(pid)*128 + n) % (1 << 22) // 22 bits: 10.x.y.z/30
	base := [4]byte{10, byte(idx >> 14), byte(idx >> 6), byte(idx&63) * 4}
	a := netip.AddrFrom4(base)
	return netip.PrefixFrom(a, 30), [2]netip.Addr{a.Next(), a.Next().Next()}
}

func (p *Pair) setUp(ctx context.Context) error {
	for i := range 2 {
		if err := run(ctx, "ip", "netns", "add", p.ns[i]); err != nil {
			return err
		}
		p.created[i] = true
	}
	if err := run(ctx, "ip", "link", "add", p.ifname[0], "netns", p.ns[0], "mtu", strconv.Itoa(p.opts.MTU),
		"type", "veth", "peer", "name", p.ifname[1], "netns", p.ns[1], "mtu", strconv.Itoa(p.opts.MTU)); err != nil {
		return err
	}
	tbf, err := p.opts.TBFArgs()
	if err != nil {
		return err
	}
	bits := strconv.Itoa(p.prefix.Bits())
	for i := range 2 {
		ns, dev := p.ns[i], p.ifname[i]
		cmds := [][]string{
			{"ip", "-n", ns, "link", "set", "lo", "up"},
			{"ip", "-n", ns, "addr", "add", p.addr[i].String() + "/" + bits, "dev", dev},
		}
		if tbf != nil {
			cmds = append(cmds, append([]string{"ip", "netns", "exec", ns, "tc", "qdisc", "add", "dev", dev, "root"}, tbf...))
		}
		cmds = append(cmds, []string{"ip", "-n", ns, "link", "set", dev, "up"})
		for _, c := range cmds {
			if err := run(ctx, c[0], c[1:]...); err != nil {
				return err
			}
		}
	}
	return nil
}

// Namespace returns the name of the network namespace of side i (0 or 1).
func (p *Pair) Namespace(i int) string { return p.ns[side(i)] }

// Addr returns the IPv4 address, without prefix length, of side i (0 or 1).
func (p *Pair) Addr(i int) string { return p.addr[side(i)].String() }

// Interface returns the name of the veth end of side i (0 or 1), inside
// Namespace(i).
func (p *Pair) Interface(i int) string { return p.ifname[side(i)] }

// Prefix returns the subnet of the link.
func (p *Pair) Prefix() netip.Prefix { return p.prefix }

// Options returns the options of the pair with defaults applied, e.g. the
// burst and limit actually used.
func (p *Pair) Options() Options { return p.opts }

// side panics unless i is 0 or 1.
func side(i int) int {
	if i != 0 && i != 1 {
		panic(fmt.Sprintf("netlab: side %d, want 0 or 1", i))
	}
	return i
}

// Command returns a command that runs name with args in the network
// namespace of side i, as `ip netns exec NS name args...`. ip execs name
// in place, so cmd.Process is name's process and killing it by PID, or
// cancelling ctx, stops it. The process also gets SIGKILL when the calling
// process dies. Close does not stop processes: stop them before, or they
// keep the namespace alive, unnamed.
func (p *Pair) Command(ctx context.Context, i int, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", p.Namespace(i), name}, args...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	return cmd
}

// Close deletes both namespaces, which removes the veth link with them. It
// is idempotent: after a successful Close further calls return nil.
func (p *Pair) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), commandTimeout)
	defer cancel()
	if err := p.deleteNamespaces(ctx); err != nil {
		return err
	}
	p.closed = true
	return nil
}

// deleteNamespaces deletes the namespaces the pair created, ignoring
// those that no longer exist.
func (p *Pair) deleteNamespaces(ctx context.Context) error {
	var errs []error
	for i := range 2 {
		if !p.created[i] {
			continue
		}
		if err := deleteNamespace(ctx, p.ns[i]); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func deleteNamespace(ctx context.Context, ns string) error {
	err := run(ctx, "ip", "netns", "delete", ns)
	if err == nil {
		return nil
	}
	names, lerr := Namespaces(ctx)
	if lerr != nil {
		return err
	}
	for _, n := range names {
		if n == ns {
			return err
		}
	}
	return nil // already gone
}

// Namespaces returns the names of all named network namespaces, as
// `ip netns list` shows them.
func Namespaces(ctx context.Context) ([]string, error) {
	out, err := output(ctx, "ip", "netns", "list")
	if err != nil {
		return nil, err
	}
	var names []string
	for line := range strings.Lines(out) {
		// "NAME" or "NAME (id: N)"
		if f := strings.Fields(line); len(f) > 0 {
			names = append(names, f[0])
		}
	}
	return names, nil
}

// RemoveStale deletes the namespaces left by netlab in processes that no
// longer exist (names NamePrefix + pid + ...), and returns their names. It
// is meant for a TestMain or a manual clean-up after a crash; namespaces of
// live processes, and of processes in other PID namespaces whose pid is in
// use here, are kept.
func RemoveStale(ctx context.Context) ([]string, error) {
	names, err := Namespaces(ctx)
	if err != nil {
		return nil, err
	}
	var removed []string
	var errs []error
	for _, n := range names {
		rest, ok := strings.CutPrefix(n, NamePrefix)
		if !ok {
			continue
		}
		pidStr, _, ok := strings.Cut(rest, "-")
		if !ok {
			continue
		}
		pid, err := strconv.Atoi(pidStr)
		if err != nil || pid <= 0 || pidAlive(pid) {
			continue
		}
		if err := deleteNamespace(ctx, n); err != nil {
			errs = append(errs, err)
			continue
		}
		removed = append(removed, n)
	}
	return removed, errors.Join(errs...)
}

// pidAlive reports whether process pid exists and is not a zombie.
func pidAlive(pid int) bool {
	if err := syscall.Kill(pid, 0); err != nil && !errors.Is(err, syscall.EPERM) {
		return false
	}
	// "PID (COMM) STATE ...": COMM may contain spaces and parentheses.
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true // exists, state unknown
	}
	if i := bytes.LastIndexByte(stat, ')'); i >= 0 && i+2 < len(stat) {
		return stat[i+2] != 'Z'
	}
	return true
}

// Check reports, with an error explaining what is missing, whether NewPair
// can work here: the process must run as root, ip and tc (Debian package
// iproute2) must be on PATH, and a network namespace must be creatable.
func Check() error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("netlab: need root to create network namespaces (euid %d)", os.Geteuid())
	}
	for _, tool := range []string{"ip", "tc"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("netlab: %s not found, install the Debian package iproute2: %w", tool, err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), commandTimeout)
	defer cancel()
	var rb [2]byte
	if _, err := rand.Read(rb[:]); err != nil {
		return fmt.Errorf("netlab: random suffix: %w", err)
	}
	ns := fmt.Sprintf("%s%d-check-%04x", NamePrefix, os.Getpid(), binary.BigEndian.Uint16(rb[:]))
	if err := run(ctx, "ip", "netns", "add", ns); err != nil {
		return fmt.Errorf("netlab: network namespaces not usable: %w", err)
	}
	if err := deleteNamespace(ctx, ns); err != nil {
		return fmt.Errorf("netlab: network namespaces not usable: %w", err)
	}
	return nil
}

// NewPairT is NewPair for tests: it fails t at once on error and closes
// the pair when the test and its subtests end (t.Cleanup), reporting a
// failing Close with t.Error.
func NewPairT(t testing.TB, opts Options) *Pair {
	t.Helper()
	ctx := t.Context()
	p, err := NewPair(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Error(err)
		}
	})
	return p
}

// run runs a command and returns an error with its output on failure.
func run(ctx context.Context, name string, args ...string) error {
	_, err := output(ctx, name, args...)
	return err
}

// output runs a command and returns its standard output, or an error with
// the command line and its standard error.
func output(ctx context.Context, name string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = time.Second
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(stderr.String())
		if msg == "" {
			msg = strings.TrimSpace(stdout.String())
		}
		cmdline := strings.Join(append([]string{name}, args...), " ")
		if msg != "" {
			return "", fmt.Errorf("netlab: %s: %w: %s", cmdline, err, msg)
		}
		return "", fmt.Errorf("netlab: %s: %w", cmdline, err)
	}
	return stdout.String(), nil
}
