package metasched_test

import (
	"os"
	"testing"

	"github.com/metasched/metasched/metasched/executor"
)

// TestMain lets the test binary be a command's supervisor, as the daemon's
// binary is: the command executor runs /proc/self/exe with
// executor.SupervisorArg.
func TestMain(m *testing.M) {
	executor.MaybeSupervise()
	os.Exit(m.Run())
}

// skipShortLong skips, in -short mode (make check), a test whose run of
// the daemon takes more than two seconds of real time on two cores, even
// on its fake clock.
func skipShortLong(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: a long run of the daemon (over 2 s on two cores); make test runs it")
	}
}
