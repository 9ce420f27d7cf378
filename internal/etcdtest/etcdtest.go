// Package etcdtest starts real etcd clusters for tests and experiments:
// members of the etcd binary (ETCD, else etcd on the PATH) under a
// temporary directory (or one given: New), on ports the system gives,
// stopped by PID.
package etcdtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/metasched/metasched/internal/tlsx"
)

// Binary is the etcd binary the tests run: $ETCD, else etcd on the PATH
// (the Debian package etcd-server, which make test installs).
func Binary() (string, error) {
	if b := os.Getenv("ETCD"); b != "" {
		return b, nil
	}
	b, err := exec.LookPath("etcd")
	if err != nil {
		return "", fmt.Errorf("no etcd binary (the Debian package etcd-server; make test installs it, or set ETCD): %w", err)
	}
	return b, nil
}

// Member is one etcd process of a cluster.
type Member struct {
	Name      string
	Dir       string // its data directory
	ClientURL string
	PeerURL   string
	// LoopbackURL is its client URL on 127.0.0.1, for a process in its
	// network namespace (MemberSpec.Loopback; else "").
	LoopbackURL string
	bin         string
	args        []string
	command     func(name string, args ...string) *exec.Cmd
	log         string
	mu          sync.Mutex
	cmd         *exec.Cmd
	done        chan struct{}
}

// MemberSpec places a member of NewWith's cluster.
type MemberSpec struct {
	// Host is the address of its client and peer URLs (""; 127.0.0.1).
	Host string
	// Loopback: it also serves clients on 127.0.0.1 (LoopbackURL).
	Loopback bool
	// Command makes the command that runs it (nil: exec.Command), such as
	// one that runs it in a network namespace.
	Command func(name string, args ...string) *exec.Cmd
	// TLS: it serves clients and peers over TLS with this certificate
	// (for both ends of a connection) and asks both for a certificate of
	// its CA (nil: plain HTTP).
	TLS *tlsx.Files
}

// Cluster is a cluster of members.
type Cluster struct {
	Members []*Member
	dir     string
	owned   bool // dir is the cluster's own, removed by Stop
	clients []*clientv3.Client
}

// freePort is a port the system gave a moment ago on 127.0.0.1.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// SkipShort skips the test in -short mode (make check), saying why: it
// starts etcd. Start and StartWith call it; tests that use New or
// StartShared call it first.
func SkipShort(tb testing.TB) {
	tb.Helper()
	if testing.Short() {
		tb.Skip("-short: starts etcd; make test runs it")
	}
}

// Start starts a cluster of n members under the test's temporary
// directory, waits until it takes writes, and stops it when the test ends.
func Start(t testing.TB, n int) *Cluster {
	t.Helper()
	SkipShort(t)
	c, err := New(n, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	return c
}

// StartShared starts a cluster of n members in a temporary directory of
// its own, for a package's tests (TestMain stops it, and removes its
// directory).
func StartShared(n int) (*Cluster, error) {
	dir, err := os.MkdirTemp("", "etcdtest-")
	if err != nil {
		return nil, err
	}
	c, err := New(n, dir)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	c.owned = true
	return c, nil
}

// New starts a cluster of n members under dir and waits until it takes
// writes.
func New(n int, dir string) (*Cluster, error) {
	return NewWith(dir, make([]MemberSpec, n))
}

// NewWith starts a cluster of a member per spec under dir. It waits until
// the cluster takes writes unless a spec has a Command (its member may be
// out of this process's reach) or TLS: the caller waits for it then.
func NewWith(dir string, specs []MemberSpec) (*Cluster, error) {
	bin, err := Binary()
	if err != nil {
		return nil, err
	}
	c := &Cluster{dir: dir}
	var initial []string
	reachable := true
	for i, spec := range specs {
		host := spec.Host
		if host == "" {
			host = "127.0.0.1"
		}
		cp, err := freePort()
		if err != nil {
			return nil, err
		}
		pp, err := freePort()
		if err != nil {
			return nil, err
		}
		scheme := "http"
		if spec.TLS != nil {
			scheme = "https"
		}
		m := &Member{Name: fmt.Sprintf("m%d", i), Dir: filepath.Join(dir, fmt.Sprintf("m%d", i)), bin: bin, command: spec.Command,
			ClientURL: fmt.Sprintf("%s://%s:%d", scheme, host, cp), PeerURL: fmt.Sprintf("%s://%s:%d", scheme, host, pp)}
		if spec.Loopback && host != "127.0.0.1" {
			m.LoopbackURL = fmt.Sprintf("%s://127.0.0.1:%d", scheme, cp)
		}
		reachable = reachable && spec.Command == nil && spec.TLS == nil
		m.log = filepath.Join(dir, m.Name+".log")
		initial = append(initial, m.Name+"="+m.PeerURL)
		c.Members = append(c.Members, m)
	}
	for i, m := range c.Members {
		listen := m.ClientURL
		if m.LoopbackURL != "" {
			listen += "," + m.LoopbackURL
		}
		m.args = []string{"--name", m.Name, "--data-dir", m.Dir,
			"--listen-client-urls", listen, "--advertise-client-urls", m.ClientURL,
			"--listen-peer-urls", m.PeerURL, "--initial-advertise-peer-urls", m.PeerURL,
			"--initial-cluster", strings.Join(initial, ","), "--initial-cluster-state", "new",
			"--initial-cluster-token", "metasched-test-" + filepath.Base(dir),
			"--heartbeat-interval", "100", "--election-timeout", "1000",
			"--max-txn-ops", "4096", "--max-request-bytes", "10485760", "--log-level", "warn"}
		if f := specs[i].TLS; f != nil {
			m.args = append(m.args, "--cert-file", f.Cert, "--key-file", f.Key, "--trusted-ca-file", f.CA, "--client-cert-auth",
				"--peer-cert-file", f.Cert, "--peer-key-file", f.Key, "--peer-trusted-ca-file", f.CA, "--peer-client-cert-auth")
		}
		if err := m.Start(); err != nil {
			c.Stop()
			return nil, err
		}
	}
	if !reachable {
		return c, nil
	}
	if err := c.WaitHealthy(60 * time.Second); err != nil {
		c.Stop()
		return nil, err
	}
	return c, nil
}

// StartWith is NewWith under the test's temporary directory; the cluster
// stops when the test ends.
func StartWith(t testing.TB, specs []MemberSpec) *Cluster {
	t.Helper()
	SkipShort(t)
	c, err := NewWith(t.TempDir(), specs)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	return c
}

// Endpoints are the members' client URLs.
func (c *Cluster) Endpoints() []string {
	var out []string
	for _, m := range c.Members {
		out = append(out, m.ClientURL)
	}
	return out
}

// NewClient is a client of every member, closed by Stop.
func (c *Cluster) NewClient() (*clientv3.Client, error) {
	cl, err := clientv3.New(clientv3.Config{Endpoints: c.Endpoints(), DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return nil, err
	}
	c.clients = append(c.clients, cl)
	return cl, nil
}

// Client is NewClient for a test, which fails if it cannot be made.
func (c *Cluster) Client(t testing.TB) *clientv3.Client {
	t.Helper()
	cl, err := c.NewClient()
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

// WaitHealthy waits until a write through the cluster succeeds.
func (c *Cluster) WaitHealthy(limit time.Duration) error {
	cl, err := clientv3.New(clientv3.Config{Endpoints: c.Endpoints(), DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return err
	}
	defer cl.Close()
	deadline := time.Now().Add(limit)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, err := cl.Put(ctx, "/etcdtest/health", "ok")
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("etcd cluster not healthy after %s: %w\n%s", limit, err, c.Logs())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Leader is the index of the member that leads the cluster's raft (etcd's
// own leader, which the cluster must elect again when it is lost).
func (c *Cluster) Leader(ctx context.Context) (int, error) {
	cl, err := c.NewClient()
	if err != nil {
		return -1, err
	}
	for i, m := range c.Members {
		st, err := cl.Status(ctx, m.ClientURL)
		if err != nil {
			continue
		}
		if st.Header.MemberId == st.Leader {
			return i, nil
		}
	}
	return -1, errors.New("no member says it leads")
}

// Logs are the end of every member's log, for a failure's report.
func (c *Cluster) Logs() string {
	var b strings.Builder
	for _, m := range c.Members {
		data, _ := os.ReadFile(m.log)
		if len(data) > 3000 {
			data = data[len(data)-3000:]
		}
		fmt.Fprintf(&b, "--- %s\n%s\n", m.Name, data)
	}
	return b.String()
}

// Stop closes the clients and stops every member (SIGKILL, by PID).
func (c *Cluster) Stop() {
	for _, cl := range c.clients {
		cl.Close()
	}
	c.clients = nil
	for _, m := range c.Members {
		m.Kill()
	}
	if c.owned {
		os.RemoveAll(c.dir)
	}
}

// Start starts the member's process (again, on its data directory).
func (m *Member) Start() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cmd != nil {
		return errors.New("etcd member " + m.Name + " runs already")
	}
	logf, err := os.OpenFile(m.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	newCmd := m.command
	if newCmd == nil {
		newCmd = exec.Command
	}
	cmd := newCmd(m.bin, m.args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	// The member dies with the test process, even a killed one.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("start etcd %s: %w", m.Name, err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		logf.Close()
		close(done)
	}()
	m.cmd, m.done = cmd, done
	return nil
}

// PID is the member's process ID, 0 when it is not running.
func (m *Member) PID() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cmd == nil {
		return 0
	}
	return m.cmd.Process.Pid
}

// Kill stops the member's process with SIGKILL, by its PID, and waits for
// it to end.
func (m *Member) Kill() {
	m.mu.Lock()
	cmd, done := m.cmd, m.done
	m.cmd = nil
	m.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	<-done
}
