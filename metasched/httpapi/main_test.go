package httpapi_test

import (
	"os"
	"testing"

	"github.com/metasched/metasched/metasched/executor"
)

// TestMain lets the test binary be a command's supervisor, as the daemon's
// binary is: the host-command executor of the tests' daemons runs
// /proc/self/exe with executor.SupervisorArg.
func TestMain(m *testing.M) {
	executor.MaybeSupervise()
	os.Exit(m.Run())
}
