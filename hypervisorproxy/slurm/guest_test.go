package slurm_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	hp "github.com/metasched/metasched/hypervisorproxy"
	"github.com/metasched/metasched/hypervisorproxy/slurm/slurmtest"
)

// The guest API of an allocation on a Slurm node, through the agent:
// files written and read at an offset, a missing file or directory, a
// program with its input, output, variables and exit status, and the
// program forgotten once its exit has been read; a program srun cannot
// launch (the node's slurmd gone) is the agent's failure.
func TestSlurmGuest(t *testing.T) {
	t.Parallel()
	c := slurmtest.StartT(t, slurmtest.Spec{Nodes: []slurmtest.NodeSpec{{Name: "n1"}},
		Partitions: []slurmtest.PartitionSpec{{Name: "batch", Nodes: []string{"n1"}, Default: true}}})
	a := c.StartAgent(t, slurmtest.AgentOptions{Site: "hpc", Partitions: map[string]string{"farm": "batch"}})
	ctx := t.Context()
	if _, err := a.CreateVM(ctx, hp.VMSpec{Name: "j-a1-m", Host: "n1", Job: "j", VCPUs: 1, MemoryMiB: 100}); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	file := dir + "/data"
	if err := a.GuestWriteFile(ctx, "j-a1-m", file, []byte("0123456789"), 0o640); err != nil {
		t.Fatal(err)
	}
	got, err := a.GuestReadFile(ctx, "j-a1-m", file, 3, 4)
	if err != nil || string(got.Data) != "3456" || got.EOF {
		t.Errorf("read 4 at 3: %q eof %v, %v; want 3456, not the end", got.Data, got.EOF, err)
	}
	got, err = a.GuestReadFile(ctx, "j-a1-m", file, 6, 100)
	if err != nil || string(got.Data) != "6789" || !got.EOF {
		t.Errorf("read the rest at 6: %q eof %v, %v", got.Data, got.EOF, err)
	}
	if _, err := a.GuestReadFile(ctx, "j-a1-m", dir+"/none", 0, 10); !errors.Is(err, hp.ErrNotFound) {
		t.Errorf("a missing file: %v, want ErrNotFound", err)
	}
	if err := a.GuestWriteFile(ctx, "j-a1-m", dir+"/no/such/x", []byte("x"), 0o644); !errors.Is(err, hp.ErrNotFound) {
		t.Errorf("a file in a missing directory: %v, want ErrNotFound", err)
	}
	p, err := a.GuestExec(ctx, "j-a1-m", hp.GuestExec{Path: "/bin/sh", Args: []string{"-c", `read x; echo "in=$x rank=$METASCHED_RANK"; echo oops >&2; exit 7`},
		Env: []string{"METASCHED_RANK=3"}, Input: []byte("hello\n"), CaptureOutput: true})
	if err != nil {
		t.Fatal(err)
	}
	var st hp.GuestExecStatus
	for range 600 {
		if st, err = a.GuestExecStatus(ctx, "j-a1-m", p.PID); err != nil || st.Exited {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil || !st.Exited || st.ExitCode != 7 || string(st.Stdout) != "in=hello rank=3\n" || strings.TrimSpace(string(st.Stderr)) != "oops" {
		t.Errorf("program: %+v (stdout %q, stderr %q), %v; want exit 7, its output", st, st.Stdout, st.Stderr, err)
	}
	if _, err := a.GuestExecStatus(ctx, "j-a1-m", p.PID); !errors.Is(err, hp.ErrNotFound) {
		t.Errorf("the program after its exit was read: %v, want ErrNotFound", err)
	}
	if _, err := a.GuestExec(ctx, "nope", hp.GuestExec{Path: "/bin/true"}); !errors.Is(err, hp.ErrNotFound) {
		t.Errorf("a program in a VM that is not there: %v, want ErrNotFound", err)
	}

	// The node's slurmd gone: srun cannot launch the step. Its status is
	// the agent's failure, not a program's exit status, at every call
	// until the VM is destroyed.
	c.StopNode("n1")
	p, err = a.GuestExec(ctx, "j-a1-m", hp.GuestExec{Path: "/bin/true", CaptureOutput: true})
	if err != nil {
		t.Fatal(err)
	}
	for range 1200 {
		if st, err = a.GuestExecStatus(ctx, "j-a1-m", p.PID); err != nil || st.Exited {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if !errors.Is(err, hp.ErrGuestAgent) || !strings.Contains(err.Error(), "srun: error: ") || st.Exited {
		t.Fatalf("a program on a node whose slurmd is gone: %+v, %v; want the agent's failure with srun's error", st, err)
	}
	if _, err2 := a.GuestExecStatus(ctx, "j-a1-m", p.PID); !errors.Is(err2, hp.ErrGuestAgent) {
		t.Errorf("asked again: %v, want the same failure", err2)
	}
	t.Logf("a program on a node whose slurmd is gone: %v", err)
	if err := a.DestroyVM(ctx, "j-a1-m"); err != nil && !errors.Is(err, hp.ErrNotFound) {
		t.Fatal(err)
	}
	if _, err := a.GuestExecStatus(ctx, "j-a1-m", p.PID); !errors.Is(err, hp.ErrNotFound) {
		t.Errorf("the program after its VM was destroyed: %v, want ErrNotFound", err)
	}
}
