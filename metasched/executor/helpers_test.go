package executor_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/metasched/metasched/metasched/executor"
	"github.com/metasched/metasched/selection"
)

// watchWriter records a job's output and closes seen once the output holds
// mark. Tests read it while Run writes to it.
type watchWriter struct {
	mark string
	seen chan struct{}

	mu   sync.Mutex
	buf  bytes.Buffer
	once sync.Once
}

func newWatchWriter(mark string) *watchWriter {
	return &watchWriter{mark: mark, seen: make(chan struct{})}
}

func (w *watchWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	if w.mark != "" && strings.Contains(w.buf.String(), w.mark) {
		w.once.Do(func() { close(w.seen) })
	}
	return len(p), nil
}

func (w *watchWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// pgidOf reads the "pid=N" line a test script prints first: the shell's
// PID, which leads the job's process group.
func pgidOf(t *testing.T, out string) int {
	t.Helper()
	for line := range strings.Lines(out) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "pid="); ok {
			pid, err := strconv.Atoi(v)
			if err != nil {
				t.Fatalf("bad pid line %q", line)
			}
			return pid
		}
	}
	t.Fatalf("no pid line in the output %q", out)
	return 0
}

func testLogger(t testing.TB) zerolog.Logger {
	return zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.DebugLevel)
}

// nobodyUID is the uid of user nobody, which the tests' commands run as
// when the tests run as root.
const nobodyUID = 65534

// jobUser is the user the tests' commands run as (CommandOptions.RunAs):
// nobody when the tests run as root (the executor never runs a job as
// root), else the tests' own user.
func jobUser() string {
	if os.Geteuid() == 0 {
		return "nobody"
	}
	return ""
}

// newCommand is the host-command executor with opt, its commands running
// as jobUser unless opt says whom.
func newCommand(t testing.TB, opt executor.CommandOptions) *executor.Command {
	t.Helper()
	if opt.RunAs == "" {
		opt.RunAs = jobUser()
	}
	ex, err := executor.NewCommand(testLogger(t), opt)
	if err != nil {
		t.Fatal(err)
	}
	return ex
}

// openDir is a new temporary directory that the jobs' user can reach
// (t.TempDir's are not: the directory above them is private).
func openDir(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	for _, d := range []string{filepath.Dir(dir), dir} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// userDir is a new temporary directory that the jobs' user may write in:
// it owns it.
func userDir(t testing.TB) string {
	t.Helper()
	dir := openDir(t)
	if os.Geteuid() == 0 {
		if err := os.Chown(dir, nobodyUID, nobodyUID); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// testVMs is a virtual cluster over two sites, the master first.
func testVMs() []executor.VM {
	return []executor.VM{
		{Name: "render-42-0", Site: "spain", Host: "spain-1", Master: true, VCPUs: 2, MemoryMiB: 2048},
		{Name: "render-42-1", Site: "spain", Host: "spain-2", VCPUs: 2, MemoryMiB: 2048},
		{Name: "render-42-2", Site: "latam-a", Host: "latam-a-1", VCPUs: 4, MemoryMiB: 4096},
		{Name: "render-42-3", Site: "spain", Host: "spain-2", VCPUs: 2, MemoryMiB: 2048},
	}
}

const testHostfile = `render-42-0 slots=2 # site=spain host=spain-1 role=master
render-42-1 slots=2 # site=spain host=spain-2 role=worker
render-42-2 slots=4 # site=latam-a host=latam-a-1 role=worker
render-42-3 slots=2 # site=spain host=spain-2 role=worker
`

// shRun is a run of a job whose command is the shell script script.
func shRun(t *testing.T, script string, out *watchWriter) executor.Run {
	return executor.Run{
		JobID:  "j-000000000042",
		Job:    &selection.Job{Name: "render-42", Type: "render", Tasks: 300, TaskOps: 2e12, TaskBytes: 5e7, Command: []string{"/bin/sh", "-c", script}},
		VMs:    testVMs(),
		Dir:    openDir(t),
		Output: out,
	}
}

type runResult struct {
	res executor.Result
	err error
	end time.Time
}

// startRun runs r in the background and waits until its output holds the
// watch writer's mark.
func startRun(t *testing.T, ctx context.Context, ex executor.Executor, r executor.Run, out *watchWriter) <-chan runResult {
	t.Helper()
	done := make(chan runResult, 1)
	go func() {
		res, err := ex.Run(ctx, r)
		done <- runResult{res, err, time.Now()}
	}()
	select {
	case <-out.seen:
	case rr := <-done:
		t.Fatalf("run ended before printing %q: %+v, %v; output %q", out.mark, rr.res, rr.err, out.String())
	case <-time.After(time.Minute):
		t.Fatalf("no %q printed after a minute; output %q", out.mark, out.String())
	}
	return done
}

func waitRun(t *testing.T, done <-chan runResult) runResult {
	t.Helper()
	select {
	case rr := <-done:
		return rr
	case <-time.After(time.Minute):
		t.Fatal("Run did not return a minute after its end was due")
		return runResult{}
	}
}

// running reports whether the process runs (a zombie does not: it has
// ended, and waits for its parent to be reaped).
func running(pid int) bool {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(stat, ')')
	return i < 0 || i+2 >= len(stat) || (stat[i+2] != 'Z' && stat[i+2] != 'X')
}
