package tlsx_test

import (
	"bytes"
	"crypto"
	"crypto/x509"
	"encoding/pem"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/metasched/metasched/internal/tlsx"
	"github.com/metasched/metasched/internal/tlsx/tlsxtest"
)

// A host's libvirt migration directory: the CA's certificate, and one
// certificate of the host as both the server and the client pair, that
// verifies against the CA for both usages and names the host's addresses.
func TestMigrationFiles(t *testing.T) {
	p := tlsxtest.New(t)
	now := time.Now()
	files, err := p.CA.MigrationFiles(tlsx.Request{Identity: tlsx.Host("qa"), Hosts: []string{"127.0.0.1", "localhost"}, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"ca-cert.pem", "client-cert.pem", "client-key.pem", "server-cert.pem", "server-key.pem"}
	if got := slices.Sorted(maps.Keys(files)); !slices.Equal(got, want) {
		t.Fatalf("files %v, want %v", got, want)
	}
	ca := parseCert(t, "ca-cert.pem", files["ca-cert.pem"])
	if !ca.Equal(p.CA.Cert()) {
		t.Errorf("ca-cert.pem is %q, not the CA's certificate", ca.Subject.CommonName)
	}
	if !bytes.Equal(files["server-cert.pem"], files["client-cert.pem"]) || !bytes.Equal(files["server-key.pem"], files["client-key.pem"]) {
		t.Error("the server and client pairs differ: a host has one certificate")
	}
	cert := parseCert(t, "server-cert.pem", files["server-cert.pem"])
	roots := x509.NewCertPool()
	roots.AddCert(ca)
	for _, usage := range []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth} {
		if _, err := cert.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{usage}, CurrentTime: now}); err != nil {
			t.Errorf("usage %v: %v", usage, err)
		}
	}
	for _, host := range []string{"127.0.0.1", "localhost"} {
		if err := cert.VerifyHostname(host); err != nil {
			t.Errorf("host %s: %v", host, err)
		}
	}
	if err := cert.VerifyHostname("10.0.0.9"); err == nil {
		t.Error("the certificate names 10.0.0.9, which the request did not give")
	}
	if cert.KeyUsage&x509.KeyUsageDigitalSignature == 0 {
		t.Errorf("key usage %b lacks digitalSignature (GnuTLS wants it)", cert.KeyUsage)
	}
	if id, err := tlsx.IdentityOf(cert); err != nil || id != tlsx.Host("qa") {
		t.Errorf("identity %v, %v; want host qa", id, err)
	}
	// The key is the certificate's.
	blk, _ := pem.Decode(files["server-key.pem"])
	if blk == nil {
		t.Fatal("server-key.pem holds no PEM block")
	}
	key, err := x509.ParsePKCS8PrivateKey(blk.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if signer, ok := key.(crypto.Signer); !ok {
		t.Errorf("key of type %T", key)
	} else if pub, ok := cert.PublicKey.(interface{ Equal(crypto.PublicKey) bool }); !ok || !pub.Equal(signer.Public()) {
		t.Error("server-key.pem is not the key of server-cert.pem")
	}
}

func TestMigrationFilesRefusesOtherKinds(t *testing.T) {
	p := tlsxtest.New(t)
	for _, id := range []tlsx.Identity{tlsx.Agent("spain"), tlsx.Daemon(), tlsx.Client("alice", tlsx.RoleOperator)} {
		_, err := p.CA.MigrationFiles(tlsx.Request{Identity: id, Now: time.Now()})
		if err == nil || !strings.Contains(err.Error(), id.String()) || !strings.Contains(err.Error(), "host") {
			t.Errorf("%v: err = %v, want a refusal naming it", id, err)
		}
	}
	if _, err := p.CA.MigrationFiles(tlsx.Request{Identity: tlsx.Host("bad name"), Now: time.Now()}); err == nil || !strings.Contains(err.Error(), "host:") {
		t.Errorf("a bad host name: err = %v", err)
	}
}

func parseCert(t *testing.T, name string, b []byte) *x509.Certificate {
	t.Helper()
	blk, rest := pem.Decode(b)
	if blk == nil || blk.Type != "CERTIFICATE" || len(bytes.TrimSpace(rest)) != 0 {
		t.Fatalf("%s is not one PEM certificate", name)
	}
	c, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return c
}
