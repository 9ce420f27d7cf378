package taskfarm

import (
	"context"
	"encoding/json"
	"net"
	"strings"
	"testing"

	"github.com/rs/zerolog"
)

// A probe through a sink on loopback: the sink reads every byte and
// times them, the probe's rate is its bytes over the sink's time, and
// the JSON line has the fields the calibration reads. A sink with a
// count stops after that many probes.
func TestSinkProbe(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	sinkErr := make(chan error, 1)
	go func() { sinkErr <- Sink(t.Context(), ln, 2, zerolog.New(zerolog.NewTestWriter(t))) }()
	const n = 8 << 20
	for range 2 {
		r, err := Probe(t.Context(), ln.Addr().String(), n)
		if err != nil {
			t.Fatal(err)
		}
		if r.Bytes != n || r.Seconds <= 0 || r.Mbps != float64(n)*8/r.Seconds/1e6 {
			t.Errorf("probe %+v", r)
		}
		line, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		var back map[string]float64
		if err := json.Unmarshal(line, &back); err != nil || len(back) != 3 || back["mbps"] != r.Mbps {
			t.Errorf("probe line %s: %v", line, err)
		}
	}
	if err := <-sinkErr; err != nil {
		t.Errorf("sink: %v", err)
	}
	if _, err := net.Dial("tcp", ln.Addr().String()); err == nil {
		t.Error("the sink still listens after its count")
	}

	// Errors: no sink, bad sizes, a sink that answers nonsense.
	if _, err := Probe(t.Context(), ln.Addr().String(), n); err == nil || !strings.Contains(err.Error(), "connection refused") {
		t.Errorf("probe without a sink: %v", err)
	}
	if _, err := Probe(t.Context(), ln.Addr().String(), 0); err == nil || !strings.Contains(err.Error(), "bytes: 0") {
		t.Errorf("probe of 0 bytes: %v", err)
	}
	bad, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer bad.Close()
	go func() {
		c, err := bad.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		buf := make([]byte, 1<<16)
		for {
			if _, err := c.Read(buf); err != nil {
				break
			}
		}
		_, _ = c.Write([]byte(`{"bytes": 12, "seconds": 1}` + "\n")) // a lost write shows in the probe's error below
	}()
	if _, err := Probe(t.Context(), bad.Addr().String(), 1000); err == nil || !strings.Contains(err.Error(), "the sink read 12 bytes of the 1000 sent") {
		t.Errorf("probe of a lying sink: %v", err)
	}

	// A sink ends with its context.
	ln2, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	go func() { sinkErr <- Sink(ctx, ln2, 0, zerolog.Nop()) }()
	cancel()
	if err := <-sinkErr; err != nil {
		t.Errorf("sink after cancel: %v", err)
	}
}
