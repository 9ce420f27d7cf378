package api

import "time"

// The kinds of a calibration figure.
const (
	// CalibrationPerf: a site's operations per second per vCPU for the VMs
	// of an image (the task farm's benchmark in one VM).
	CalibrationPerf = "perf"
	// CalibrationLAN: a site's LAN bandwidth (a stream between VMs on two
	// of its hosts).
	CalibrationLAN = "lan"
	// CalibrationLink: a link's bandwidth VM to VM (a stream from a VM at
	// one site to a VM at the other).
	CalibrationLink = "link"
	// CalibrationStart: the seconds a job's start and end take at a site
	// beyond its program's run (the guest executor runs a job that does
	// nothing in two VMs of the site, from its VMs up to its end seen).
	CalibrationStart = "start"
)

// The states of a calibration figure.
const (
	// CalibrationMeasured: measured, not due yet.
	CalibrationMeasured = "measured"
	// CalibrationDue: to be measured as soon as its hosts are idle (never
	// measured, stale, asked for, or its site's agent registered again).
	CalibrationDue = "due"
	// CalibrationMeasuring: being measured now.
	CalibrationMeasuring = "measuring"
	// CalibrationFailed: its last attempt failed (Error); it is tried
	// again at Due.
	CalibrationFailed = "failed"
)

// Calibration is what the daemon measured of its sites in VMs, and what it
// will measure (GET /v1/calibration, and the answer of POST
// /v1/calibrate).
type Calibration struct {
	// At is the daemon's time of the view.
	At time.Time `json:"at"`
	// MaxAgeSeconds is how old a figure may get before it is measured
	// again; Auto false measures only on demand.
	MaxAgeSeconds float64 `json:"max_age_s"`
	Auto          bool    `json:"auto"`
	BenchSeconds  int     `json:"bench_s"`
	ProbeBytes    int64   `json:"probe_bytes"`
	// Measuring is the key of the figure being measured now (one at a
	// time across the grid).
	Measuring string `json:"measuring,omitempty"`
	// Sites says, for every site of the grid, whether it is calibrated,
	// and why not.
	Sites   []CalibrationSite   `json:"sites"`
	Figures []CalibrationFigure `json:"figures"`
}

// CalibrationSite is one site as the calibration sees it.
type CalibrationSite struct {
	Name string `json:"name"`
	// Calibrated is false for a site whose agent cannot boot guests (an
	// in-process agent on libvirt's test driver): its plans keep the grid
	// file's figures.
	Calibrated bool `json:"calibrated"`
	// Note says why a site is not calibrated, or what of it cannot be
	// (a LAN with one host).
	Note string `json:"note,omitempty"`
}

// CalibrationFigure is one measured figure: a site's perf for an image,
// its LAN, its start and end of a job, or a link VM to VM.
type CalibrationFigure struct {
	// Key names it: perf/SITE/IMAGE, lan/SITE, start/SITE or link/A/B.
	Key  string `json:"key"`
	Kind string `json:"kind"`
	Site string `json:"site"`
	// Peer is a link's other site.
	Peer  string `json:"peer,omitempty"`
	Image string `json:"image,omitempty"`
	// Value is the measured figure in Unit (0: never measured);
	// Configured is the grid file's, in ConfiguredUnit.
	Value          float64 `json:"value,omitempty"`
	Unit           string  `json:"unit"`
	Configured     float64 `json:"configured"`
	ConfiguredUnit string  `json:"configured_unit"`
	// MeasuredAt is when Value was measured, AgeSeconds how long ago.
	MeasuredAt time.Time `json:"measured_at,omitzero"`
	AgeSeconds float64   `json:"age_s,omitempty"`
	// Hosts are where it was measured (the VMs' hosts).
	Hosts []string `json:"hosts,omitempty"`
	State string   `json:"state"`
	// Due is when it is measured next (as soon as hosts allow when it is
	// due now); Waiting says what a due figure waits for.
	Due     time.Time `json:"due,omitzero"`
	Waiting string    `json:"waiting,omitempty"`
	// Error is why its last attempt failed (naming the site and what the
	// VM printed), at ErrorAt; a later success clears it.
	Error   string    `json:"error,omitempty"`
	ErrorAt time.Time `json:"error_at,omitzero"`
}

// CalibrateRequest asks for the figures of one site (or of every site
// that can be calibrated: Site empty) to be measured now (POST
// /v1/calibrate).
type CalibrateRequest struct {
	Site string `json:"site,omitempty"`
}
