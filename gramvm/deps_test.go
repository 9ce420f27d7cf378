package gramvm_test

import (
	"errors"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// TestDeps: gramvm plans on the hosts its caller gives it; neither it nor
// its tests depend on the hypervisor proxy or libvirt.
func TestDeps(t *testing.T) {
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go is not on PATH")
	}
	const pkg = "github.com/metasched/metasched/gramvm"
	out, err := exec.CommandContext(t.Context(), goCmd, "list", "-deps", "-test", pkg).Output()
	if err != nil {
		var stderr []byte
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			stderr = ee.Stderr
		}
		t.Fatalf("go list -deps -test %s: %v\n%s", pkg, err, stderr)
	}
	deps := strings.Fields(string(out))
	if !slices.Contains(deps, pkg) {
		t.Fatalf("go list -deps -test %s does not list the package itself:\n%s", pkg, out)
	}
	for _, d := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		p, _, _ := strings.Cut(d, " ") // "pkg [pkg.test]" is pkg built for the tests
		for _, banned := range []string{"github.com/metasched/metasched/hypervisorproxy", "libvirt.org/go/libvirt"} {
			if p == banned || strings.HasPrefix(p, banned+"/") {
				t.Errorf("gramvm depends on %s", d)
			}
		}
	}
}
