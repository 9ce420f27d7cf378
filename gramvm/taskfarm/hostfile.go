package taskfarm

import (
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"unicode/utf8"
)

// ErrHostfile: a hostfile that does not parse.
var ErrHostfile = errors.New("invalid hostfile")

// MaxHostfileBytes bounds a hostfile that ParseHostfile reads.
const MaxHostfileBytes = 1 << 20

// Host is one VM of the job's hostfile, the file the guest executor
// writes into every VM (OpenMPI syntax by address, one VM a line, the
// master first):
//
//	10.77.1.12 slots=2 # name=j-1-a1-m site=spain role=master
//
// The master names the workers of its summary by their address with it.
type Host struct {
	Address netip.Addr
	Slots   int
	Name    string
	Site    string
	Role    string
}

// ParseHostfile reads a hostfile: each line an IP address, optionally
// slots=N (N ≥ 1, default 1), then optionally a comment whose
// name=, site= and role= words describe the VM (other words of the
// comment are left alone). Blank lines and lines that are only a
// comment are skipped. An address given twice, anything else before the
// comment, a bad slots, name, site or role are errors naming the line
// and the field; file is the name errors give.
func ParseHostfile(file string, data []byte) ([]Host, error) {
	if len(data) > MaxHostfileBytes {
		return nil, fmt.Errorf("%w: %s: %d bytes, more than %d", ErrHostfile, file, len(data), MaxHostfileBytes)
	}
	if !utf8.Valid(data) {
		return nil, fmt.Errorf("%w: %s: not UTF-8", ErrHostfile, file)
	}
	var hosts []Host
	seen := map[netip.Addr]int{}
	for i, line := range strings.Split(string(data), "\n") {
		bad := func(field, format string, a ...any) error {
			return fmt.Errorf("%w: %s:%d: %s: %s", ErrHostfile, file, i+1, field, fmt.Sprintf(format, a...))
		}
		spec, comment, _ := strings.Cut(line, "#")
		words := strings.Fields(spec)
		if len(words) == 0 {
			continue
		}
		addr, err := netip.ParseAddr(words[0])
		if err != nil || addr.Zone() != "" {
			return nil, bad("address", "%q is not an IP address", clip(words[0]))
		}
		addr = addr.Unmap()
		if prev, ok := seen[addr]; ok {
			return nil, bad("address", "%s is already on line %d", addr, prev)
		}
		seen[addr] = i + 1
		h := Host{Address: addr, Slots: 1}
		for _, w := range words[1:] {
			v, ok := strings.CutPrefix(w, "slots=")
			if !ok {
				return nil, bad("slots", "%q: only slots=N may follow the address", clip(w))
			}
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 || n > 1<<16-1 {
				return nil, bad("slots", "%q is not a number from 1 to 65535", clip(v))
			}
			h.Slots = n
		}
		for _, w := range strings.Fields(comment) {
			k, v, ok := strings.Cut(w, "=")
			if !ok {
				continue
			}
			var dst *string
			switch k {
			case "name":
				dst = &h.Name
			case "site":
				dst = &h.Site
			case "role":
				dst = &h.Role
			default:
				continue
			}
			if v == "" || len(v) > MaxName {
				return nil, bad(k, "%q: want 1 to %d bytes", clip(v), MaxName)
			}
			*dst = v
		}
		if h.Role != "" && h.Role != "master" && h.Role != "worker" {
			return nil, bad("role", "%q: want master or worker", clip(h.Role))
		}
		hosts = append(hosts, h)
	}
	return hosts, nil
}

// clip shortens a string quoted in an error.
func clip(s string) string {
	if len(s) <= 64 {
		return s
	}
	n := 64
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
