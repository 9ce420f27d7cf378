package gramvm_test

import (
	"testing"

	"github.com/metasched/metasched/internal/deptest"
)

// TestDeps: gramvm plans on the hosts its caller gives it; neither it nor
// its tests depend on the hypervisor proxy or libvirt.
func TestDeps(t *testing.T) {
	deptest.Forbid(t, "github.com/metasched/metasched/gramvm", true,
		deptest.Rule{Path: "github.com/metasched/metasched/hypervisorproxy", Tree: true},
		deptest.Rule{Path: "libvirt.org/go/libvirt", Tree: true})
}
