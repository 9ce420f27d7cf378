package metasched_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/rs/zerolog"

	hp "github.com/metasched/metasched/hypervisorproxy"
	"github.com/metasched/metasched/hypervisorproxy/virt"
	"github.com/metasched/metasched/metasched"
	"github.com/metasched/metasched/metasched/api"
	"github.com/metasched/metasched/metasched/demo"
	"github.com/metasched/metasched/metasched/executor"
	"github.com/metasched/metasched/metasched/store"
)

// memGuests is a site agent with a guest API held in memory: its VMs get
// addresses in the inventory, their files are a map, mkdir succeeds, and
// the runner's start plays a command that ran at once: DIR/output says what
// the command's environment held and what the guest's hostfile holds,
// DIR/exit its status ("exit N" in the command line, else 0), and a
// "cp A B" of the command line copies A to B in the working directory.
type memGuests struct {
	metasched.SiteAgent
	net int // the site's network: 10.77.net.N; 0: none (no addresses)

	mu    sync.Mutex
	files map[string]map[string][]byte // VM, path
	procs int
}

var (
	exitRE = regexp.MustCompile(`exit (\d+)`)
	cpRE   = regexp.MustCompile(`cp ([\w./-]+) ([\w./-]+)`)
)

func (m *memGuests) Inventory(ctx context.Context) (hp.Inventory, error) {
	inv, err := m.SiteAgent.Inventory(ctx)
	for h := range inv.Hosts {
		if m.net == 0 {
			break
		}
		for i := range inv.Hosts[h].VMs {
			vm := &inv.Hosts[h].VMs[i]
			vm.Address = fmt.Sprintf("10.77.%d.%d/16", m.net, 10+len(vm.Name)%200)
		}
	}
	return inv, err
}

func (m *memGuests) vm(name string) map[string][]byte {
	if m.files == nil {
		m.files = map[string]map[string][]byte{}
	}
	if m.files[name] == nil {
		m.files[name] = map[string][]byte{}
	}
	return m.files[name]
}

func (m *memGuests) GuestExec(ctx context.Context, vm string, e hp.GuestExec) (hp.GuestProcess, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	files := m.vm(vm)
	m.procs++
	if e.Path == executor.GuestRunner && len(e.Args) == 4 && e.Args[0] == "start" {
		dir := e.Args[1]
		env := map[string]string{}
		for _, kv := range e.Env {
			k, v, _ := strings.Cut(kv, "=")
			env[k] = v
		}
		files[path.Join(dir, "pid")] = []byte("100\n")
		files[path.Join(dir, "output")] = fmt.Appendf(nil, "rank=%s role=%s master=%s\n%s", env["METASCHED_RANK"], env["METASCHED_ROLE"],
			env["METASCHED_MASTER"], files[env["METASCHED_HOSTFILE"]])
		code := "0"
		if sm := exitRE.FindSubmatch(files[path.Join(dir, "command")]); sm != nil {
			code = string(sm[1])
		}
		files[path.Join(dir, "exit")] = []byte(code + "\n")
		// "cp A B" in the command copies A to B in the working directory.
		if sm := cpRE.FindSubmatch(files[path.Join(dir, "command")]); sm != nil {
			if data, ok := files[path.Join(e.Args[2], string(sm[1]))]; ok {
				files[path.Join(e.Args[2], string(sm[2]))] = data
			}
		}
	}
	return hp.GuestProcess{PID: m.procs}, nil
}

func (m *memGuests) GuestExecStatus(ctx context.Context, vm string, pid int) (hp.GuestExecStatus, error) {
	return hp.GuestExecStatus{Exited: true}, nil
}

func (m *memGuests) GuestWriteFile(ctx context.Context, vm, p string, data []byte, mode os.FileMode) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.vm(vm)[p] = append([]byte(nil), data...)
	return nil
}

func (m *memGuests) GuestReadFile(ctx context.Context, vm, p string, offset int64, max int) (hp.GuestFileChunk, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	data, ok := m.vm(vm)[p]
	if !ok {
		return hp.GuestFileChunk{}, fmt.Errorf("%s: %w", p, hp.ErrNotFound)
	}
	data = data[min(offset, int64(len(data))):]
	if max > 0 && len(data) > max {
		return hp.GuestFileChunk{Data: data[:max]}, nil
	}
	return hp.GuestFileChunk{Data: data, EOF: true}, nil
}

// TestGuestExecutor runs jobs with the guest executor through the sites'
// agents: every VM's output is in the job's log with its name, the
// hostfile in the guests has the addresses of the agents' inventories, and
// the master's exit decides.
func TestGuestExecutor(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		nets := 0
		td := startDaemon(t, metasched.Options{WrapAgent: func(_ string, a metasched.SiteAgent) metasched.SiteAgent {
			nets++
			return &memGuests{SiteAgent: a, net: nets}
		}}, func(c *metasched.Config) {
			c.Executor = metasched.ExecutorConfig{Name: "guest", Poll: 100 * time.Millisecond}
			c.Policy = metasched.PolicyConfig{Name: "none"}
		})
		d, ctx := td.d, context.Background()
		submit := func(name, script string) string {
			j, err := d.Submit(ctx, []byte("name: "+name+"\ntype: sim\ntasks: 10\ntask_ops: 1.0e9\ntask_bytes: 0\ncommand: [/bin/sh, -c, '"+script+"']\n"))
			if err != nil {
				t.Fatal(err)
			}
			return j.ID
		}
		ok, bad := submit("ok", "echo hello"), submit("bad", "exit 3")
		for _, id := range []string{ok, bad} {
			waitFor(t, "job "+id+" finished", time.Minute, func() bool {
				j, _ := d.Job(ctx, id)
				return j.State.Terminal()
			})
		}
		j, _ := d.Job(ctx, ok)
		if j.State != store.Done {
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
		j, _ = d.Job(ctx, bad)
		if j.State != store.Failed || j.ExitCode == nil || *j.ExitCode != 3 {
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
		guests := map[string]*memGuests{}
		var dataDir string
		td := startDaemon(t, metasched.Options{WrapAgent: func(site string, a metasched.SiteAgent) metasched.SiteAgent {
			g := &memGuests{SiteAgent: a, net: len(guests) + 1}
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
			j, _ = c.Job(ctx, j.ID)
			return j.State.Terminal()
		})
		if j.State != store.Done {
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
			g.mu.Lock()
			got, params := g.vm(vm.Name)[path.Join(work, "data/in.bin")], g.vm(vm.Name)[path.Join(work, "params.txt")]
			g.mu.Unlock()
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
					f.Close()
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
			return &memGuests{SiteAgent: a}
		}}, func(c *metasched.Config) {
			c.Executor = metasched.ExecutorConfig{Name: "guest"}
			c.Policy = metasched.PolicyConfig{Name: "none"}
		})
		d, ctx := td.d, context.Background()
		j, err := d.Submit(ctx, []byte("name: j\ntype: sim\ntasks: 10\ntask_ops: 1.0e9\ntask_bytes: 0\ncommand: [/bin/true]\n"))
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		waitFor(t, "the job finished", time.Hour, func() bool {
			j, _ = d.Job(ctx, j.ID)
			return j.State.Terminal()
		})
		if j.State != store.Failed || !strings.Contains(j.Reason, "gave it no address: the guest executor needs the site's network") {
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
			c.Executor = metasched.ExecutorConfig{Name: "command"}
		})
		const job = "name: j\ntype: sim\ntasks: 10\ntask_ops: 1.0e9\ntask_bytes: 0\ncommand: [/bin/true]\n"
		for field, file := range map[string]string{"inputs": job + "inputs: [{path: a, content: b}]\n", "outputs": job + "outputs: [a]\n"} {
			_, err := td.d.Submit(context.Background(), []byte(file))
			if err == nil || !strings.Contains(err.Error(), field) || !strings.Contains(err.Error(), "applies to the guest executor only; this daemon runs the command executor") {
				t.Errorf("a job with %s on the command executor: %v", field, err)
			}
		}
	})
}

// TestJobInputFromRefused: the daemon does not read a file an input's
// from names (a file of the submitting machine) and says so.
func TestJobInputFromRefused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		td := startDaemon(t, metasched.Options{WrapAgent: func(_ string, a metasched.SiteAgent) metasched.SiteAgent {
			return &memGuests{SiteAgent: a, net: 1}
		}}, func(c *metasched.Config) {
			c.Executor = metasched.ExecutorConfig{Name: "guest"}
		})
		_, err := td.d.Submit(context.Background(), []byte("name: j\ntype: sim\ntasks: 10\ntask_ops: 1.0e9\ntask_bytes: 0\ncommand: [/bin/true]\n"+
			"inputs: [{path: a, content: b}, {path: in.bin, from: /etc/hostname}]\n"))
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
		d.Close()
		t.Fatal("the daemon started with the guest executor on agents without a guest API")
	}
	if !strings.Contains(err.Error(), "executor: guest: site ") || !strings.Contains(err.Error(), "in-process agent is on libvirt's test driver") {
		t.Fatalf("error %q does not name the site without a guest API", err)
	}
}
