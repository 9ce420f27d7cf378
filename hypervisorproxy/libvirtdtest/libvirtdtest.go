package libvirtdtest

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Standard system binaries the daemon needs.
const (
	LibvirtdPath = "/usr/sbin/libvirtd"
	QEMUPath     = "/usr/bin/qemu-system-x86_64"
)

// debianPackages is what to install when Check fails.
const debianPackages = "libvirt-daemon libvirt-daemon-driver-qemu qemu-system-x86"

// The daemon and everything it starts run as this unprivileged user and group
// ("nobody" and "nogroup" on Debian).
const (
	daemonUID = 65534
	daemonGID = 65534
)

// StartTimeout bounds Start in StartT.
const StartTimeout = 60 * time.Second

// maxDirLen bounds the length of the state directory path so that the
// deepest unix socket libvirt creates in it,
// DIR/config/libvirt/qemu/lib/domain-ID-NAME/monitor.sock (NAME cut to 20
// bytes by libvirt), fits in the 108 bytes of sun_path, NUL included.
const maxDirLen = 107 - len("/config/libvirt/qemu/lib/domain-99999-") - 20 - len("/monitor.sock")

// Options configures a Daemon.
type Options struct {
	// HostUUID is the host_uuid of the daemon, in the form
	// xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx. Default: a fresh random UUID
	// (version 4). Daemons that migrate guests between each other need
	// different values.
	HostUUID string

	// Root runs libvirtd as root in a private mount namespace, as a
	// "system" daemon that can put guests on Linux bridges (see the
	// package documentation). The default is an unprivileged session
	// daemon.
	Root bool

	// NetNS, with Root, is the name of a network namespace (as ip netns
	// names them, /run/netns/NAME) that libvirtd and its guests run in,
	// e.g. a netlab.Grid's. "" is the calling process's network
	// namespace.
	NetNS string

	// MigrateTLSDir is the directory of the daemon's certificates for
	// live migrations over TLS (VIR_MIGRATE_TLS), written as
	// migrate_tls_x509_cert_dir in its qemu.conf: ca-cert.pem,
	// server-cert.pem and server-key.pem (the destination's QEMU serves
	// with them), client-cert.pem and client-key.pem (the source's
	// connects with them), as tlsx's MigrationFiles makes them. It must
	// exist when Start is called (libvirtd refuses to start without it),
	// as an absolute path outside the directories a root daemon mounts
	// over (/etc/libvirt, /run, /var/lib, /var/cache, /var/log). For a
	// session daemon, whose QEMU runs as uid 65534, Start gives the
	// directory and its files to uid/gid 65534 (directories 0700, files
	// 0600), and every directory above it must be traversable by others:
	// make it with os.MkdirTemp, not t.TempDir (whose parent is 0700).
	// QEMU reads the files at each migration: a test may replace them
	// while the daemon runs (overwriting a file keeps its owner and
	// mode). "": libvirt's default, /etc/pki/qemu.
	MigrateTLSDir string

	// MigrateTLSForce makes the daemon refuse live migrations without
	// TLS (migrate_tls_force = 1 in its qemu.conf): "this libvirtd
	// instance allows migration only with VIR_MIGRATE_TLS flag".
	MigrateTLSForce bool
}

// netnsDir is where ip netns keeps its named network namespaces.
const netnsDir = "/run/netns"

// check reports every problem of o, each naming its field.
func (o Options) check() error {
	var errs []error
	if o.HostUUID != "" {
		if err := validUUID(o.HostUUID); err != nil {
			errs = append(errs, fmt.Errorf("libvirtdtest: host uuid: %w", err))
		}
	}
	if o.NetNS != "" {
		switch {
		case !o.Root:
			errs = append(errs, fmt.Errorf("libvirtdtest: netns: %q needs root mode (Options.Root): a session daemon cannot join a network namespace", o.NetNS))
		case strings.ContainsAny(o.NetNS, "/\x00") || o.NetNS == "." || o.NetNS == "..":
			errs = append(errs, fmt.Errorf("libvirtdtest: netns: %q is not a namespace name", o.NetNS))
		default:
			if _, err := os.Stat(filepath.Join(netnsDir, o.NetNS)); err != nil {
				errs = append(errs, fmt.Errorf("libvirtdtest: netns: no network namespace %q: %w", o.NetNS, err))
			}
		}
	}
	if o.MigrateTLSDir != "" {
		if err := o.checkMigrateTLSDir(); err != nil {
			errs = append(errs, fmt.Errorf("libvirtdtest: migrate tls dir: %w", err))
		}
	}
	return errors.Join(errs...)
}

// checkMigrateTLSDir says what is wrong with o.MigrateTLSDir.
func (o Options) checkMigrateTLSDir() error {
	dir := o.MigrateTLSDir
	switch {
	case !filepath.IsAbs(dir) || filepath.Clean(dir) != dir:
		return fmt.Errorf("%q is not a clean absolute path", dir)
	case strings.ContainsAny(dir, "\"\\\n\x00"):
		return fmt.Errorf("%q cannot be written in qemu.conf (a quote, backslash, newline or NUL)", dir)
	}
	if o.Root {
		for _, m := range rootMounts {
			if dir == m.target || strings.HasPrefix(dir, m.target+"/") {
				return fmt.Errorf("%s is under %s, which the root daemon's mount namespace replaces by a directory of its own", dir, m.target)
			}
		}
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("%w (it must exist before libvirtd starts)", err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("%s is not a directory", dir)
	}
	if o.Root {
		return nil
	}
	// The session daemon and its QEMU (uid 65534) must reach it.
	for p := filepath.Dir(dir); ; p = filepath.Dir(p) {
		fi, err := os.Stat(p)
		if err != nil {
			return err
		}
		st, _ := fi.Sys().(*syscall.Stat_t)
		if fi.Mode().Perm()&0o001 == 0 && (st == nil || st.Uid != daemonUID || fi.Mode().Perm()&0o100 == 0) {
			return fmt.Errorf("%s (mode %v) is not traversable by uid %d, the session daemon's QEMU: make the directory elsewhere (os.MkdirTemp)",
				p, fi.Mode().Perm(), daemonUID)
		}
		if p == "/" {
			return nil
		}
	}
}

// migrateTLSConf is the part of qemu.conf that o gives.
func (o Options) migrateTLSConf() string {
	var b strings.Builder
	if o.MigrateTLSDir != "" {
		fmt.Fprintf(&b, "migrate_tls_x509_cert_dir = \"%s\"\n", o.MigrateTLSDir)
	}
	if o.MigrateTLSForce {
		b.WriteString("migrate_tls_force = 1\n")
	}
	return b.String()
}

// giveMigrateTLSDir gives dir and everything in it to the session
// daemon's user: directories 0700, files 0600 (the keys are secrets).
func giveMigrateTLSDir(dir string) error {
	return filepath.WalkDir(dir, func(path string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		mode := fs.FileMode(0o600)
		if e.IsDir() {
			mode = 0o700
		} else if !e.Type().IsRegular() {
			return fmt.Errorf("libvirtdtest: migrate tls dir: %s is not a regular file", path)
		}
		if err := os.Chown(path, daemonUID, daemonGID); err != nil {
			return err
		}
		return os.Chmod(path, mode)
	})
}

// Daemon is a running private libvirtd session daemon. Its methods are safe
// for concurrent use.
type Daemon struct {
	dir      string
	hostUUID string
	root     bool
	netns    string
	mntNS    string // root mode: libvirtd's mount namespace, once ready
	// qemuConf are the lines of qemu.conf the options add (migrations
	// over TLS); migrateTLSDir is Options.MigrateTLSDir.
	qemuConf      string
	migrateTLSDir string
	// cpuControl says the root daemon has the cpu cgroup controller;
	// cgroups are its directories in the cgroup hierarchies (cgroup.go).
	cpuControl bool
	cgroups    []string
	cmd        *exec.Cmd
	exited     chan struct{} // closed when cmd.Wait has returned
	waitErr    error         // result of cmd.Wait, set before exited is closed

	// releaseSuite drops the daemon's hold of the suite lock, once its
	// processes are gone (suite.go).
	releaseSuite func()

	mu      sync.Mutex
	stopped bool
}

// Check reports, in one error naming the Debian packages to install, why
// daemons cannot be started here: a missing libvirtd or QEMU binary, or not
// running as root. It returns nil when all is in place.
func Check() error {
	var missing []string
	if os.Geteuid() != 0 {
		missing = append(missing, "root privileges (to run libvirtd as uid 65534)")
	}
	for _, p := range []string{LibvirtdPath, QEMUPath} {
		if _, err := os.Stat(p); err != nil {
			missing = append(missing, p)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	return fmt.Errorf("libvirtdtest: missing %s (on Debian, as root: apt-get install %s)",
		strings.Join(missing, ", "), debianPackages)
}

// Start starts a private libvirtd session daemon in a new state directory and
// returns once it serves connections: it has opened qemu:///session and
// returned its capabilities to a client on its socket (a few seconds, spent
// probing QEMU; a mere connect succeeds much earlier). ctx bounds the start
// only: it does not stop the daemon later. On failure Start stops whatever it
// started, removes the directory and returns an error that includes the tail
// of the daemon's log. On success the caller must call Stop. Start first
// waits for the suite lock unless this process holds it (a deadline of ctx
// counts from when it has it), and the daemon holds it until its Stop (see
// suite.go): one test binary at a time runs libvirtd and QEMU guests.
func Start(ctx context.Context, opts Options) (*Daemon, error) {
	if err := opts.check(); err != nil {
		return nil, err
	}
	hostUUID := opts.HostUUID
	if hostUUID == "" {
		hostUUID = randomUUID()
	}
	if err := Check(); err != nil {
		return nil, err
	}
	if opts.Root {
		for _, tool := range []string{"nsenter", "unshare", "mount"} {
			if _, err := exec.LookPath(tool); err != nil {
				return nil, fmt.Errorf("libvirtdtest: root mode needs %s (Debian packages util-linux and mount): %w", tool, err)
			}
		}
	}
	// The wait for another test binary's suite is not the start's: a
	// deadline of ctx counts from when the lock is held.
	budget, timed := time.Duration(0), false
	if dl, ok := ctx.Deadline(); ok {
		budget, timed = time.Until(dl), true
	}
	release, err := AcquireSuite()
	if err != nil {
		return nil, err
	}
	if timed {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), budget)
		defer cancel()
		stop := context.AfterFunc(ctx, func() {
			if errors.Is(ctx.Err(), context.Canceled) {
				cancel() // a cancel still stops the start; the old deadline does not
			}
		})
		defer stop()
		ctx = sctx
	}
	dir, err := os.MkdirTemp("", "libvirtd-")
	if err != nil {
		release()
		return nil, fmt.Errorf("libvirtdtest: %w", err)
	}
	d := &Daemon{dir: dir, hostUUID: hostUUID, root: opts.Root, netns: opts.NetNS, qemuConf: opts.migrateTLSConf(),
		migrateTLSDir: opts.MigrateTLSDir, exited: make(chan struct{}), releaseSuite: release}
	if err := d.start(ctx); err != nil {
		tail := d.logTail()
		if stopErr := d.Stop(); stopErr != nil {
			err = errors.Join(err, stopErr)
		}
		if tail != "" {
			return nil, fmt.Errorf("libvirtdtest: start libvirtd in %s: %w\nlog tail:\n%s", dir, err, tail)
		}
		return nil, fmt.Errorf("libvirtdtest: start libvirtd in %s: %w (empty log)", dir, err)
	}
	return d, nil
}

// SkipShort skips the test in -short mode (make check), saying why: it
// starts libvirtd, and most such tests boot QEMU guests. Tests that call
// Start call it first; StartT does.
func SkipShort(tb testing.TB) {
	tb.Helper()
	if testing.Short() {
		tb.Skip("-short: starts libvirtd (and QEMU guests); make test runs it")
	}
}

// StartT starts a daemon like Start with a timeout of StartTimeout, fails the
// test at once when that fails, and registers Stop with t.Cleanup (a Stop
// error is reported with t.Error). When the test has failed, the cleanup logs
// the tail of the daemon's log before removing it.
func StartT(t testing.TB, opts Options) *Daemon {
	t.Helper()
	SkipShort(t)
	// Start counts its deadline from when it holds the suite lock.
	ctx, cancel := context.WithTimeout(context.Background(), StartTimeout)
	defer cancel()
	d, err := Start(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			if tail := d.logTail(); tail != "" {
				t.Logf("libvirtd log tail (%s):\n%s", d.dir, tail)
			}
		}
		if err := d.Stop(); err != nil {
			t.Error(err)
		}
	})
	return d
}

// start prepares the state directory, starts libvirtd and waits until it
// serves connections.
func (d *Daemon) start(ctx context.Context) error {
	if len(d.dir) > maxDirLen {
		return fmt.Errorf("state directory path is %d bytes, more than %d (unix socket paths are limited to 108 bytes): set TMPDIR to a shorter directory",
			len(d.dir), maxDirLen)
	}
	if d.root {
		return d.startRoot(ctx)
	}
	// MkdirTemp makes 0700 directories: uid 65534 must be able to traverse.
	if err := os.Chmod(d.dir, 0o755); err != nil {
		return err
	}
	for _, sub := range []string{"home", "run", "config/libvirt", "cache", "data"} {
		if err := os.MkdirAll(filepath.Join(d.dir, sub), 0o755); err != nil {
			return err
		}
	}
	conf := fmt.Sprintf("host_uuid = %q\n", d.hostUUID)
	if err := os.WriteFile(filepath.Join(d.dir, "config", "libvirt", "libvirtd.conf"), []byte(conf), 0o644); err != nil {
		return err
	}
	if d.qemuConf != "" {
		if err := os.WriteFile(filepath.Join(d.dir, "config", "libvirt", "qemu.conf"), []byte(d.qemuConf), 0o644); err != nil {
			return err
		}
	}
	if d.migrateTLSDir != "" {
		if err := giveMigrateTLSDir(d.migrateTLSDir); err != nil {
			return err
		}
	}
	logFile, err := os.OpenFile(d.logPath(), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logFile.Close() // the child has its own copy
	if err := chownTree(d.dir, daemonUID, daemonGID); err != nil {
		return err
	}

	cmd := exec.Command(LibvirtdPath)
	cmd.Dir = d.dir
	cmd.Env = []string{
		"PATH=/usr/sbin:/usr/bin:/sbin:/bin",
		"HOME=" + filepath.Join(d.dir, "home"),
		"XDG_RUNTIME_DIR=" + filepath.Join(d.dir, "run"),
		"XDG_CONFIG_HOME=" + filepath.Join(d.dir, "config"),
		"XDG_CACHE_HOME=" + filepath.Join(d.dir, "cache"),
		"XDG_DATA_HOME=" + filepath.Join(d.dir, "data"),
	}
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Setsid: true,
		Credential: &syscall.Credential{
			Uid:    daemonUID,
			Gid:    daemonGID,
			Groups: []uint32{},
		},
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	d.cmd = cmd
	go func() {
		d.waitErr = cmd.Wait()
		close(d.exited)
	}()
	return d.waitReady(ctx)
}

// URI returns the libvirt connection URI of the daemon,
// qemu+unix:///session?socket=SOCKET, or qemu+unix:///system?socket=SOCKET
// in root mode.
func (d *Daemon) URI() string {
	if d.root {
		return "qemu+unix:///system?socket=" + d.Socket()
	}
	return "qemu+unix:///session?socket=" + d.Socket()
}

// driverURI is the URI of the daemon's QEMU driver, without the socket.
func (d *Daemon) driverURI() string {
	if d.root {
		return systemURI
	}
	return sessionURI
}

// Root reports whether the daemon runs in root mode.
func (d *Daemon) Root() bool { return d.root }

// NetNS returns the network namespace the daemon runs in (root mode), or
// "" for the caller's.
func (d *Daemon) NetNS() string { return d.netns }

// Socket returns the path of the daemon's unix socket.
func (d *Daemon) Socket() string {
	return filepath.Join(d.dir, "run", "libvirt", "libvirt-sock")
}

// Dir returns the state directory of the daemon. Stop removes it.
func (d *Daemon) Dir() string { return d.dir }

// HostUUID returns the host_uuid the daemon was configured with.
func (d *Daemon) HostUUID() string { return d.hostUUID }

// CPUControl reports whether the daemon's guests are in cgroups with the
// cpu controller, so that a <cputune> quota holds for them: a root daemon
// on a host with the cgroup v1 cpu and cpuacct controllers. A session
// daemon has none (libvirt refuses a quota there: "CPU tuning is not
// available in session mode").
func (d *Daemon) CPUControl() bool { return d.cpuControl }

// PID returns the process ID of libvirtd.
func (d *Daemon) PID() int { return d.cmd.Process.Pid }

// LogPath returns the file that receives libvirtd's stdout and stderr (in
// Dir, so Stop removes it).
func (d *Daemon) LogPath() string { return d.logPath() }

func (d *Daemon) logPath() string { return filepath.Join(d.dir, "libvirtd.log") }

// guestPIDDir is where libvirt keeps one NAME.pid file per running QEMU guest
// (next to driver.pid, the lock file of the QEMU driver).
func (d *Daemon) guestPIDDir() string {
	if d.root {
		return filepath.Join(d.dir, "run", "libvirt", "qemu") // /run/libvirt/qemu
	}
	return filepath.Join(d.dir, "run", "libvirt", "qemu", "run")
}

// GuestPIDs returns the process ID of every running QEMU guest of the
// daemon, by domain name, as recorded in libvirt's pid files.
func (d *Daemon) GuestPIDs() (map[string]int, error) {
	dir := d.guestPIDDir()
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return map[string]int{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("libvirtdtest: %w", err)
	}
	pids := make(map[string]int)
	for _, e := range entries {
		name, ok := strings.CutSuffix(e.Name(), ".pid")
		if !ok || name == "driver" || !e.Type().IsRegular() {
			continue
		}
		pid, err := readPIDFile(filepath.Join(dir, e.Name()))
		if errors.Is(err, fs.ErrNotExist) {
			continue // the guest has just stopped
		}
		if err != nil {
			return nil, fmt.Errorf("libvirtdtest: %w", err)
		}
		pids[name] = pid
	}
	return pids, nil
}

// logTail returns the last lines of the daemon's log, or "" when there is
// none.
func (d *Daemon) logTail() string {
	const maxBytes, maxLines = 4096, 30
	f, err := os.Open(d.logPath())
	if err != nil {
		return ""
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.Size() > maxBytes {
		if _, err := f.Seek(-maxBytes, io.SeekEnd); err != nil {
			return ""
		}
	}
	b, err := io.ReadAll(f)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > maxLines {
		lines = lines[len(lines)-maxLines:]
	}
	return strings.Join(lines, "\n")
}

// chownTree changes the owner of root and everything under it.
func chownTree(root string, uid, gid int) error {
	return filepath.WalkDir(root, func(path string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(path, uid, gid)
	})
}

var uuidRE = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)

// validUUID reports whether s is a UUID libvirt accepts as host_uuid: the
// usual textual form, and not all hex digits equal.
func validUUID(s string) error {
	if !uuidRE.MatchString(s) {
		return fmt.Errorf("%q is not of the form xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx", s)
	}
	hex := strings.ToLower(strings.ReplaceAll(s, "-", ""))
	if strings.Count(hex, hex[:1]) == len(hex) {
		return fmt.Errorf("%q has all digits equal, which libvirt rejects", s)
	}
	return nil
}

// randomUUID returns a random (version 4) UUID.
func randomUUID() string {
	var b [16]byte
	// crypto/rand.Read never returns an error.
	rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40 // version 4
	b[8] = b[8]&0x3f | 0x80 // RFC 4122 variant
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}
