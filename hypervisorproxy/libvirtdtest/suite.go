package libvirtdtest

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
)

// The suites that start libvirtd and QEMU guests run one test binary at a
// time: `go test ./...` runs packages in parallel, and two packages' QEMU
// guests and live migrations at once on two cores starve each other
// (migrations that time out, listeners not up in time). A daemon holds an
// exclusive lock on a file in the system's temporary directory from its
// Start until its Stop has seen its processes gone; the daemons of one
// process share it, and the last one's Stop releases it (so do callers of
// AcquireSuite, for as long as they hold it). Between a binary's QEMU
// tests, another binary's may run, while the first goes on with tests
// that need no guest. The kernel releases the lock when a binary exits,
// however it ends.
var suite struct {
	mu   sync.Mutex
	refs int
	f    *os.File // open while refs > 0: the lock lives as long as it
}

// suiteLockFile is the lock's file name in os.TempDir().
const suiteLockFile = "metasched-libvirtdtest.lock"

// AcquireSuite waits for the suite lock (at once when this process holds
// it) and holds it until release is called (once; more calls do nothing):
// for a caller that starts daemons with Start under a deadline of its own,
// so that the wait for another test binary's suite is not counted in it.
func AcquireSuite() (release func(), err error) {
	suite.mu.Lock()
	defer suite.mu.Unlock()
	if suite.refs == 0 {
		f, err := os.OpenFile(filepath.Join(os.TempDir(), suiteLockFile), os.O_CREATE|os.O_RDWR, 0o666)
		if err != nil {
			return nil, fmt.Errorf("libvirtdtest: suite lock: %w", err)
		}
		for {
			err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX)
			if err != syscall.EINTR {
				break
			}
		}
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("libvirtdtest: suite lock: %w", err)
		}
		suite.f = f
	}
	suite.refs++
	var once sync.Once
	return func() { once.Do(releaseSuite) }, nil
}

// releaseSuite drops a hold of the suite lock, and the lock with the last.
func releaseSuite() {
	suite.mu.Lock()
	defer suite.mu.Unlock()
	suite.refs--
	if suite.refs == 0 {
		suite.f.Close() // the lock goes with the file's last descriptor
		suite.f = nil
	}
}

// FreePort returns a TCP port of 127.0.0.1 that was free when asked: the
// tests take their ports from the system, never fixed numbers another
// test may hold.
func FreePort(tb testing.TB) int {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("free port: %v", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// FreePortRange returns n consecutive TCP ports of 127.0.0.1, from lo to
// hi, that were all free when asked (for an agent's migration_ports).
func FreePortRange(tb testing.TB, n int) (lo, hi int) {
	tb.Helper()
	lo, err := FindFreePortRange(n)
	if err != nil {
		tb.Fatal(err)
	}
	return lo, lo + n - 1
}

// FindFreePortRange is FreePortRange outside a test: the first of n
// consecutive ports of 127.0.0.1 free a moment ago, or an error.
func FindFreePortRange(n int) (int, error) {
	for range 200 {
		lo := 20000 + rand.IntN(30000)
		var held []net.Listener
		for p := lo; p < lo+n; p++ {
			ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
			if err != nil {
				break
			}
			held = append(held, ln)
		}
		ok := len(held) == n
		for _, ln := range held {
			ln.Close()
		}
		if ok {
			return lo, nil
		}
	}
	return 0, fmt.Errorf("no %d consecutive free ports of 127.0.0.1 found", n)
}
