// Package deptest checks in tests what a package links: the tests of
// gramvm and of the daemon's Go client hold the architecture's import
// rules with it. The design is described in docs/design.md of the
// repository ("Packages and their imports").
package deptest

import (
	"errors"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// Rule forbids a package: Path itself, and with Tree every package under
// it too.
type Rule struct {
	Path string
	Tree bool
}

// Forbid fails the test for each dependency of pkg (with its tests' too
// when withTests) that a rule forbids. It runs `go list -deps`; without a
// go command on PATH the test is skipped.
func Forbid(t *testing.T, pkg string, withTests bool, rules ...Rule) {
	t.Helper()
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go is not on PATH")
	}
	args := []string{"list", "-deps"}
	if withTests {
		args = append(args, "-test")
	}
	out, err := exec.CommandContext(t.Context(), goCmd, append(args, pkg)...).Output()
	if err != nil {
		var stderr []byte
		if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
			stderr = ee.Stderr
		}
		t.Fatalf("go %s %s: %v\n%s", strings.Join(args, " "), pkg, err, stderr)
	}
	var deps []string
	for _, d := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		p, _, _ := strings.Cut(d, " ") // "pkg [pkg.test]" is pkg built for the tests
		deps = append(deps, p)
	}
	if !slices.Contains(deps, pkg) {
		t.Fatalf("go list -deps %s does not list the package itself:\n%s", pkg, out)
	}
	for _, d := range deps {
		for _, r := range rules {
			if d == r.Path || r.Tree && strings.HasPrefix(d, strings.TrimSuffix(r.Path, "/")+"/") {
				t.Errorf("%s depends on %s", pkg, d)
			}
		}
	}
}
