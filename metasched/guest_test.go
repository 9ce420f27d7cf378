package metasched_test

import (
	"context"
	"encoding/base64"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/rs/zerolog"

	"github.com/metasched/metasched/hypervisorproxy/virt"
	"github.com/metasched/metasched/metasched"
	"github.com/metasched/metasched/metasched/api"
	"github.com/metasched/metasched/metasched/demo"
	"github.com/metasched/metasched/metasched/executor"
	"github.com/metasched/metasched/metasched/guesttest"
	"github.com/metasched/metasched/metasched/jobfile"
)

// TestGuestExecutor runs jobs with the guest executor through the sites'
// agents: every VM's output is in the job's log with its name, the
// hostfile in the guests has the addresses of the agents' inventories, and
// the master's exit decides.
func TestGuestExecutor(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		td := startGuestDaemon(t)
		d, ctx := td.d, context.Background()
		submit := scriptSubmitter(t, d)
		ok, bad := submit("ok", "echo hello"), submit("bad", "exit 3")
		for _, id := range []string{ok, bad} {
			waitFor(t, "job "+id+" finished", time.Minute, func() bool {
				j, err := d.Job(ctx, id)
				if err != nil {
					t.Fatal(err)
				}
				return j.State.Terminal()
			})
		}
		j, err := d.Job(ctx, ok)
		if err != nil {
			t.Fatal(err)
		}
		if j.State != api.Done {
			t.Fatalf("ok job: %s (%s)", j.State, j.Reason)
		}
		logs, err := d.Store().Logs(ctx, ok)
		if err != nil {
			t.Fatal(err)
		}
		if len(j.VMs) < 2 {
			t.Fatalf("job on %d VMs, want a master and workers", len(j.VMs))
		}
		for i, vm := range j.VMs {
			role := "worker"
			if i == 0 {
				role = "master"
			}
			want := vm.Name + "| rank=" + strconv.Itoa(i) + " role=" + role + " master=" + j.VMs[0].Name + "\n"
			if !strings.Contains(string(logs), want) {
				t.Errorf("the log has no %q:\n%s", want, logs)
			}
			hostfileLine := regexp.MustCompile(regexp.QuoteMeta(j.VMs[0].Name) + `\| 10\.77\.\d+\.\d+ slots=\d+ # name=` + regexp.QuoteMeta(vm.Name) + " ")
			if !hostfileLine.Match(logs) {
				t.Errorf("the master's hostfile in the log has no address line for %s:\n%s", vm.Name, logs)
			}
		}
		j, err = d.Job(ctx, bad)
		if err != nil {
			t.Fatal(err)
		}
		if j.State != api.Failed || j.ExitCode == nil || *j.ExitCode != 3 {
			t.Fatalf("bad job: %s (%s), exit %v", j.State, j.Reason, j.ExitCode)
		}
	})
}

// TestGuestJobFiles: a job's input that is not text (NUL, CR, bytes that
// are not UTF-8), sent as data, reaches every VM of the job byte for byte;
// an output the master writes comes back through the API (its list and
// its bytes), one it did not write is listed as missing, and a name that
// is not a clean relative path is refused.
func TestGuestJobFiles(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		guests := map[string]*guesttest.Site{}
		var dataDir string
		td := startDaemon(t, metasched.Options{WrapAgent: func(site string, a metasched.SiteAgent) metasched.SiteAgent {
			g := &guesttest.Site{SiteAgent: a, Net: len(guests) + 1}
			guests[site] = g
			return g
		}}, func(c *metasched.Config) {
			dataDir = c.DataDir
			c.Executor = metasched.ExecutorConfig{Name: "guest", Poll: 100 * time.Millisecond}
			c.Policy = metasched.PolicyConfig{Name: "none"}
		})
		ctx, c := context.Background(), apiClientOf(td)
		bin := []byte{0, 0xff, 0xfe, '\r', '\n', 0x80, 0, 'x'}
		j, err := c.Submit(ctx, []byte("name: files\ntype: sim\ntasks: 10\ntask_ops: 1.0e9\ntask_bytes: 0\n"+
			"command: [/bin/sh, -c, 'cp data/in.bin result.bin']\n"+
			"inputs: [{path: params.txt, content: \"a=1\\n\"}, {path: data/in.bin, data: "+base64.StdEncoding.EncodeToString(bin)+"}]\n"+
			"outputs: [result.bin, never.txt]\n"))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Outputs(ctx, j.ID); err == nil || !strings.Contains(err.Error(), "its outputs are copied out of the master VM when it ends") {
			t.Errorf("the outputs of a job not ended: %v", err)
		}
		waitFor(t, "the job finished", time.Minute, func() bool {
			j, err = c.Job(ctx, j.ID)
			if err != nil {
				t.Fatal(err)
			}
			return j.State.Terminal()
		})
		if j.State != api.Done {
			t.Fatalf("job: %s (%s)", j.State, j.Reason)
		}
		if len(j.VMs) < 2 {
			t.Fatalf("job on %d VMs, want a master and workers", len(j.VMs))
		}
		// The job's view names its inputs without their bytes.
		if in := j.Spec.Inputs; len(in) != 2 || in[0].Path != "params.txt" || in[1].Path != "data/in.bin" || in[0].Content != "" || in[1].Data != nil {
			t.Errorf("the job's view of its inputs: %+v, want their paths only", in)
		}
		work := executor.GuestWorkDir(j.ID)
		for _, vm := range j.VMs {
			g := guests[vm.Site]
			got, params := g.File(vm.Name, path.Join(work, "data/in.bin")), g.File(vm.Name, path.Join(work, "params.txt"))
			if string(got) != string(bin) || string(params) != "a=1\n" {
				t.Errorf("inputs in %s: %q and %q, want %q and %q", vm.Name, got, params, bin, "a=1\n")
			}
		}
		list, err := c.Outputs(ctx, j.ID)
		if err != nil {
			t.Fatal(err)
		}
		want := api.OutputList{Job: j.ID, Attempt: 1, Files: []api.OutputFile{{Name: "result.bin", Size: int64(len(bin))}}, Missing: []string{"never.txt"}}
		if diff := cmp.Diff(want, list); diff != "" {
			t.Errorf("outputs (-want +got):\n%s", diff)
		}
		got, err := c.Output(ctx, j.ID, "result.bin")
		if err != nil || string(got) != string(bin) {
			t.Errorf("output result.bin: %q, %v; want %q", got, err, bin)
		}
		if _, err := c.Output(ctx, j.ID, "never.txt"); err == nil || !strings.Contains(err.Error(), `no output "never.txt" in attempt 1`) {
			t.Errorf("an output the master did not write: %v", err)
		}
		for _, name := range []string{"../result.bin", "a//b", "/etc/passwd", ""} {
			if f, err := td.d.Output(ctx, j.ID, name); err == nil || !strings.Contains(err.Error(), "name") {
				if f != nil {
					_ = f.Close() // read-only, and the test fails on it anyway
				}
				t.Errorf("output %q: %v, want refused naming the field", name, err)
			}
		}
		// The run directory gone (retention.job_dirs), the outputs are too.
		if err := os.RemoveAll(filepath.Join(dataDir, "jobs", j.ID)); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Outputs(ctx, j.ID); err == nil || !strings.Contains(err.Error(), "its run directory was removed") {
			t.Errorf("the outputs of a job whose run directory was removed: %v", err)
		}
		if _, err := c.Outputs(ctx, "j-999999999999"); err == nil || !strings.Contains(err.Error(), `no job "j-999999999999"`) {
			t.Errorf("the outputs of no job: %v", err)
		}
	})
}

// TestGuestExecutorNoAddress: a job whose VMs' site has no network (its
// agent gives them no address) fails with the reason, at once.
func TestGuestExecutorNoAddress(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		td := startDaemon(t, metasched.Options{WrapAgent: func(_ string, a metasched.SiteAgent) metasched.SiteAgent {
			return &guesttest.Site{SiteAgent: a}
		}}, func(c *metasched.Config) {
			c.Executor = metasched.ExecutorConfig{Name: "guest"}
			c.Policy = metasched.PolicyConfig{Name: "none"}
		})
		d, ctx := td.d, context.Background()
		j, err := d.Submit(ctx, jobfile.Decode([]byte("name: j\ntype: sim\ntasks: 10\ntask_ops: 1.0e9\ntask_bytes: 0\ncommand: [/bin/true]\n")))
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		waitFor(t, "the job finished", time.Hour, func() bool {
			j, err = d.Job(ctx, j.ID)
			if err != nil {
				t.Fatal(err)
			}
			return j.State.Terminal()
		})
		if j.State != api.Failed || !strings.Contains(j.Reason, "gave it no address: the guest executor needs the site's network") {
			t.Fatalf("job: %s (%s), want failed for the missing address", j.State, j.Reason)
		}
		if waited := time.Since(start); waited > 30*time.Second {
			t.Errorf("the job failed %s after its submission: a site without network is not worth waiting for", waited)
		}
	})
}

// TestJobFilesNeedGuestExecutor: a daemon with another executor refuses a
// job with inputs or outputs, naming the field.
func TestJobFilesNeedGuestExecutor(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		td := startDaemon(t, metasched.Options{}, func(c *metasched.Config) {
			hostCommand(t, c)
		})
		const job = "name: j\ntype: sim\ntasks: 10\ntask_ops: 1.0e9\ntask_bytes: 0\ncommand: [/bin/true]\n"
		for field, file := range map[string]string{"inputs": job + "inputs: [{path: a, content: b}]\n", "outputs": job + "outputs: [a]\n"} {
			_, err := td.d.Submit(context.Background(), jobfile.Decode([]byte(file)))
			if err == nil || !strings.Contains(err.Error(), field) || !strings.Contains(err.Error(), "applies to the guest executor only; this daemon runs the host-command executor") {
				t.Errorf("a job with %s on the host-command executor: %v", field, err)
			}
		}
	})
}

// TestJobInputFromRefused: the daemon does not read a file an input's
// from names (a file of the submitting machine) and says so.
func TestJobInputFromRefused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		td := startDaemon(t, metasched.Options{WrapAgent: func(_ string, a metasched.SiteAgent) metasched.SiteAgent {
			return &guesttest.Site{SiteAgent: a, Net: 1}
		}}, func(c *metasched.Config) {
			c.Executor = metasched.ExecutorConfig{Name: "guest"}
		})
		_, err := td.d.Submit(context.Background(), jobfile.Decode([]byte("name: j\ntype: sim\ntasks: 10\ntask_ops: 1.0e9\ntask_bytes: 0\ncommand: [/bin/true]\n"+
			"inputs: [{path: a, content: b}, {path: in.bin, from: /etc/hostname}]\n")))
		if err == nil || !strings.Contains(err.Error(), `inputs[1].from: "/etc/hostname" is a file of the submitting machine, which the daemon does not read`) {
			t.Fatalf("a job with an input from a local file: %v", err)
		}
	})
}

// TestGuestExecutorNeedsGuestAPI: a daemon configured with the guest
// executor on its in-process agents (libvirt's test driver, which boots
// no guest) does not start, and says which site.
func TestGuestExecutorNeedsGuestAPI(t *testing.T) {
	cfg, grid, err := demo.Config(t.TempDir(), "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Executor = metasched.ExecutorConfig{Name: "guest"}
	log := zerolog.Nop()
	d, err := metasched.NewWithGrid(context.Background(), cfg, grid, metasched.Options{Logger: log, Connect: virt.Connector(log)})
	if err == nil {
		_ = d.Close() // the test fails: that is the error to report
		t.Fatal("the daemon started with the guest executor on agents without a guest API")
	}
	if !strings.Contains(err.Error(), "executor: guest: site ") || !strings.Contains(err.Error(), "in-process agent is on libvirt's test driver") {
		t.Fatalf("error %q does not name the site without a guest API", err)
	}
}

// startGuestDaemon starts a daemon with the guest executor (polling every
// 100 ms) on in-memory guests, site N's VMs on 10.77.N.0/24, and no
// policy.
func startGuestDaemon(t *testing.T) *testDaemon {
	t.Helper()
	nets := 0
	return startDaemon(t, metasched.Options{WrapAgent: func(_ string, a metasched.SiteAgent) metasched.SiteAgent {
		nets++
		return &guesttest.Site{SiteAgent: a, Net: nets}
	}}, func(c *metasched.Config) {
		c.Executor = metasched.ExecutorConfig{Name: "guest", Poll: 100 * time.Millisecond}
		c.Policy = metasched.PolicyConfig{Name: "none"}
	})
}
