// Package domxml builds and reads the libvirt XML documents of the hypervisor
// proxy: the domain XML of a VM, the host file of libvirt's test driver, and
// the device XML of a memory DIMM. Every function is pure and deterministic
// (no I/O, no libvirt, no cgo), so the libvirt driver can be table-tested
// and golden-tested without a hypervisor.
//
// # Building a domain
//
// A [Domain] is what the agent asks for: a type, a name, current and maximum
// vCPUs, current and maximum memory, and the job and pool the VM belongs to.
// [Domain.Validate] reports every problem at once (joined with
// [errors.Join]), each one naming its field as the agent's JSON API spells it
// ("vcpus: must be >= 1", "max_memory_mib: must be >= memory_mib (128)").
// [Domain.XML] validates and returns the XML to pass to libvirt's
// DomainDefineXML or DomainCreateXML.
//
// Two types are supported, and they grow differently:
//
//   - "test", libvirt's test driver (test:///path/host.xml). The domain is
//     defined with <memory> at the maximum and <currentMemory> at the current
//     size, and <vcpu current='CUR'>MAX</vcpu>. The driver enforces the
//     maxima and accepts SetVcpusFlags and SetMemoryFlags with
//     VIR_DOMAIN_AFFECT_LIVE anywhere within them, so resizing is a single
//     call in either direction.
//
//   - "qemu", QEMU with TCG (no KVM needed). The guest boots into SeaBIOS
//     with no disk, which is enough for a VM whose point is to exist, be
//     resized and be migrated. vCPUs are hot-plugged up to the <vcpu>
//     maximum. Memory is different: <memory> and <currentMemory> are both
//     the boot memory, and when MaxMemoryMiB exceeds MemoryMiB the XML also
//     carries <maxMemory slots='16'> and a NUMA cell, which together let
//     the driver grow the guest live by attaching one DIMM (see [DIMM]) per
//     growth step, up to 16 steps.
//
// Why DIMM hot-plug and not the balloon: a balloon never takes a guest above
// <memory>, the RAM it booted with; it can only lend part of that RAM back
// to the host, and only a balloon driver inside the guest does the lending.
// A guest without one, like this SeaBIOS guest, ignores the request:
// SetMemoryFlags returns success and nothing changes, so a balloon resize is
// silently lost. Growth therefore needs headroom above the boot memory and
// a way to add it that does not depend on the guest: a DIMM, which QEMU
// plugs into the machine itself. QEMU's DIMM backend refuses sizes that are
// not multiples of 2 MiB, which is why, for qemu with memory headroom,
// Validate requires memory_mib and the headroom (max_memory_mib −
// memory_mib) to be even.
//
// A qemu domain may also boot a guest: Kernel, Initrd and Cmdline become
// <kernel>, <initrd> and <cmdline> under <os> (direct kernel boot, no
// firmware boot loader); Disk gives it one qcow2 disk, its vda on virtio
// (<disk type='file' device='disk'>, the VM's copy-on-write overlay of a
// disk image), booted from (<boot dev='hd'/>) when there is no kernel;
// ConsoleLog adds the first serial port
// appended to a file (<serial type='file'>: the guest's console, when its
// command line says console=ttyS0); GuestAgent adds the channel of QEMU's
// guest agent (<channel type='unix'> to the virtio port named
// org.qemu.guest_agent.0), on the unix socket AgentSocket or, when that is
// empty, on one libvirt chooses under its own directory. Paths are
// absolute and clean, the command line at most 2,047 bytes (Linux's limit
// on x86) without control characters, the socket path at most 107 bytes.
// Bridge gives the guest one virtio network interface, a port of that
// Linux bridge of the host (<interface type='bridge'>), with the MAC
// address MAC when it is set.
//
// CPUQuota (qemu only) caps what each vCPU thread of the guest may use:
// <cputune><period>100000</period><quota>Q</quota></cputune> with Q the
// quota times the 100 ms period (0.25: 25 ms of every 100 ms, a quarter
// of a core), which libvirt enforces through the cpu cgroup controller
// (it needs one: a session daemon refuses the domain) and applies to
// vCPUs plugged later too. [Parse] reads it back as a fraction.
//
// Both types record the job and the pool in <metadata>, in the
// [MetadataNS] namespace, so that an agent restarted from scratch can tell
// whose VMs are on its hosts.
//
// # Hosts for the test driver
//
// [Node.XML] writes the smallest host file libvirt's test driver accepts: one
// NUMA node, one socket, CPUs cores at MHz (2400 when zero), and the memory
// in KiB. The driver then reports that host from NodeGetInfo, which lets the
// agent's inventory be tested with made-up hosts of any size.
//
// # Reading a domain back
//
// [Parse] reads a domain XML as libvirt returns it from GetXMLDesc into a
// [Desc]. Libvirt rewrites sizes in KiB and, for qemu, counts hot-plugged
// DIMMs in <memory>; Parse accepts every unit libvirt does (b, bytes, KB,
// KiB, MB, MiB, GB, GiB, ... with libvirt's default of KiB), converts to MiB
// rounding down, and separates the boot memory from the DIMMs. The agent
// uses it to read back the maxima, the number of DIMMs and free slots, and
// the job and pool of VMs it did not create in this run; it also reads the
// kernel, initrd, command line, console file and guest agent channel.
//
// Parse(d.XML()) gives back d's fields (with MaxVCPUs and MaxMemoryMiB
// defaulted), which the tests check for both types.
//
// The design is described in docs/internals/agent.md of the
// repository, "Booting a VM", and in docs/internals/images.md, "The domain
// and the guest agent".
package domxml
