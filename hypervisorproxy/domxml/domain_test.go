package domxml

import (
	"reflect"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// errLines splits a joined error into its messages.
func errLines(err error) []string {
	if err == nil {
		return nil
	}
	return strings.Split(err.Error(), "\n")
}

func TestValidate(t *testing.T) {
	ok := Domain{Type: "test", Name: "vm", VCPUs: 1, MemoryMiB: 64}
	okQ := Domain{Type: "qemu", Name: "vm", VCPUs: 1, MaxVCPUs: 4, MemoryMiB: 128, MaxMemoryMiB: 1024}
	with := func(d Domain, f func(*Domain)) Domain { f(&d); return d }
	long := strings.Repeat("a", 65)

	for _, tc := range []struct {
		name string
		d    Domain
		want []string
	}{
		{"test ok", ok, nil},
		{"qemu ok", okQ, nil},
		{"qemu no headroom odd memory ok", with(okQ, func(d *Domain) { d.MemoryMiB, d.MaxMemoryMiB = 129, 0 }), nil},
		{"qemu max equal odd ok", with(okQ, func(d *Domain) { d.MemoryMiB, d.MaxMemoryMiB = 129, 129 }), nil},
		{"test odd headroom ok", with(ok, func(d *Domain) { d.MemoryMiB, d.MaxMemoryMiB = 63, 100 }), nil},
		{"64-char name ok", with(ok, func(d *Domain) { d.Name = long[:64] }), nil},
		{"name with all classes ok", with(ok, func(d *Domain) { d.Name = "A-z_0.9" }), nil},
		{"limits ok", with(ok, func(d *Domain) {
			d.VCPUs, d.MaxVCPUs, d.MemoryMiB, d.MaxMemoryMiB = 4096, 4096, 16<<20, 16<<20
		}), nil},
		{"unicode metadata ok", with(ok, func(d *Domain) { d.Job, d.Pool = "rendu-é", "日本" }), nil},
		{"qemu emulator ok", with(okQ, func(d *Domain) { d.Emulator = DefaultEmulator }), nil},
		{"qemu boot ok", with(okQ, func(d *Domain) {
			d.Kernel, d.Initrd, d.Cmdline = "/img/vmlinuz", "/img/initrd.img", "console=ttyS0 "+strings.Repeat("x", 2047-14)
			d.ConsoleLog, d.GuestAgent, d.AgentSocket = "/run/vm/console.log", true, "/"+strings.Repeat("s", 106)
		}), nil},
		{"qemu kernel only ok", with(okQ, func(d *Domain) { d.Kernel = "/vmlinuz" }), nil},
		{"qemu agent without socket ok", with(okQ, func(d *Domain) { d.GuestAgent = true }), nil},
		{"qemu quota ok", with(okQ, func(d *Domain) { d.CPUQuota = 0.25 }), nil},
		{"qemu smallest and largest quota ok", with(okQ, func(d *Domain) { d.CPUQuota = 0.01 }), nil},
		{"qemu whole core ok", with(okQ, func(d *Domain) { d.CPUQuota = 1 }), nil},
		{"qemu quota above one core", with(okQ, func(d *Domain) { d.CPUQuota = 1.5 }), []string{
			"cpu_quota: must be 0 (no limit) or a fraction of one core from 0.01 to 1, not 1.5",
		}},
		{"qemu quota below the kernel's least", with(okQ, func(d *Domain) { d.CPUQuota = 0.001 }), []string{
			"cpu_quota: must be 0 (no limit) or a fraction of one core from 0.01 to 1, not 0.001",
		}},
		{"qemu negative quota", with(okQ, func(d *Domain) { d.CPUQuota = -0.5 }), []string{
			"cpu_quota: must be 0 (no limit) or a fraction of one core from 0.01 to 1, not -0.5",
		}},
		{"test quota", with(ok, func(d *Domain) { d.CPUQuota = 0.5 }), []string{"cpu_quota: must be 0 for type test"}},

		{"zero value", Domain{}, []string{
			`type: must be test or qemu, not ""`,
			"name: must not be empty",
			"vcpus: must be >= 1",
			"memory_mib: must be >= 1",
		}},
		{"xen", with(ok, func(d *Domain) { d.Type = "xen" }), []string{`type: must be test or qemu, not "xen"`}},
		{"type is case-sensitive", with(ok, func(d *Domain) { d.Type = "QEMU" }), []string{`type: must be test or qemu, not "QEMU"`}},
		{"long name", with(ok, func(d *Domain) { d.Name = long }), []string{"name: must be at most 64 characters, not 65"}},
		{"dot name", with(ok, func(d *Domain) { d.Name = ".vm" }), []string{`name: must not start with '.'`}},
		{"dash name", with(ok, func(d *Domain) { d.Name = "-vm" }), []string{`name: must not start with '-'`}},
		{"slash in name", with(ok, func(d *Domain) { d.Name = "a/b" }), []string{
			`name: character '/' at byte 1 is not allowed (use A-Z a-z 0-9 . _ -)`,
		}},
		{"space in name", with(ok, func(d *Domain) { d.Name = "my vm" }), []string{
			`name: character ' ' at byte 2 is not allowed (use A-Z a-z 0-9 . _ -)`,
		}},
		{"unicode in name", with(ok, func(d *Domain) { d.Name = "vmé" }), []string{
			`name: character 'é' at byte 2 is not allowed (use A-Z a-z 0-9 . _ -)`,
		}},
		{"negative vcpus", with(ok, func(d *Domain) { d.VCPUs = -1 }), []string{"vcpus: must be >= 1"}},
		{"too many vcpus", with(ok, func(d *Domain) { d.VCPUs = 4097 }), []string{"vcpus: must be <= 4096"}},
		{"max_vcpus below vcpus", with(ok, func(d *Domain) { d.VCPUs, d.MaxVCPUs = 4, 2 }), []string{"max_vcpus: must be >= vcpus (4)"}},
		{"negative max_vcpus", with(ok, func(d *Domain) { d.MaxVCPUs = -2 }), []string{"max_vcpus: must be >= 0 (0 means vcpus)"}},
		{"too many max_vcpus", with(ok, func(d *Domain) { d.MaxVCPUs = 5000 }), []string{"max_vcpus: must be <= 4096"}},
		{"no memory", with(ok, func(d *Domain) { d.MemoryMiB = 0 }), []string{"memory_mib: must be >= 1"}},
		{"too much memory", with(ok, func(d *Domain) { d.MemoryMiB = 16<<20 + 1 }), []string{"memory_mib: must be <= 16777216 (16 TiB)"}},
		{"max memory below memory", with(ok, func(d *Domain) { d.MemoryMiB, d.MaxMemoryMiB = 128, 64 }), []string{
			"max_memory_mib: must be >= memory_mib (128)",
		}},
		{"negative max memory", with(ok, func(d *Domain) { d.MaxMemoryMiB = -1 }), []string{
			"max_memory_mib: must be >= 0 (0 means memory_mib)",
		}},
		{"too much max memory", with(ok, func(d *Domain) { d.MaxMemoryMiB = 1 << 30 }), []string{
			"max_memory_mib: must be <= 16777216 (16 TiB)",
		}},
		{"qemu too little memory", with(okQ, func(d *Domain) { d.MemoryMiB = 8 }), []string{"memory_mib: must be >= 16 for type qemu"}},
		{"qemu odd headroom", with(okQ, func(d *Domain) { d.MaxMemoryMiB = 1023 }), []string{
			"max_memory_mib: must exceed memory_mib by a multiple of 2 MiB for type qemu (QEMU's DIMM size granularity), not by 895",
		}},
		{"qemu odd boot memory", with(okQ, func(d *Domain) { d.MemoryMiB, d.MaxMemoryMiB = 129, 1025 }), []string{
			"memory_mib: must be a multiple of 2 MiB for type qemu with max_memory_mib > memory_mib, not 129",
		}},
		{"qemu odd boot memory and headroom", with(okQ, func(d *Domain) { d.MemoryMiB, d.MaxMemoryMiB = 129, 1024 }), []string{
			"memory_mib: must be a multiple of 2 MiB for type qemu with max_memory_mib > memory_mib, not 129",
			"max_memory_mib: must exceed memory_mib by a multiple of 2 MiB for type qemu (QEMU's DIMM size granularity), not by 895",
		}},
		{"control character in job", with(ok, func(d *Domain) { d.Job = "a\x07b" }), []string{
			"job: character U+0007 at byte 1 is not allowed (no control characters)",
		}},
		{"newline in pool", with(ok, func(d *Domain) { d.Pool = "a\nb" }), []string{
			"pool: character U+000A at byte 1 is not allowed (no control characters)",
		}},
		{"invalid UTF-8 in job", with(ok, func(d *Domain) { d.Job = "\xff" }), []string{"job: must be valid UTF-8"}},
		{"long pool", with(ok, func(d *Domain) { d.Pool = strings.Repeat("p", 257) }), []string{
			"pool: must be at most 256 bytes, not 257",
		}},
		{"noncharacter in pool", with(ok, func(d *Domain) { d.Pool = "\uFFFE" }), []string{
			"pool: character U+FFFE at byte 0 is not allowed (no control characters)",
		}},
		{"emulator for test", with(ok, func(d *Domain) { d.Emulator = "/usr/bin/qemu-system-x86_64" }), []string{
			"emulator: must be empty for type test",
		}},
		{"relative emulator", with(okQ, func(d *Domain) { d.Emulator = "qemu-system-x86_64" }), []string{
			`emulator: must be an absolute path, not "qemu-system-x86_64"`,
		}},
		{"boot for test", with(ok, func(d *Domain) {
			d.Kernel, d.Initrd, d.Cmdline, d.ConsoleLog, d.GuestAgent, d.AgentSocket = "/k", "/i", "c", "/l", true, "/s"
		}), []string{
			"kernel: must be empty for type test",
			"initrd: must be empty for type test",
			"cmdline: must be empty for type test",
			"console_log: must be empty for type test",
			"guest_agent: must be false for type test",
			"agent_socket: must be empty for type test",
		}},
		{"boot paths", with(okQ, func(d *Domain) {
			d.Kernel, d.Initrd, d.ConsoleLog, d.AgentSocket = "vmlinuz", "/img/../initrd", "/run//c.log", "/run/a.sock/"
			d.GuestAgent = true
		}), []string{
			`kernel: must be a clean absolute path, not "vmlinuz"`,
			`initrd: must be a clean absolute path, not "/img/../initrd"`,
			`console_log: must be a clean absolute path, not "/run//c.log"`,
			`agent_socket: must be a clean absolute path, not "/run/a.sock/"`,
		}},
		{"boot needs kernel", with(okQ, func(d *Domain) { d.Initrd, d.Cmdline, d.AgentSocket = "/i", "quiet", "/a.sock" }), []string{
			"initrd: needs kernel",
			"cmdline: needs kernel",
			"agent_socket: needs guest_agent",
		}},
		{"long and bad boot values", with(okQ, func(d *Domain) {
			d.Kernel, d.Initrd, d.Cmdline = "/"+strings.Repeat("k", 4096), "/i\x00", strings.Repeat("c", 2048)
			d.GuestAgent, d.AgentSocket = true, "/"+strings.Repeat("s", 107)
		}), []string{
			"kernel: must be at most 4096 bytes, not 4097",
			"initrd: character U+0000 at byte 2 is not allowed (no control characters)",
			"cmdline: must be at most 2047 bytes, not 2048",
			"agent_socket: must be at most 107 bytes, not 108",
		}},
		{"qemu disk ok", with(okQ, func(d *Domain) { d.Disk = "/var/lib/metasched/overlays/vm-1.qcow2" }), nil},
		{"disk for test", with(ok, func(d *Domain) { d.Disk = "/o/vm.qcow2" }), []string{"disk: must be empty for type test"}},
		{"bad disks", with(okQ, func(d *Domain) { d.Disk = "overlays/vm.qcow2" }), []string{
			`disk: must be a clean absolute path, not "overlays/vm.qcow2"`,
		}},
		{"disk with a control character", with(okQ, func(d *Domain) { d.Disk = "/o/\x01.qcow2" }), []string{
			"disk: character U+0001 at byte 3 is not allowed (no control characters)",
		}},
		{"seed ok", with(okQ, func(d *Domain) { d.Disk, d.Seed = "/o/vm.qcow2", "/o/vm.cidata.iso" }), nil},
		{"seed needs disk", with(okQ, func(d *Domain) { d.Seed = "/o/vm.cidata.iso" }), []string{"seed: needs disk"}},
		{"seed is the disk", with(okQ, func(d *Domain) { d.Disk, d.Seed = "/o/vm.qcow2", "/o/vm.qcow2" }), []string{"seed: must not be the disk"}},
		{"seed relative", with(okQ, func(d *Domain) { d.Disk, d.Seed = "/o/vm.qcow2", "vm.iso" }), []string{
			`seed: must be a clean absolute path, not "vm.iso"`,
		}},
		{"qemu bridge ok", with(okQ, func(d *Domain) { d.Bridge, d.MAC = "msbr-a", "52:54:0a:01:00:05" }), nil},
		{"qemu bridge without mac ok", with(okQ, func(d *Domain) { d.Bridge = "br0" }), nil},
		{"bridge for test", with(ok, func(d *Domain) { d.Bridge = "br0" }), []string{"bridge: must be empty for type test"}},
		{"bad network", with(okQ, func(d *Domain) { d.Bridge, d.MAC = "a-bridge-too-long", "52:54:0A:01:00:05" }), []string{
			"bridge: must be at most 15 bytes (a Linux interface name), not 17",
			`mac: must be six lower-case hex pairs like 52:54:00:0a:4d:01, not "52:54:0A:01:00:05"`,
		}},
		{"bad bridge character and multicast mac", with(okQ, func(d *Domain) { d.Bridge, d.MAC = "br/0", "01:00:5e:00:00:01" }), []string{
			`bridge: character '/' at byte 2 is not allowed (use A-Z a-z 0-9 . _ -)`,
			`mac: must be a unicast address (even first byte), not "01:00:5e:00:00:01"`,
		}},
		{"mac needs bridge", with(okQ, func(d *Domain) { d.MAC = "52:54:0a:01:00:05" }), []string{"mac: needs bridge"}},
		{"control character in cmdline", with(okQ, func(d *Domain) { d.Kernel, d.Cmdline = "/k", "quiet\nx" }), []string{
			"cmdline: character U+000A at byte 5 is not allowed (no control characters)",
		}},
		{"everything wrong", Domain{
			Type: "qemu", Name: "-x", VCPUs: 0, MaxVCPUs: 5000, MemoryMiB: 4, MaxMemoryMiB: -1,
			Job: "\x00", Pool: "\xfe", Emulator: "qemu",
		}, []string{
			`name: must not start with '-'`,
			"vcpus: must be >= 1",
			"max_vcpus: must be <= 4096",
			"memory_mib: must be >= 16 for type qemu",
			"max_memory_mib: must be >= 0 (0 means memory_mib)",
			"job: character U+0000 at byte 0 is not allowed (no control characters)",
			"pool: must be valid UTF-8",
			`emulator: must be an absolute path, not "qemu"`,
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.d.Validate()
			got := errLines(err)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Validate() messages mismatch (-want +got):\n%s", diff)
			}
			fields := []string{"type", "name", "vcpus", "max_vcpus", "memory_mib", "max_memory_mib", "job", "pool", "emulator",
				"kernel", "initrd", "cmdline", "console_log", "guest_agent", "agent_socket", "disk", "seed", "bridge", "mac", "cpu_quota"}
			for _, msg := range got {
				named := false
				for _, f := range fields {
					named = named || strings.HasPrefix(msg, f+": ")
				}
				if !named {
					t.Errorf("message %q does not start with a field name", msg)
				}
				if strings.TrimRight(msg, ".!") != msg || strings.ToLower(msg[:1]) != msg[:1] {
					t.Errorf("message %q: want lowercase, no trailing punctuation", msg)
				}
			}
			// XML refuses exactly what Validate refuses.
			x, xerr := tc.d.XML()
			if diff := cmp.Diff(got, errLines(xerr)); diff != "" {
				t.Errorf("XML() error differs from Validate() (-validate +xml):\n%s", diff)
			}
			if (xerr == nil) != (x != "") {
				t.Errorf("XML() = %q, %v: want a document or an error", x, xerr)
			}
		})
	}
}

func TestNodeValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		n    Node
		want []string
	}{
		{"ok", Node{CPUs: 1, MemoryMiB: 1}, nil},
		{"ok mhz", Node{CPUs: 4096, MemoryMiB: 16 << 20, MHz: 3000}, nil},
		{"zero", Node{}, []string{"cpus: must be >= 1", "memory_mib: must be >= 1"}},
		{"too big", Node{CPUs: 4097, MemoryMiB: 16<<20 + 1, MHz: -1}, []string{
			"cpus: must be <= 4096",
			"memory_mib: must be <= 16777216 (16 TiB)",
			"mhz: must be >= 0 (0 means 2400)",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, errLines(tc.n.Validate())); diff != "" {
				t.Errorf("Validate() messages mismatch (-want +got):\n%s", diff)
			}
			_, err := tc.n.XML()
			if diff := cmp.Diff(tc.want, errLines(err)); diff != "" {
				t.Errorf("XML() error mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDIMM(t *testing.T) {
	want := "<memory model='dimm'>\n  <target>\n    <size unit='MiB'>2048</size>\n    <node>1</node>\n  </target>\n</memory>\n"
	if diff := cmp.Diff(want, DIMM(2048, 1)); diff != "" {
		t.Errorf("DIMM(2048, 1) mismatch (-want +got):\n%s", diff)
	}
}

// The metadata struct tag in parse.go must spell MetadataNS.
func TestMetadataNSTag(t *testing.T) {
	f, ok := reflect.TypeFor[xmlDomain]().FieldByName("Metadata")
	if !ok {
		t.Fatal("xmlDomain has no Metadata field")
	}
	vm, ok := f.Type.FieldByName("VM")
	if !ok {
		t.Fatal("Metadata has no VM field")
	}
	if got, want := vm.Tag.Get("xml"), MetadataNS+" vm"; got != want {
		t.Errorf("tag %q, want %q", got, want)
	}
}

// XML is deterministic: the same Domain gives the same bytes.
func TestXMLDeterministic(t *testing.T) {
	d := Domain{Type: "qemu", Name: "tiny", VCPUs: 1, MaxVCPUs: 4, MemoryMiB: 128, MaxMemoryMiB: 1024, Job: "j", Pool: "p"}
	first, err := d.XML()
	if err != nil {
		t.Fatal(err)
	}
	for range 20 {
		got, err := d.XML()
		if err != nil {
			t.Fatal(err)
		}
		if got != first {
			t.Fatalf("XML() changed between calls:\n%s\n%s", first, got)
		}
	}
}
