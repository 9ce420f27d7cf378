package hypervisorproxy

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/metasched/metasched/graph"
	"github.com/metasched/metasched/hypervisorproxy/image"
	"github.com/metasched/metasched/internal/httpsrv"
	"github.com/metasched/metasched/internal/tlsx"
)

// Connector opens a host's hypervisor. onReconnect must be called after the
// connection was re-opened (the virt driver's Options.OnReconnect).
type Connector func(ctx context.Context, uri string, onReconnect func()) (Hypervisor, error)

// Config configures an Agent.
type Config struct {
	Site *Site
	// TLS is the agent's certificate (of the agent of Site's site), key
	// and CA: the API is served over HTTPS and checks its clients'
	// certificates (Handler), and a probe goes to the other agent over
	// mutual TLS. nil: plain HTTP with Token.
	TLS *tlsx.Source
	// Token is the bearer token of a plain HTTP API; required without
	// TLS, none with it.
	Token   string
	Grid    *graph.Grid // required when the site file lists no hosts
	Connect Connector   // required
	Logger  zerolog.Logger
	// Now is the clock of timestamps (default time.Now).
	Now func() time.Time
	// HTTP overrides the timeouts of the API's server (Serve); zero
	// fields keep httpsrv's defaults.
	HTTP httpsrv.Timeouts
}

// Agent is one site's hypervisor proxy: it manages the site's hosts and
// the VMs it created on them. Its methods are the operations of the HTTP
// API (Handler); they are safe for concurrent use. The agent's lock guards
// only its bookkeeping: no hypervisor call is made under it (the package
// doc lists the files of its pieces).
type Agent struct {
	site    *Site
	tls     *tlsx.Source
	token   string
	connect Connector
	log     zerolog.Logger
	now     func() time.Time
	dataDir string
	tmpDir  string // removed by Close

	httpTimeouts httpsrv.Timeouts

	mu    sync.Mutex
	epoch int64 // the highest leader epoch seen (leader.go)
	// records is the record of the VMs and pools as last saved, and its
	// journal (records.go).
	records *recordLog
	hosts   []*host
	vms     map[string]*vm
	ports   migrationPorts
	// images are the site file's images by name, loaded and verified.
	images map[string]*image.Image
	// boots holds a token for each VM booting an image when the site
	// file bounds them (max_concurrent_boots); nil: no bound.
	boots chan struct{}
	// imageFiles are the files of each image as hosts hold them, computed
	// once (hashing the files whose sums the image file does not give).
	imageFiles map[*image.Image]hostFiles
}

// New resolves the site's hosts (generating them from the grid when the
// site file lists none), loads the record of VMs from the data directory,
// connects to every host and recreates the recorded VMs that a test host
// lost. A host that cannot be reached is kept, marked unreachable, and
// retried on every inventory.
func New(ctx context.Context, cfg Config) (*Agent, error) {
	if cfg.Site == nil || cfg.Connect == nil {
		return nil, errors.New("agent: site and connector are required")
	}
	switch {
	case cfg.TLS == nil && cfg.Token == "":
		return nil, fmt.Errorf("agent: token: %w: must not be empty", ErrInvalid)
	case cfg.TLS != nil && cfg.Token != "":
		return nil, fmt.Errorf("agent: token: %w: none with tls (the daemon proves itself by its certificate)", ErrInvalid)
	case cfg.TLS != nil && cfg.TLS.Identity() != tlsx.Agent(cfg.Site.Site):
		return nil, fmt.Errorf("agent: tls: cert_file %s: %w: the certificate is %s's, not the agent of site %s's",
			cfg.TLS.Files().Cert, ErrInvalid, cfg.TLS.Identity(), cfg.Site.Site)
	}
	a := &Agent{
		site: cfg.Site, tls: cfg.TLS, token: cfg.Token, connect: cfg.Connect, log: cfg.Logger, now: cfg.Now,
		dataDir: cfg.Site.DataDir, vms: map[string]*vm{}, ports: newMigrationPorts(cfg.Site.MigrationPorts),
		httpTimeouts: cfg.HTTP,
	}
	if a.now == nil {
		a.now = time.Now
	}
	if a.dataDir != "" {
		if err := os.MkdirAll(a.dataDir, 0o755); err != nil {
			return nil, fmt.Errorf("agent: data_dir: %w", err)
		}
	}
	images, err := loadImages(cfg.Site.Images)
	if err != nil {
		return nil, err
	}
	a.images = images
	if n := cfg.Site.MaxConcurrentBoots; n > 0 {
		a.boots = make(chan struct{}, n)
	}
	a.imageFiles = map[*image.Image]hostFiles{}
	for name, img := range images {
		files, roles, err := imageFiles(img)
		if err != nil {
			return nil, fmt.Errorf("agent: site file: images.%s: %w", name, err)
		}
		a.imageFiles[img] = hostFiles{files, roles}
	}
	hosts := cfg.Site.Hosts
	if len(hosts) == 0 {
		if hosts, err = a.generateHosts(cfg.Grid); err != nil {
			a.Close()
			return nil, err
		}
	}
	rec, records, err := openRecordLog(a.dataDir)
	if err != nil {
		a.Close()
		return nil, err
	}
	a.records = records
	a.epoch = rec.LeaderEpoch
	for _, hc := range hosts {
		h := &host{cfg: hc, pool: hc.Pool, test: strings.HasPrefix(hc.URI, "test") || strings.HasPrefix(hc.URI, "sim:"),
			slurm: IsSlurmURI(hc.URI)}
		if p, ok := rec.Pools[hc.Name]; ok {
			h.pool = p
		}
		a.hosts = append(a.hosts, h)
	}
	for _, s := range rec.VMs {
		if a.host(s.Host) == nil {
			a.log.Warn().Str("vm", s.Name).Str("host", s.Host).Msg("recorded vm on a host the site no longer has: forgotten")
			continue
		}
		a.vms[s.Name] = &vm{spec: s, boot: time.Duration(rec.Boot[s.Name] * float64(time.Second)),
			agent: time.Duration(rec.Agent[s.Name] * float64(time.Second)), addr: rec.Addresses[s.Name]}
	}
	for _, h := range a.hosts {
		a.dial(ctx, h)
	}
	return a, nil
}

// Site returns the name of the site.
func (a *Agent) Site() string { return a.site.Site }

// Close closes every host connection and removes the temporary directory.
func (a *Agent) Close() error {
	a.mu.Lock()
	var errs []error
	for _, h := range a.hosts {
		if h.hv != nil {
			errs = append(errs, h.hv.Close())
			h.hv = nil
		}
	}
	errs = append(errs, a.records.close())
	a.mu.Unlock()
	if a.tmpDir != "" {
		errs = append(errs, os.RemoveAll(a.tmpDir))
	}
	return errors.Join(errs...)
}
