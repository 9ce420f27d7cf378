package tlsx

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/url"
	"os"
	"regexp"
	"strings"
	"time"
)

// Validity defaults.
const (
	DefaultCAValidity   = 10 * 365 * 24 * time.Hour
	DefaultCertValidity = 365 * 24 * time.Hour
	// backdate is how far before now a certificate becomes valid, for
	// clocks a little behind the issuer's.
	backdate = 5 * time.Minute
)

// PEM is a certificate and its private key, PEM-encoded.
type PEM struct {
	Cert, Key []byte
}

// NewCA makes a self-signed CA (an ECDSA P-256 key) valid from now for
// validFor (DefaultCAValidity when 0), named "metasched CA" and name.
func NewCA(name string, now time.Time, validFor time.Duration) (PEM, error) {
	if validFor <= 0 {
		validFor = DefaultCAValidity
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return PEM{}, err
	}
	cn := "metasched CA"
	if name != "" {
		cn += " " + name
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: cn, Organization: []string{"metasched"}},
		NotBefore:             now.Add(-backdate),
		NotAfter:              now.Add(validFor),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return PEM{}, err
	}
	return encode(der, key)
}

// CA is a loaded CA that issues certificates.
type CA struct {
	cert *x509.Certificate
	key  crypto.Signer
}

// LoadCA reads a CA's certificate and key (as NewCA writes them).
func LoadCA(certFile, keyFile string) (*CA, error) {
	cert, err := readCert(certFile)
	if err != nil {
		return nil, err
	}
	if !cert.IsCA {
		return nil, fmt.Errorf("%s: %q is not a CA certificate", certFile, cert.Subject.CommonName)
	}
	kb, err := os.ReadFile(keyFile)
	if err != nil {
		return nil, err
	}
	key, err := parseKey(kb)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", keyFile, err)
	}
	if !publicKeysEqual(cert.PublicKey, key.Public()) {
		return nil, fmt.Errorf("%s: the key is not the key of the certificate in %s", keyFile, certFile)
	}
	return &CA{cert: cert, key: key}, nil
}

// Cert is the CA's certificate.
func (ca *CA) Cert() *x509.Certificate { return ca.cert }

// Request is a certificate to issue.
type Request struct {
	Identity Identity
	// Hosts are the DNS names and IP addresses the holder serves at (a
	// server checks nothing of its clients' hosts).
	Hosts []string
	// Now and ValidFor (DefaultCertValidity when 0) bound its validity;
	// it ends with the CA's at the latest.
	Now      time.Time
	ValidFor time.Duration
}

// Issue makes a certificate (an ECDSA P-256 key) for r: a client one
// for a client, and one for both ends of a connection for the daemon,
// an agent (each serves its API and calls the others') and a host (its
// QEMU receives and sends live migrations).
func (ca *CA) Issue(r Request) (PEM, error) {
	if err := r.Identity.Check(); err != nil {
		return PEM{}, err
	}
	if r.ValidFor <= 0 {
		r.ValidFor = DefaultCertValidity
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: commonName(r.Identity), Organization: []string{"metasched"}},
		NotBefore:    r.Now.Add(-backdate),
		NotAfter:     r.Now.Add(r.ValidFor),
		URIs:         []*url.URL{r.Identity.URI()},
		// KeyEncipherment besides DigitalSignature: GnuTLS (libvirt and
		// QEMU read the same certificates) wants both on a server's.
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		BasicConstraintsValid: true,
	}
	if tmpl.NotAfter.After(ca.cert.NotAfter) {
		tmpl.NotAfter = ca.cert.NotAfter
	}
	if !tmpl.NotAfter.After(r.Now) {
		return PEM{}, fmt.Errorf("the CA %q expired on %s: make a new one", ca.cert.Subject.CommonName, ca.cert.NotAfter.UTC().Format(time.RFC3339))
	}
	switch r.Identity.Kind {
	case KindClient:
		if len(r.Hosts) > 0 {
			return PEM{}, errors.New("hosts: a client certificate names no hosts")
		}
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	default:
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
	}
	for _, h := range r.Hosts {
		h = strings.TrimSpace(h)
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
			continue
		}
		if !hostRE.MatchString(h) {
			return PEM{}, fmt.Errorf("host: %q is neither an IP address nor a DNS name", h)
		}
		tmpl.DNSNames = append(tmpl.DNSNames, h)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return PEM{}, err
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, key.Public(), ca.key)
	if err != nil {
		return PEM{}, err
	}
	return encode(der, key)
}

// hostRE is a DNS name (or a wildcard one) of letters, digits and hyphens.
var hostRE = regexp.MustCompile(`^(\*\.)?([A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)*[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?$`)

func commonName(id Identity) string {
	switch id.Kind {
	case KindDaemon:
		return "metasched daemon"
	case KindAgent:
		return "metasched agent " + id.Name
	case KindHost:
		return "metasched host " + id.Name
	}
	return id.Name
}

// serial is a random 128-bit serial number.
func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128)) // never fails (crypto/rand)
	return n.Add(n, big.NewInt(1))
}

func encode(der []byte, key *ecdsa.PrivateKey) (PEM, error) {
	kb, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return PEM{}, err
	}
	return PEM{
		Cert: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		Key:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kb}),
	}, nil
}

// parseKey reads a PEM private key: PKCS #8, EC or PKCS #1 RSA.
func parseKey(b []byte) (crypto.Signer, error) {
	for {
		var blk *pem.Block
		if blk, b = pem.Decode(b); blk == nil {
			return nil, errors.New("no PEM private key in the file")
		}
		var k any
		var err error
		switch blk.Type {
		case "PRIVATE KEY":
			k, err = x509.ParsePKCS8PrivateKey(blk.Bytes)
		case "EC PRIVATE KEY":
			k, err = x509.ParseECPrivateKey(blk.Bytes)
		case "RSA PRIVATE KEY":
			k, err = x509.ParsePKCS1PrivateKey(blk.Bytes)
		default:
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("the private key cannot be read: %w", err)
		}
		s, ok := k.(crypto.Signer)
		if !ok {
			return nil, fmt.Errorf("a private key of type %T cannot sign", k)
		}
		return s, nil
	}
}

// readCert reads the first certificate of a PEM file.
func readCert(file string) (*x509.Certificate, error) {
	certs, err := readCerts(file)
	if err != nil {
		return nil, err
	}
	return certs[0], nil
}

// readCerts reads the certificates of a PEM file: at least one.
func readCerts(file string) ([]*x509.Certificate, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	certs, err := parseCerts(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	return certs, nil
}

// parseCerts reads the certificates of a PEM text: at least one.
func parseCerts(b []byte) ([]*x509.Certificate, error) {
	var certs []*x509.Certificate
	for {
		var blk *pem.Block
		if blk, b = pem.Decode(b); blk == nil {
			break
		}
		if blk.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(blk.Bytes)
		if err != nil {
			return nil, fmt.Errorf("certificate %d cannot be read: %w", len(certs)+1, err)
		}
		certs = append(certs, c)
	}
	if len(certs) == 0 {
		return nil, errors.New("no PEM certificate in the file")
	}
	return certs, nil
}

func publicKeysEqual(a, b crypto.PublicKey) bool {
	e, ok := a.(interface{ Equal(crypto.PublicKey) bool })
	return ok && e.Equal(b)
}
