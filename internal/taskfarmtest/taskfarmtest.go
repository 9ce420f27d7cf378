// Package taskfarmtest builds the task farm binary (cmd/taskfarm) for the
// tests that build the bundled guest image, which holds it: static,
// without cgo, as make build does. The design is described in
// docs/internals/tests.md of the repository, "Real parts".
package taskfarmtest

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// Package is the task farm's main package.
const Package = "github.com/metasched/metasched/cmd/taskfarm"

// Binary builds the task farm into a temporary directory of tb and
// returns its path. The go command's build cache makes a build of
// unchanged sources a link; the same sources give the same bytes, so the
// image built with it keeps its cache key.
func Binary(tb testing.TB) string {
	tb.Helper()
	bin := filepath.Join(tb.TempDir(), "taskfarm")
	cmd := exec.Command("go", "build", "-o", bin, Package)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		tb.Fatalf("build the task farm: %v\n%s", err, out)
	}
	return bin
}
