package main

import (
	"strings"
	"testing"
	"time"

	"github.com/metasched/metasched/metasched/api"
)

// The fixtures of the calibration: a site calibrated, one not.
var (
	calMeasured = api.CalibrationFigure{Key: "perf/spain/debian", Kind: api.CalibrationPerf, Site: "spain", Image: "debian", Value: 2.1e8,
		Unit: "ops/s per vCPU", Configured: 2e9, ConfiguredUnit: "ops/s per machine", MeasuredAt: t0.Add(-90 * time.Second), AgeSeconds: 90,
		Hosts: []string{"es-2"}, State: api.CalibrationMeasured, Due: t0.Add(58*time.Minute + 30*time.Second)}
	calLAN = api.CalibrationFigure{Key: "lan/spain", Kind: api.CalibrationLAN, Site: "spain", Unit: "Mbit/s", Configured: 1000,
		ConfiguredUnit: "Mbit/s", State: api.CalibrationDue, Due: t0,
		Waiting: "waiting for two idle hosts at site spain, in pools with an image (idle: serving its pool, with no VM, and no job queued in its pool)"}
	calFailed = api.CalibrationFigure{Key: "perf/spain/ubuntu", Kind: api.CalibrationPerf, Site: "spain", Image: "ubuntu",
		Unit: "ops/s per vCPU", Configured: 2e9, ConfiguredUnit: "ops/s per machine", State: api.CalibrationFailed, Due: t0.Add(8 * time.Minute),
		Error:   `site spain, VM cal-1f-3 on host es-1: taskfarm bench: exit code 127: stderr "no such file", stdout ""`,
		ErrorAt: t0.Add(-2 * time.Minute)}
	calView = api.Calibration{At: t0, MaxAgeSeconds: 3600, Auto: true, BenchSeconds: 10, ProbeBytes: 8 << 20,
		Sites: []api.CalibrationSite{{Name: "spain", Calibrated: true},
			{Name: "latam-a", Note: "its agent is in process, on libvirt's test driver, which boots no guest: its plans keep the grid file's figures"}},
		Figures: []api.CalibrationFigure{calMeasured, calLAN, calFailed}}
	calAsked = func() api.Calibration {
		v := calView
		v.Figures = []api.CalibrationFigure{calMeasured, calLAN, calFailed}
		for i := range v.Figures {
			v.Figures[i].State, v.Figures[i].Due, v.Figures[i].Waiting = api.CalibrationDue, t0, ""
		}
		return v
	}()
	calDone = func() api.Calibration {
		v := calView
		v.At = t0.Add(time.Minute)
		lan := calLAN
		lan.State, lan.Value, lan.MeasuredAt, lan.AgeSeconds, lan.Hosts, lan.Waiting = api.CalibrationMeasured, 70.5, t0.Add(30*time.Second), 30,
			[]string{"es-1", "es-2"}, ""
		lan.Due = lan.MeasuredAt.Add(time.Hour)
		measured := calMeasured
		measured.MeasuredAt, measured.AgeSeconds, measured.Due = t0.Add(10*time.Second), 50, t0.Add(time.Hour+10*time.Second)
		failed := calFailed
		failed.ErrorAt = t0.Add(40 * time.Second)
		v.Figures = []api.CalibrationFigure{measured, lan, failed}
		return v
	}()
)

func TestCalibrationCommands(t *testing.T) {
	get := daemonRoute{Method: "GET", Path: "/v1/calibration", Answer: calView}
	runDaemonCases(t, []daemonCase{
		{name: "calibration", args: []string{"calibration"}, routes: []daemonRoute{get}},
		{name: "calibration-json", args: []string{"calibration", "--output", "json"}, routes: []daemonRoute{get}, want: calView},
		{name: "calibrate", args: []string{"calibrate", "--site", "spain"},
			routes: []daemonRoute{{Method: "POST", Path: "/v1/calibrate", Body: ptr(`{"site":"spain"}`), Status: 202, Answer: calAsked}}},
		{name: "calibrate-json", args: []string{"calibrate", "--output", "json"},
			routes: []daemonRoute{{Method: "POST", Path: "/v1/calibrate", Body: ptr(`{}`), Status: 202, Answer: calAsked}}, want: calAsked},
	})
}

// calibrate --wait asks until every figure asked for is measured or has
// failed since the request, prints them, and exits 1 when one failed; on
// stderr, how far the calibration is as it waits.
func TestCalibrateWait(t *testing.T) {
	f := newFakeDaemon(t, daemonToken,
		daemonRoute{Method: "POST", Path: "/v1/calibrate", Body: ptr(`{"site":"spain"}`), Status: 202, Answer: calAsked},
		daemonRoute{Method: "GET", Path: "/v1/calibration", Answer: calDone})
	code, out, errOut := runDaemonCmd(t, f.URL, daemonToken, "calibrate", "--site", "spain", "--wait")
	if code != 1 || errOut != "calibration: 2 of 3 figures measured after 1m0s, 1 failed\nmetasched: calibration failed for perf/spain/ubuntu\n" {
		t.Errorf("exit %d, stderr %q; want 1 and the failed figure", code, errOut)
	}
	golden(t, "calibrate-wait", out)
	if n := len(f.requests()); n != 2 {
		t.Errorf("%d requests, want the calibrate and one look", n)
	}
}

// Bad input is refused naming the flag, before any request; what the
// daemon refuses comes back with its exit code.
func TestCalibrateRefused(t *testing.T) {
	f := newFakeDaemon(t, daemonToken)
	for _, tc := range []struct {
		args   []string
		stderr string
	}{
		{[]string{"calibrate", "--site", "Spain!"}, `--site: must be a site's name (a-z, 0-9, -), not "Spain!"`},
		{[]string{"calibrate", "--site", ""}, `--site: must be a site's name (a-z, 0-9, -), not ""`},
		{[]string{"calibrate", "spain"}, `metasched calibrate: unexpected argument "spain"`},
		{[]string{"calibrate", "--output", "xml"}, `--output: must be table or json, got "xml"`},
		{[]string{"calibration", "--site", "spain"}, "unknown flag: --site"},
	} {
		code, out, errOut := runDaemonCmd(t, f.URL, daemonToken, tc.args...)
		if code != 2 || out != "" || !strings.Contains(errOut, tc.stderr) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want 2 and %q", tc.args, code, out, errOut, tc.stderr)
		}
	}
	if reqs := f.requests(); len(reqs) != 0 {
		t.Errorf("requests sent on bad usage: %+v", reqs)
	}
	for _, tc := range []struct {
		name   string
		route  daemonRoute
		code   int
		stderr string
	}{
		{"no such site", daemonRoute{Method: "POST", Path: "/v1/calibrate", Body: ptr(`{"site":"mars"}`), Status: 400,
			Answer: api.APIError{Error: "invalid request", Code: api.CodeInvalid,
				Fields: []api.FieldError{{Field: "site", Problem: `no site "mars" (the grid's sites: latam-a, spain)`}}}},
			2, "metasched: invalid request\n  site: no site \"mars\" (the grid's sites: latam-a, spain)\n"},
		{"not calibrated", daemonRoute{Method: "POST", Path: "/v1/calibrate", Body: ptr(`{"site":"mars"}`), Status: 409,
			Answer: api.APIError{Error: "site mars cannot be calibrated: its agent boots no guest", Code: api.CodeConflict}},
			1, "metasched: site mars cannot be calibrated: its agent boots no guest\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeDaemon(t, daemonToken, tc.route)
			code, out, errOut := runDaemonCmd(t, f.URL, daemonToken, "calibrate", "--site", "mars")
			if code != tc.code || out != "" || errOut != tc.stderr {
				t.Errorf("exit %d, stdout %q, stderr %q; want %d and %q", code, out, errOut, tc.code, tc.stderr)
			}
		})
	}
}
