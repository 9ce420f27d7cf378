package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/rs/zerolog"

	"github.com/metasched/metasched/hypervisorproxy/client"
	"github.com/metasched/metasched/internal/httpsrv"
	"github.com/metasched/metasched/internal/slowclient"
	metaclient "github.com/metasched/metasched/metasched/client"
)

// startAgentBin runs `bin agent --config site` (the site file listens on a
// port of the system) through sh -c with the shell's ulimit command prefix
// (may be empty), waits for the address it logs and returns it with the
// agent's PID. The agent is stopped by PID when the test ends.
func startAgentBin(t *testing.T, bin, site, ulimit string) (string, int) {
	t.Helper()
	cmd := exec.Command("sh", "-c", ulimit+`exec "$0" agent --config "$1" --log-format json`, bin, site)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	addr := make(chan string, 1)
	var log strings.Builder
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			log.WriteString(sc.Text() + "\n")
			var line struct{ Message, Address string }
			if json.Unmarshal(sc.Bytes(), &line) == nil && line.Message == "agent listening" {
				addr <- strings.TrimPrefix(line.Address, "http://")
			}
		}
		_, _ = io.Copy(io.Discard, stderr) // the rest of the log, unread
		_ = cmd.Wait()                     // killed by the cleanup: its status says nothing
		close(exited)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill() // by PID: this test's own child
		<-exited
	})
	select {
	case a := <-addr:
		return a, cmd.Process.Pid
	case <-exited:
		t.Fatalf("the agent exited before listening:\n%s", log.String())
	case <-time.After(time.Minute):
		t.Fatal("the agent logged no address in a minute")
	}
	return "", 0
}

// agentSite writes a site file of the paper's spain cluster (test-driver
// hosts) that listens on a port of the system, and its token.
func agentSite(t *testing.T) (site, token string) {
	t.Helper()
	dir := t.TempDir()
	grid, err := filepath.Abs(example + "grid-paper.yaml")
	if err != nil {
		t.Fatal(err)
	}
	token = "slow-client-token"
	site = filepath.Join(dir, "site.yaml")
	if err := os.WriteFile(filepath.Join(dir, "token"), []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(site, []byte("site: spain\nlisten: 127.0.0.1:0\ntoken_file: token\ninsecure_http: true\ngrid: "+grid+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return site, token
}

// limitOpenFiles sets the soft and hard limit of open files of process
// pid to its open files now plus room (prlimit(2)) and returns the limit.
func limitOpenFiles(t *testing.T, pid, room int) int {
	t.Helper()
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Fatal(err)
	}
	n := uint64(len(fds) + room)
	lim := syscall.Rlimit{Cur: n, Max: n}
	if _, _, e := syscall.RawSyscall6(syscall.SYS_PRLIMIT64, uintptr(pid), syscall.RLIMIT_NOFILE,
		uintptr(unsafe.Pointer(&lim)), 0, 0, 0); e != 0 {
		t.Fatalf("prlimit %d: %v", pid, e)
	}
	return int(n)
}

// TestSlowClientsAtTheFileLimit is the attack as it was met: the real
// daemon and the real agent, each limited to its open files plus the room
// their default caps ask for (max_unproven_connections and 256 more: see
// warnFileLimit), get 100 slow requests more than that from 127.0.0.1
// (each declares a body of 100,000 bytes and sends one byte: POST /login
// to the daemon, POST /v1/vms to the agent); a valid request from the same
// address must still be answered. Without the cap on unproven connections
// both servers held every slow connection, ran out of file descriptors
// (accept4: too many open files) and left the valid request waiting.
func TestSlowClientsAtTheFileLimit(t *testing.T) {
	bin := buildBinary(t)
	const room = httpsrv.DefaultMaxUnproven + fileRoom
	const slow = room + 100
	t.Run("serve", func(t *testing.T) {
		dir := t.TempDir()
		data := filepath.Join(dir, "data")
		d := startServe(t, bin, dir, filepath.Join(dir, "daemon.log"), "--listen", "127.0.0.1:0", "--data-dir", data,
			"--demo=false", "--log-format", "json", "--log-level", "warn")
		limit := limitOpenFiles(t, d.cmd.Process.Pid, room)
		addr := strings.TrimPrefix(d.base, "http://")
		slowclient.Flood(t, slow, addr, "POST", "/login", slowclient.Options{})
		tok, err := os.ReadFile(filepath.Join(data, "token"))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), slowclient.Safety)
		defer cancel()
		if _, err := metaclient.New(d.base, strings.TrimSpace(string(tok))).Jobs(ctx, metaclient.JobsQuery{}); err != nil {
			log, lerr := os.ReadFile(filepath.Join(dir, "daemon.log"))
			if lerr != nil {
				log = []byte(lerr.Error())
			}
			t.Fatalf("the valid request after %d slow logins (the daemon may open %d files): %v\nthe daemon's log ends:\n%s",
				slow, limit, err, tail(string(log), 10))
		}
	})
	t.Run("agent", func(t *testing.T) {
		site, token := agentSite(t)
		addr, pid := startAgentBin(t, bin, site, "")
		limit := limitOpenFiles(t, pid, room)
		slowclient.Flood(t, slow, addr, "POST", "/v1/vms", slowclient.Options{})
		ctx, cancel := context.WithTimeout(context.Background(), slowclient.Safety)
		defer cancel()
		if _, err := client.New("http://"+addr, token).Inventory(ctx); err != nil {
			t.Fatalf("the valid request after %d slow ones (the agent may open %d files): %v", slow, limit, err)
		}
	})
}

// Go raises a process's soft limit of open files to (one below) its hard
// limit when it starts (Go 1.19 and later), so serve and the agent do not
// do it themselves: the agent started with a soft limit of 256 runs with
// its hard limit.
func TestOpenFileLimitRaised(t *testing.T) {
	bin := buildBinary(t)
	var hard syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &hard); err != nil {
		t.Fatal(err)
	}
	if hard.Max <= 257 {
		t.Skipf("the hard limit of open files is %d: nothing to raise", hard.Max)
	}
	site, _ := agentSite(t)
	_, pid := startAgentBin(t, bin, site, "ulimit -S -n 256 && ")
	limits, err := os.ReadFile(fmt.Sprintf("/proc/%d/limits", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(limits), "\n") {
		if rest, ok := strings.CutPrefix(line, "Max open files"); ok {
			f := append(strings.Fields(rest), "", "")
			soft, err := strconv.ParseUint(f[0], 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			maxim, err := strconv.ParseUint(f[1], 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("started with a soft limit of 256 open files, the agent runs with %d (hard limit %d)", soft, maxim)
			if soft+1 < maxim || maxim != hard.Max {
				t.Errorf("the agent runs with %d open files at most (hard limit %d), want its hard limit %d", soft, maxim, hard.Max)
			}
			return
		}
	}
	t.Fatalf("no limit of open files in /proc/%d/limits:\n%s", pid, limits)
}

// tail returns the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// serve and agent warn when the limit of open files leaves little room
// beyond the cap on unproven connections.
func TestWarnFileLimit(t *testing.T) {
	var l syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		cap  int
		warn bool
	}{{int(l.Cur) - fileRoom + 1, true}, {int(l.Cur) - fileRoom, false}} {
		var buf strings.Builder
		warnFileLimit(zerolog.New(&buf), tc.cap)
		if got := strings.Contains(buf.String(), "the limit of open files leaves fewer than 256"); got != tc.warn {
			t.Errorf("limit %d, cap %d: warned %v (%q), want %v", l.Cur, tc.cap, got, buf.String(), tc.warn)
		}
	}
}
