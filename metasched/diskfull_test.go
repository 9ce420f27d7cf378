package metasched_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/metasched/metasched/metasched"
	"github.com/metasched/metasched/metasched/api"
	"github.com/metasched/metasched/metasched/jobfile"
)

// mountTmpfs mounts a tmpfs of size bytes for the test (root only: the
// test is skipped, saying why, for another user).
func mountTmpfs(t *testing.T, size int) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting a small tmpfs needs root")
	}
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", fmt.Sprintf("size=%d", size), "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs: %v: %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", "-l", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
		}
	})
	return dir
}

// fill writes a file until the file system is full and returns its path.
func fill(t *testing.T, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "filler")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close() // on a full disk: its error would be the one the writes met
	buf := make([]byte, 64<<10)
	for {
		if _, err := f.Write(buf); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("fill: %v", err)
			}
			break
		}
	}
	for n := 4096; n >= 1; n /= 2 { // the last pages too
		for {
			if _, err := f.Write(buf[:n]); err != nil {
				break
			}
		}
	}
	return path
}

// TestDiskFull runs the daemon on a 4 MiB tmpfs under a stream of
// submissions, fills the disk, then frees it. While it is full,
// submissions fail cleanly and nothing acknowledged is lost; once writes
// succeed again the daemon resumes by itself: every acknowledged job runs
// to done exactly once, and jobs submitted after run too. (Before the
// store became the one source of truth, memory and the store diverged:
// the daemon logged "is provisioning, not queued: conflict" hundreds of
// times, queued jobs stayed queued with idle hosts until a restart, and a
// job ran twice.)
func TestDiskFull(t *testing.T) {
	if testing.Short() {
		t.Skip("mounts a tmpfs")
	}
	dir := mountTmpfs(t, 4<<20)
	td := startDaemonNet(t, nil, metasched.Options{}, func(c *metasched.Config) {
		c.DataDir = filepath.Join(dir, "data")
		c.Executor.TimeScale = 0.0005
	})
	d, ctx := td.d, context.Background()

	var (
		mu     sync.Mutex
		acked  []string
		failed int
		lastEr error
	)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			j, err := d.Submit(ctx, jobfile.Decode([]byte(fmt.Sprintf("name: full-%d\ntype: sim\ntasks: 30\ntask_ops: 1.0e9\ntask_bytes: 1.0e4\n", i))))
			mu.Lock()
			if err != nil {
				failed++
				lastEr = err
			} else {
				acked = append(acked, j.ID)
			}
			mu.Unlock()
			time.Sleep(5 * time.Millisecond)
		}
	}()
	count := func() (int, int) {
		mu.Lock()
		defer mu.Unlock()
		return len(acked), failed
	}
	waitFor(t, "some jobs acknowledged", time.Minute, func() bool { n, _ := count(); return n >= 20 })
	filler := fill(t, dir)
	waitFor(t, "submissions failing on the full disk", time.Minute, func() bool { _, f := count(); return f >= 20 })
	time.Sleep(time.Second) // the daemon's loops meet the full disk too
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	n0, _ := count()
	waitFor(t, "submissions acknowledged again", time.Minute, func() bool { n, _ := count(); return n >= n0+20 })
	close(stop)
	wg.Wait()
	mu.Lock()
	ids := append([]string(nil), acked...)
	t.Logf("acknowledged %d, refused %d while the disk was full (last: %v)", len(ids), failed, lastEr)
	mu.Unlock()

	waitFor(t, "every acknowledged job done", 3*time.Minute, func() bool {
		l, err := d.Jobs(ctx, api.JobFilter{States: []api.State{api.Queued, api.Planned, api.Provisioning, api.Running}, Limit: 1})
		return err == nil && len(l.Jobs) == 0
	})
	for _, id := range ids {
		j, err := d.Job(ctx, id)
		if err != nil {
			t.Fatalf("acknowledged job %s: %v", id, err)
		}
		runs := 0
		for _, tr := range j.Transitions {
			if tr.To == api.Running {
				runs++
			}
		}
		if j.State != api.Done || runs != 1 {
			t.Errorf("job %s: %s after %d runs (%s), want done after one", id, j.State, runs, j.Reason)
		}
	}
	t.Logf("the daemon met the full disk %d times in its own writes", strings.Count(td.log.String(), "no space left"))
	if n := strings.Count(td.log.String(), "conflict"); n > 0 {
		t.Errorf("the daemon logged %d conflicts between memory and the store", n)
	}
}
