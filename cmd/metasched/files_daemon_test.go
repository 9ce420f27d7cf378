package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/metasched/metasched/hypervisorproxy/virt"
	"github.com/metasched/metasched/metasched"
	"github.com/metasched/metasched/metasched/api"
	"github.com/metasched/metasched/metasched/demo"
	"github.com/metasched/metasched/metasched/executor"
	"github.com/metasched/metasched/metasched/guesttest"
	"github.com/metasched/metasched/metasched/httpapi"
)

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
	guests := map[string]*guesttest.Site{}
	ctx, cancel := context.WithCancel(context.Background())
	d, err := metasched.NewWithGrid(ctx, cfg, grid, metasched.Options{Logger: log, Connect: virt.Connector(log),
		Tick: 100 * time.Millisecond, WrapAgent: func(site string, a metasched.SiteAgent) metasched.SiteAgent {
			mu.Lock()
			defer mu.Unlock()
			g := &guesttest.Site{SiteAgent: a, Net: len(guests) + 1}
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
	go func() { done <- d.Run(ctx, ln, httpapi.New(httpapi.All(d), log)) }()
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
			if j.State != api.Done {
				t.Fatalf("job %s: %s (%s)", id, j.State, j.Reason)
			}
			work := executor.GuestWorkDir(id)
			for _, vm := range j.VMs {
				g := guests[vm.Site]
				got := g.File(vm.Name, path.Join(work, "data/in.bin"))
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
