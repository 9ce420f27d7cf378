package metasched

import (
	"math"
	"strings"
	"testing"
)

// benchOutputs are what taskfarm bench may print for 2 processes, and
// the figure taken or the error (TestParseBench), and seeds of
// FuzzParseBench.
var benchOutputs = []struct {
	name, out string
	want      float64
	err       string
}{
	{"the line", `{"procs":2,"seconds":10,"ops":4e9,"ops_per_second":4e8,"ops_per_second_per_proc":2e8}` + "\n", 2e8, ""},
	{"after other lines", "warming up\n\n" + `{"procs":2,"seconds":10,"ops":4e9,"ops_per_second":4e8,"ops_per_second_per_proc":2e8}` + "\n\n", 2e8, ""},
	{"rounded", `{"procs":2,"seconds":10,"ops":4000000000,"ops_per_second":400000000.1,"ops_per_second_per_proc":200000000}`, 2e8, ""},
	{"an extra field", `{"procs":2,"seconds":10,"ops":4e9,"ops_per_second":4e8,"ops_per_second_per_proc":2e8,"kernel":"mix64"}`, 2e8, ""},
	{"garbage", "garbage\n", 0, `taskfarm bench printed "garbage\n": not its JSON line`},
	{"nothing", "", 0, "not its JSON line"},
	{"a list", `[1,2]`, 0, "not its JSON line"},
	{"a field missing", `{"procs":2,"seconds":10,"ops":4e9,"ops_per_second":4e8}`, 0, "a field is missing"},
	{"other procs", `{"procs":1,"seconds":10,"ops":2e9,"ops_per_second":2e8,"ops_per_second_per_proc":2e8}`, 0, "procs: 1 processes ran, 2 were asked for"},
	{"no time", `{"procs":2,"seconds":0,"ops":0,"ops_per_second":0,"ops_per_second_per_proc":0}`, 0, "seconds: must be a number > 0"},
	{"nothing done", `{"procs":2,"seconds":10,"ops":0,"ops_per_second":0,"ops_per_second_per_proc":0}`, 0, "ops_per_second_per_proc: must be a number > 0"},
	{"disagree", `{"procs":2,"seconds":10,"ops":4e9,"ops_per_second":4e8,"ops_per_second_per_proc":3e8}`, 0, "do not agree"},
	{"ops disagree", `{"procs":2,"seconds":10,"ops":1e9,"ops_per_second":4e8,"ops_per_second_per_proc":2e8}`, 0, "do not agree"},
	{"a string", `{"procs":"2","seconds":10,"ops":4e9,"ops_per_second":4e8,"ops_per_second_per_proc":2e8}`, 0, "not its JSON line"},
	{"long garbage", strings.Repeat("x", 500), 0, `xxx"...: not its JSON line`},
}

func TestParseBench(t *testing.T) {
	for _, tc := range benchOutputs {
		got, err := parseBench([]byte(tc.out), 2)
		switch {
		case tc.err == "" && (err != nil || math.Abs(got-tc.want) > 1e-9*tc.want):
			t.Errorf("%s: %g, %v; want %g", tc.name, got, err, tc.want)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err) || !strings.HasPrefix(err.Error(), "taskfarm bench printed ")):
			t.Errorf("%s: %g, %v; want an error naming the output and %q", tc.name, got, err, tc.err)
		}
	}
}

// FuzzParseBench: what a bench prints is either refused, naming the
// output, or gives a figure > 0 that its own line states and that agrees
// with the line's totals.
func FuzzParseBench(f *testing.F) {
	for _, tc := range benchOutputs {
		f.Add([]byte(tc.out))
	}
	f.Fuzz(func(t *testing.T, out []byte) {
		got, err := parseBench(out, 2)
		if err != nil {
			if got != 0 || !strings.HasPrefix(err.Error(), "taskfarm bench printed ") {
				t.Fatalf("refused with %g and %v", got, err)
			}
			// 200 bytes of output at most, each quoted in 4 at most.
			if len(err.Error()) > 1000 {
				t.Fatalf("an error of %d bytes: the output is not cut", len(err.Error()))
			}
			return
		}
		if !(got > 0) || math.IsInf(got, 0) {
			t.Fatalf("accepted %g from %q", got, out)
		}
	})
}

// probeOutputs are what taskfarm probe may print for 1 MiB, and the
// figure taken or the error (TestParseProbe), and seeds of
// FuzzParseProbe.
var probeOutputs = []struct {
	name, out string
	want      float64
	err       string
}{
	{"the line", `{"bytes":1048576,"seconds":0.5,"mbps":16.777216}`, 16.777216, ""},
	{"rounded", `{"bytes":1048576,"seconds":0.453,"mbps":18.52}` + "\n", 18.52, ""},
	{"garbage", "connect: connection refused\n", 0, "not its JSON line"},
	{"a field missing", `{"bytes":1048576,"seconds":0.5}`, 0, "a field is missing"},
	{"bytes lost", `{"bytes":1000,"seconds":0.5,"mbps":0.016}`, 0, "bytes: the sink received 1000 of the 1048576 sent"},
	{"no time", `{"bytes":1048576,"seconds":0,"mbps":16}`, 0, "seconds: must be a number > 0"},
	{"no speed", `{"bytes":1048576,"seconds":0.5,"mbps":0}`, 0, "mbps: must be a number > 0"},
	{"disagree", `{"bytes":1048576,"seconds":0.5,"mbps":100}`, 0, "do not agree"},
}

func TestParseProbe(t *testing.T) {
	for _, tc := range probeOutputs {
		got, err := parseProbe([]byte(tc.out), 1<<20)
		switch {
		case tc.err == "" && (err != nil || math.Abs(got-tc.want) > 1e-9*tc.want):
			t.Errorf("%s: %g, %v; want %g", tc.name, got, err, tc.want)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err) || !strings.HasPrefix(err.Error(), "taskfarm probe printed ")):
			t.Errorf("%s: %g, %v; want an error naming the output and %q", tc.name, got, err, tc.err)
		}
	}
}

// FuzzParseProbe: what a probe prints is either refused, naming the
// output, or gives a bandwidth > 0.
func FuzzParseProbe(f *testing.F) {
	for _, tc := range probeOutputs {
		f.Add([]byte(tc.out))
	}
	f.Fuzz(func(t *testing.T, out []byte) {
		got, err := parseProbe(out, 1<<20)
		if err != nil {
			if got != 0 || !strings.HasPrefix(err.Error(), "taskfarm probe printed ") {
				t.Fatalf("refused with %g and %v", got, err)
			}
			return
		}
		if !(got > 0) || math.IsInf(got, 0) {
			t.Fatalf("accepted %g from %q", got, out)
		}
	})
}
