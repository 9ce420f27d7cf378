package client

import (
	"testing"

	"github.com/metasched/metasched/internal/deptest"
)

// The client links the API's wire types and the standard library, nothing
// else: not the daemon, its store, Prometheus or libvirt, nor the solver
// (selection, gramvm, the switching policy) or the agent's server, whose
// JSON the wire types mirror. A program that drives the daemon stays
// small; a new import shows here.
func TestClientDeps(t *testing.T) {
	deptest.Allow(t, "github.com/metasched/metasched/metasched/client", false,
		deptest.Rule{Path: "github.com/metasched/metasched/metasched/client"},
		deptest.Rule{Path: "github.com/metasched/metasched/metasched/api"})
}
