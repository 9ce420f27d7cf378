package hypervisorproxy_test

import (
	"context"
	"errors"
	"testing"

	hp "github.com/metasched/metasched/hypervisorproxy"
)

// A probe between two agents on loopback.
func TestAgentProbeLoopback(t *testing.T) {
	a := startAgent(t, "", "")
	b := startAgent(t, "", "")
	p, err := a.client.Probe(context.Background(), hp.ProbeRequest{Target: b.srv.URL, Bytes: 4 << 20})
	if err != nil {
		t.Fatal(err)
	}
	if p.Bytes <= 3<<20 || p.Bytes > 4<<20 || p.Mbps <= 0 || p.Seconds <= 0 || p.MeasuredAt.IsZero() {
		t.Errorf("probe = %+v", p)
	}
	if _, err := a.client.Probe(context.Background(), hp.ProbeRequest{Target: b.srv.URL, Token: "wrong"}); !errors.Is(err, hp.ErrUnauthorized) {
		t.Errorf("probe with a wrong token: err = %v, want ErrUnauthorized", err)
	}
}
