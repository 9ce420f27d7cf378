package hypervisorproxy_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	hp "github.com/metasched/metasched/hypervisorproxy"
	"github.com/metasched/metasched/hypervisorproxy/client"
	"github.com/metasched/metasched/hypervisorproxy/libvirtdtest"
	"github.com/metasched/metasched/hypervisorproxy/virt"
	"github.com/metasched/metasched/internal/syncbuf"
	"github.com/metasched/metasched/internal/tlsx"
	"github.com/metasched/metasched/internal/tlsx/tlsxtest"
)

// Live migrations over libvirt's native TLS between two real libvirtd
// daemons, each with a migration certificate directory of the grid's CA
// (a host certificate for 127.0.0.1 and localhost), the destination
// refusing plain migrations (migrate_tls_force):
//
//   - an agent without migration_tls is refused by the forcing daemon: an
//     error that says to set migration_tls, the VM still running on its
//     source;
//   - an agent with migration_tls: true live-migrates a VM, and the
//     answer (and the agent's log) says tls;
//   - with a certificate of another CA in the destination's directory
//     (QEMU reads the files at each migration), the migration fails with
//     an error that names migrate_tls_x509_cert_dir, and the VM keeps
//     running on its source.
func TestAgentQEMUEncryptedMigration(t *testing.T) {
	ctx := context.Background()
	grid, foreign := tlsxtest.New(t), tlsxtest.New(t)
	dirA := migrationTLSDir(t, grid.CA, "qa")
	dirB := migrationTLSDir(t, grid.CA, "qb")
	da, db := twoDaemonsWith(t, libvirtdtest.Options{MigrateTLSDir: dirA},
		libvirtdtest.Options{MigrateTLSDir: dirB, MigrateTLSForce: true})
	// Both agents' tiny guests: no image, no network.
	spec := func(name string) hp.VMSpec {
		return hp.VMSpec{Name: name, Host: "qa", Job: "job-1", VCPUs: 1, MaxVCPUs: 1, MemoryMiB: 128, MaxMemoryMiB: 128}
	}

	// Without migration_tls: the forcing destination refuses.
	plain, _ := migrationAgent(t, da, db, false)
	if _, err := plain.Create(ctx, spec("plain-1")); err != nil {
		t.Fatal(err)
	}
	pid := runningOn(t, plain, "plain-1", "qa", da, db, 0)
	_, err := plain.Migrate(ctx, "plain-1", "qb")
	t.Logf("plain migration to the forcing daemon: %v", err)
	if err == nil {
		t.Fatal("a plain migration to a daemon with migrate_tls_force succeeded")
	}
	if !errors.Is(err, hp.ErrUnsupported) || !strings.Contains(err.Error(), "migration_tls: true") ||
		!strings.Contains(err.Error(), "migrate_tls_force") {
		t.Errorf("plain migration: err = %v; want unsupported, saying to set migration_tls: true", err)
	}
	runningOn(t, plain, "plain-1", "qa", da, db, pid)
	if err := plain.Destroy(ctx, "plain-1"); err != nil {
		t.Fatal(err)
	}

	// With migration_tls: the migration goes over TLS.
	secure, logs := migrationAgent(t, da, db, true)
	if _, err := secure.Create(ctx, spec("secure-1")); err != nil {
		t.Fatal(err)
	}
	srcPID := runningOn(t, secure, "secure-1", "qa", da, db, 0)
	m, err := secure.Migrate(ctx, "secure-1", "qb")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("tls migration: %.2f s, downtime %.0f ms, %.1f MiB over %s", m.Seconds, m.DowntimeMs, m.DataMiB, m.URI)
	if !m.Live || !m.TLS || m.From != "qa" || m.To != "qb" || !strings.HasPrefix(m.URI, "tcp://127.0.0.1:") {
		t.Errorf("migration = %+v; want live over tls from qa to qb", m)
	}
	if m.VM.Host != "qb" || m.VM.State != hp.StateRunning {
		t.Errorf("vm after the migration = %+v", m.VM)
	}
	if alive(srcPID) {
		t.Errorf("the source qemu (pid %d) still runs", srcPID)
	}
	dstPID := runningOn(t, secure, "secure-1", "qb", db, da, 0)
	if line := lastLine(logs, `"message":"vm migrated"`); !strings.Contains(line, `"tls":true`) || !strings.Contains(line, `"live":true`) {
		t.Errorf("the agent's log line of the migration %q does not say tls", line)
	}

	// A certificate of another CA on the destination (now qa): refused,
	// the VM stays where it runs.
	writeMigrationFiles(t, dirA, foreign.CA, "qa")
	_, err = secure.Migrate(ctx, "secure-1", "qa")
	t.Logf("tls migration to a host of another CA: %v", err)
	if err == nil {
		t.Fatal("a migration to a host whose certificate is of another CA succeeded")
	}
	if errors.Is(err, hp.ErrUnsupported) || !strings.Contains(err.Error(), "migrate_tls_x509_cert_dir") ||
		!strings.Contains(err.Error(), "migration certificates") {
		t.Errorf("migration to another CA: err = %v; want one that names the migration certificates and migrate_tls_x509_cert_dir", err)
	}
	runningOn(t, secure, "secure-1", "qb", db, da, dstPID)
	if err := secure.Destroy(ctx, "secure-1"); err != nil {
		t.Fatal(err)
	}
}

// migrationTLSDir makes a libvirt migration certificate directory with
// host's certificate of ca, in the system's temporary directory (a
// session daemon's QEMU must reach it: t.TempDir's parent is 0700).
func migrationTLSDir(t *testing.T, ca *tlsx.CA, host string) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "migration-tls-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := os.RemoveAll(dir); err != nil {
			t.Error(err)
		}
	})
	writeMigrationFiles(t, dir, ca, host)
	return dir
}

// writeMigrationFiles writes (over the files there, keeping their owner
// and mode) host's certificate of ca, for 127.0.0.1 and localhost, as
// libvirt's five migration files.
func writeMigrationFiles(t *testing.T, dir string, ca *tlsx.CA, host string) {
	t.Helper()
	files, err := ca.MigrationFiles(tlsx.Request{Identity: tlsx.Host(host), Hosts: []string{"127.0.0.1", "localhost"}, Now: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// migrationAgent serves an agent of two QEMU hosts, qa on daemon a and qb on
// daemon b, whose site file says migration_tls when tls is true; it
// returns its client and its log.
func migrationAgent(t *testing.T, a, b *libvirtdtest.Daemon, tls bool) (*client.Client, *syncbuf.Buffer) {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "token"), []byte(testToken), 0o600); err != nil {
		t.Fatal(err)
	}
	lo, hi := libvirtdtest.FreePortRange(t, 4)
	yaml := fmt.Sprintf(`site: lab
token_file: token
insecure_http: true
migration_ports: %d-%d
hosts:
  - {name: qa, uri: %q, pool: render}
  - {name: qb, uri: %q, pool: render}
`, lo, hi, a.URI(), b.URI())
	if tls {
		yaml += "migration_tls: true\n"
	}
	site, err := hp.ParseSite(filepath.Join(dir, "site.yaml"), []byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	if site.MigrationTLS != tls {
		t.Fatalf("site.MigrationTLS = %v, want %v", site.MigrationTLS, tls)
	}
	logs := &syncbuf.Buffer{}
	log := zerolog.New(zerolog.MultiLevelWriter(zerolog.NewTestWriter(t), logs))
	return serveAgent(t, hp.Config{Site: site, Token: testToken, Connect: virt.Connector(log), Logger: log}).client, logs
}

// runningOn checks that the VM is on host (daemon on), running, with a
// QEMU process of its own there (the process want, when not 0) and none
// on the other daemon; it returns the process.
func runningOn(t *testing.T, c *client.Client, name, host string, on, other *libvirtdtest.Daemon, want int) int {
	t.Helper()
	vm, err := c.VM(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	if vm.Host != host || vm.State != hp.StateRunning {
		t.Errorf("vm %s = %+v; want it running on %s", name, vm, host)
	}
	pids, err := on.GuestPIDs()
	if err != nil {
		t.Fatal(err)
	}
	pid := pids[name]
	if !alive(pid) || want != 0 && pid != want {
		t.Errorf("qemu of %s on %s: pid %d (alive %v), want a running one%s", name, host, pid, alive(pid),
			map[bool]string{true: fmt.Sprintf(", pid %d", want)}[want != 0])
	}
	if others, err := other.GuestPIDs(); err != nil || len(others) != 0 {
		t.Errorf("the other daemon has guests %v (%v)", others, err)
	}
	return pid
}

// lastLine is the last line of log that contains s, or "".
func lastLine(log *syncbuf.Buffer, s string) string {
	lines := strings.Split(log.String(), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if strings.Contains(lines[i], s) {
			return lines[i]
		}
	}
	return ""
}
