package hypervisorproxy

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"

	"github.com/metasched/metasched/hypervisorproxy/cloudinit"
	"github.com/metasched/metasched/hypervisorproxy/domxml"
	"github.com/metasched/metasched/internal/yamlx"
)

// Network is the network a site's VMs join (the site file's network):
// every host of the site has the Linux bridge Bridge, its VMs are ports of
// it, and the agent gives each VM one address of the range First..Last of
// Subnet, the guest's eth0 then having that address with Subnet's prefix
// length (and a default route through Gateway, when there is one).
//
//	network:
//	  bridge: msbr0                          # on every host of the site
//	  subnet: 10.77.0.0/16                   # the grid's VM network
//	  addresses: 10.77.1.10-10.77.1.250      # this site's share of it
//	  gateway: 10.77.0.1                     # optional
//	  dns: [10.77.0.53]                      # optional: name servers of cloud images' VMs
//
// The sites of one grid share a subnet (their bridges joined at layer 2)
// and give disjoint ranges of it, so that the VMs of a job reach each
// other across sites.
type Network struct {
	Bridge      string
	Subnet      netip.Prefix
	First, Last netip.Addr
	Gateway     netip.Addr // invalid: no default route
	// DNS are the name servers a VM of a cloud image is given (its seed's
	// network-config); none: the image's own resolver configuration.
	DNS []netip.Addr
}

// MaxNetworkAddresses bounds the size of a site's address range.
const MaxNetworkAddresses = 1 << 16

var networkFields = []string{"bridge", "subnet", "addresses", "gateway", "dns"}

// parseNetwork reads the site file's network section; every problem is
// reported on its field.
func parseNetwork(v yamlx.Value) *Network {
	m, ok := v.Map(networkFields...)
	if !ok {
		return nil
	}
	n := &Network{}
	good := true
	if b, ok := m.Str("bridge", true); ok {
		if msg := domxml.CheckBridge(b); msg != "" {
			m.Errorf("bridge", "%s", msg)
			good = false
		}
		n.Bridge = b
	} else {
		good = false
	}
	if s, ok := m.Str("subnet", true); ok {
		p, err := netip.ParsePrefix(s)
		switch {
		case err != nil || !p.Addr().Is4():
			m.Errorf("subnet", "must be an IPv4 network like 10.77.0.0/16, not %q", s)
			good = false
		case p.Bits() < 8 || p.Bits() > 30:
			m.Errorf("subnet", "must have a prefix length from 8 to 30, not %d", p.Bits())
			good = false
		case p.Masked() != p:
			m.Errorf("subnet", "must be a network address (%s), not %q", p.Masked(), s)
			good = false
		default:
			n.Subnet = p
		}
	} else {
		good = false
	}
	inSubnet := func(a netip.Addr) string {
		if !n.Subnet.IsValid() {
			return ""
		}
		if !n.Subnet.Contains(a) {
			return fmt.Sprintf("%s is not in the subnet %s", a, n.Subnet)
		}
		if a == n.Subnet.Addr() || a == broadcast(n.Subnet) {
			return fmt.Sprintf("%s is the subnet's network or broadcast address", a)
		}
		return ""
	}
	if s, ok := m.Str("addresses", true); ok {
		lo, hi, found := strings.Cut(s, "-")
		if !found {
			hi = lo
		}
		first, err1 := netip.ParseAddr(strings.TrimSpace(lo))
		last, err2 := netip.ParseAddr(strings.TrimSpace(hi))
		switch {
		case err1 != nil || err2 != nil || !first.Is4() || !last.Is4():
			m.Errorf("addresses", "must be a range of IPv4 addresses FIRST-LAST like 10.77.1.10-10.77.1.250, not %q", s)
			good = false
		case last.Less(first):
			m.Errorf("addresses", "must have FIRST <= LAST, not %q", s)
			good = false
		case count(first, last) > MaxNetworkAddresses:
			m.Errorf("addresses", "must hold at most %d addresses, not %d", MaxNetworkAddresses, count(first, last))
			good = false
		default:
			for _, a := range []netip.Addr{first, last} {
				if msg := inSubnet(a); msg != "" {
					m.Errorf("addresses", "%s", msg)
					good = false
				}
			}
			n.First, n.Last = first, last
		}
	} else {
		good = false
	}
	if s, ok := m.Str("gateway", false); ok {
		g, err := netip.ParseAddr(s)
		switch {
		case err != nil || !g.Is4():
			m.Errorf("gateway", "must be an IPv4 address, not %q", s)
			good = false
		case inSubnet(g) != "":
			m.Errorf("gateway", "%s", inSubnet(g))
			good = false
		case n.First.IsValid() && !g.Less(n.First) && !n.Last.Less(g):
			m.Errorf("gateway", "%s is in the VMs' address range %s-%s", g, n.First, n.Last)
			good = false
		default:
			n.Gateway = g
		}
	}
	if items, ok := m.Seq("dns", false); ok {
		if len(items) > cloudinit.MaxDNS {
			m.Errorf("dns", "must list at most %d name servers, not %d", cloudinit.MaxDNS, len(items))
			good = false
		}
		for _, it := range items {
			s, ok := it.Str()
			if !ok {
				good = false
				continue
			}
			a, err := netip.ParseAddr(s)
			if err != nil || !a.Is4() {
				it.Errorf("must be an IPv4 address, not %q", s)
				good = false
				continue
			}
			n.DNS = append(n.DNS, a)
		}
	}
	if !good {
		return nil
	}
	return n
}

// broadcast is the last address of p.
func broadcast(p netip.Prefix) netip.Addr {
	b := p.Masked().Addr().As4()
	host := uint32(1)<<(32-p.Bits()) - 1
	x := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
	x |= host
	return netip.AddrFrom4([4]byte{byte(x >> 24), byte(x >> 16), byte(x >> 8), byte(x)})
}

// count is the number of addresses from first to last, both included.
func count(first, last netip.Addr) int {
	f, l := first.As4(), last.As4()
	fx := uint32(f[0])<<24 | uint32(f[1])<<16 | uint32(f[2])<<8 | uint32(f[3])
	lx := uint32(l[0])<<24 | uint32(l[1])<<16 | uint32(l[2])<<8 | uint32(l[3])
	return int(lx-fx) + 1
}

// String is the network as the site file writes it (its fields in order).
func (n *Network) String() string {
	s := fmt.Sprintf("bridge %s, subnet %s, addresses %s-%s", n.Bridge, n.Subnet, n.First, n.Last)
	if n.Gateway.IsValid() {
		s += ", gateway " + n.Gateway.String()
	}
	return s
}

// ErrNoAddress means the site's address range is used up.
var ErrNoAddress = errors.New("no free address")

// allocateLocked gives the VM name the lowest address of the site's range
// that no VM of the agent holds; a.mu must be held.
func (a *Agent) allocateLocked(name string) (netip.Addr, error) {
	n := a.site.Network
	held := map[netip.Addr]bool{}
	for _, v := range a.vms {
		if v.addr.IsValid() {
			held[v.addr] = true
		}
	}
	for x := n.First; ; x = x.Next() {
		if !held[x] {
			return x, nil
		}
		if x == n.Last {
			break
		}
	}
	return netip.Addr{}, fmt.Errorf("%w: vm %s: %w in %s-%s (%d addresses, all held by the site's VMs)",
		ErrLimit, name, ErrNoAddress, n.First, n.Last, count(n.First, n.Last))
}

// prefix is the address a of a VM with the site's prefix length, as its
// eth0 has it; "" for none.
func (a *Agent) prefix(addr netip.Addr) netip.Prefix {
	if !addr.IsValid() || a.site.Network == nil {
		return netip.Prefix{}
	}
	return netip.PrefixFrom(addr, a.site.Network.Subnet.Bits())
}

// macOf is the MAC address of the VM with the IPv4 address addr:
// 52:54 (the locally administered prefix QEMU uses) and the address's
// four bytes, so that the addresses the sites give, disjoint, give
// disjoint MACs.
func macOf(addr netip.Addr) string {
	b := addr.As4()
	return fmt.Sprintf("52:54:%02x:%02x:%02x:%02x", b[0], b[1], b[2], b[3])
}
