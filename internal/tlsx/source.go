package tlsx

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/rs/zerolog"
)

// Files names a party's certificate, its key and the CA file it checks
// the others' certificates against.
type Files struct {
	Cert, Key, CA string
}

// Source holds a party's certificate, key and CA, read from their files,
// and reads them again when the files change (a check of their sizes and
// times at every handshake): an operator rotates a certificate, or the CA
// file, by replacing the files, without a restart. A change that cannot
// be used (a certificate without its key yet, an expired one, a
// certificate of another identity) is logged once and the last good
// files stay in use.
type Source struct {
	files Files
	want  Kind // the kind of identity the certificate must name
	log   zerolog.Logger
	now   func() time.Time

	mu      sync.Mutex
	stamp   string // the files' sizes and times when last read
	cur     *material
	lastErr string
}

// material is what one reading of the files gave.
type material struct {
	cert *tls.Certificate
	id   Identity
	pool *x509.CertPool
}

// NewSource reads the files now: an error names the file and what is
// wrong (missing, unreadable, a key of another certificate, expired, not
// yet valid, not signed by the CA, an identity of another kind than
// want). now is the clock (time.Now when nil).
func NewSource(f Files, want Kind, log zerolog.Logger, now func() time.Time) (*Source, error) {
	if now == nil {
		now = time.Now
	}
	s := &Source{files: f, want: want, log: log, now: now}
	stamp, err := s.stampOf()
	if err != nil {
		return nil, err
	}
	m, err := s.read()
	if err != nil {
		return nil, err
	}
	s.stamp, s.cur = stamp, m
	return s, nil
}

// Identity is the identity the current certificate names.
func (s *Source) Identity() Identity { return s.current().id }

// Files are the source's files.
func (s *Source) Files() Files { return s.files }

// stampOf returns the sizes and modification times of the files.
func (s *Source) stampOf() (string, error) {
	var b bytes.Buffer
	for _, f := range []struct{ field, path string }{{"cert_file", s.files.Cert}, {"key_file", s.files.Key}, {"ca_file", s.files.CA}} {
		st, err := os.Stat(f.path)
		if err != nil {
			return "", fmt.Errorf("tls: %s: %w", f.field, err)
		}
		fmt.Fprintf(&b, "%d %d;", st.Size(), st.ModTime().UnixNano())
	}
	return b.String(), nil
}

// read loads and checks the files.
func (s *Source) read() (*material, error) {
	pool, err := CAPool(s.files.CA)
	if err != nil {
		return nil, fmt.Errorf("tls: ca_file: %w", err)
	}
	pair, err := tls.LoadX509KeyPair(s.files.Cert, s.files.Key)
	if err != nil {
		return nil, fmt.Errorf("tls: cert_file %s and key_file %s: %w", s.files.Cert, s.files.Key, err)
	}
	leaf := pair.Leaf
	now := s.now()
	switch {
	case now.After(leaf.NotAfter):
		return nil, fmt.Errorf("tls: cert_file %s: the certificate expired on %s: make a new one (metasched tls cert)", s.files.Cert, leaf.NotAfter.UTC().Format(time.RFC3339))
	case now.Before(leaf.NotBefore):
		return nil, fmt.Errorf("tls: cert_file %s: the certificate is valid only from %s", s.files.Cert, leaf.NotBefore.UTC().Format(time.RFC3339))
	}
	inter := x509.NewCertPool()
	for _, der := range pair.Certificate[1:] {
		if c, err := x509.ParseCertificate(der); err == nil {
			inter.AddCert(c)
		}
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, Intermediates: inter, CurrentTime: now,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err != nil {
		return nil, fmt.Errorf("tls: cert_file %s: not signed by the CA of ca_file %s: %w", s.files.Cert, s.files.CA, err)
	}
	id, err := IdentityOf(leaf)
	if err != nil {
		return nil, fmt.Errorf("tls: cert_file %s: %w", s.files.Cert, err)
	}
	if id.Kind != s.want {
		return nil, fmt.Errorf("tls: cert_file %s: the certificate is %s's, not a %s's", s.files.Cert, id, s.want)
	}
	return &material{cert: &pair, id: id, pool: pool}, nil
}

// current returns the material in use, read again first when the files
// changed since.
func (s *Source) current() *material {
	s.mu.Lock()
	defer s.mu.Unlock()
	stamp, err := s.stampOf()
	if err == nil && stamp == s.stamp {
		return s.cur
	}
	var m *material
	if err == nil {
		m, err = s.read()
	}
	if err != nil {
		if msg := err.Error(); msg != s.lastErr {
			s.lastErr = msg
			s.log.Error().Err(err).Msg("tls: the changed certificate files cannot be used: the previous ones stay in use")
		}
		return s.cur
	}
	if m.id != s.cur.id {
		err := fmt.Errorf("tls: cert_file %s: the new certificate is %s's, not %s's", s.files.Cert, m.id, s.cur.id)
		if msg := err.Error(); msg != s.lastErr {
			s.lastErr = msg
			s.log.Error().Err(err).Msg("tls: the changed certificate files cannot be used: the previous ones stay in use")
		}
		return s.cur
	}
	s.stamp, s.cur, s.lastErr = stamp, m, ""
	s.log.Info().Str("cert_file", s.files.Cert).Time("not_after", m.cert.Leaf.NotAfter).Msg("tls: certificate files read again")
	return m
}

// base is the configuration every connection starts from: TLS 1.2 at
// least; Go prefers 1.3 and modern cipher suites by itself.
func base() *tls.Config {
	return &tls.Config{MinVersion: tls.VersionTLS12}
}

// ServerConfig is the configuration of a server: it presents the
// current certificate and, with clientAuth, checks the clients'
// certificates against the current CA (tls.RequireAndVerifyClientCert:
// every client must present one; tls.VerifyClientCertIfGiven: those
// that present one). Who a verified client is: PeerIdentity.
func (s *Source) ServerConfig(clientAuth tls.ClientAuthType) *tls.Config {
	cfg := base()
	cfg.GetConfigForClient = func(*tls.ClientHelloInfo) (*tls.Config, error) {
		m := s.current()
		c := base()
		c.Certificates = []tls.Certificate{*m.cert}
		c.ClientAuth = clientAuth
		c.ClientCAs = m.pool
		return c, nil
	}
	return cfg
}

// ClientConfig is the configuration of a client that presents the
// current certificate and accepts a server whose certificate the
// current CA signed, names host (the DNS name or IP address dialled,
// without the port) and whose identity is want.
func (s *Source) ClientConfig(want Identity, host string) *tls.Config {
	cfg := base()
	cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
		return s.current().cert, nil
	}
	// The chain is checked by VerifyConnection against the CA file as it
	// is now, which a fixed RootCAs could not follow.
	cfg.InsecureSkipVerify = true
	cfg.VerifyConnection = func(cs tls.ConnectionState) error {
		return verifyServer(cs, s.current().pool, s.now(), host, want)
	}
	return cfg
}

// verifyServer checks a server's chain against pool, its name against
// the name dialled and its identity against want, with messages that say
// what is wrong.
func verifyServer(cs tls.ConnectionState, pool *x509.CertPool, now time.Time, host string, want Identity) error {
	if len(cs.PeerCertificates) == 0 {
		return errors.New("the server presented no certificate")
	}
	leaf := cs.PeerCertificates[0]
	inter := x509.NewCertPool()
	for _, c := range cs.PeerCertificates[1:] {
		inter.AddCert(c)
	}
	_, err := leaf.Verify(x509.VerifyOptions{Roots: pool, Intermediates: inter, CurrentTime: now, DNSName: host,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
	if err != nil {
		return Explain(err, "the server "+host)
	}
	id, err := IdentityOf(leaf)
	if err != nil {
		return fmt.Errorf("the server %s: %w", host, err)
	}
	if id != want {
		return fmt.Errorf("the server %s is %s, not %s (its certificate names another party)", host, id, want)
	}
	return nil
}

// Explain rewrites a certificate verification error of who's certificate
// into a sentence that says what is wrong and what to do: expired (or
// not yet valid), another name, an unknown CA, the wrong usage.
func Explain(err error, who string) error {
	var inv x509.CertificateInvalidError
	var host x509.HostnameError
	var unknown x509.UnknownAuthorityError
	switch {
	case errors.As(err, &inv) && inv.Reason == x509.Expired:
		return fmt.Errorf("%s: its certificate %q expired on %s (or is not valid yet): the holder needs a new one: %w",
			who, inv.Cert.Subject.CommonName, inv.Cert.NotAfter.UTC().Format(time.RFC3339), err)
	case errors.As(err, &inv) && inv.Reason == x509.IncompatibleUsage:
		return fmt.Errorf("%s: its certificate %q is not for this use (a client certificate serving, or the reverse): %w",
			who, inv.Cert.Subject.CommonName, err)
	case errors.As(err, &host):
		return fmt.Errorf("%s: its certificate %q is for %s, not for %q (the address dialled): %w",
			who, host.Certificate.Subject.CommonName, certNames(host.Certificate), host.Host, err)
	case errors.As(err, &unknown):
		return fmt.Errorf("%s: its certificate is not signed by the CA this side trusts (its ca_file or --ca-file): %w", who, err)
	}
	return fmt.Errorf("%s: %w", who, err)
}

// certNames lists the DNS names and addresses a certificate is valid
// for.
func certNames(c *x509.Certificate) string {
	var names []string
	names = append(names, c.DNSNames...)
	for _, ip := range c.IPAddresses {
		names = append(names, ip.String())
	}
	if len(names) == 0 {
		return "no host"
	}
	return fmt.Sprint(names)
}

// PeerIdentity is the identity of the verified certificate a client
// presented on a connection (ok false when it presented none, or the
// connection is not TLS).
func PeerIdentity(cs *tls.ConnectionState) (Identity, bool) {
	if cs == nil || len(cs.VerifiedChains) == 0 || len(cs.VerifiedChains[0]) == 0 {
		return Identity{}, false
	}
	id, err := IdentityOf(cs.VerifiedChains[0][0])
	if err != nil {
		return Identity{}, false
	}
	return id, true
}

// CAPool reads a CA file (PEM certificates) into a pool, for a client
// that checks a server with the standard verification (the CLI).
func CAPool(file string) (*x509.CertPool, error) {
	certs, err := readCerts(file)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	for _, c := range certs {
		pool.AddCert(c)
	}
	return pool, nil
}
