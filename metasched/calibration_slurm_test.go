package metasched

import (
	"testing"

	hp "github.com/metasched/metasched/hypervisorproxy"
)

// A calibration VM boots on a QEMU host of a remote agent, not on a
// test-driver host, nor on a Slurm node (whose jobs run on its own system,
// with no task farm to measure with).
func TestBootsOn(t *testing.T) {
	s := &siteAgent{}
	for uri, want := range map[string]bool{"qemu:///system": true, "qemu+ssh://root@node0/system": true,
		"test:///default": false, "slurm:n1": false} {
		if got := bootsOn(s, &gridHost{inv: hp.Host{URI: uri}}); got != want {
			t.Errorf("bootsOn(%s) = %v, want %v", uri, got, want)
		}
	}
}
