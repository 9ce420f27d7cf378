package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/metasched/metasched/internal/tlsx"
)

// tls ca and tls cert make a CA and certificates that name their holders,
// with private keys; bad usage is refused with the flag named.
func TestTLSCommands(t *testing.T) {
	dir := t.TempDir()
	pki := filepath.Join(dir, "pki")
	ok := func(args ...string) string {
		t.Helper()
		code, out, errOut := runCmd(t, args...)
		if code != 0 {
			t.Fatalf("%v: exit %d, %q", args, code, errOut)
		}
		return out
	}
	ok("tls", "ca", "--out", pki)
	for _, c := range []struct {
		args []string
		file string
		id   tlsx.Identity
	}{
		{[]string{"--daemon", "--host", "sched.example.org", "--host", "10.0.0.1"}, "daemon", tlsx.Daemon()},
		{[]string{"--agent", "spain", "--host", "10.0.0.2"}, "agent-spain", tlsx.Agent("spain")},
		{[]string{"--client", "alice"}, "client-alice", tlsx.Client("alice", tlsx.RoleUser)},
		{[]string{"--client", "ops", "--role", "operator"}, "client-ops", tlsx.Client("ops", tlsx.RoleOperator)},
	} {
		out := ok(append([]string{"tls", "cert", "--ca", pki, "--out", pki}, c.args...)...)
		if !strings.Contains(out, c.id.String()) {
			t.Errorf("%v: %q does not say whose", c.args, out)
		}
		f := tlsx.Files{Cert: filepath.Join(pki, c.file+".pem"), Key: filepath.Join(pki, c.file+"-key.pem"), CA: filepath.Join(pki, "ca.pem")}
		src, err := tlsx.NewSource(f, c.id.Kind, zerolog.Nop(), nil)
		if err != nil {
			t.Errorf("%v: %v", c.args, err)
			continue
		}
		if src.Identity() != c.id {
			t.Errorf("%v: identity %v, want %v", c.args, src.Identity(), c.id)
		}
		if st, err := os.Stat(f.Key); err != nil || st.Mode().Perm() != 0o600 {
			t.Errorf("%v: key mode %v (%v), want 0600", c.args, st.Mode(), err)
		}
	}
	migr := filepath.Join(dir, "migration")
	ok("tls", "cert", "--ca", pki, "--out", migr, "--migration-host", "spain-0", "--host", "10.0.0.10")
	for _, name := range []string{"ca-cert.pem", "server-cert.pem", "server-key.pem", "client-cert.pem", "client-key.pem"} {
		if _, err := os.Stat(filepath.Join(migr, name)); err != nil {
			t.Errorf("migration directory: %v", err)
		}
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"tls", "ca"}, "--out: required"},
		{[]string{"tls", "ca", "--out", pki}, "ca-key.pem exists: give --force to replace it"},
		{[]string{"tls", "ca", "--out", pki, "--days", "0"}, "--days: must be >= 1"},
		{[]string{"tls", "cert", "--ca", pki, "--out", pki}, "give one of --daemon, --agent SITE, --client NAME and --migration-host HOST"},
		{[]string{"tls", "cert", "--ca", pki, "--out", pki, "--daemon", "--agent", "spain"}, "give one of"},
		{[]string{"tls", "cert", "--ca", pki, "--out", pki, "--agent", "sp:ain"}, "--agent: site: must be"},
		{[]string{"tls", "cert", "--ca", pki, "--out", pki, "--client", "bob", "--role", "root"}, "--role: role: must be user or operator"},
		{[]string{"tls", "cert", "--ca", pki, "--out", pki, "--daemon", "--role", "operator"}, "--role: applies to --client only"},
		{[]string{"tls", "cert", "--ca", pki, "--out", pki, "--client", "bob", "--host", "x"}, "--host: a client certificate names no hosts"},
		{[]string{"tls", "cert", "--ca", pki, "--out", pki, "--daemon", "--host", "not a host"}, `host: "not a host" is neither`},
		{[]string{"tls", "cert", "--ca", pki, "--out", pki, "--daemon"}, "daemon-key.pem exists: give --force"},
		{[]string{"tls", "cert", "--ca", dir, "--out", pki, "--agent", "x"}, "--ca: open " + filepath.Join(dir, "ca.pem")},
		{[]string{"tls", "cert", "--out", pki, "--agent", "x"}, "--ca: required"},
	} {
		code, out, errOut := runCmd(t, c.args...)
		if code != exitUsage || out != "" || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: exit %d, %q %q; want %d and %q", c.args, code, out, errOut, exitUsage, c.want)
		}
	}
	// --force replaces a certificate: a new serial, the same identity.
	before, err := os.ReadFile(filepath.Join(pki, "daemon.pem"))
	if err != nil {
		t.Fatal(err)
	}
	ok("tls", "cert", "--ca", pki, "--out", pki, "--daemon", "--force")
	after, err := os.ReadFile(filepath.Join(pki, "daemon.pem"))
	if err != nil {
		t.Fatal(err)
	}
	if string(after) == string(before) {
		t.Error("--force kept the old certificate")
	}
}
