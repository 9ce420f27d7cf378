package domxml

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// bootDomain boots a kernel, logs its console and has a guest agent.
var bootDomain = Domain{
	Type: "qemu", Name: "j-7-m", VCPUs: 1, MemoryMiB: 128, Job: "j-7", Pool: "sim",
	Kernel: "/var/lib/metasched/images/3d74c468018e71c5/vmlinuz", Initrd: "/var/lib/metasched/images/3d74c468018e71c5/initrd.img",
	Cmdline:    "console=ttyS0 quiet metasched.hostname=j-7-m metasched.ip=10.1.0.5/24",
	ConsoleLog: "/var/lib/metasched/vms/j-7-m/console.log", GuestAgent: true,
}

// Parse reads back what Domain.XML writes of a direct kernel boot, its
// console and its guest agent.
func TestParseBootRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name string
		d    Domain
		want Desc
	}{
		{"boot", bootDomain, Desc{
			Type: "qemu", Name: "j-7-m", VCPUs: 1, MaxVCPUs: 1, MemoryMiB: 128, MaxMemoryMiB: 128, BootMemoryMiB: 128,
			Job: "j-7", Pool: "sim", Kernel: bootDomain.Kernel, Initrd: bootDomain.Initrd, Cmdline: bootDomain.Cmdline,
			ConsoleLog: bootDomain.ConsoleLog, GuestAgent: true,
		}},
		{"disk", func() Domain { d := bootDomain; d.Disk = "/o/j-7-m.qcow2"; return d }(), Desc{
			Type: "qemu", Name: "j-7-m", VCPUs: 1, MaxVCPUs: 1, MemoryMiB: 128, MaxMemoryMiB: 128, BootMemoryMiB: 128,
			Job: "j-7", Pool: "sim", Kernel: bootDomain.Kernel, Initrd: bootDomain.Initrd, Cmdline: bootDomain.Cmdline,
			ConsoleLog: bootDomain.ConsoleLog, GuestAgent: true, Disk: "/o/j-7-m.qcow2",
		}},
		{"socket, escapes", Domain{
			Type: "qemu", Name: "q", VCPUs: 1, MemoryMiB: 64, Kernel: "/k & 'q'", Cmdline: `a="<b>" é`,
			GuestAgent: true, AgentSocket: "/run/q.agent",
		}, Desc{
			Type: "qemu", Name: "q", VCPUs: 1, MaxVCPUs: 1, MemoryMiB: 64, MaxMemoryMiB: 64, BootMemoryMiB: 64,
			Kernel: "/k & 'q'", Cmdline: `a="<b>" é`, GuestAgent: true, AgentSocket: "/run/q.agent",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			x, err := tc.d.XML()
			if err != nil {
				t.Fatal(err)
			}
			got, err := Parse(x)
			if err != nil {
				t.Fatalf("Parse: %v\n%s", err, x)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Parse(XML()) mismatch (-want +got):\n%s", diff)
			}
		})
	}
}
