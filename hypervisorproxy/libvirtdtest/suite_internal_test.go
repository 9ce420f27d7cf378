package libvirtdtest

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
)

// TestSuiteLock: once a test binary has started a daemon (or waited for
// the lock with LockSuite), another process cannot take the suite lock
// until this one exits.
func TestSuiteLock(t *testing.T) {
	if err := LockSuite(); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(filepath.Join(os.TempDir(), suiteLockFile))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	// Another open file description: as another process would hold it.
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); !errors.Is(err, syscall.EWOULDBLOCK) {
		t.Fatalf("a second lock: %v, want EWOULDBLOCK", err)
	}
}

// TestFreePorts: the ports handed out can be listened on.
func TestFreePorts(t *testing.T) {
	lo, hi := FreePortRange(t, 5)
	if hi-lo != 4 {
		t.Fatalf("range %d-%d, want 5 ports", lo, hi)
	}
	for _, p := range []int{FreePort(t), lo, hi} {
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			t.Errorf("port %d: %v", p, err)
			continue
		}
		ln.Close()
	}
}
