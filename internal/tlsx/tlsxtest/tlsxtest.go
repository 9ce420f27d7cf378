// Package tlsxtest makes a grid's certificates for tests: a CA in a
// temporary directory and the certificates of the daemon, agents and
// clients it issues, as metasched tls ca and tls cert would.
package tlsxtest

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/metasched/metasched/internal/tlsx"
)

// PKI is a CA and the directory its files are in.
type PKI struct {
	Dir string
	CA  *tlsx.CA
}

// New makes a CA in a temporary directory of t.
func New(t testing.TB) *PKI {
	t.Helper()
	dir := t.TempDir()
	p, err := tlsx.NewCA("test", time.Now(), 0)
	if err != nil {
		t.Fatal(err)
	}
	Write(t, filepath.Join(dir, "ca.pem"), p.Cert)
	Write(t, filepath.Join(dir, "ca-key.pem"), p.Key)
	ca, err := tlsx.LoadCA(filepath.Join(dir, "ca.pem"), filepath.Join(dir, "ca-key.pem"))
	if err != nil {
		t.Fatal(err)
	}
	return &PKI{Dir: dir, CA: ca}
}

// CAFile is the CA's certificate file.
func (p *PKI) CAFile() string { return filepath.Join(p.Dir, "ca.pem") }

// Write writes a file readable by its owner only.
func Write(t testing.TB, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// Issue writes the certificate of r as NAME.pem and NAME-key.pem in the
// PKI's directory (r.Now: now when zero) and returns the files.
func (p *PKI) Issue(t testing.TB, name string, r tlsx.Request) tlsx.Files {
	t.Helper()
	if r.Now.IsZero() {
		r.Now = time.Now()
	}
	out, err := p.CA.Issue(r)
	if err != nil {
		t.Fatal(err)
	}
	f := tlsx.Files{Cert: filepath.Join(p.Dir, name+".pem"), Key: filepath.Join(p.Dir, name+"-key.pem"), CA: p.CAFile()}
	Write(t, f.Cert, out.Cert)
	Write(t, f.Key, out.Key)
	return f
}

// Source issues the certificate of id for hosts (a client's: none) and
// returns its source.
func (p *PKI) Source(t testing.TB, id tlsx.Identity, hosts ...string) *tlsx.Source {
	t.Helper()
	name := string(id.Kind)
	if id.Name != "" {
		name += "-" + id.Name
	}
	s, err := tlsx.NewSource(p.Issue(t, name, tlsx.Request{Identity: id, Hosts: hosts}), id.Kind, zerolog.Nop(), nil)
	if err != nil {
		t.Fatal(err)
	}
	return s
}
