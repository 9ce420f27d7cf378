package client

import (
	"errors"
	"os/exec"
	"strings"
	"testing"
)

// The client links the API's wire types, not the daemon: a program that
// drives the daemon does not pull in its store, Prometheus or libvirt.
func TestClientDeps(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go command: %v", err)
	}
	out, err := exec.Command(goTool, "list", "-deps", "github.com/metasched/metasched/metasched/client").Output()
	if err != nil {
		var stderr []byte
		if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
			stderr = ee.Stderr
		}
		t.Fatalf("go list -deps: %v\n%s", err, stderr)
	}
	forbidden := []struct {
		path   string
		prefix bool // the path and every package under it
	}{
		{"go.etcd.io/bbolt", true},
		{"github.com/prometheus/", true},
		{"libvirt.org/go/libvirt", true},
		{"github.com/metasched/metasched/metasched", false}, // the daemon
		{"github.com/metasched/metasched/metasched/store", true},
	}
	deps := strings.Fields(string(out))
	if len(deps) == 0 {
		t.Fatal("go list -deps listed nothing")
	}
	for _, dep := range deps {
		for _, f := range forbidden {
			if dep == f.path || f.prefix && strings.HasPrefix(dep, strings.TrimSuffix(f.path, "/")+"/") {
				t.Errorf("the client depends on %s", dep)
			}
		}
	}
}
