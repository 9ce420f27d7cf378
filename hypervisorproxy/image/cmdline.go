package image

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
)

// keyPrefix starts every kernel command-line key the guest's init reads.
const keyPrefix = "metasched."

// The keys the bundled image's init reads on /proc/cmdline (see
// docs/internals/images.md, "The kernel command line"). Values have no
// spaces.
const (
	KeyHostname = keyPrefix + "hostname" // the guest's host name
	KeyIP       = keyPrefix + "ip"       // eth0's IPv4 address and prefix: 10.1.0.5/24
	KeyGateway  = keyPrefix + "gw"       // the default route's IPv4 gateway
	KeyHosts    = keyPrefix + "hosts"    // /etc/hosts entries: name=addr,name=addr
	KeyRoot     = keyPrefix + "root"     // the device of the root file system (a disk image's): /dev/vda
)

// maxHostname is Linux's HOST_NAME_MAX.
const maxHostname = 64

// Guest is what a guest is told on its kernel command line.
type Guest struct {
	Hostname string       // "" leaves the kernel's default ("(none)")
	Address  netip.Prefix // eth0's address; the zero Prefix: eth0 is left down
	Gateway  netip.Addr   // the default route; needs Address, inside its network
	Hosts    []Host       // written to /etc/hosts after localhost and the guest itself
}

// Host is one /etc/hosts entry of a guest.
type Host struct {
	Name string
	Addr netip.Addr
}

// GuestCmdline returns the image's command line followed by the keys that tell
// the guest g (and, for a disk image booted with its kernel, where its
// root file system is: KeyRoot). Every problem is reported, each naming its field
// (hostname, address, gateway, hosts[i].name, hosts[i].addr), and a line
// longer than MaxCmdline is refused: many hosts are then better written
// into the guest through its agent.
func (img *Image) GuestCmdline(g Guest) (string, error) {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", field, fmt.Sprintf(format, args...)))
	}
	words := strings.Fields(img.Cmdline)
	if img.Kind == KindDisk && img.Kernel != "" {
		// The image's kernel and initramfs boot; the init switches to
		// the root file system on the VM's overlay.
		words = append(words, KeyRoot+"="+RootDevice)
	}
	if g.Hostname != "" {
		if msg := checkHostname(g.Hostname); msg != "" {
			bad("hostname", "%s", msg)
		}
		words = append(words, KeyHostname+"="+g.Hostname)
	}
	switch {
	case !g.Address.IsValid():
		if g.Gateway.IsValid() {
			bad("gateway", "given without an address")
		}
	case !g.Address.Addr().Is4():
		bad("address", "%s is not an IPv4 address", g.Address)
	case g.Address.Bits() < 1 || g.Address.Bits() > 32:
		bad("address", "%s: the prefix length must be 1 to 32", g.Address)
	default:
		words = append(words, KeyIP+"="+g.Address.String())
		if g.Gateway.IsValid() {
			switch {
			case !g.Gateway.Is4():
				bad("gateway", "%s is not an IPv4 address", g.Gateway)
			case !g.Address.Masked().Contains(g.Gateway) || g.Gateway == g.Address.Addr():
				bad("gateway", "%s is not another address of %s", g.Gateway, g.Address.Masked())
			default:
				words = append(words, KeyGateway+"="+g.Gateway.String())
			}
		}
	}
	if len(g.Hosts) > 0 {
		entries := make([]string, 0, len(g.Hosts))
		seen := map[string]int{}
		for i, h := range g.Hosts {
			field := fmt.Sprintf("hosts[%d]", i)
			if msg := checkHostname(h.Name); msg != "" {
				bad(field+".name", "%s", msg)
			} else if j, dup := seen[h.Name]; dup {
				bad(field+".name", "%s is listed twice (also hosts[%d])", h.Name, j)
			} else {
				seen[h.Name] = i
			}
			if !h.Addr.Is4() {
				bad(field+".addr", "%v is not an IPv4 address", h.Addr)
			}
			entries = append(entries, h.Name+"="+h.Addr.String())
		}
		words = append(words, KeyHosts+"="+strings.Join(entries, ","))
	}
	if err := errors.Join(errs...); err != nil {
		return "", err
	}
	line := strings.Join(words, " ")
	if len(line) > MaxCmdline {
		return "", fmt.Errorf("hosts: the command line would be %d bytes, more than Linux's %d: give the hosts through the guest agent instead",
			len(line), MaxCmdline)
	}
	return line, nil
}

// checkHostname returns what is wrong with a host name (RFC 1123 labels
// of letters, digits and '-', dot-separated, at most 64 bytes in all), or
// "".
func checkHostname(s string) string {
	if s == "" {
		return "must not be empty"
	}
	if len(s) > maxHostname {
		return fmt.Sprintf("must be at most %d bytes, not %d", maxHostname, len(s))
	}
	for _, label := range strings.Split(s, ".") {
		if label == "" || label[0] == '-' || label[len(label)-1] == '-' {
			return fmt.Sprintf("%q is not a host name (dot-separated labels, none empty or starting or ending with '-')", s)
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-') {
				return fmt.Sprintf("character %q is not allowed in a host name (use A-Z a-z 0-9 - .)", c)
			}
		}
	}
	return ""
}
