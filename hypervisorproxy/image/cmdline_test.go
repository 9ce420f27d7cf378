package image

import (
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestGuestCmdline(t *testing.T) {
	img := &Image{Cmdline: "console=ttyS0  quiet"}
	got, err := img.GuestCmdline(Guest{
		Hostname: "j-7-m",
		Address:  netip.MustParsePrefix("10.1.0.5/24"),
		Gateway:  netip.MustParseAddr("10.1.0.1"),
		Hosts:    []Host{{"j-7-m", netip.MustParseAddr("10.1.0.5")}, {"j-7-w1.site-b", netip.MustParseAddr("10.2.0.9")}},
	})
	want := "console=ttyS0 quiet metasched.hostname=j-7-m metasched.ip=10.1.0.5/24 metasched.gw=10.1.0.1 " +
		"metasched.hosts=j-7-m=10.1.0.5,j-7-w1.site-b=10.2.0.9"
	if err != nil || got != want {
		t.Errorf("GuestCmdline = %q, %v\nwant %q", got, err, want)
	}
	if got, err := img.GuestCmdline(Guest{}); err != nil || got != "console=ttyS0 quiet" {
		t.Errorf("no keys: %q, %v", got, err)
	}

	_, err = img.GuestCmdline(Guest{
		Hostname: "vm_1",
		Address:  netip.MustParsePrefix("10.1.0.5/24"),
		Gateway:  netip.MustParseAddr("10.9.0.1"),
		Hosts: []Host{
			{"a", netip.MustParseAddr("10.1.0.6")}, {"a", netip.MustParseAddr("2001:db8::1")},
			{"-b", netip.MustParseAddr("10.1.0.7")}, {"", netip.Addr{}}, {strings.Repeat("x", 65), netip.MustParseAddr("10.1.0.8")},
		},
	})
	wantErrs := []string{
		"hostname: character '_' is not allowed in a host name (use A-Z a-z 0-9 - .)",
		"gateway: 10.9.0.1 is not another address of 10.1.0.0/24",
		"hosts[1].name: a is listed twice (also hosts[0])",
		"hosts[1].addr: 2001:db8::1 is not an IPv4 address",
		`hosts[2].name: "-b" is not a host name (dot-separated labels, none empty or starting or ending with '-')`,
		"hosts[3].name: must not be empty",
		"hosts[3].addr: invalid IP is not an IPv4 address",
		"hosts[4].name: must be at most 64 bytes, not 65",
	}
	if err == nil {
		t.Fatal("no error")
	}
	if diff := cmp.Diff(wantErrs, strings.Split(err.Error(), "\n")); diff != "" {
		t.Errorf("errors (-want +got):\n%s", diff)
	}
	for _, tc := range []struct {
		g    Guest
		want string
	}{
		{Guest{Gateway: netip.MustParseAddr("10.0.0.1")}, "gateway: given without an address"},
		{Guest{Address: netip.MustParsePrefix("2001:db8::5/64")}, "address: 2001:db8::5/64 is not an IPv4 address"},
		{Guest{Address: netip.MustParsePrefix("10.0.0.5/0")}, "address: 10.0.0.5/0: the prefix length must be 1 to 32"},
		{Guest{Address: netip.MustParsePrefix("10.0.0.5/24"), Gateway: netip.MustParseAddr("10.0.0.5")},
			"gateway: 10.0.0.5 is not another address of 10.0.0.0/24"},
	} {
		if _, err := img.GuestCmdline(tc.g); err == nil || err.Error() != tc.want {
			t.Errorf("%+v: %v, want %q", tc.g, err, tc.want)
		}
	}

	// Too many hosts for Linux's command line.
	var many []Host
	for i := range 120 {
		many = append(many, Host{Name: "host-" + strings.Repeat("n", 3) + string(rune('a'+i%26)) + string(rune('a'+i/26)),
			Addr: netip.AddrFrom4([4]byte{10, 0, byte(i / 250), byte(i%250 + 1)})})
	}
	_, err = img.GuestCmdline(Guest{Hosts: many})
	if err == nil || !strings.HasPrefix(err.Error(), "hosts: the command line would be ") ||
		!strings.HasSuffix(err.Error(), "bytes, more than Linux's 2047: give the hosts through the guest agent instead") {
		t.Errorf("120 hosts: %v", err)
	}
}

// The init's cmdline.sh, run by busybox's sh on this machine, reads the
// keys GuestCmdline writes and writes the hosts file from them.
func TestInitReadsCmdline(t *testing.T) {
	if _, err := os.Stat(BusyboxPath); err != nil {
		t.Fatalf("%v (Debian package busybox-static; make test installs it)", err)
	}
	img := &Image{Cmdline: BaseCmdline}
	for _, tc := range []struct {
		name  string
		g     Guest
		extra string
		vars  string
		hosts string
	}{
		{"all keys", Guest{
			Hostname: "j-7-m", Address: netip.MustParsePrefix("10.1.0.5/24"), Gateway: netip.MustParseAddr("10.1.0.1"),
			Hosts: []Host{{"j-7-w1", netip.MustParseAddr("10.1.0.6")}, {"j-7-w2.b", netip.MustParseAddr("10.2.0.9")}},
		}, " metasched.future=1 *",
			"j-7-m|10.1.0.5/24|10.1.0.1|j-7-w1=10.1.0.6,j-7-w2.b=10.2.0.9|\nmetasched-init: unknown key metasched.future ignored\n",
			"127.0.0.1 localhost\n10.1.0.5 j-7-m\n10.1.0.6 j-7-w1\n10.2.0.9 j-7-w2.b\n"},
		{"name only", Guest{Hostname: "solo"}, "", "solo||||\n", "127.0.0.1 localhost\n127.0.1.1 solo\n"},
		{"nothing", Guest{}, "", "||||\n", "127.0.0.1 localhost\n"},
		{"root on the disk", Guest{Hostname: "d1"}, " " + KeyRoot + "=" + RootDevice, "d1||||/dev/vda\n", "127.0.0.1 localhost\n127.0.1.1 d1\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			line, err := img.GuestCmdline(tc.g)
			if err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "cmdline"), []byte(line+tc.extra+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "cmdline.sh"), []byte(cmdlineScript), 0o644); err != nil {
				t.Fatal(err)
			}
			// The extra "*" must not be globbed into the names of the files here.
			cmd := exec.Command(BusyboxPath, "sh", "-c", `. ./cmdline.sh; read_cmdline cmdline
echo "$ms_hostname|$ms_ip|$ms_gw|$ms_hosts|$ms_root" >vars; write_hosts hosts`)
			cmd.Dir = dir
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			vars, err := os.ReadFile(filepath.Join(dir, "vars"))
			if err != nil {
				t.Fatal(err)
			}
			hosts, err := os.ReadFile(filepath.Join(dir, "hosts"))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.vars, string(vars)+string(out)); diff != "" {
				t.Errorf("variables and messages (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.hosts, string(hosts)); diff != "" {
				t.Errorf("hosts (-want +got):\n%s", diff)
			}
		})
	}
}
