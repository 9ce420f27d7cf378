package api

import (
	"testing"

	"github.com/metasched/metasched/internal/deptest"
)

// The wire types are plain structs on the standard library alone: every
// program that talks to the daemon links them, and nothing of the daemon
// or its solver comes with them (the daemon converts its values to them).
func TestAPIDeps(t *testing.T) {
	deptest.Allow(t, "github.com/metasched/metasched/metasched/api", false,
		deptest.Rule{Path: "github.com/metasched/metasched/metasched/api"})
}
