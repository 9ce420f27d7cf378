//go:build linux

package netlab_test

import (
	"fmt"
	"math"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/metasched/metasched/hypervisorproxy/netlab"
)

// ipOut runs ip (or tc, through ip netns exec) and returns its output.
func ipOut(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := exec.CommandContext(t.Context(), name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// attachHost makes a network namespace with one veth end, address addr/24,
// whose other end is a port of the bridge of site in g: a host of that
// site. It is deleted when the test ends.
func attachHost(t *testing.T, g *netlab.Grid, site, name, addr string) string {
	t.Helper()
	ns := fmt.Sprintf("%s%d-%s", netlab.NamePrefix, os.Getpid(), name)
	ipOut(t, "ip", "netns", "add", ns)
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "delete", ns).Run() }) // best effort: TestMain reports a namespace left behind
	port := netlab.NamePrefix + name
	ipOut(t, "ip", "-n", g.Namespace(), "link", "add", port, "type", "veth", "peer", "name", "eth0", "netns", ns)
	ipOut(t, "ip", "-n", g.Namespace(), "link", "set", port, "master", g.Bridge(site), "up")
	ipOut(t, "ip", "-n", ns, "addr", "add", addr+"/24", "dev", "eth0")
	ipOut(t, "ip", "-n", ns, "link", "set", "eth0", "up")
	ipOut(t, "ip", "-n", ns, "link", "set", "lo", "up")
	return ns
}

// A grid of three sites in a line, a-b shaped to 20 Mbit/s and b-c not:
// the namespace holds the bridges and the links as asked, hosts of sites a
// and b exchange data at the shaped rate, hosts of b and c faster, and
// Close leaves nothing.
func TestGrid(t *testing.T) {
	requireNetlab(t)
	ctx := t.Context()
	g, err := netlab.NewGrid(ctx, netlab.GridOptions{
		Sites: []string{"a", "b", "site-c"},
		Links: []netlab.Link{
			{A: "a", B: "b", Options: netlab.Options{RateMbit: 20}},
			{A: "site-c", B: "b"},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := g.Close(); err != nil {
			t.Error(err)
		}
	})
	ns := g.Namespace()
	if !strings.HasPrefix(ns, fmt.Sprintf("%s%d-", netlab.NamePrefix, os.Getpid())) {
		t.Errorf("namespace %s does not carry the pid (RemoveStale would not find it)", ns)
	}
	if g.Bridge("site-c") != "br-site-c" || !slices.Equal(g.Sites(), []string{"a", "b", "site-c"}) {
		t.Errorf("bridge of site-c %q, sites %v", g.Bridge("site-c"), g.Sites())
	}
	names, err := netlab.Namespaces(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(names, ns) {
		t.Fatalf("namespace %s not in ip netns list %q", ns, names)
	}

	links := ipOut(t, "ip", "-n", ns, "-o", "link", "show")
	t.Logf("links:\n%s", links)
	va, vb := g.LinkInterfaces(0)
	vc, vb2 := g.LinkInterfaces(1)
	for _, want := range []string{
		"lo: <LOOPBACK,UP,LOWER_UP>",
		va + "@" + vb + ": ", "master br-a",
		vb + "@" + va + ": ",
		vc + "@" + vb2 + ": ", "master br-site-c",
		"br-b: <BROADCAST,MULTICAST,UP,LOWER_UP>",
	} {
		if !strings.Contains(links, want) {
			t.Errorf("ip link in %s lacks %q", ns, want)
		}
	}
	for _, dev := range []string{va, vb} {
		if q := ipOut(t, "ip", "netns", "exec", ns, "tc", "qdisc", "show", "dev", dev); !strings.Contains(q, "tbf") || !strings.Contains(q, "rate 20Mbit") {
			t.Errorf("qdisc of %s: %s, want tbf at 20Mbit", dev, q)
		}
	}
	if q := ipOut(t, "ip", "netns", "exec", ns, "tc", "qdisc", "show", "dev", vc); strings.Contains(q, "tbf") {
		t.Errorf("qdisc of unshaped %s: %s", vc, q)
	}
	if o := g.Links()[0].Options; o.BurstBytes == 0 || o.MTU != netlab.DefaultMTU {
		t.Errorf("link options without defaults: %+v", o)
	}

	hostA := attachHost(t, g, "a", "ga", "10.77.0.1")
	hostB := attachHost(t, g, "b", "gb", "10.77.0.2")
	hostC := attachHost(t, g, "site-c", "gc", "10.77.0.3")
	shaped := measureBetween(t, hostA, hostB, "10.77.0.2")
	if math.Abs(shaped-20) > tolerance*20 {
		t.Errorf("site a to b: %.2f Mbit/s, want 20 ± %g%%", shaped, 100*tolerance)
	}
	if free := measureBetween(t, hostC, hostB, "10.77.0.2"); free < 100 {
		t.Errorf("site c to b (unshaped): %.2f Mbit/s, want more than 100", free)
	}

	if err := g.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := g.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	names, err = netlab.Namespaces(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(names, ns) {
		t.Errorf("namespace %s left after Close", ns)
	}
	// The kernel frees a deleted namespace's links later, in the
	// background: that the hosts' links go is not checked here.
}

// Bad grids are refused before anything is created, each problem naming
// its field.
func TestGridBadOptions(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts netlab.GridOptions
		want []string
	}{
		{"no sites", netlab.GridOptions{}, []string{"sites: at least one site"}},
		{"names", netlab.GridOptions{Sites: []string{"a", "", "a", "a/b", "thirteen-char"}}, []string{
			"sites[1]: must not be empty",
			`sites[2]: "a" is listed twice (also sites[0])`,
			`sites[3]: character '/' is not allowed`,
			`sites[4]: "thirteen-char" is 13 bytes, more than 12`,
		}},
		{"links", netlab.GridOptions{Sites: []string{"a", "b", "c"}, Links: []netlab.Link{
			{A: "a", B: "x"},
			{A: "y", B: "b"},
			{A: "a", B: "a"},
			{A: "a", B: "b", Options: netlab.Options{RateMbit: -1}},
			{A: "b", B: "c"},
			{A: "c", B: "a"},
		}}, []string{
			`links[0].b: "x" is not one of the sites`,
			`links[1].a: "y" is not one of the sites`,
			`links[2].b: the link joins site "a" to itself`,
			`links[3].options: netlab: negative rate -1 Mbit/s`,
			`links[5]: c-a closes a loop`,
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, err := netlab.NewGrid(t.Context(), tc.opts)
			if err == nil {
				_ = g.Close() // the test fails: that is the error to report
				t.Fatal("no error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q:\n%v", w, err)
				}
			}
		})
	}
}
