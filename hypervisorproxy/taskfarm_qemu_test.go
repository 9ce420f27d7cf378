package hypervisorproxy_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/rs/zerolog"

	"github.com/metasched/metasched/gramvm/taskfarm"
	hp "github.com/metasched/metasched/hypervisorproxy"
	"github.com/metasched/metasched/hypervisorproxy/image"
	"github.com/metasched/metasched/hypervisorproxy/libvirtdtest"
	"github.com/metasched/metasched/hypervisorproxy/netlab"
	"github.com/metasched/metasched/hypervisorproxy/virt"
	"github.com/metasched/metasched/internal/taskfarmtest"
)

// The task farm in booted guests of the bundled image, on one site's
// bridge (a root libvirtd in a netlab grid, an agent with the site's
// network): its bench runs through the guest agent and prints its JSON
// line, a probe from one VM to a sink in the other prints its own; a master in one VM and the worker process of another (one per
// vCPU) complete a run, the master's summary (its line and its file)
// accounting for every task, the worker VM named by the hostfile, and
// the worker exits 0 when told the run is over.
func TestTaskFarmInGuests(t *testing.T) {
	libvirtdtest.SkipShort(t)
	if err := libvirtdtest.Check(); err != nil {
		t.Fatal(err)
	}
	if err := netlab.Check(); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	g := netlab.NewGridT(t, netlab.GridOptions{Sites: []string{"a"}})
	var (
		d   *libvirtdtest.Daemon
		res *image.Result
		err error
		wg  sync.WaitGroup
	)
	tf := taskfarmtest.Binary(t)
	imageDir := filepath.Join(t.TempDir(), "image")
	wg.Go(func() { res, err = image.Build(ctx, image.Options{Out: imageDir, TaskFarm: tf}) })
	d = libvirtdtest.StartT(t, libvirtdtest.Options{Root: true, NetNS: g.Namespace()})
	wg.Wait()
	if err != nil {
		t.Fatalf("image: %v", err)
	}

	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "token"), []byte(testToken), 0o600); err != nil {
		t.Fatal(err)
	}
	site, err := hp.ParseSite(filepath.Join(dir, "site.yaml"), []byte(fmt.Sprintf(`site: a
token_file: token
insecure_http: true
data_dir: %q
boot_timeout: %s
images: {farm: %q}
network: {bridge: %s, subnet: 10.79.0.0/16, addresses: 10.79.1.10-10.79.1.20}
hosts:
  - {name: qa, uri: %q, pool: farm}
`, filepath.Join(dir, "data"), goodBootTimeout, res.Dir, g.Bridge("a"), d.URI())))
	if err != nil {
		t.Fatal(err)
	}
	log := zerolog.New(zerolog.NewTestWriter(t))
	c := serveAgent(t, hp.Config{Site: site, Token: testToken, Connect: virt.Connector(log), Logger: log}).client

	specs := []hp.VMSpec{
		{Name: "farm-m", Host: "qa", Job: "tf", VCPUs: 1, MemoryMiB: 128, Image: "farm"},
		{Name: "farm-w", Host: "qa", Job: "tf", VCPUs: 1, MemoryMiB: 128, Image: "farm"},
	}
	vms := make([]hp.VM, len(specs))
	errs := make([]error, len(specs))
	for i, s := range specs {
		wg.Go(func() { vms[i], errs[i] = c.Create(ctx, s) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("create %s: %v", specs[i].Name, err)
		}
	}
	t.Cleanup(func() {
		for _, vm := range vms {
			if err := c.Destroy(context.Background(), vm.Name); err != nil {
				t.Error(err)
			}
		}
	})
	addr := func(vm hp.VM) string {
		p, err := netip.ParsePrefix(vm.Address)
		if err != nil {
			t.Fatalf("%s has no address: %+v", vm.Name, vm)
		}
		return p.Addr().String()
	}
	master, worker := addr(vms[0]), addr(vms[1])

	t.Run("bench", func(t *testing.T) {
		st := guestRun(t, c, "farm-w", hp.GuestExec{Path: image.TaskFarmPath, Args: []string{"bench", "--seconds", "1"}, CaptureOutput: true})
		if st.ExitCode != 0 {
			t.Fatalf("bench: exit %d: %s", st.ExitCode, st.Stderr)
		}
		var b taskfarm.BenchResult
		dec := json.NewDecoder(strings.NewReader(string(st.Stdout)))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&b); err != nil {
			t.Fatalf("bench printed %q: %v", st.Stdout, err)
		}
		if b.Procs != 1 || b.Ops == 0 || b.Seconds < 1 || b.OpsPerSecond <= 0 || b.OpsPerSecondPerProc != b.OpsPerSecond {
			t.Errorf("bench in a guest of 1 vCPU: %+v", b)
		}
		t.Logf("the kernel in a TCG guest of 1 vCPU: %.3g ops/s: %s", b.OpsPerSecond, strings.TrimSpace(string(st.Stdout)))
	})

	t.Run("probe", func(t *testing.T) {
		sink := startRunnerJob(t, c, "farm-m", "/run/metasched/sink/1", "taskfarm sink --port 7421 --count 1")
		st := guestRun(t, c, "farm-w", hp.GuestExec{Path: image.TaskFarmPath, CaptureOutput: true,
			Args: []string{"probe", "--to", master + ":7421", "--bytes", "8388608"}})
		if st.ExitCode != 0 {
			t.Fatalf("probe: exit %d: %s", st.ExitCode, st.Stderr)
		}
		var p taskfarm.ProbeResult
		if err := json.Unmarshal(st.Stdout, &p); err != nil || p.Bytes != 8388608 || p.Seconds <= 0 || p.Mbps <= 0 {
			t.Fatalf("probe printed %q: %v", st.Stdout, err)
		}
		t.Logf("8 MiB from one TCG guest to another on the bridge: %s", strings.TrimSpace(string(st.Stdout)))
		if code, out := sink.wait(); code != 0 {
			t.Errorf("the sink after its one probe: exit %d:\n%s", code, out)
		}
	})

	t.Run("run", func(t *testing.T) {
		hostfile := fmt.Sprintf("%s slots=1 # name=farm-m site=a role=master\n%s slots=1 # name=farm-w site=a role=worker\n", master, worker)
		if st := guestRun(t, c, "farm-m", hp.GuestExec{Path: "/bin/mkdir", Args: []string{"-p", "/etc/metasched"}}); st.ExitCode != 0 {
			t.Fatalf("mkdir: %+v", st)
		}
		if err := c.GuestWriteFile(ctx, "farm-m", "/etc/metasched/hostfile", []byte(hostfile), 0o644); err != nil {
			t.Fatal(err)
		}
		w := startRunnerJob(t, c, "farm-w", "/run/metasched/tf/1", "taskfarm run",
			"METASCHED_ROLE=worker", "METASCHED_MASTER_ADDRESS="+master, "METASCHED_JOB_ID=tf")
		m := startRunnerJob(t, c, "farm-m", "/run/metasched/tf/1", "taskfarm run",
			"METASCHED_ROLE=master", "METASCHED_TASKS=40", "METASCHED_TASK_OPS=2e+05", "METASCHED_TASK_BYTES=16384",
			"METASCHED_HOSTFILE=/etc/metasched/hostfile", "METASCHED_JOB_ID=tf")
		code, out := m.wait()
		if code != 0 {
			t.Fatalf("master: exit %d:\n%s", code, out)
		}
		var line string
		for _, l := range strings.Split(out, "\n") {
			if s, ok := strings.CutPrefix(l, "taskfarm-summary: "); ok {
				line = s
			}
		}
		file, err := c.GuestReadFile(ctx, "farm-m", "/tmp/work/"+taskfarm.SummaryFile, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		if strings.TrimSpace(string(file.Data)) != line {
			t.Errorf("the summary file %q differs from the master's line %q", file.Data, line)
		}
		s, err := taskfarm.ParseSummary(file.Data)
		if err != nil {
			t.Fatalf("%v:\n%s", err, out)
		}
		if s.Tasks != 40 || s.Done != 40 || s.InputBytes != 16352 || s.ResultBytes != 32 || s.Reissued != 0 {
			t.Errorf("summary %+v", s)
		}
		if len(s.Workers) != 1 || s.Workers[0] != (taskfarm.Worker{Name: "farm-w", Site: "a", Address: worker, Procs: 1, Tasks: 40}) {
			t.Errorf("workers %+v, want farm-w of site a with its one process and the 40 tasks", s.Workers)
		}
		t.Logf("40 tasks of 200,000 operations and 16 KiB, one worker VM of 1 vCPU: %.2f s, %d bytes moved", s.WallSeconds, s.BytesMoved)
		if code, out := w.wait(); code != 0 {
			t.Errorf("worker: exit %d:\n%s", code, out)
		}
	})
}
