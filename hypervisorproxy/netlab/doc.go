// Package netlab builds, for tests, networks on one Linux machine: a
// two-host network (two network namespaces joined by a veth pair whose link
// can be shaped to a given rate with tc), and a grid of sites' bridges joined
// by shaped links, for guests. Tests of the hypervisor proxy run two site
// agents as separate processes in the two namespaces of a pair, on their
// own addresses, and check that a bandwidth probe between them measures the
// shaped rate.
//
// It needs root, and ip and tc from the Debian package iproute2: it runs
// those commands (ip netns add, ip link add ... type veth, tc qdisc add ...
// tbf) rather than using netlink. Check reports what is missing. The
// package only builds on Linux.
//
// # Usage
//
// NewPairT creates a Pair and deletes it when the test ends; Command runs a
// program inside one of the namespaces, typically the test binary itself
// (the helper-process pattern) or an agent binary:
//
//	func TestProbe(t *testing.T) {
//		if err := netlab.Check(); err != nil {
//			t.Skip(err)
//		}
//		p := netlab.NewPairT(t, netlab.Options{RateMbit: 20})
//		agent := p.Command(t.Context(), 1, os.Args[0], "-test.run=^TestHelperProcess$")
//		agent.Env = append(os.Environ(), "ROLE=agent", "LISTEN="+net.JoinHostPort(p.Addr(1), "7000"))
//		if err := agent.Start(); err != nil {
//			t.Fatal(err)
//		}
//		t.Cleanup(func() { agent.Process.Kill(); agent.Wait() })
//		// ... run the probe from side 0 with p.Command(ctx, 0, ...) and
//		// check it measures 20 Mbit/s within 15%.
//	}
//
//	func TestHelperProcess(t *testing.T) {
//		if os.Getenv("ROLE") == "" {
//			t.Skip("the program TestProbe runs, not a test of its own")
//		}
//		// ... act as the agent, then os.Exit(0).
//	}
//
// Outside tests, NewPair takes a context and Close deletes the namespaces;
// Close is idempotent. Stop the processes started with Command before Close:
// a process keeps its namespace, and the link, alive after the name is gone.
// Processes started with Command are killed when the process that started
// them dies, so a crashed test leaves no agent behind; RemoveStale deletes
// the namespaces of dead processes.
//
// # Names and addresses
//
// Namespaces are named "ms-PID-N-RAND-0" and "ms-PID-N-RAND-1" (N counts the
// pairs of the process, RAND is random), so parallel tests and leftovers
// never collide. The veth ends, "ms-RAND-0" and "ms-RAND-1", are created
// directly inside their namespaces, so their names (at most 15 characters)
// need to be unique only there. Side 0 gets the first and side 1 the second
// host address of a /30 in 10.0.0.0/8 derived from the pid and N: distinct
// for all pairs of a process and, in practice, across processes (and, the
// link being private to the two namespaces, a clash would be harmless).
//
// # Shaping
//
// With Options.RateMbit set, the root qdisc of both veth ends is a token
// bucket filter (tbf; this works on kernels without netem), so each
// direction is limited to the rate:
//
//	tc qdisc add dev ms-RAND-i root tbf rate R burst B limit L
//
// The rate counts Ethernet frames: a bulk TCP transfer carries
// GoodputFactor(1500) = 1448/1514 = 95.6% of it as payload. The defaults,
// measured with 6 MiB TCP transfers (netlab_test.go), are:
//
//   - burst B = max(rate × 2 ms, 32 KiB). The bucket must cover the gaps in
//     which the sender is not scheduled, or tbf idles and loses rate: at
//     1 Gbit/s a 3 KB bucket gave 80% of the rate and 32 KiB 88-95%, 2 ms
//     (250 KB) 98%. It must not be so large that the initial burst, sent at
//     line rate, distorts a short measurement: 4 ms gave 102.5% at
//     1 Gbit/s. Up to 131 Mbit/s the 32 KiB floor (21 frames, 13 ms at
//     20 Mbit/s, 0.5% of a 6 MiB transfer) applies. It is always larger than
//     a frame, which tbf would otherwise drop.
//   - limit L = B + max(rate × 100 ms, 256 KiB) bytes of queue. TCP's send
//     path hands veth GSO packets of up to 64 KiB, which tbf splits into
//     frames that must all fit in the queue: with L = 16 KiB throughput
//     collapsed to a few percent of the rate. 100 ms of queue lets the
//     congestion window grow without losses (none seen, with bbr or reno).
//   - no peakrate, hence no tbf mtu/minburst; the veth MTU is Options.MTU
//     (1500).
//
// Measured receiver goodput, bytes after the first read over the time from
// the first to the last read: 19.1-19.2 Mbit/s at 20 Mbit/s and 47.8-48.0 at
// 50 Mbit/s (95.6-96% of the rate, within 15%).
//
// # Grids of sites
//
// A Grid is the network of several sites' hosts for guests: one network
// namespace holding a Linux bridge per site (named BridgePrefix + site,
// "br-a"), its loopback up, and veth links joining the bridges pairwise,
// each shaped like a Pair's link (tbf on the egress of both ends). Linked
// bridges form one Ethernet segment, so guests of every site can share a
// subnet and reach each other through the shaped links; the links must form
// a tree (the bridges run no spanning tree). Private root libvirtd daemons
// run inside the namespace (libvirtdtest's root mode) and put their
// guests on a site's bridge with <interface type='bridge'>:
//
//	g := netlab.NewGridT(t, netlab.GridOptions{
//		Sites: []string{"a", "b"},
//		Links: []netlab.Link{{A: "a", B: "b", Options: netlab.Options{RateMbit: 20}}},
//	})
//	d := libvirtdtest.StartT(t, libvirtdtest.Options{Root: true, NetNS: g.Namespace()})
//	// a guest of d on g.Bridge("a") ...
//
// The namespace is named like a Pair's, NamePrefix + pid-N-RAND + "-g", so
// RemoveStale deletes it once its process is gone. Stop the daemons (and
// so their guests) before Close: a QEMU holding a tap keeps the namespace
// alive, unnamed.
//
// The design is described in docs/internals/daemon.md of the
// repository, "Bandwidth probes", and in docs/internals/tests.md, "Real
// parts".
package netlab
