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

// TestSuiteLock: while this process holds the suite lock (a daemon, or a
// caller of AcquireSuite), another process cannot take it; once the last
// hold is released, it can.
func TestSuiteLock(t *testing.T) {
	first, err := AcquireSuite()
	if err != nil {
		t.Fatal(err)
	}
	second, err := AcquireSuite() // at once: this process holds it
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(filepath.Join(os.TempDir(), suiteLockFile))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close() // a lock file opened to test flock: closing it releases the lock, which the test checks otherwise
	// Another open file description: as another process would hold it.
	try := func() error { return syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) }
	if err := try(); !errors.Is(err, syscall.EWOULDBLOCK) {
		t.Fatalf("a lock while this process holds it twice: %v, want EWOULDBLOCK", err)
	}
	first()
	first() // a second call does nothing
	if err := try(); !errors.Is(err, syscall.EWOULDBLOCK) {
		t.Fatalf("a lock while this process still holds it once: %v, want EWOULDBLOCK", err)
	}
	second()
	// Released: the lock is taken (once another test binary's suite, if
	// one runs now, is done with it).
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatalf("a lock once released: %v", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_UN); err != nil {
		t.Fatal(err)
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
