package domxml

import (
	"errors"
	"fmt"
	"strconv"
)

// DefaultMHz is the clock a Node with MHz 0 reports.
const DefaultMHz = 2400

// Node is a made-up host for libvirt's test driver.
type Node struct {
	CPUs      int // cores, all active
	MemoryMiB int
	MHz       int // 0 means 2400
}

// Validate reports every problem of n, joined with errors.Join, each one
// starting with the field's name (cpus, memory_mib, mhz). CPUs are 1 to
// 4096 and memory 1 MiB to 16 TiB.
func (n Node) Validate() error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", field, fmt.Sprintf(format, args...)))
	}
	switch {
	case n.CPUs < 1:
		bad("cpus", "must be >= 1")
	case n.CPUs > limitVCPUs:
		bad("cpus", "must be <= %d", limitVCPUs)
	}
	switch {
	case n.MemoryMiB < 1:
		bad("memory_mib", "must be >= 1")
	case n.MemoryMiB > limitMemoryMiB:
		bad("memory_mib", "must be <= %d (16 TiB)", limitMemoryMiB)
	}
	if n.MHz < 0 {
		bad("mhz", "must be >= 0 (0 means %d)", DefaultMHz)
	}
	return errors.Join(errs...)
}

// XML validates n and returns a host file for libvirt's test driver
// (opened as test:///path/to/host.xml), ending with a newline: one NUMA
// node and one socket of CPUs single-threaded cores, all active, and the
// memory in KiB as the driver expects. The file defines no domains.
func (n Node) XML() (string, error) {
	if err := n.Validate(); err != nil {
		return "", err
	}
	mhz := n.MHz
	if mhz == 0 {
		mhz = DefaultMHz
	}
	itoa := strconv.Itoa
	return el("node", nil,
		el("cpu", nil,
			textEl("mhz", nil, itoa(mhz)),
			textEl("model", nil, "x86_64"),
			textEl("active", nil, itoa(n.CPUs)),
			textEl("nodes", nil, "1"),
			textEl("sockets", nil, "1"),
			textEl("cores", nil, itoa(n.CPUs)),
			textEl("threads", nil, "1"),
		),
		textEl("memory", nil, strconv.FormatInt(int64(n.MemoryMiB)*1024, 10)),
	).String(), nil
}
