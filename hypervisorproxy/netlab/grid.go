//go:build linux

package netlab

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
)

// BridgePrefix starts the name of every site's bridge in a Grid: the bridge
// of site "a" is "br-a".
const BridgePrefix = "br-"

// MaxSiteName is the longest site name a Grid accepts: BridgePrefix plus
// the name must fit in an interface name (15 bytes).
const MaxSiteName = 15 - len(BridgePrefix)

// GridOptions describes a Grid: its sites and the links between them.
type GridOptions struct {
	// Sites names the sites, one Linux bridge each. A name is 1 to
	// MaxSiteName letters, digits, '-' or '_', unique in the grid.
	Sites []string

	// Links joins sites pairwise, each through a veth pair whose ends are
	// ports of the two sites' bridges, shaped as its Options say. The
	// links must not close a loop (the bridges run no spanning tree, so a
	// loop would flood broadcasts forever): they form a tree or a forest.
	Links []Link
}

// Link joins the bridges of sites A and B.
type Link struct {
	A, B string
	// Options shapes the link like a Pair's (rate, burst, limit, MTU),
	// tbf on the egress of both veth ends.
	Options Options
}

// Grid is one network namespace holding a Linux bridge per site, its
// loopback up, and veth links between the sites' bridges. Guests join a
// site by a tap on its bridge (libvirt's <interface type='bridge'>); since
// linked bridges form one Ethernet segment, guests of all sites can share
// one subnet and reach each other through the shaped links. Create it with
// NewGrid or NewGridT and delete it with Close.
type Grid struct {
	ns    string
	sites []string
	links []Link // with defaults applied
	veths [][2]string

	created bool

	mu     sync.Mutex
	closed bool
}

// gridCounter numbers the grids of this process.
var gridCounter atomic.Uint32

// NewGrid checks opts (every problem is reported, naming its field:
// sites[i], links[i].a, links[i].b, links[i].options), then creates the
// namespace, named NamePrefix + pid-counter-random + "-g" so that
// RemoveStale deletes it once this process is gone, the bridges, named
// BridgePrefix + site, and the links, whose veth ends are named
// "ms-vI-J" (I and J the link's sites' indexes in Sites, the end on I's
// bridge first). On failure it deletes what it created and returns an error
// carrying the failing command and its output.
func NewGrid(ctx context.Context, opts GridOptions) (*Grid, error) {
	g, err := checkGrid(opts)
	if err != nil {
		return nil, err
	}
	var rb [2]byte
	if _, err := rand.Read(rb[:]); err != nil {
		return nil, fmt.Errorf("netlab: random suffix: %w", err)
	}
	g.ns = fmt.Sprintf("%s%d-%d-%04x-g", NamePrefix, os.Getpid(), gridCounter.Add(1), binary.BigEndian.Uint16(rb[:]))
	if err := g.setUp(ctx); err != nil {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), commandTimeout)
		defer cancel()
		if g.created {
			if cerr := deleteNamespace(cctx, g.ns); cerr != nil {
				err = fmt.Errorf("%w (cleanup: %w)", err, cerr)
			}
		}
		return nil, err
	}
	return g, nil
}

// checkGrid validates opts and returns the grid they describe, without a
// namespace yet.
func checkGrid(opts GridOptions) (*Grid, error) {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("netlab: grid: %s: %s", field, fmt.Sprintf(format, args...)))
	}
	if len(opts.Sites) == 0 {
		bad("sites", "at least one site is needed")
	}
	index := map[string]int{}
	for i, s := range opts.Sites {
		field := fmt.Sprintf("sites[%d]", i)
		if msg := checkSiteName(s); msg != "" {
			bad(field, "%s", msg)
			continue
		}
		if j, dup := index[s]; dup {
			bad(field, "%q is listed twice (also sites[%d])", s, j)
			continue
		}
		index[s] = i
	}
	// Union-find over the sites, to refuse links that close a loop.
	parent := make([]int, len(opts.Sites))
	for i := range parent {
		parent[i] = i
	}
	var root func(int) int
	root = func(i int) int {
		for parent[i] != i {
			parent[i] = parent[parent[i]]
			i = parent[i]
		}
		return i
	}
	g := &Grid{sites: append([]string(nil), opts.Sites...)}
	for k, l := range opts.Links {
		field := fmt.Sprintf("links[%d]", k)
		ia, okA := index[l.A]
		ib, okB := index[l.B]
		if !okA {
			bad(field+".a", "%q is not one of the sites", l.A)
		}
		if !okB {
			bad(field+".b", "%q is not one of the sites", l.B)
		}
		o, err := l.Options.withDefaults()
		if err != nil {
			bad(field+".options", "%v", err)
		}
		if !okA || !okB {
			continue
		}
		if ia == ib {
			bad(field+".b", "the link joins site %q to itself", l.A)
			continue
		}
		if ra, rb := root(ia), root(ib); ra == rb {
			bad(field, "%s-%s closes a loop of links (the bridges run no spanning tree: give a tree of links)", l.A, l.B)
			continue
		} else {
			parent[ra] = rb
		}
		g.links = append(g.links, Link{A: l.A, B: l.B, Options: o})
		g.veths = append(g.veths, [2]string{
			fmt.Sprintf("%sv%d-%d", NamePrefix, ia, ib),
			fmt.Sprintf("%sv%d-%d", NamePrefix, ib, ia),
		})
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return g, nil
}

// checkSiteName returns what is wrong with a site name, or "".
func checkSiteName(s string) string {
	if s == "" {
		return "must not be empty"
	}
	if len(s) > MaxSiteName {
		return fmt.Sprintf("%q is %d bytes, more than %d (its bridge %s%s must fit in 15)", s, len(s), MaxSiteName, BridgePrefix, s)
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return fmt.Sprintf("character %q is not allowed in %q (use A-Z a-z 0-9 - _)", c, s)
		}
	}
	return ""
}

func (g *Grid) setUp(ctx context.Context) error {
	if err := run(ctx, "ip", "netns", "add", g.ns); err != nil {
		return err
	}
	g.created = true
	cmds := [][]string{{"ip", "-n", g.ns, "link", "set", "lo", "up"}}
	for _, s := range g.sites {
		br := BridgePrefix + s
		cmds = append(cmds,
			[]string{"ip", "-n", g.ns, "link", "add", br, "type", "bridge", "stp_state", "0", "forward_delay", "0"},
			[]string{"ip", "-n", g.ns, "link", "set", br, "up"})
	}
	for k, l := range g.links {
		v := g.veths[k]
		mtu := strconv.Itoa(l.Options.MTU)
		cmds = append(cmds, []string{"ip", "-n", g.ns, "link", "add", v[0], "mtu", mtu, "type", "veth", "peer", "name", v[1], "mtu", mtu})
		tbf, err := l.Options.TBFArgs()
		if err != nil {
			return err
		}
		for i, site := range []string{l.A, l.B} {
			if tbf != nil {
				cmds = append(cmds, append([]string{"ip", "netns", "exec", g.ns, "tc", "qdisc", "add", "dev", v[i], "root"}, tbf...))
			}
			cmds = append(cmds,
				[]string{"ip", "-n", g.ns, "link", "set", v[i], "master", BridgePrefix + site},
				[]string{"ip", "-n", g.ns, "link", "set", v[i], "up"})
		}
	}
	for _, c := range cmds {
		if err := run(ctx, c[0], c[1:]...); err != nil {
			return err
		}
	}
	return nil
}

// Namespace returns the name of the grid's network namespace (its file is
// /run/netns/NAME).
func (g *Grid) Namespace() string { return g.ns }

// Sites returns the names of the sites, in the order given.
func (g *Grid) Sites() []string { return append([]string(nil), g.sites...) }

// Bridge returns the name of the bridge of a site, inside Namespace(); it
// panics when site is not one of the grid's sites (a test's mistake).
func (g *Grid) Bridge(site string) string {
	for _, s := range g.sites {
		if s == site {
			return BridgePrefix + s
		}
	}
	panic(fmt.Sprintf("netlab: grid has no site %q (sites %v)", site, g.sites))
}

// Links returns the links of the grid with defaults applied, in the order
// given.
func (g *Grid) Links() []Link { return append([]Link(nil), g.links...) }

// LinkInterfaces returns the names of the veth ends of link k (in the
// order of Links): the end on A's bridge, then the end on B's.
func (g *Grid) LinkInterfaces(k int) (a, b string) { return g.veths[k][0], g.veths[k][1] }

// Command returns a command that runs name with args in the grid's
// namespace, as `ip netns exec NS name args...`: cmd.Process is name's
// process, which gets SIGKILL when the calling process dies. Stop it
// before Close.
func (g *Grid) Command(ctx context.Context, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", g.ns, name}, args...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	return cmd
}

// Close deletes the namespace, and with it the bridges and links. Stop
// the guests and daemons using it first: a process (a QEMU holding a tap)
// keeps the namespace alive, unnamed. Close is idempotent.
func (g *Grid) Close() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), commandTimeout)
	defer cancel()
	if err := deleteNamespace(ctx, g.ns); err != nil {
		return err
	}
	g.closed = true
	return nil
}

// NewGridT is NewGrid for tests: it fails t at once on error and closes
// the grid when the test ends (t.Cleanup; register the cleanups of the
// daemons using it after this call, so that they run before), reporting
// a failing Close with t.Error.
func NewGridT(t testing.TB, opts GridOptions) *Grid {
	t.Helper()
	g, err := NewGrid(t.Context(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := g.Close(); err != nil {
			t.Error(err)
		}
	})
	return g
}
