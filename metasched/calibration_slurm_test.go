package metasched

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	hp "github.com/metasched/metasched/hypervisorproxy"
)

// A calibration VM boots on a QEMU host of a remote agent, not on a
// test-driver host; on a Slurm node (whose jobs run on its own system)
// the calibration measures when the daemon has a task farm to copy there.
func TestBootsOn(t *testing.T) {
	s := &siteAgent{}
	for _, farm := range [][]byte{nil, []byte("a task farm")} {
		d := &Daemon{taskFarm: farm}
		for uri, want := range map[string]bool{"qemu:///system": true, "qemu+ssh://root@node0/system": true,
			"test:///default": false, "slurm:n1": farm != nil} {
			if got := d.bootsOn(s, &gridHost{inv: hp.Host{URI: uri}}); got != want {
				t.Errorf("with task farm %q: bootsOn(%s) = %v, want %v", farm, uri, got, want)
			}
		}
	}
}

// The task farm the calibration copies onto Slurm nodes: a configured one
// that cannot be used is an error naming the field; none configured and
// none beside the program leaves Slurm nodes unmeasured, saying why.
func TestLoadTaskFarm(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "taskfarm")
	if err := os.WriteFile(bad, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{bad, filepath.Join(t.TempDir(), "none")} {
		if b, _, err := loadTaskFarm(p); err == nil || !strings.HasPrefix(err.Error(), "calibration.taskfarm: unusable task farm binary: ") || b != nil {
			t.Errorf("loadTaskFarm(%s) = %d bytes, %v", p, len(b), err)
		}
	}
	// The test's own binary has no task farm beside it.
	b, why, err := loadTaskFarm("")
	if err != nil || b != nil || !strings.Contains(why, "calibration.taskfarm is not set, and unusable task farm binary: ") {
		t.Errorf(`loadTaskFarm("") = %d bytes, %q, %v`, len(b), why, err)
	}
}
