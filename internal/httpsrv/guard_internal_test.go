package httpsrv

import (
	"net"
	"testing"
)

type addr string

func (a addr) Network() string { return "test" }
func (a addr) String() string  { return string(a) }

// Connections are counted per IPv4 address and per IPv6 /64.
func TestClientAddr(t *testing.T) {
	for in, want := range map[string]string{
		"127.0.0.1:5000":          "127.0.0.1",
		"[::ffff:10.0.0.1]:80":    "10.0.0.1",
		"[2001:db8::1]:5000":      "2001:db8::/64",
		"[2001:db8::ffff:1]:6000": "2001:db8::/64",
		"[2001:db8:0:1::1]:6000":  "2001:db8:0:1::/64",
		"[fe80::1%eth0]:22":       "fe80::/64",
		"pipe":                    "pipe",
	} {
		if got := clientAddr(addr(in)); got != want {
			t.Errorf("%s: %q, want %q", in, got, want)
		}
	}
	if got := clientAddr(&net.TCPAddr{IP: net.ParseIP("192.0.2.7"), Port: 1}); got != "192.0.2.7" {
		t.Errorf("TCPAddr: %q", got)
	}
}
