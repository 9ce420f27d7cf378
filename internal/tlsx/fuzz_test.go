package tlsx

import (
	"crypto/x509"
	"net/url"
	"testing"
	"time"
)

// FuzzParseFiles reads fuzzed PEM files as a certificate file (or CA
// file) and a key file, as NewSource and LoadCA do: an error, or
// certificates and a key that can be used; and reads the identity of a
// certificate with a fuzzed URI: an error, or an identity that checks
// and names itself the same way.
func FuzzParseFiles(f *testing.F) {
	ca, err := NewCA("fuzz", time.Now(), 0)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(ca.Cert, ca.Key, "metasched:agent:spain")
	f.Add([]byte("-----BEGIN CERTIFICATE-----\nnot base64\n-----END CERTIFICATE-----\n"), []byte("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"), "metasched:daemon")
	f.Add([]byte(""), []byte(""), "metasched:client:operator:ops")
	f.Add(ca.Key, ca.Cert, "metasched:client:root:x")
	f.Add(ca.Cert, ca.Key, "metasched:agent:a:b")
	f.Add(ca.Cert, ca.Key, "spiffe://x/y")
	f.Add(ca.Cert, ca.Key, "metasched:host:spain-0")
	f.Fuzz(func(t *testing.T, certPEM, keyPEM []byte, uri string) {
		if certs, err := parseCerts(certPEM); err == nil && len(certs) == 0 {
			t.Fatal("no error and no certificate")
		}
		if k, err := parseKey(keyPEM); err == nil && k.Public() == nil {
			t.Fatal("a key without a public key")
		}
		u, err := url.Parse(uri)
		if err != nil {
			return
		}
		id, err := IdentityOf(&x509.Certificate{URIs: []*url.URL{u}})
		if err != nil {
			return
		}
		if err := id.Check(); err != nil {
			t.Fatalf("identity %+v of %q does not check: %v", id, uri, err)
		}
		again, err := IdentityOf(&x509.Certificate{URIs: []*url.URL{id.URI()}})
		if err != nil || again != id {
			t.Fatalf("identity %+v of %q reads back as %+v, %v", id, uri, again, err)
		}
	})
}
