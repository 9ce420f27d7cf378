package credentials

import (
	"testing"

	"github.com/metasched/metasched/internal/deptest"
)

// The credentials are a subsystem below the daemon: they keep their state
// in the store and know nothing of the daemon, its HTTP server or libvirt.
func TestDeps(t *testing.T) {
	deptest.Forbid(t, "github.com/metasched/metasched/metasched/credentials", false,
		deptest.Rule{Path: "github.com/metasched/metasched/metasched"}, // the daemon
		deptest.Rule{Path: "github.com/metasched/metasched/metasched/httpapi", Tree: true},
		deptest.Rule{Path: "libvirt.org/go/libvirt", Tree: true})
}
