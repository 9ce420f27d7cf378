package tlsx

import (
	"encoding/pem"
	"fmt"
)

// The files of libvirt's migration certificate directory (qemu.conf's
// migrate_tls_x509_cert_dir): the destination's QEMU serves a migration
// with the server pair, the source's connects with the client pair, and
// each checks the other's against ca-cert.pem.
const (
	MigrationCACert     = "ca-cert.pem"
	MigrationServerCert = "server-cert.pem"
	MigrationServerKey  = "server-key.pem"
	MigrationClientCert = "client-cert.pem"
	MigrationClientKey  = "client-key.pem"
)

// MigrationFiles issues the certificate of a hypervisor host (r.Identity
// of KindHost, r.Hosts the addresses other hosts migrate to it at: the
// host of the tcp://ADDR:PORT migration URI) and returns the five files of
// its libvirt migration directory, by name: the CA's certificate, and the
// host's certificate and key as both the server and the client pair (a
// host's certificate serves and connects). The keys are secrets: the
// caller writes them readable by QEMU's user only.
func (ca *CA) MigrationFiles(r Request) (map[string][]byte, error) {
	if r.Identity.Kind != KindHost {
		return nil, fmt.Errorf("libvirt's migration files are issued to a host (kind %s), not to %s (kind %q)", KindHost, r.Identity, r.Identity.Kind)
	}
	p, err := ca.Issue(r)
	if err != nil {
		return nil, err
	}
	return map[string][]byte{
		MigrationCACert:     pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.cert.Raw}),
		MigrationServerCert: p.Cert,
		MigrationServerKey:  p.Key,
		MigrationClientCert: p.Cert,
		MigrationClientKey:  p.Key,
	}, nil
}
