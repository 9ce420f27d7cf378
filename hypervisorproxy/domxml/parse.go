package domxml

import (
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"math"
	"math/bits"
	"strconv"
	"strings"
)

// Desc is a domain as read back from libvirt by Parse. Sizes are in MiB,
// rounded down.
type Desc struct {
	Type string // the domain's type attribute: "test", "qemu", "kvm"...
	Name string

	VCPUs    int // <vcpu current=…>, or the maximum when absent
	MaxVCPUs int // <vcpu>

	// MemoryMiB is the current memory: <currentMemory>, or <memory> when
	// absent. For qemu it includes the hot-plugged DIMMs.
	MemoryMiB int
	// MaxMemoryMiB is <maxMemory> when present (qemu with headroom), else
	// <memory> (the balloon's ceiling).
	MaxMemoryMiB int
	// BootMemoryMiB is <memory> minus the DIMMs: for qemu, the memory the
	// guest booted with; for test domains, the same as MaxMemoryMiB.
	BootMemoryMiB int
	DIMMs         int // <memory model='dimm'> devices
	Slots         int // <maxMemory slots=…>, 0 when absent

	Job, Pool string // from <metasched:vm> in <metadata>, "" when absent

	// Kernel, Initrd and Cmdline are those of <os> (direct kernel boot).
	Kernel, Initrd, Cmdline string
	// ConsoleLog is the file of the first <serial type='file'>.
	ConsoleLog string
	// GuestAgent: a <channel> to a virtio port named AgentChannel;
	// AgentSocket is its unix socket (libvirt fills it in when it chose
	// it).
	GuestAgent  bool
	AgentSocket string
	// Disk is the file of the <disk type='file' device='disk'> on
	// target DiskTarget.
	Disk string
	// Seed is the file of the <disk type='file' device='disk'> on target
	// SeedTarget (a cloud-init seed).
	Seed string
	// CPUQuota is <cputune>'s <quota> over its <period> (libvirt's
	// default period, 100 ms, when absent): the fraction of one core each
	// vCPU thread may use; 0 when there is no quota (absent, or -1 or
	// larger than libvirt's maximum: unlimited).
	CPUQuota float64
}

// The struct tags below cannot refer to MetadataNS; TestMetadataNSTag
// checks that they spell it.
type xmlDomain struct {
	Type     string `xml:"type,attr"`
	Name     string `xml:"name"`
	Metadata struct {
		VM []struct {
			Job  string `xml:"job,attr"`
			Pool string `xml:"pool,attr"`
		} `xml:"https://metasched.github.io/xmlns/vm/1 vm"`
	} `xml:"metadata"`
	MaxMemory     *xmlSize `xml:"maxMemory"`
	Memory        *xmlSize `xml:"memory"`
	CurrentMemory *xmlSize `xml:"currentMemory"`
	VCPU          *struct {
		Current string `xml:"current,attr"`
		Value   string `xml:",chardata"`
	} `xml:"vcpu"`
	CPUTune struct {
		Period string `xml:"period"`
		Quota  string `xml:"quota"`
	} `xml:"cputune"`
	OS struct {
		Kernel  string `xml:"kernel"`
		Initrd  string `xml:"initrd"`
		Cmdline string `xml:"cmdline"`
	} `xml:"os"`
	Devices struct {
		Disk []struct {
			Type   string `xml:"type,attr"`
			Device string `xml:"device,attr"`
			Source struct {
				File string `xml:"file,attr"`
			} `xml:"source"`
			Target struct {
				Dev string `xml:"dev,attr"`
			} `xml:"target"`
		} `xml:"disk"`
		Serial []struct {
			Type   string `xml:"type,attr"`
			Source struct {
				Path string `xml:"path,attr"`
			} `xml:"source"`
		} `xml:"serial"`
		Channel []struct {
			Type   string `xml:"type,attr"`
			Source struct {
				Path string `xml:"path,attr"`
			} `xml:"source"`
			Target struct {
				Type string `xml:"type,attr"`
				Name string `xml:"name,attr"`
			} `xml:"target"`
		} `xml:"channel"`
		Memory []struct {
			Model  string `xml:"model,attr"`
			Target struct {
				Size *xmlSize `xml:"size"`
			} `xml:"target"`
		} `xml:"memory"`
	} `xml:"devices"`
}

type xmlSize struct {
	Unit  string `xml:"unit,attr"`
	Slots string `xml:"slots,attr"`
	Value string `xml:",chardata"`
}

// Parse reads a domain XML as libvirt's GetXMLDesc returns it (or as
// Domain.XML writes it). Sizes may be in any unit libvirt accepts, KiB when
// the unit attribute is absent, and are converted to MiB rounding down;
// BootMemoryMiB is computed in bytes before rounding. Elements Parse does
// not need are ignored. Every problem found is reported, joined with
// errors.Join, each one starting with the element's name.
func Parse(xmlDesc string) (Desc, error) {
	var root xmlDomain
	dec := xml.NewDecoder(strings.NewReader(xmlDesc))
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return Desc{}, errors.New("domain xml: no element")
		}
		if err != nil {
			return Desc{}, fmt.Errorf("domain xml: %w", err)
		}
		start, ok := tok.(xml.StartElement)
		if !ok {
			continue
		}
		if start.Name.Local != "domain" {
			return Desc{}, fmt.Errorf("domain xml: root element is <%s>, not <domain>", start.Name.Local)
		}
		if err := dec.DecodeElement(&root, &start); err != nil {
			return Desc{}, fmt.Errorf("domain xml: %w", err)
		}
		break
	}

	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", field, fmt.Sprintf(format, args...)))
	}
	desc := Desc{Type: root.Type, Name: strings.TrimSpace(root.Name)}
	if desc.Type == "" {
		bad("type", "missing")
	}
	if desc.Name == "" {
		bad("name", "missing")
	}
	if len(root.Metadata.VM) > 0 {
		desc.Job, desc.Pool = root.Metadata.VM[0].Job, root.Metadata.VM[0].Pool
	}
	desc.Kernel = strings.TrimSpace(root.OS.Kernel)
	desc.Initrd = strings.TrimSpace(root.OS.Initrd)
	desc.Cmdline = root.OS.Cmdline
	for _, s := range root.Devices.Serial {
		if s.Type == "file" && desc.ConsoleLog == "" {
			desc.ConsoleLog = s.Source.Path
		}
	}
	for _, dk := range root.Devices.Disk {
		if dk.Type == "file" && dk.Device == "disk" && dk.Target.Dev == SeedTarget {
			desc.Seed = dk.Source.File
		}
		if dk.Type == "file" && dk.Device == "disk" && dk.Target.Dev == DiskTarget {
			desc.Disk = dk.Source.File
		}
	}
	for _, c := range root.Devices.Channel {
		if c.Target.Type == "virtio" && c.Target.Name == AgentChannel && !desc.GuestAgent {
			desc.GuestAgent, desc.AgentSocket = true, c.Source.Path
		}
	}

	// vCPUs.
	if root.VCPU == nil {
		bad("vcpu", "missing")
	} else {
		maxV, err := parseCount(root.VCPU.Value)
		if err != nil {
			bad("vcpu", "%v", err)
		}
		desc.MaxVCPUs, desc.VCPUs = maxV, maxV
		if root.VCPU.Current != "" {
			cur, err := parseCount(root.VCPU.Current)
			switch {
			case err != nil:
				bad("vcpu", "current: %v", err)
			case cur > maxV:
				bad("vcpu", "current %d exceeds the maximum %d", cur, maxV)
			default:
				desc.VCPUs = cur
			}
		}
	}

	// CPU quota.
	if q := strings.TrimSpace(root.CPUTune.Quota); q != "" {
		quota, err := strconv.ParseInt(q, 10, 64)
		period := int64(QuotaPeriodMicros)
		if err != nil {
			bad("cputune", "quota: %q is not a number of microseconds", q)
		}
		if p := strings.TrimSpace(root.CPUTune.Period); p != "" {
			n, perr := strconv.ParseInt(p, 10, 64)
			if perr != nil || n <= 0 {
				bad("cputune", "period: %q is not a positive number of microseconds", p)
			} else {
				period = n
			}
		}
		if err == nil && quota > 0 && quota < maxQuotaMicros {
			desc.CPUQuota = float64(quota) / float64(period)
		}
	}

	// Memory, in bytes until the end.
	size := func(name string, s *xmlSize) uint64 {
		b, err := s.bytes()
		if err != nil {
			bad(name, "%v", err)
		}
		return b
	}
	var memB uint64
	if root.Memory == nil {
		bad("memory", "missing")
	} else {
		memB = size("memory", root.Memory)
	}
	curB, maxB := memB, memB
	if root.CurrentMemory != nil {
		curB = size("currentMemory", root.CurrentMemory)
	}
	if root.MaxMemory != nil {
		maxB = size("maxMemory", root.MaxMemory)
		if root.MaxMemory.Slots != "" {
			n, err := parseCount(root.MaxMemory.Slots)
			if err != nil {
				bad("maxMemory", "slots: %v", err)
			}
			desc.Slots = n
		}
	}
	var dimmB uint64
	for _, m := range root.Devices.Memory {
		if m.Model != "dimm" {
			continue
		}
		desc.DIMMs++
		field := fmt.Sprintf("devices: memory dimm %d", desc.DIMMs-1)
		if m.Target.Size == nil {
			bad(field, "size missing")
			continue
		}
		b := size(field+" size", m.Target.Size)
		sum, carry := bits.Add64(dimmB, b, 0)
		if carry != 0 {
			bad(field, "sizes overflow")
			continue
		}
		dimmB = sum
	}
	if root.Memory != nil && dimmB > memB {
		bad("memory", "%d bytes is less than the DIMMs' %d bytes", memB, dimmB)
	}
	if root.Memory != nil && curB > maxB {
		bad("currentMemory", "%d bytes exceeds the maximum %d bytes", curB, maxB)
	}
	for _, v := range []struct {
		name string
		b    uint64
		dst  *int
	}{
		{"currentMemory", curB, &desc.MemoryMiB},
		{"maxMemory", maxB, &desc.MaxMemoryMiB},
		{"memory", memB - min(dimmB, memB), &desc.BootMemoryMiB},
	} {
		mib := v.b >> 20
		if mib > math.MaxInt {
			bad(v.name, "%d MiB is too large", mib)
			continue
		}
		*v.dst = int(mib)
	}

	if err := errors.Join(errs...); err != nil {
		return Desc{}, err
	}
	return desc, nil
}

// maxQuotaMicros is libvirt's largest <quota>, (2^64 − 1) / 1000: it
// means no limit, like -1.
const maxQuotaMicros = 18446744073709551

// parseCount parses a non-negative decimal count (vCPUs, slots).
func parseCount(s string) (int, error) {
	s = strings.TrimSpace(s)
	n, err := strconv.ParseUint(s, 10, 0)
	if err != nil || n > math.MaxInt {
		return 0, fmt.Errorf("%q is not a count", s)
	}
	return int(n), nil
}

// bytes returns the size in bytes. Units are libvirt's (virScaleInteger),
// case-insensitive: b or bytes; k, KiB, m, MiB, ... e, EiB for powers of
// 1024; KB, MB, ... EB for powers of 1000; KiB when the unit is absent.
func (s *xmlSize) bytes() (uint64, error) {
	v := strings.TrimSpace(s.Value)
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%q is not a size", v)
	}
	scale, err := unitScale(strings.TrimSpace(s.Unit))
	if err != nil {
		return 0, err
	}
	hi, lo := bits.Mul64(n, scale)
	if hi != 0 {
		return 0, fmt.Errorf("%s %s overflows", v, s.Unit)
	}
	return lo, nil
}

// unitScale returns the number of bytes in one unit.
func unitScale(unit string) (uint64, error) {
	u := strings.ToLower(unit)
	switch u {
	case "":
		return 1024, nil
	case "b", "bytes":
		return 1, nil
	}
	power := strings.IndexByte("kmgtpe", u[0]) + 1
	if power == 0 {
		return 0, fmt.Errorf("unknown unit %q", unit)
	}
	var base uint64
	switch u[1:] {
	case "", "ib":
		base = 1024
	case "b":
		base = 1000
	default:
		return 0, fmt.Errorf("unknown unit %q", unit)
	}
	scale := uint64(1)
	for range power {
		scale *= base
	}
	return scale, nil
}
