package domxml

import (
	"errors"
	"fmt"
	"math"
	"net"
	"path/filepath"
	"strconv"
	"unicode"
	"unicode/utf8"
)

// MetadataNS is the XML namespace of the <metasched:vm> element that
// records a VM's job and pool in the domain's <metadata>.
const MetadataNS = "https://metasched.github.io/xmlns/vm/1"

// Domain types.
const (
	TypeTest = "test" // libvirt's test driver
	TypeQEMU = "qemu" // QEMU with TCG
)

// DefaultEmulator is the QEMU binary of a qemu domain whose Emulator is empty.
const DefaultEmulator = "/usr/bin/qemu-system-x86_64"

// HotplugSlots is the number of DIMM slots (<maxMemory slots='16'>) of a
// qemu domain with memory headroom: it can grow in at most this many steps.
const HotplugSlots = 16

// Limits checked by Validate.
const (
	limitVCPUs      = 4096
	limitMemoryMiB  = 16 << 20 // 16 TiB
	minQEMUMiB      = 16       // smallest boot memory of a qemu domain
	limitNameLen    = 64
	limitLabelBytes = 256 // job and pool
	limitPathBytes  = 4096
	// LimitCmdlineBytes is the longest kernel command line: Linux's
	// COMMAND_LINE_SIZE on x86 is 2048 bytes, its NUL included.
	LimitCmdlineBytes = 2047
	// LimitSocketBytes is the longest unix socket path (sun_path holds
	// 108 bytes, its NUL included).
	LimitSocketBytes = 107
)

// AgentChannel is the virtio port name of QEMU's guest agent: qemu-ga in
// the guest opens the port of that name.
const AgentChannel = "org.qemu.guest_agent.0"

// Domain is what the agent asks for.
type Domain struct {
	Type         string // "test" (libvirt's test driver) or "qemu" (QEMU TCG)
	Name         string
	VCPUs        int    // current
	MaxVCPUs     int    // 0 means VCPUs
	MemoryMiB    int    // current; for qemu, the boot memory
	MaxMemoryMiB int    // 0 means MemoryMiB
	Job, Pool    string // recorded in <metadata>, may be empty
	Emulator     string // qemu only; "" means /usr/bin/qemu-system-x86_64

	// Direct kernel boot (qemu only): the guest boots Kernel with Initrd
	// and Cmdline instead of sitting in the firmware. Absolute paths on
	// the host of the hypervisor, readable by its QEMU processes.
	Kernel, Initrd, Cmdline string
	// ConsoleLog is a file the guest's first serial port (its console)
	// is appended to (qemu only).
	ConsoleLog string
	// GuestAgent adds the channel of QEMU's guest agent (a virtio port
	// named AgentChannel); AgentSocket is its unix socket on the host,
	// "" letting libvirt choose one under its own directory (qemu only).
	GuestAgent  bool
	AgentSocket string

	// Disk is the guest's one disk, its vda on virtio: a qcow2 file (the
	// VM's own copy-on-write overlay of a disk image), an absolute path
	// on the host of the hypervisor (qemu only). Without a kernel the
	// guest boots from it (<boot dev='hd'/>).
	Disk string
	// Seed is a read-only raw disk, the guest's vdb on virtio: a VM's
	// cloud-init NoCloud seed (an ISO 9660 volume labelled cidata), an
	// absolute path on the host of the hypervisor (qemu only; needs Disk).
	Seed string

	// Bridge puts the guest's one network interface (virtio, its eth0) on
	// this Linux bridge of the host, with the MAC address MAC (qemu only;
	// MAC "" lets libvirt choose one).
	Bridge, MAC string

	// CPUQuota is the fraction of one host core each vCPU thread may use
	// in every period of QuotaPeriodMicros (qemu only; 0: no limit): the
	// domain gets <cputune> with <period> and <quota> = CPUQuota × the
	// period, which libvirt enforces with the cpu cgroup controller.
	CPUQuota float64
}

// QuotaPeriodMicros is the period of a CPU quota, in microseconds (the
// kernel's default CFS period).
const QuotaPeriodMicros = 100000

// MinCPUQuota and MaxCPUQuota bound Domain.CPUQuota: the kernel takes no
// quota below 1 ms per period, and a vCPU thread cannot use more than one
// core.
const (
	MinCPUQuota = 0.01
	MaxCPUQuota = 1.0
)

// CheckCPUQuota returns what is wrong with a CPU quota (0, or from
// MinCPUQuota to MaxCPUQuota), or "".
func CheckCPUQuota(q float64) string {
	if q == 0 {
		return ""
	}
	if math.IsNaN(q) || q < MinCPUQuota || q > MaxCPUQuota {
		return fmt.Sprintf("must be 0 (no limit) or a fraction of one core from %g to %g, not %g", MinCPUQuota, MaxCPUQuota, q)
	}
	return ""
}

// quotaMicros is the <quota> of a CPU quota q.
func quotaMicros(q float64) int {
	return int(math.Round(q * QuotaPeriodMicros))
}

// maxVCPUs is MaxVCPUs with its default applied.
func (d Domain) maxVCPUs() int {
	if d.MaxVCPUs == 0 {
		return d.VCPUs
	}
	return d.MaxVCPUs
}

// maxMemoryMiB is MaxMemoryMiB with its default applied.
func (d Domain) maxMemoryMiB() int {
	if d.MaxMemoryMiB == 0 {
		return d.MemoryMiB
	}
	return d.MaxMemoryMiB
}

// Validate reports every problem of d, joined with errors.Join, each one
// starting with the field's name in the agent's JSON API (type, name, vcpus,
// max_vcpus, memory_mib, max_memory_mib, job, pool, emulator, kernel,
// initrd, cmdline, console_log, guest_agent, agent_socket, disk, seed,
// bridge, mac, cpu_quota). It returns nil when d is valid.
//
// Names are 1 to 64 characters of A-Z a-z 0-9 . _ -, not starting with '.'
// or '-'. vCPUs are 1 to 4096 and memory 1 MiB to 16 TiB, with maxima not
// below the current values. A qemu domain needs at least 16 MiB, and when it
// has memory headroom both memory_mib and the headroom must be multiples of
// 2 MiB, the granularity of QEMU's DIMMs. Job and pool are at most 256
// bytes of UTF-8 without control characters; emulator is an absolute path,
// for qemu only. So are kernel, initrd, console_log, agent_socket, disk and seed (which needs disk),
// which must also be clean (no . or .. elements, no repeated /): initrd
// and cmdline need a kernel, agent_socket needs guest_agent and is at
// most 107 bytes (a unix socket path), and cmdline is at most 2,047
// bytes without control characters. Bridge (qemu only) is a Linux
// interface name (CheckBridge); mac needs bridge and is a unicast MAC
// address written in lower case. cpu_quota (qemu only) is 0 or from 0.01
// to 1 (CheckCPUQuota).
func (d Domain) Validate() error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", field, fmt.Sprintf(format, args...)))
	}

	qemu := d.Type == TypeQEMU
	switch d.Type {
	case TypeTest, TypeQEMU:
	default:
		bad("type", "must be %s or %s, not %q", TypeTest, TypeQEMU, d.Type)
	}

	if msg := checkName(d.Name); msg != "" {
		bad("name", "%s", msg)
	}

	// vCPUs.
	vcpusOK := true
	switch {
	case d.VCPUs < 1:
		bad("vcpus", "must be >= 1")
		vcpusOK = false
	case d.VCPUs > limitVCPUs:
		bad("vcpus", "must be <= %d", limitVCPUs)
		vcpusOK = false
	}
	switch {
	case d.MaxVCPUs < 0:
		bad("max_vcpus", "must be >= 0 (0 means vcpus)")
	case d.MaxVCPUs > limitVCPUs:
		bad("max_vcpus", "must be <= %d", limitVCPUs)
	case d.MaxVCPUs > 0 && vcpusOK && d.MaxVCPUs < d.VCPUs:
		bad("max_vcpus", "must be >= vcpus (%d)", d.VCPUs)
	}

	// Memory.
	memOK := true
	switch {
	case d.MemoryMiB < 1:
		bad("memory_mib", "must be >= 1")
		memOK = false
	case d.MemoryMiB > limitMemoryMiB:
		bad("memory_mib", "must be <= %d (16 TiB)", limitMemoryMiB)
		memOK = false
	case qemu && d.MemoryMiB < minQEMUMiB:
		bad("memory_mib", "must be >= %d for type qemu", minQEMUMiB)
		memOK = false
	}
	maxMemOK := false
	switch {
	case d.MaxMemoryMiB < 0:
		bad("max_memory_mib", "must be >= 0 (0 means memory_mib)")
	case d.MaxMemoryMiB > limitMemoryMiB:
		bad("max_memory_mib", "must be <= %d (16 TiB)", limitMemoryMiB)
	case d.MaxMemoryMiB > 0 && memOK && d.MaxMemoryMiB < d.MemoryMiB:
		bad("max_memory_mib", "must be >= memory_mib (%d)", d.MemoryMiB)
	default:
		maxMemOK = true
	}
	if qemu && memOK && maxMemOK && d.MaxMemoryMiB > d.MemoryMiB {
		// The headroom is added as DIMMs, which QEMU sizes in 2 MiB units.
		if d.MemoryMiB%2 != 0 {
			bad("memory_mib", "must be a multiple of 2 MiB for type qemu with max_memory_mib > memory_mib, not %d", d.MemoryMiB)
		}
		if diff := d.MaxMemoryMiB - d.MemoryMiB; diff%2 != 0 {
			bad("max_memory_mib", "must exceed memory_mib by a multiple of 2 MiB for type qemu (QEMU's DIMM size granularity), not by %d", diff)
		}
	}

	// Metadata.
	if msg := checkLabel(d.Job, limitLabelBytes); msg != "" {
		bad("job", "%s", msg)
	}
	if msg := checkLabel(d.Pool, limitLabelBytes); msg != "" {
		bad("pool", "%s", msg)
	}

	// Emulator.
	if d.Emulator != "" {
		switch {
		case !qemu:
			if d.Type == TypeTest {
				bad("emulator", "must be empty for type test")
			}
		case d.Emulator[0] != '/':
			bad("emulator", "must be an absolute path, not %q", d.Emulator)
		default:
			if msg := checkLabel(d.Emulator, limitPathBytes); msg != "" {
				bad("emulator", "%s", msg)
			}
		}
	}

	// Boot, console and guest agent.
	path := func(field, p string, limit int) {
		if p == "" {
			return
		}
		switch {
		case !qemu:
			if d.Type == TypeTest {
				bad(field, "must be empty for type test")
			}
		case p[0] != '/' || filepath.Clean(p) != p:
			bad(field, "must be a clean absolute path, not %q", p)
		default:
			if msg := checkLabel(p, limit); msg != "" {
				bad(field, "%s", msg)
			}
		}
	}
	path("kernel", d.Kernel, limitPathBytes)
	path("initrd", d.Initrd, limitPathBytes)
	if d.Initrd != "" && d.Kernel == "" && qemu {
		bad("initrd", "needs kernel")
	}
	if d.Cmdline != "" {
		switch {
		case !qemu:
			if d.Type == TypeTest {
				bad("cmdline", "must be empty for type test")
			}
		case d.Kernel == "":
			bad("cmdline", "needs kernel")
		default:
			if msg := checkLabel(d.Cmdline, LimitCmdlineBytes); msg != "" {
				bad("cmdline", "%s", msg)
			}
		}
	}
	path("console_log", d.ConsoleLog, limitPathBytes)
	if d.GuestAgent && d.Type == TypeTest {
		bad("guest_agent", "must be false for type test")
	}
	path("agent_socket", d.AgentSocket, LimitSocketBytes)
	if d.AgentSocket != "" && !d.GuestAgent && qemu {
		bad("agent_socket", "needs guest_agent")
	}
	path("disk", d.Disk, limitPathBytes)
	path("seed", d.Seed, limitPathBytes)
	if d.Seed != "" && d.Disk == "" && qemu {
		bad("seed", "needs disk")
	}
	if d.Seed != "" && d.Seed == d.Disk {
		bad("seed", "must not be the disk")
	}

	// Network.
	switch {
	case d.Bridge == "" && d.MAC != "":
		bad("mac", "needs bridge")
	case d.Bridge != "" && d.Type == TypeTest:
		bad("bridge", "must be empty for type test")
	case d.Bridge != "":
		if msg := CheckBridge(d.Bridge); msg != "" {
			bad("bridge", "%s", msg)
		}
	}
	if d.MAC != "" {
		if msg := checkMAC(d.MAC); msg != "" {
			bad("mac", "%s", msg)
		}
	}

	// CPU quota.
	switch msg := CheckCPUQuota(d.CPUQuota); {
	case msg != "":
		bad("cpu_quota", "%s", msg)
	case d.CPUQuota != 0 && d.Type == TypeTest:
		bad("cpu_quota", "must be 0 for type test")
	}

	return errors.Join(errs...)
}

// limitIfname is the longest Linux interface name (IFNAMSIZ less its NUL).
const limitIfname = 15

// CheckBridge returns what is wrong with a bridge's name (a Linux
// interface name: 1 to 15 bytes of A-Z a-z 0-9 . _ -, not "." or ".."),
// or "".
func CheckBridge(name string) string {
	switch {
	case name == "":
		return "must not be empty"
	case len(name) > limitIfname:
		return fmt.Sprintf("must be at most %d bytes (a Linux interface name), not %d", limitIfname, len(name))
	case name == "." || name == "..":
		return fmt.Sprintf("must not be %q", name)
	}
	return badNameChar(name)
}

// badNameChar says which character of a name is not one of A-Z a-z 0-9
// . _ -, or "".
func badNameChar(name string) string {
	for i, r := range name {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' ||
			r == '.' || r == '_' || r == '-'
		if !ok {
			return fmt.Sprintf("character %q at byte %d is not allowed (use A-Z a-z 0-9 . _ -)", r, i)
		}
	}
	return ""
}

// checkMAC returns what is wrong with a MAC address (six lower-case hex
// pairs joined by ':', unicast), or "".
func checkMAC(mac string) string {
	hw, err := net.ParseMAC(mac)
	switch {
	case err != nil || len(hw) != 6 || hw.String() != mac:
		return fmt.Sprintf("must be six lower-case hex pairs like 52:54:00:0a:4d:01, not %q", mac)
	case hw[0]&1 != 0:
		return fmt.Sprintf("must be a unicast address (even first byte), not %q", mac)
	}
	return ""
}

// checkName returns what is wrong with a domain name, or "".
func checkName(name string) string {
	if name == "" {
		return "must not be empty"
	}
	if n := utf8.RuneCountInString(name); n > limitNameLen {
		return fmt.Sprintf("must be at most %d characters, not %d", limitNameLen, n)
	}
	if name[0] == '.' || name[0] == '-' {
		return fmt.Sprintf("must not start with %q", name[0])
	}
	return badNameChar(name)
}

// LabelBytes is the longest job or pool label, in bytes.
const LabelBytes = limitLabelBytes

// CheckLabel returns what is wrong with a job or pool label (at most
// LabelBytes of UTF-8 without control characters), or "".
func CheckLabel(s string) string { return checkLabel(s, limitLabelBytes) }

// checkLabel returns what is wrong with a free-text value stored in the
// XML (job, pool, emulator), or "".
func checkLabel(s string, maxBytes int) string {
	if !utf8.ValidString(s) {
		return "must be valid UTF-8"
	}
	if len(s) > maxBytes {
		return fmt.Sprintf("must be at most %d bytes, not %d", maxBytes, len(s))
	}
	for i, r := range s {
		// U+FFFE and U+FFFF are not characters in XML 1.0.
		if unicode.IsControl(r) || r == 0xFFFE || r == 0xFFFF {
			return fmt.Sprintf("character %U at byte %d is not allowed (no control characters)", r, i)
		}
	}
	return ""
}

// XML validates d and returns its libvirt domain XML, ending with a
// newline. The document for each type is described in the package
// documentation; the golden files under testdata show it in full.
func (d Domain) XML() (string, error) {
	if err := d.Validate(); err != nil {
		return "", err
	}
	maxVCPUs, maxMem := d.maxVCPUs(), d.maxMemoryMiB()
	itoa := strconv.Itoa

	kids := []*elem{textEl("name", nil, d.Name)}
	if md := metadata(d.Job, d.Pool); md != nil {
		kids = append(kids, md)
	}

	switch d.Type {
	case TypeTest:
		// The test driver's balloon: <memory> is the maximum.
		kids = append(kids,
			textEl("memory", a("unit", "MiB"), itoa(maxMem)),
			textEl("currentMemory", a("unit", "MiB"), itoa(d.MemoryMiB)),
			textEl("vcpu", a("placement", "static", "current", itoa(d.VCPUs)), itoa(maxVCPUs)),
			el("os", nil, textEl("type", a("arch", "x86_64"), "hvm")),
			el("devices", nil),
		)

	case TypeQEMU:
		hotplug := maxMem > d.MemoryMiB
		if hotplug {
			kids = append(kids, textEl("maxMemory",
				a("slots", itoa(HotplugSlots), "unit", "MiB"), itoa(maxMem)))
		}
		kids = append(kids,
			textEl("memory", a("unit", "MiB"), itoa(d.MemoryMiB)),
			textEl("currentMemory", a("unit", "MiB"), itoa(d.MemoryMiB)),
			textEl("vcpu", a("placement", "static", "current", itoa(d.VCPUs)), itoa(maxVCPUs)),
		)
		if d.CPUQuota > 0 {
			kids = append(kids, el("cputune", nil,
				textEl("period", nil, itoa(QuotaPeriodMicros)),
				textEl("quota", nil, itoa(quotaMicros(d.CPUQuota)))))
		}
		kids = append(kids,
			bootOS(d),
			el("features", nil, el("acpi", nil), el("apic", nil)),
		)
		cpu := el("cpu", a("mode", "custom", "match", "exact"),
			textEl("model", a("fallback", "allow"), "qemu64"))
		if hotplug {
			// Memory hot-plug needs a NUMA topology; DIMMs go to cell 0.
			cpus := "0"
			if maxVCPUs > 1 {
				cpus = "0-" + itoa(maxVCPUs-1)
			}
			cpu.kids = append(cpu.kids, el("numa", nil,
				el("cell", a("id", "0", "cpus", cpus, "memory", itoa(d.MemoryMiB), "unit", "MiB"))))
		}
		emulator := d.Emulator
		if emulator == "" {
			emulator = DefaultEmulator
		}
		kids = append(kids,
			cpu,
			textEl("on_poweroff", nil, "destroy"),
			textEl("on_reboot", nil, "restart"),
			textEl("on_crash", nil, "destroy"),
			el("devices", nil, devices(d, emulator)...),
		)
	}

	return el("domain", a("type", d.Type), kids...).String(), nil
}

// bootOS is the <os> element of a qemu domain: the machine, and the
// kernel, initrd and command line of a direct kernel boot, or the disk
// to boot from without a kernel.
func bootOS(d Domain) *elem {
	o := el("os", nil, textEl("type", a("arch", "x86_64", "machine", "pc"), "hvm"))
	for _, f := range []struct{ name, value string }{{"kernel", d.Kernel}, {"initrd", d.Initrd}, {"cmdline", d.Cmdline}} {
		if f.value != "" {
			o.kids = append(o.kids, textEl(f.name, nil, f.value))
		}
	}
	if d.Kernel == "" && d.Disk != "" {
		o.kids = append(o.kids, el("boot", a("dev", "hd")))
	}
	return o
}

// DiskTarget is the guest's device name of Domain.Disk, SeedTarget of
// Domain.Seed.
const (
	DiskTarget = "vda"
	SeedTarget = "vdb"
)

// FormatRaw is the format of Domain.Seed.
const FormatRaw = "raw"

// FormatQCOW2 is the format of Domain.Disk.
const FormatQCOW2 = "qcow2"

// devices are the <devices> of a qemu domain: the emulator, the console
// on the first serial port, appended to a file (libvirt refuses a
// <console type='serial'> of type file here), the guest agent's channel
// and the balloon.
func devices(d Domain, emulator string) []*elem {
	devs := []*elem{textEl("emulator", nil, emulator)}
	if d.Disk != "" {
		devs = append(devs, el("disk", a("type", "file", "device", "disk"),
			el("driver", a("name", "qemu", "type", FormatQCOW2)),
			el("source", a("file", d.Disk)),
			el("target", a("dev", DiskTarget, "bus", "virtio"))))
	}
	if d.Seed != "" {
		devs = append(devs, el("disk", a("type", "file", "device", "disk"),
			el("driver", a("name", "qemu", "type", FormatRaw)),
			el("source", a("file", d.Seed)),
			el("target", a("dev", SeedTarget, "bus", "virtio")),
			el("readonly", nil)))
	}
	if d.ConsoleLog != "" {
		devs = append(devs, el("serial", a("type", "file"),
			el("source", a("path", d.ConsoleLog, "append", "on")),
			el("target", a("port", "0"))))
	}
	if d.GuestAgent {
		ch := el("channel", a("type", "unix"))
		if d.AgentSocket != "" {
			ch.kids = append(ch.kids, el("source", a("mode", "bind", "path", d.AgentSocket)))
		}
		ch.kids = append(ch.kids, el("target", a("type", "virtio", "name", AgentChannel)))
		devs = append(devs, ch)
	}
	if d.Bridge != "" {
		nic := el("interface", a("type", "bridge"))
		if d.MAC != "" {
			nic.kids = append(nic.kids, el("mac", a("address", d.MAC)))
		}
		nic.kids = append(nic.kids, el("source", a("bridge", d.Bridge)), el("model", a("type", "virtio")))
		devs = append(devs, nic)
	}
	return append(devs, el("memballoon", a("model", "virtio")))
}

// metadata returns the <metadata> element recording job and pool, or nil
// when both are empty. An empty one of the two is left out.
func metadata(job, pool string) *elem {
	if job == "" && pool == "" {
		return nil
	}
	as := a("xmlns:metasched", MetadataNS)
	if job != "" {
		as = append(as, attr{"job", job})
	}
	if pool != "" {
		as = append(as, attr{"pool", pool})
	}
	return el("metadata", nil, el("metasched:vm", as))
}

// DIMM returns the device XML of one DIMM of sizeMiB MiB on NUMA node node,
// for DomainAttachDeviceFlags: the way a qemu domain's memory grows live.
// It does not check its arguments; QEMU refuses sizes that are not positive
// multiples of 2 MiB, and the domain must have a free slot under
// <maxMemory> and room below its maximum.
func DIMM(sizeMiB, node int) string {
	return el("memory", a("model", "dimm"),
		el("target", nil,
			textEl("size", a("unit", "MiB"), strconv.Itoa(sizeMiB)),
			textEl("node", nil, strconv.Itoa(node)),
		),
	).String()
}
