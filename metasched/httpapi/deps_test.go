package httpapi

import (
	"errors"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// The server and the dashboard use the daemon through the interfaces they
// declare, and the daemon serves the handler it is given: neither links
// the other. The server maps the daemon's errors (api.ErrNotFound, ...),
// not the store's: it links neither the store nor its engines.
func TestDeps(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go command: %v", err)
	}
	const mod = "github.com/metasched/metasched/"
	deps := func(pkg string) []string {
		t.Helper()
		out, err := exec.Command(goTool, "list", "-deps", mod+pkg).Output()
		if err != nil {
			var stderr []byte
			if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
				stderr = ee.Stderr
			}
			t.Fatalf("go list -deps %s: %v\n%s", pkg, err, stderr)
		}
		d := strings.Fields(string(out))
		if len(d) == 0 {
			t.Fatalf("go list -deps %s listed nothing", pkg)
		}
		return d
	}
	for _, c := range []struct {
		pkg       string
		forbidden []string
	}{
		{"metasched/httpapi", []string{"metasched", "metasched/store", "metasched/store/kv"}},
		{"metasched/dashboard", []string{"metasched", "metasched/httpapi"}},
		{"metasched", []string{"metasched/httpapi", "metasched/dashboard", "metasched/demo"}},
	} {
		d := deps(c.pkg)
		for _, f := range c.forbidden {
			if slices.Contains(d, mod+f) {
				t.Errorf("%s depends on %s", c.pkg, f)
			}
		}
	}
}
