package hypervisorproxy_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	hp "github.com/metasched/metasched/hypervisorproxy"
	"github.com/metasched/metasched/hypervisorproxy/client"
	"github.com/metasched/metasched/hypervisorproxy/image"
	"github.com/metasched/metasched/hypervisorproxy/libvirtdtest"
)

// guestWait bounds the waits of the guest API tests for a guest's
// answer: a bound against a guest that never answers, not a measure.
const guestWait = 2 * time.Minute

// guestRun runs a program in vm through the agent's API and returns its
// status once it has exited.
func guestRun(t testing.TB, c *client.Client, vm string, e hp.GuestExec) hp.GuestExecStatus {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), guestWait)
	defer cancel()
	p, err := c.GuestExec(ctx, vm, e)
	if err != nil {
		t.Fatalf("guest exec %s %q: %v", e.Path, e.Args, err)
	}
	for {
		st, err := c.GuestExecStatus(ctx, vm, p.PID)
		if err != nil {
			t.Fatalf("guest exec status of %s %q (pid %d): %v", e.Path, e.Args, p.PID, err)
		}
		if st.Exited {
			return st
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// runnerJob is one command run by metasched-run in a guest, driven as the
// daemon drives it: the command line written with GuestWriteFile, the
// runner started with GuestExec, its output and exit read with
// GuestReadFile.
type runnerJob struct {
	t   *testing.T
	c   *client.Client
	vm  string
	dir string
}

func startRunnerJob(t *testing.T, c *client.Client, vm, dir, command string, env ...string) *runnerJob {
	t.Helper()
	ctx := context.Background()
	if st := guestRun(t, c, vm, hp.GuestExec{Path: "/bin/mkdir", Args: []string{"-p", dir}}); st.ExitCode != 0 {
		t.Fatalf("mkdir -p %s: %+v", dir, st)
	}
	if err := c.GuestWriteFile(ctx, vm, dir+"/command", []byte(command), 0o644); err != nil {
		t.Fatal(err)
	}
	st := guestRun(t, c, vm, hp.GuestExec{Path: image.RunnerPath, Args: []string{"start", dir, "/tmp/work", "65536"},
		Env: append([]string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin"}, env...), CaptureOutput: true})
	if st.ExitCode != 0 {
		t.Fatalf("metasched-run start %s: exit %d: %s%s", dir, st.ExitCode, st.Stdout, st.Stderr)
	}
	return &runnerJob{t: t, c: c, vm: vm, dir: dir}
}

// wait polls DIR/exit until it appears and returns the exit status and
// the whole output, read in chunks of at most 7 bytes from their
// offsets.
func (j *runnerJob) wait() (int, string) {
	j.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), guestWait)
	defer cancel()
	var exit hp.GuestFileChunk
	for {
		var err error
		exit, err = j.c.GuestReadFile(ctx, j.vm, j.dir+"/exit", 0, 0)
		if err == nil {
			break
		}
		if !errors.Is(err, hp.ErrNotFound) {
			j.t.Fatalf("read %s/exit: %v", j.dir, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	code, err := strconv.Atoi(strings.TrimSpace(string(exit.Data)))
	if err != nil || !exit.EOF {
		j.t.Fatalf("%s/exit = %+v: %v", j.dir, exit, err)
	}
	var out []byte
	for {
		c, err := j.c.GuestReadFile(ctx, j.vm, j.dir+"/output", int64(len(out)), 7)
		if err != nil {
			j.t.Fatalf("read %s/output at %d: %v", j.dir, len(out), err)
		}
		if len(c.Data) > 7 || (!c.EOF && len(c.Data) != 7) {
			j.t.Fatalf("read of at most 7 bytes: %+v", c)
		}
		out = append(out, c.Data...)
		if c.EOF {
			return code, string(out)
		}
	}
}

// checkGuestAPI drives vm, a booted guest of the bundled image img,
// through the agent's guest API: metasched-run runs commands in it with
// the environment it is given, its output and exit status are read back
// as files, stop ends a program with SIGTERM; files are written with
// their mode and read at offsets; a missing file is 404, a bad path 400.
func checkGuestAPI(t *testing.T, c *client.Client, vm string, img *image.Image) {
	ctx := context.Background()
	host, err := os.ReadFile("/proc/sys/kernel/osrelease")
	if err != nil {
		t.Fatal(err)
	}
	if img.KernelRelease == strings.TrimSpace(string(host)) {
		t.Fatalf("the guest's kernel %s is this machine's: the test could not tell them apart", img.KernelRelease)
	}

	t.Run("runner", func(t *testing.T) {
		j := startRunnerJob(t, c, vm, "/run/metasched/job-1/1",
			`echo "kernel $(uname -r)"; echo "role=$METASCHED_ROLE rank=$METASCHED_RANK"; echo "host $(hostname)"; pwd`,
			"METASCHED_ROLE=master", "METASCHED_RANK=0")
		code, out := j.wait()
		want := fmt.Sprintf("kernel %s\nrole=master rank=0\nhost %s\n/tmp/work\n", img.KernelRelease, vm)
		if code != 0 || out != want {
			t.Errorf("exit %d, output %q; want 0 and %q", code, out, want)
		}
		// A second start of the same directory starts nothing.
		st := guestRun(t, c, vm, hp.GuestExec{Path: image.RunnerPath, Args: []string{"start", j.dir, "/tmp/work", "65536"}})
		if st.ExitCode != 0 {
			t.Errorf("second start: %+v", st)
		}
		if code2, out2 := j.wait(); code2 != code || out2 != out {
			t.Errorf("after a second start: exit %d, output %q", code2, out2)
		}

		j = startRunnerJob(t, c, vm, "/run/metasched/job-2/1", `echo three; exit 3`)
		if code, out := j.wait(); code != 3 || out != "three\n" {
			t.Errorf("exit %d, output %q; want 3 and \"three\\n\"", code, out)
		}

		j = startRunnerJob(t, c, vm, "/run/metasched/job-3/1", `echo sleeping; sleep 600`)
		if st := guestRun(t, c, vm, hp.GuestExec{Path: image.RunnerPath, Args: []string{"stop", j.dir}}); st.ExitCode != 0 {
			t.Errorf("stop: %+v", st)
		}
		if code, out := j.wait(); code != 143 || out != "sleeping\n" {
			t.Errorf("stopped: exit %d, output %q; want 143 (SIGTERM) and \"sleeping\\n\"", code, out)
		}
	})

	t.Run("exec", func(t *testing.T) {
		st := guestRun(t, c, vm, hp.GuestExec{Path: "/bin/sh", Args: []string{"-c", "read line; echo \"$line $A\"; echo err >&2; exit 5"},
			Env: []string{"A=b"}, Input: []byte("in\n"), CaptureOutput: true})
		if !st.Exited || st.ExitCode != 5 || string(st.Stdout) != "in b\n" || string(st.Stderr) != "err\n" {
			t.Errorf("status %+v", st)
		}
		p, err := c.GuestExec(ctx, vm, hp.GuestExec{Path: "/bin/true"})
		if err != nil {
			t.Fatal(err)
		}
		for {
			st, err := c.GuestExecStatus(ctx, vm, p.PID)
			if err != nil {
				t.Fatal(err)
			}
			if st.Exited {
				break
			}
		}
		// The guest agent forgets a process once it has reported its exit.
		if _, err := c.GuestExecStatus(ctx, vm, p.PID); !errors.Is(err, hp.ErrNotFound) {
			t.Errorf("status of a reported process: %v, want ErrNotFound", err)
		}
		if _, err := c.GuestExec(ctx, vm, hp.GuestExec{Path: "/no/such/program"}); !errors.Is(err, hp.ErrNotFound) {
			t.Errorf("exec of a missing program: %v, want ErrNotFound", err)
		}
	})

	t.Run("files", func(t *testing.T) {
		data := make([]byte, 3<<20+5) // more than one guest-file-write and one read
		for i := range data {
			data[i] = byte(i % 251)
		}
		if err := c.GuestWriteFile(ctx, vm, "/tmp/big", data, 0o750); err != nil {
			t.Fatal(err)
		}
		st := guestRun(t, c, vm, hp.GuestExec{Path: "/bin/sh", Args: []string{"-c", "stat -c %a /tmp/big; wc -c </tmp/big"}, CaptureOutput: true})
		if got := strings.Fields(string(st.Stdout)); len(got) != 2 || got[0] != "750" || got[1] != strconv.Itoa(len(data)) {
			t.Errorf("written file: %q, want mode 750 and %d bytes", st.Stdout, len(data))
		}
		var back []byte
		for {
			c, err := c.GuestReadFile(ctx, vm, "/tmp/big", int64(len(back)), 0)
			if err != nil {
				t.Fatal(err)
			}
			back = append(back, c.Data...)
			if c.EOF {
				break
			}
			if len(c.Data) != hp.MaxGuestRead {
				t.Fatalf("a chunk short of the end has %d bytes, want %d", len(c.Data), hp.MaxGuestRead)
			}
		}
		if string(back) != string(data) {
			t.Errorf("read back %d bytes, not the %d written", len(back), len(data))
		}
		// A file of exactly max bytes: EOF at once.
		if err := c.GuestWriteFile(ctx, vm, "/tmp/five", []byte("12345"), 0o600); err != nil {
			t.Fatal(err)
		}
		if ch, err := c.GuestReadFile(ctx, vm, "/tmp/five", 0, 5); err != nil || string(ch.Data) != "12345" || !ch.EOF {
			t.Errorf("read of a 5-byte file, max 5: %+v, %v", ch, err)
		}
		if ch, err := c.GuestReadFile(ctx, vm, "/tmp/five", 9, 5); err != nil || len(ch.Data) != 0 || !ch.EOF {
			t.Errorf("read beyond the end: %+v, %v", ch, err)
		}
		if _, err := c.GuestReadFile(ctx, vm, "/tmp/none", 0, 0); !errors.Is(err, hp.ErrNotFound) {
			t.Errorf("read of a missing file: %v, want ErrNotFound", err)
		}
		if err := c.GuestWriteFile(ctx, vm, "/no/such/dir/f", []byte("x"), 0o644); !errors.Is(err, hp.ErrNotFound) {
			t.Errorf("write into a missing directory: %v, want ErrNotFound", err)
		}
		if _, err := c.GuestReadFile(ctx, vm, "tmp/five", 0, 0); !errors.Is(err, hp.ErrInvalid) {
			t.Errorf("read of a relative path: %v, want ErrInvalid", err)
		}
		if _, err := c.GuestReadFile(ctx, vm, "/tmp", 0, 0); !errors.Is(err, hp.ErrInvalid) {
			t.Errorf("read of a directory: %v, want ErrInvalid", err)
		}
	})
}

// BenchmarkAgentGuestExec is one guest-exec round trip through the
// agent's HTTP API: /bin/true started in a booted guest of the bundled
// image, and its status read (as often as it answers) until it has
// exited.
func BenchmarkAgentGuestExec(b *testing.B) {
	if err := libvirtdtest.Check(); err != nil {
		b.Skip(err)
	}
	ctx := context.Background()
	d, res := imageDaemon(b)
	c := bootAgent(b, d, filepath.Join(d.Dir(), "agent"), "render", res.Dir, goodBootTimeout)
	if _, err := c.Create(ctx, hp.VMSpec{Name: "bench-1", Host: "qa", VCPUs: 1, MemoryMiB: 128, Image: "render"}); err != nil {
		b.Fatal(err)
	}
	polls := 0
	for b.Loop() {
		p, err := c.GuestExec(ctx, "bench-1", hp.GuestExec{Path: "/bin/true"})
		if err != nil {
			b.Fatal(err)
		}
		for { // no pause between polls: the round trip is measured
			polls++
			st, err := c.GuestExecStatus(ctx, "bench-1", p.PID)
			if err != nil {
				b.Fatal(err)
			}
			if st.Exited {
				if st.ExitCode != 0 {
					b.Fatal(st)
				}
				break
			}
		}
	}
	b.ReportMetric(float64(polls)/float64(b.N), "polls/op")
	b.StopTimer()
	if err := c.Destroy(ctx, "bench-1"); err != nil {
		b.Fatal(err)
	}
}
