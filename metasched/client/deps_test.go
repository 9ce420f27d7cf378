package client

import (
	"testing"

	"github.com/metasched/metasched/internal/deptest"
)

// The client links the API's wire types, not the daemon: a program that
// drives the daemon does not pull in its store, Prometheus or libvirt.
func TestClientDeps(t *testing.T) {
	deptest.Forbid(t, "github.com/metasched/metasched/metasched/client", false,
		deptest.Rule{Path: "go.etcd.io/bbolt", Tree: true},
		deptest.Rule{Path: "github.com/prometheus", Tree: true},
		deptest.Rule{Path: "libvirt.org/go/libvirt", Tree: true},
		deptest.Rule{Path: "github.com/metasched/metasched/metasched"}, // the daemon
		deptest.Rule{Path: "github.com/metasched/metasched/metasched/store", Tree: true})
}
