package taskfarm

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// The guest executor's hostfile, as it writes it.
const goodHostfile = `10.77.1.12 slots=2 # name=j-1-a1-m site=spain role=master
10.77.1.13 slots=2 # name=j-1-a1-w1 site=spain role=worker

# a comment line
10.77.2.10 # name=j-1-a1-w2 site=latam-a role=worker other=words ignored
::ffff:10.77.2.11 slots=1
`

func TestParseHostfile(t *testing.T) {
	hosts, err := ParseHostfile("hostfile", []byte(goodHostfile))
	if err != nil {
		t.Fatal(err)
	}
	want := []Host{
		{Address: netip.MustParseAddr("10.77.1.12"), Slots: 2, Name: "j-1-a1-m", Site: "spain", Role: "master"},
		{Address: netip.MustParseAddr("10.77.1.13"), Slots: 2, Name: "j-1-a1-w1", Site: "spain", Role: "worker"},
		{Address: netip.MustParseAddr("10.77.2.10"), Slots: 1, Name: "j-1-a1-w2", Site: "latam-a", Role: "worker"},
		{Address: netip.MustParseAddr("10.77.2.11"), Slots: 1},
	}
	if d := cmp.Diff(want, hosts, cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); d != "" {
		t.Errorf("hosts (-want +got):\n%s", d)
	}
}

// badHostfiles are hostfiles ParseHostfile refuses, with what the error
// names; FuzzParseHostfile starts from them.
var badHostfiles = []struct{ name, data, want string }{
	{"name, not address", "render-42-0 slots=2 # site=spain\n", `hostfile:1: address: "render-42-0" is not an IP address`},
	{"twice", "10.0.0.1\n10.0.0.2\n10.0.0.1 slots=2\n", "hostfile:3: address: 10.0.0.1 is already on line 1"},
	{"stray word", "10.0.0.1 max_slots=4\n", `hostfile:1: slots: "max_slots=4": only slots=N may follow the address`},
	{"slots 0", "10.0.0.1 slots=0\n", `hostfile:1: slots: "0" is not a number from 1 to 65535`},
	{"slots word", "\n\n10.0.0.1 slots=two\n", `hostfile:3: slots: "two"`},
	{"empty name", "10.0.0.1 # name= site=a\n", `hostfile:1: name: "": want 1 to 255 bytes`},
	{"long site", "10.0.0.1 # site=" + strings.Repeat("s", 256) + "\n", "hostfile:1: site: "},
	{"bad role", "10.0.0.1 # role=boss\n", `hostfile:1: role: "boss": want master or worker`},
	{"zone", "fe80::1%eth0\n", `hostfile:1: address: "fe80::1%eth0" is not an IP address`},
	{"not utf-8", "10.0.0.1 # name=\xff\n", "hostfile: not UTF-8"},
}

func TestParseHostfileBad(t *testing.T) {
	for _, c := range badHostfiles {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseHostfile("hostfile", []byte(c.data))
			if !errors.Is(err, ErrHostfile) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("err = %v, want ErrHostfile saying %q", err, c.want)
			}
		})
	}
	if _, err := ParseHostfile("hostfile", make([]byte, MaxHostfileBytes+1)); !errors.Is(err, ErrHostfile) {
		t.Errorf("oversized: %v", err)
	}
}

// FuzzParseHostfile: any bytes give hosts whose fields keep their rules,
// and that parse back from their own lines, or ErrHostfile.
func FuzzParseHostfile(f *testing.F) {
	f.Add([]byte(goodHostfile))
	for _, c := range badHostfiles {
		f.Add([]byte(c.data))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		hosts, err := ParseHostfile("hostfile", data)
		if err != nil {
			if !errors.Is(err, ErrHostfile) {
				t.Fatalf("err = %v, not ErrHostfile", err)
			}
			return
		}
		var b strings.Builder
		for _, h := range hosts {
			if !h.Address.IsValid() || h.Slots < 1 || (h.Role != "" && h.Role != "master" && h.Role != "worker") {
				t.Fatalf("host %+v", h)
			}
			fmt.Fprintf(&b, "%s slots=%d #", h.Address, h.Slots)
			for _, kv := range [][2]string{{"name", h.Name}, {"site", h.Site}, {"role", h.Role}} {
				if strings.ContainsAny(kv[1], " \t\n#") {
					return // a word the comment cuts differently: nothing to compare
				}
				if kv[1] != "" {
					fmt.Fprintf(&b, " %s=%s", kv[0], kv[1])
				}
			}
			b.WriteString("\n")
		}
		back, err := ParseHostfile("again", []byte(b.String()))
		if err != nil {
			t.Fatalf("hosts %+v written as\n%s do not parse: %v", hosts, b.String(), err)
		}
		if d := cmp.Diff(hosts, back, cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); d != "" {
			t.Fatalf("again (-first +again):\n%s", d)
		}
	})
}
