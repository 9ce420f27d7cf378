package tlsx

import (
	"net"
	"net/netip"

	"github.com/metasched/metasched/internal/yamlx"
)

// Fields are the keys of a configuration (the site file, the daemon's)
// that Parse reads.
var Fields = []string{"tls", "insecure_http"}

// Parse reads a configuration's transport security:
//
//	tls: {cert_file: agent-spain.pem, key_file: agent-spain-key.pem, ca_file: ca.pem}
//
// or, for a test on one machine, plain HTTP on a loopback listen
// address:
//
//	insecure_http: true
//
// One of them is required, not both; relative paths are relative to dir.
// It returns the files (nil for plain HTTP); problems go to m's decoder.
func Parse(m *yamlx.Map, dir, listen string) *Files {
	insecure, _ := m.Bool("insecure_http", false)
	v, hasTLS := m.Get("tls", false)
	switch {
	case hasTLS && insecure:
		m.Errorf("insecure_http", "must not be true with tls")
		return nil
	case insecure:
		if !Loopback(listen) {
			m.Errorf("insecure_http", "plain HTTP is served on a loopback address only (127.0.0.1, ::1, localhost), not on listen %q: give tls", listen)
		}
		return nil
	case !hasTLS:
		m.Errorf("tls", "is required: {cert_file, key_file, ca_file} (metasched tls cert makes them), or insecure_http: true to serve plain HTTP on a loopback address")
		return nil
	}
	t, ok := v.Map("cert_file", "key_file", "ca_file")
	if !ok {
		return nil
	}
	return &Files{Cert: t.File("cert_file", true, dir), Key: t.File("key_file", true, dir), CA: t.File("ca_file", true, dir)}
}

// Loopback reports whether a listen or dial address (HOST:PORT, or a
// host) is on the loopback interface only.
func Loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	if host == "localhost" {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}
