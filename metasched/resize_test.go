package metasched_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/metasched/metasched/graph"
	"github.com/metasched/metasched/metasched"
	"github.com/metasched/metasched/metasched/api"
	"github.com/metasched/metasched/metasched/client"
	"github.com/metasched/metasched/metasched/jobfile"
)

// TestResizeVM: with vm_headroom, the VMs the daemon creates have maxima
// above their size (the hosts' free capacity counts their size), and a
// running job's VM is resized live through the API: it grows within its
// maxima and as far as its host has room, and the daemon's view of the
// host's capacity follows at once; a growth beyond either is refused
// before the agent is asked, naming the maximum or the host's free
// vCPUs and memory; the test driver shrinks it back; bad requests name
// their field.
func TestResizeVM(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		grid := &graph.Grid{Clusters: []graph.Cluster{
			{Name: "lab", Machines: 3, Cores: 2, MemoryMiB: 8192, Perf: 1e9, LANMbps: 1000, UplinkMbps: 1000},
		}}
		td := startDaemonGrid(t, grid, metasched.Options{}, func(c *metasched.Config) {
			c.JobTypes = []api.JobType{{Name: "render", VCPUs: 1, MemoryMiB: 1024, HoldingCost: 1}}
			c.Policy = metasched.PolicyConfig{Name: "none"}
			c.Executor.TimeScale = 1
			c.MinPoolHosts = 0
			c.VMHeadroom = metasched.VMHeadroom{VCPUs: 2, MemoryMiB: 2048}
		})
		d, ctx := td.d, context.Background()
		c := client.New(td.addr, d.Token()).WithHTTPClient(td.http)
		job, err := d.Submit(ctx, jobfile.Decode([]byte("name: long\ntype: render\ntasks: 100000\ntask_ops: 1.0e10\ntask_bytes: 1.0e3\n")))
		if err != nil {
			t.Fatal(err)
		}
		var vm api.VM
		waitFor(t, "the job running with its VMs listed", 20*time.Second, func() bool {
			j, err := d.Job(ctx, job.ID)
			if err != nil {
				t.Fatal(err)
			}
			if j.State != api.Running {
				return false
			}
			for _, v := range d.VMs() {
				if v.Job == job.ID && !strings.HasSuffix(v.Name, "-m") {
					vm = v
					return true
				}
			}
			return false
		})
		if vm.VCPUs != 1 || vm.MaxVCPUs != 3 || vm.MemoryMiB != 1024 || vm.MaxMemoryMiB != 3072 {
			t.Fatalf("vm %+v: want 1 vCPU (at most 3) and 1024 MiB (at most 3072)", vm)
		}
		free := func() (int, int) {
			for _, h := range d.Hosts() {
				if h.Name == vm.Host {
					return h.FreeVCPUs, h.FreeMemoryMiB
				}
			}
			t.Fatalf("no host %s", vm.Host)
			return 0, 0
		}
		if c, m := free(); c != 1 || m != 8192-1024 {
			t.Errorf("host %s has %d vCPUs and %d MiB free: want its VM counted at its size (1 and 7168)", vm.Host, c, m)
		}

		got, err := c.ResizeVM(ctx, job.ID, vm.Name, api.ResizeRequest{VCPUs: 2, MemoryMiB: 2048})
		if err != nil {
			t.Fatal(err)
		}
		if got.VCPUs != 2 || got.MemoryMiB != 2048 {
			t.Errorf("after the resize the vm is %+v", got)
		}
		if c, m := free(); c != 0 || m != 8192-2048 {
			t.Errorf("after the growth host %s has %d vCPUs and %d MiB free, want 0 and 6144", vm.Host, c, m)
		}

		refused := func(r api.ResizeRequest, status int, want ...string) {
			t.Helper()
			_, err := c.ResizeVM(ctx, job.ID, vm.Name, r)
			var re *client.RemoteError
			if !errors.As(err, &re) || re.Status != status {
				t.Fatalf("resize %+v: %v, want status %d", r, err, status)
			}
			for _, w := range want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("resize %+v: %v; want it to say %q", r, err, w)
				}
			}
		}
		refused(api.ResizeRequest{VCPUs: 3}, 409, "host "+vm.Host+" has 0 vCPUs and 6144 MiB free", "cannot grow by 1 vCPUs and 0 MiB")
		refused(api.ResizeRequest{VCPUs: 4}, 409, "vcpus: 4 is beyond the VM's maximum of 3 vCPUs")
		refused(api.ResizeRequest{MemoryMiB: 4096}, 409, "memory_mib: 4096 is beyond the VM's maximum of 3072 MiB")
		refused(api.ResizeRequest{VCPUs: -1}, 400, "vcpus: must be >= 1, not -1")
		refused(api.ResizeRequest{}, 400, "vcpus: give vcpus or memory_mib")
		if _, err := c.ResizeVM(ctx, job.ID, "nope", api.ResizeRequest{VCPUs: 1}); err == nil || !strings.Contains(err.Error(), `has no VM "nope"`) {
			t.Errorf("resize of an unknown VM: %v", err)
		}
		if _, err := c.ResizeVM(ctx, "j-000000000099", vm.Name, api.ResizeRequest{VCPUs: 1}); err == nil || !strings.Contains(err.Error(), "no job") {
			t.Errorf("resize in an unknown job: %v", err)
		}

		// The test driver takes vCPUs out again.
		if got, err = c.ResizeVM(ctx, job.ID, vm.Name, api.ResizeRequest{VCPUs: 1}); err != nil || got.VCPUs != 1 {
			t.Fatalf("shrink: %+v, %v", got, err)
		}
		if c, _ := free(); c != 1 {
			t.Errorf("after the shrink host %s has %d vCPUs free, want 1", vm.Host, c)
		}

		if _, err := d.Cancel(ctx, job.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := c.ResizeVM(ctx, job.ID, vm.Name, api.ResizeRequest{VCPUs: 2}); err == nil || !strings.Contains(err.Error(), "only the VMs of a provisioning or running job") {
			t.Errorf("resize in a cancelled job: %v", err)
		}
	})
}
