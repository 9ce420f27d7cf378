package taskfarm

import (
	"testing"

	"github.com/metasched/metasched/internal/deptest"
)

// The task farm runs inside the guests as one static binary: it links
// neither the hypervisor proxy nor libvirt (nor the rest of gramvm).
func TestDeps(t *testing.T) {
	deptest.Forbid(t, "github.com/metasched/metasched/gramvm/taskfarm", true,
		deptest.Rule{Path: "github.com/metasched/metasched/hypervisorproxy", Tree: true},
		deptest.Rule{Path: "github.com/metasched/metasched/gramvm"},
		deptest.Rule{Path: "libvirt.org/go/libvirt", Tree: true})
}
