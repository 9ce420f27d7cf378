// Package deptest checks in tests what a package links: the tests of
// gramvm and of the daemon's Go client hold the architecture's import
// rules with it, as a list of what a package must not link (Forbid) or of
// all it may link beside the standard library (Allow). The design is
// described in docs/internals/architecture.md of the repository ("Packages
// and their imports").
package deptest

import (
	"errors"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// Rule names a package: Path itself, and with Tree every package under
// it too.
type Rule struct {
	Path string
	Tree bool
}

// matches reports whether the rule names package p.
func (r Rule) matches(p string) bool {
	return p == r.Path || r.Tree && strings.HasPrefix(p, strings.TrimSuffix(r.Path, "/")+"/")
}

// Forbid fails the test for each dependency of pkg (with its tests' too
// when withTests) that a rule forbids. It runs `go list -deps`; without a
// go command on PATH the test is skipped.
func Forbid(t *testing.T, pkg string, withTests bool, rules ...Rule) {
	t.Helper()
	for _, d := range deps(t, pkg, withTests, false) {
		for _, r := range rules {
			if r.matches(d) {
				t.Errorf("%s depends on %s", pkg, d)
			}
		}
	}
}

// Allow fails the test for each dependency of pkg (with its tests' too
// when withTests) outside the standard library that no rule allows: the
// package itself must be allowed too. An allow-list keeps a package small
// where a list of what it must not link would miss a newcomer.
func Allow(t *testing.T, pkg string, withTests bool, rules ...Rule) {
	t.Helper()
	for _, d := range deps(t, pkg, withTests, true) {
		if !slices.ContainsFunc(rules, func(r Rule) bool { return r.matches(d) }) {
			t.Errorf("%s depends on %s, which is not on its list", pkg, d)
		}
	}
}

// deps lists the dependencies of pkg, pkg included (only those outside
// the standard library with nonStd).
func deps(t *testing.T, pkg string, withTests, nonStd bool) []string {
	t.Helper()
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go is not on PATH")
	}
	args := []string{"list", "-deps"}
	if withTests {
		args = append(args, "-test")
	}
	// Every package is listed, a standard one as "-" (the format's first
	// field), so that the package itself is found whatever it is.
	args = append(args, "-f", "{{if .Standard}}-{{end}} {{.ImportPath}}")
	out, err := exec.CommandContext(t.Context(), goCmd, append(args, pkg)...).Output()
	if err != nil {
		var stderr []byte
		if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
			stderr = ee.Stderr
		}
		t.Fatalf("go %s %s: %v\n%s", strings.Join(args, " "), pkg, err, stderr)
	}
	var all, list []string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		std, d, _ := strings.Cut(line, " ")
		d, _, _ = strings.Cut(d, " ") // "pkg [pkg.test]" is pkg built for the tests
		all = append(all, d)
		if std != "-" || !nonStd {
			list = append(list, d)
		}
	}
	if !slices.Contains(all, pkg) {
		t.Fatalf("go list -deps %s does not list the package itself:\n%s", pkg, out)
	}
	return list
}
