package image

import (
	"testing"

	"github.com/metasched/metasched/internal/deptest"
)

// The image package builds without cgo: it links no libvirt.
func TestDeps(t *testing.T) {
	deptest.Forbid(t, "github.com/metasched/metasched/hypervisorproxy/image", false,
		deptest.Rule{Path: "libvirt.org/go/libvirt", Tree: true},
		deptest.Rule{Path: "github.com/metasched/metasched/hypervisorproxy/virt"})
}
