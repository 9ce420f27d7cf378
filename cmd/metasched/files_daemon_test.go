package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	hp "github.com/metasched/metasched/hypervisorproxy"
	"github.com/metasched/metasched/hypervisorproxy/virt"
	"github.com/metasched/metasched/metasched"
	"github.com/metasched/metasched/metasched/demo"
	"github.com/metasched/metasched/metasched/executor"
	"github.com/metasched/metasched/metasched/httpapi"
	"github.com/metasched/metasched/metasched/lifecycle"
)

// fileGuests is a site agent (libvirt's test driver, in process) with a
// guest API held in memory: its VMs get addresses, their files are a map,
// and the runner's start plays a command that ran at once and exited 0,
// a "cp A B" of its command line copying A to B in the working directory.
type fileGuests struct {
	metasched.SiteAgent
	net int

	mu    sync.Mutex
	files map[string]map[string][]byte // VM, path
}

var fileCpRE = regexp.MustCompile(`cp ([\w./-]+) ([\w./-]+)`)

func (g *fileGuests) Inventory(ctx context.Context) (hp.Inventory, error) {
	inv, err := g.SiteAgent.Inventory(ctx)
	for h := range inv.Hosts {
		for i := range inv.Hosts[h].VMs {
			inv.Hosts[h].VMs[i].Address = fmt.Sprintf("10.78.%d.%d/16", g.net, 10+i)
		}
	}
	return inv, err
}

func (g *fileGuests) vm(name string) map[string][]byte {
	if g.files == nil {
		g.files = map[string]map[string][]byte{}
	}
	if g.files[name] == nil {
		g.files[name] = map[string][]byte{}
	}
	return g.files[name]
}

func (g *fileGuests) GuestExec(ctx context.Context, vm string, e hp.GuestExec) (hp.GuestProcess, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	files := g.vm(vm)
	if e.Path == executor.GuestRunner && len(e.Args) == 4 && e.Args[0] == "start" {
		dir, work := e.Args[1], e.Args[2]
		if sm := fileCpRE.FindSubmatch(files[path.Join(dir, "command")]); sm != nil {
			if data, ok := files[path.Join(work, string(sm[1]))]; ok {
				files[path.Join(work, string(sm[2]))] = data
			}
		}
		files[path.Join(dir, "pid")] = []byte("100\n")
		files[path.Join(dir, "output")] = []byte("ran\n")
		files[path.Join(dir, "exit")] = []byte("0\n")
	}
	return hp.GuestProcess{PID: 1}, nil
}

func (g *fileGuests) GuestExecStatus(ctx context.Context, vm string, pid int) (hp.GuestExecStatus, error) {
	return hp.GuestExecStatus{Exited: true}, nil
}

func (g *fileGuests) GuestWriteFile(ctx context.Context, vm, p string, data []byte, mode os.FileMode) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.vm(vm)[p] = append([]byte(nil), data...)
	return nil
}

func (g *fileGuests) GuestReadFile(ctx context.Context, vm, p string, offset int64, max int) (hp.GuestFileChunk, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	data, ok := g.vm(vm)[p]
	if !ok {
		return hp.GuestFileChunk{}, fmt.Errorf("%s: %w", p, hp.ErrNotFound)
	}
	data = data[min(offset, int64(len(data))):]
	if max > 0 && len(data) > max {
		return hp.GuestFileChunk{Data: data[:max]}, nil
	}
	return hp.GuestFileChunk{Data: data, EOF: true}, nil
}

// TestJobFilesThroughCLI: a job file's input from a local file that is not
// text, submitted with metasched submit to a daemon with the guest
// executor (its agents in process, their guests in memory), reaches every
// VM of the job byte for byte; metasched outputs lists the output the
// master wrote and the one it did not, and --out writes it.
func TestJobFilesThroughCLI(t *testing.T) {
	cfg, grid, err := demo.Config(t.TempDir(), "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg.SwitchDelay = 200 * time.Millisecond
	cfg.Executor = metasched.ExecutorConfig{Name: "guest", Poll: 50 * time.Millisecond}
	cfg.Policy = metasched.PolicyConfig{Name: "none"}
	log := zerolog.Nop()
	var mu sync.Mutex
	guests := map[string]*fileGuests{}
	ctx, cancel := context.WithCancel(context.Background())
	d, err := metasched.NewWithGrid(ctx, cfg, grid, metasched.Options{Logger: log, Connect: virt.Connector(log),
		Tick: 100 * time.Millisecond, WrapAgent: func(site string, a metasched.SiteAgent) metasched.SiteAgent {
			mu.Lock()
			defer mu.Unlock()
			g := &fileGuests{SiteAgent: a, net: len(guests) + 1}
			guests[site] = g
			return g
		}})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx, ln, httpapi.New(d, log)) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run: %v", err)
		}
		if err := d.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	server := "http://" + ln.Addr().String()

	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "in.bin"), binInput, 0o644); err != nil {
		t.Fatal(err)
	}
	job := filepath.Join(dir, "job.yaml")
	if err := os.WriteFile(job, []byte("name: files\ntype: sim\ntasks: 10\ntask_ops: 1.0e9\ntask_bytes: 0\n"+
		"command: [/bin/sh, -c, 'cp data/in.bin result.bin']\n"+
		"inputs: [{path: data/in.bin, from: in.bin}]\noutputs: [result.bin, never.txt]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runDaemonCmd(t, server, d.Token(), "submit", job)
	if code != 0 {
		t.Fatalf("submit: exit %d: %s", code, errOut)
	}
	id, _, _ := strings.Cut(out, " ")
	deadline := time.Now().Add(2 * time.Minute) // a bound for a loaded machine, not a speed
	for {
		j, err := d.Job(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if j.State.Terminal() {
			if j.State != lifecycle.Done {
				t.Fatalf("job %s: %s (%s)", id, j.State, j.Reason)
			}
			work := executor.GuestWorkDir(id)
			for _, vm := range j.VMs {
				g := guests[vm.Site]
				g.mu.Lock()
				got := g.vm(vm.Name)[path.Join(work, "data/in.bin")]
				g.mu.Unlock()
				if string(got) != string(binInput) {
					t.Errorf("the input in %s: %q, want %q", vm.Name, got, binInput)
				}
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %s still %s", id, j.State)
		}
		time.Sleep(20 * time.Millisecond)
	}
	code, out, errOut = runDaemonCmd(t, server, d.Token(), "outputs", id)
	if code != 0 || !strings.Contains(out, fmt.Sprintf("result.bin  %d\n", len(binInput))) || !strings.Contains(out, "missing: never.txt") {
		t.Errorf("outputs: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	odir := filepath.Join(t.TempDir(), "results")
	code, _, errOut = runDaemonCmd(t, server, d.Token(), "outputs", id, "--out", odir)
	if code != 0 {
		t.Fatalf("outputs --out: exit %d: %s", code, errOut)
	}
	if got, err := os.ReadFile(filepath.Join(odir, "result.bin")); err != nil || string(got) != string(binInput) {
		t.Errorf("result.bin under --out: %q, %v; want %q", got, err, binInput)
	}
}
