package image

import (
	"bufio"
	"bytes"
	"cmp"
	"compress/gzip"
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"text/template"
	"time"

	"github.com/rs/zerolog"
)

// Recipe is the version of the build recipe below: bump it when the
// image changes for the same inputs in a way the key does not already
// see (the key includes the scripts, the module list and the command
// line themselves).
const Recipe = 3

// The recipe.
var (
	// Modules are loaded by the init in this order; those built into the
	// kernel are left out. virtio_ring before virtio: each one's
	// dependencies come first (checked against the modules' .modinfo).
	// virtio_blk is for the disk form's root (ext4 is built into the
	// cloud kernel).
	Modules = []string{"virtio_ring", "virtio", "virtio_pci_modern_dev", "virtio_pci_legacy_dev", "virtio_pci",
		"virtio_blk", "virtio_console", "failover", "net_failover", "virtio_net"}
	// KernelPackageRE matches the kernels the build takes by default: the
	// newest one apt knows.
	KernelPackageRE = regexp.MustCompile(`^linux-image-6\.1\.0-([0-9]+)-cloud-amd64$`)
)

const (
	// BaseCmdline is the image's own kernel command line: the console on
	// the first serial port, kernel messages from warnings up.
	BaseCmdline = "console=ttyS0 quiet"
	// RunnerPath is where the guest has metasched-run, the runner of a
	// job's command (guest/metasched-run).
	RunnerPath = "/usr/bin/metasched-run"
	// AgentPort is the name of the virtio serial port of QEMU's guest
	// agent, the target name of the domain's agent channel.
	AgentPort = "org.qemu.guest_agent.0"

	kernelFile = "vmlinuz"
	initrdFile = "initrd.img"
)

// RunnerScript is the runner (guest/metasched-run), which the guest
// executor copies into a VM of a cloud image.
var RunnerScript = runnerScript

var (
	//go:embed guest/init.sh
	initTemplate string
	//go:embed guest/cmdline.sh
	cmdlineScript string
	//go:embed guest/metasched-run
	runnerScript string
)

// Options configure Build.
type Options struct {
	// Out is the directory the image is written to (made if missing; an
	// image already there is replaced). "": the image stays in the cache
	// only, and Result.Dir is its cache entry.
	Out string
	// CacheDir holds downloaded packages and built images, one directory
	// per key. "": DefaultCacheDir().
	CacheDir string
	// KernelPackage is the Debian kernel package. "": the newest
	// linux-image-6.1.0-N-cloud-amd64 apt knows.
	KernelPackage string
	// Rebuild builds even when the cache has the image (the packages
	// already downloaded are still used).
	Rebuild bool
	// Kind is the form of the image: KindKernel ("" too), or KindDisk:
	// the same kernel and initramfs, and the initramfs's tree as an ext4
	// file system in a qcow2 disk that is the guest's root; or
	// BuildDebian: the Debian image (debian.go).
	Kind string
	// Sources are the apt sources of the Debian image (one-line "deb"
	// entries); "": DebianSources.
	Sources string
	// TaskFarm is the task farm binary (cmd/taskfarm, built static) the
	// image has at TaskFarmPath; required. Its SHA-256 is in the key.
	TaskFarm string
	Logger   zerolog.Logger
}

// Result is a built image.
type Result struct {
	Image  *Image // loaded from Dir
	Dir    string // Options.Out, or the cache entry
	Entry  string // the cache entry
	Cached bool   // the image was in the cache
}

// DefaultCacheDir is the user's cache directory's metasched/images.
func DefaultCacheDir() (string, error) {
	dir, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("image cache: %w", err)
	}
	return filepath.Join(dir, "metasched", "images"), nil
}

// tools are the Debian programs the build runs.
type tools struct {
	aptGet, aptCache, dpkgDeb, dpkgQuery string
}

// findTools finds apt-get, apt-cache, dpkg-deb and dpkg-query on PATH.
func findTools() (*tools, error) {
	t := &tools{}
	var missing []string
	for _, x := range []struct {
		name string
		dst  *string
	}{{"apt-get", &t.aptGet}, {"apt-cache", &t.aptCache}, {"dpkg-deb", &t.dpkgDeb}, {"dpkg-query", &t.dpkgQuery}} {
		p, err := exec.LookPath(x.name)
		if err != nil {
			missing = append(missing, x.name)
			continue
		}
		*x.dst = p
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("image build: %s not found on PATH: the image is built from Debian packages with Debian's apt and dpkg",
			strings.Join(missing, ", "))
	}
	return t, nil
}

// run runs a program and returns its standard output; a failure includes
// the end of its standard error.
func run(ctx context.Context, dir, prog string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, prog, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "LC_ALL=C", "DEBIAN_FRONTEND=noninteractive")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(stderr.String())
		if len(msg) > 2000 {
			msg = "…" + msg[len(msg)-2000:]
		}
		if msg != "" {
			return stdout.Bytes(), fmt.Errorf("%s %s: %w: %s", filepath.Base(prog), strings.Join(args, " "), err, msg)
		}
		return stdout.Bytes(), fmt.Errorf("%s %s: %w", filepath.Base(prog), strings.Join(args, " "), err)
	}
	return stdout.Bytes(), nil
}

// plan is what a build takes: the inputs and the key they make.
type plan struct {
	kernel   Input
	inputs   []Input        // every package, by name
	programs []string       // host programs copied as they are
	objects  []sharedObject // their shared objects, each once
	interp   string
	key      string // hex SHA-256 of the recipe, the kind and the inputs
	kind     string // KindKernel or KindDisk
	disk     *diskTools
	taskfarm []byte // the task farm binary, read once
}

// Build builds the bundled guest image, or takes it from the cache when
// an image of the same inputs is there. The inputs are the kernel package
// (downloaded with apt-get download), the installed busybox-static and
// qemu-guest-agent and the packages of qemu-ga's shared libraries, and
// the task farm binary; the key is the SHA-256 of the packages' names and
// versions, of the task farm and of the recipe. The same inputs give the
// same bytes.
func Build(ctx context.Context, opt Options) (*Result, error) {
	log := opt.Logger
	switch opt.Kind {
	case "", KindKernel:
		opt.Kind = KindKernel
	case KindDisk:
	case BuildDebian:
		return buildDebian(ctx, opt)
	default:
		return nil, fmt.Errorf("image build: kind: must be %q, %q or %q, not %q", KindKernel, KindDisk, BuildDebian, clip(opt.Kind))
	}
	if opt.Sources != "" {
		return nil, errors.New("image build: sources: only the Debian image (kind debian) is made from apt sources")
	}
	taskfarm, err := ReadTaskFarm(opt.TaskFarm)
	if err != nil {
		return nil, fmt.Errorf("image build: taskfarm: %w", err)
	}
	var dt *diskTools
	if opt.Kind == KindDisk {
		if dt, err = findDiskTools(); err != nil {
			return nil, err
		}
	}
	t, err := findTools()
	if err != nil {
		return nil, err
	}
	if opt.CacheDir == "" {
		if opt.CacheDir, err = DefaultCacheDir(); err != nil {
			return nil, err
		}
	}
	if err := os.MkdirAll(opt.CacheDir, 0o755); err != nil {
		return nil, fmt.Errorf("image cache: %w", err)
	}
	p, err := makePlan(ctx, t, opt.KernelPackage, opt.CacheDir, opt.Kind, taskfarm)
	if err != nil {
		return nil, err
	}
	p.disk = dt
	entry := filepath.Join(opt.CacheDir, p.key[:16])

	unlock, err := lockDir(ctx, opt.CacheDir, ".lock")
	if err != nil {
		return nil, err
	}
	defer unlock()

	cached := !opt.Rebuild && inCache(entry, p.key, log)
	if !cached {
		start := time.Now()
		if err := build(ctx, t, p, opt.CacheDir, entry, log); err != nil {
			return nil, err
		}
		log.Info().Str("entry", entry).Str("kind", p.kind).Dur("took", time.Since(start)).Msg("image built")
	}
	return finish(opt, entry, cached)
}

// inCache reports whether the cache entry holds the image of key, whole;
// an entry that does not is said and built again.
func inCache(entry, key string, log zerolog.Logger) bool {
	img, err := Load(entry)
	if err == nil && img.InputsHash == "sha256:"+key && img.Verify() == nil {
		return true
	}
	if !errors.Is(err, fs.ErrNotExist) {
		log.Warn().Err(err).Str("entry", entry).Msg("cached image unusable, building it again")
	}
	return false
}

// finish copies a built or cached image to opt.Out, when given, and
// loads it.
func finish(opt Options, entry string, cached bool) (*Result, error) {
	var err error
	dir := entry
	if opt.Out != "" {
		if dir, err = filepath.Abs(opt.Out); err != nil {
			return nil, fmt.Errorf("image build: out: %w", err)
		}
		if err := copyImage(entry, dir); err != nil {
			return nil, err
		}
	}
	img, err := Load(dir)
	if err != nil {
		return nil, err
	}
	return &Result{Image: img, Dir: dir, Entry: entry, Cached: cached}, nil
}

// lockDir takes an exclusive lock on DIR/NAME, waiting for another build
// (of this process or another) to finish.
func lockDir(ctx context.Context, dir, name string) (func(), error) {
	f, err := os.OpenFile(filepath.Join(dir, name), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("image cache: %w", err)
	}
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() { f.Close() }, nil
		}
		if err != syscall.EWOULDBLOCK && err != syscall.EINTR {
			f.Close()
			return nil, fmt.Errorf("image cache: lock: %w", err)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// makePlan finds the inputs: the kernel package and its version from
// apt, the programs' shared objects and the packages of every file taken
// from the host, and computes the key.
func makePlan(ctx context.Context, t *tools, kernelPkg, cacheDir, kind string, taskfarm []byte) (*plan, error) {
	k, err := kernelInput(ctx, t, kernelPkg, cacheDir)
	if err != nil {
		return nil, err
	}

	p := &plan{kernel: k, programs: []string{BusyboxPath, QemuGAPath}, kind: kind, taskfarm: taskfarm}
	r, err := newResolver("/")
	if err != nil {
		return nil, fmt.Errorf("image build: %w", err)
	}
	seen := map[string]bool{}
	for _, prog := range p.programs {
		if _, err := os.Stat(prog); err != nil {
			return nil, fmt.Errorf("image build: %w (install the Debian packages busybox-static and qemu-guest-agent; make image does)", err)
		}
		objs, err := r.closure(prog)
		if err != nil {
			return nil, fmt.Errorf("image build: %w", err)
		}
		for _, o := range objs {
			if seen[o.path] {
				continue
			}
			seen[o.path] = true
			if p.interp == "" && len(p.objects) == 0 {
				p.interp = o.path // a closure starts with its interpreter
			}
			p.objects = append(p.objects, o)
		}
	}
	hostFiles := slices.Clone(p.programs)
	for _, o := range p.objects {
		hostFiles = append(hostFiles, o.path)
	}
	pkgs, err := owners(ctx, t, hostFiles)
	if err != nil {
		return nil, err
	}
	installed, err := installedVersions(ctx, t, pkgs)
	if err != nil {
		return nil, err
	}
	if kind == KindDisk {
		// The disk's bytes are mke2fs's and qemu-img's.
		for _, pkg := range diskToolPackages {
			if !slices.Contains(pkgs, pkg) {
				pkgs = append(pkgs, pkg)
			}
		}
		if installed, err = installedVersions(ctx, t, pkgs); err != nil {
			return nil, err
		}
	}
	p.inputs = append(installed, k)
	slices.SortFunc(p.inputs, func(a, b Input) int { return strings.Compare(a.Package, b.Package) })
	p.key = inputsKey(kind, p.inputs, taskfarm)
	return p, nil
}

// kernelInput is the kernel package to take and its version: the one
// asked for, or the newest linux-image-6.1.0-N-cloud-amd64, with the
// version apt would install. apt-cache answers in one or two seconds
// where its own cache is off (Debian's container images), so its answer
// is kept in CacheDir/apt-answers.json, with a stamp of apt's state (its
// package lists, sources and preferences, dpkg's status), and asked
// again only when that state changes.
func kernelInput(ctx context.Context, t *tools, kernelPkg, cacheDir string) (Input, error) {
	if kernelPkg != "" && !packageRE.MatchString(kernelPkg) {
		return Input{}, fmt.Errorf("image build: kernel package: %q is not a Debian package name", kernelPkg)
	}
	stamp := aptStamp()
	answersFile := filepath.Join(cacheDir, "apt-answers.json")
	answers := map[string]aptAnswer{}
	if data, err := os.ReadFile(answersFile); err == nil {
		_ = json.Unmarshal(data, &answers) // a damaged file is asked again
	}
	if a, ok := answers[kernelPkg]; ok && a.Stamp == stamp && packageRE.MatchString(a.Input.Package) &&
		versionRE.MatchString(a.Input.Version) && archRE.MatchString(a.Input.Architecture) {
		return a.Input, nil
	}

	query := kernelPkg
	if query == "" {
		// An apt pattern: KernelPackageRE without its group.
		query = `?name(^linux-image-6\.1\.0-[0-9]+-cloud-amd64$)`
	}
	out, err := run(ctx, "", t.aptCache, "show", "--no-all-versions", query)
	if err != nil {
		return Input{}, fmt.Errorf("image build: kernel package %s: %w", cmp.Or(kernelPkg, "linux-image-6.1.0-N-cloud-amd64"), err)
	}
	var best Input
	bestN := -1
	for _, rec := range strings.Split(string(out), "\n\n") {
		var in Input
		for _, line := range strings.Split(rec, "\n") {
			if v, ok := strings.CutPrefix(line, "Package: "); ok {
				in.Package = strings.TrimSpace(v)
			}
			if v, ok := strings.CutPrefix(line, "Version: "); ok {
				in.Version = strings.TrimSpace(v)
			}
			if v, ok := strings.CutPrefix(line, "Architecture: "); ok {
				in.Architecture = strings.TrimSpace(v)
			}
		}
		n := 0
		if kernelPkg == "" {
			m := KernelPackageRE.FindStringSubmatch(in.Package)
			if m == nil {
				continue
			}
			n, _ = strconv.Atoi(m[1])
		} else if in.Package != kernelPkg {
			continue
		}
		if n > bestN && versionRE.MatchString(in.Version) && archRE.MatchString(in.Architecture) {
			best, bestN = in, n
		}
	}
	if bestN < 0 {
		if kernelPkg == "" {
			return Input{}, errors.New("image build: kernel: apt knows no package linux-image-6.1.0-N-cloud-amd64 (run apt-get update)")
		}
		return Input{}, fmt.Errorf("image build: kernel package %s: apt-cache show gave no version and architecture", kernelPkg)
	}
	answers[kernelPkg] = aptAnswer{Stamp: stamp, Input: best}
	if data, err := json.Marshal(answers); err == nil {
		tmp := answersFile + ".tmp"
		if os.WriteFile(tmp, data, 0o644) == nil {
			os.Rename(tmp, answersFile)
		}
	}
	return best, nil
}

// aptAnswer is apt-cache's answer about a kernel package, and the state
// of apt it was given in.
type aptAnswer struct {
	Stamp string
	Input Input
}

// aptStamp sums up the state apt's answers depend on: the names, sizes
// and times of its package lists, sources and preferences, and of
// dpkg's status file.
func aptStamp() string {
	h := sha256.New()
	for _, pat := range []string{"/var/lib/apt/lists/*", "/etc/apt/sources.list", "/etc/apt/sources.list.d/*",
		"/etc/apt/preferences", "/etc/apt/preferences.d/*", "/etc/apt/apt.conf.d/*", "/var/lib/dpkg/status"} {
		files, _ := filepath.Glob(pat)
		for _, f := range files {
			if fi, err := os.Stat(f); err == nil {
				fmt.Fprintf(h, "%s %d %d\n", f, fi.Size(), fi.ModTime().UnixNano())
			}
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}

// inputsKey is the hex SHA-256 of the recipe, the kind, the inputs and
// the task farm binary.
func inputsKey(kind string, inputs []Input, taskfarm []byte) string {
	h := sha256.New()
	fmt.Fprintf(h, "metasched guest image\nrecipe %d\ncmdline %s\nmodules %s\nagent port %s\n",
		Recipe, BaseCmdline, strings.Join(Modules, ","), AgentPort)
	if kind == KindDisk {
		fmt.Fprintf(h, "kind %s\ndisk %s %d MiB ext4\nmarker %s\n", kind, diskFile, DiskSizeMiB, OnDiskMarker)
	}
	fmt.Fprintf(h, "init %x\ncmdline.sh %x\n", sha256.Sum256([]byte(initTemplate)), sha256.Sum256([]byte(cmdlineScript)))
	fmt.Fprintf(h, "%s %x\n", RunnerPath, sha256.Sum256([]byte(runnerScript)))
	fmt.Fprintf(h, "%s %x\n", TaskFarmPath, sha256.Sum256(taskfarm))
	for _, in := range inputs {
		fmt.Fprintf(h, "package %s %s %s\n", in.Package, in.Architecture, in.Version)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// usrMerged is the other name of a path on a merged-/usr system
// (/lib/x ↔ /usr/lib/x), or "": dpkg knows each file under the name its
// package ships it with.
func usrMerged(p string) string {
	for _, d := range []string{"/lib/", "/lib64/", "/bin/", "/sbin/"} {
		if strings.HasPrefix(p, d) {
			return "/usr" + p
		}
		if strings.HasPrefix(p, "/usr"+d) {
			return strings.TrimPrefix(p, "/usr")
		}
	}
	return ""
}

// owners returns the Debian packages (arch-qualified when dpkg says so)
// that ship the host files, each file under any of its names. A file no
// package ships is an error: the image is made of Debian packages only.
func owners(ctx context.Context, t *tools, files []string) ([]string, error) {
	names := map[string][]string{} // file → the names it may be known by
	var args []string
	for _, f := range files {
		cands := []string{f}
		if real, err := filepath.EvalSymlinks(f); err == nil && real != f {
			cands = append(cands, real)
		}
		for _, c := range slices.Clone(cands) {
			if m := usrMerged(c); m != "" {
				cands = append(cands, m)
			}
		}
		names[f] = cands
		args = append(args, cands...)
	}
	// dpkg-query -S fails when some name is unknown; the others are
	// still listed.
	out, _ := run(ctx, "", t.dpkgQuery, append([]string{"-S"}, args...)...)
	owner := map[string]string{}
	for _, line := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(line, "diversion ") {
			continue
		}
		pkgs, path, ok := strings.Cut(line, ": ")
		if !ok {
			continue
		}
		first, _, _ := strings.Cut(pkgs, ", ")
		owner[strings.TrimSpace(path)] = first
	}
	var pkgs []string
	for _, f := range files {
		pkg := ""
		for _, c := range names[f] {
			if pkg = owner[c]; pkg != "" {
				break
			}
		}
		if pkg == "" {
			return nil, fmt.Errorf("image build: %s belongs to no Debian package (dpkg-query -S): the image is made of Debian packages only", f)
		}
		if !slices.Contains(pkgs, pkg) {
			pkgs = append(pkgs, pkg)
		}
	}
	return pkgs, nil
}

// installedVersions returns the installed version of each package.
func installedVersions(ctx context.Context, t *tools, pkgs []string) ([]Input, error) {
	out, err := run(ctx, "", t.dpkgQuery, append([]string{"-W", "-f", "${Package}\t${Architecture}\t${Version}\t${db:Status-Status}\n"}, pkgs...)...)
	if err != nil {
		return nil, fmt.Errorf("image build: %w", err)
	}
	var inputs []Input
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Split(line, "\t")
		if len(f) != 4 {
			continue
		}
		if f[3] != "installed" {
			return nil, fmt.Errorf("image build: package %s is %s, not installed", f[0], f[3])
		}
		inputs = append(inputs, Input{Package: f[0], Architecture: f[1], Version: f[2]})
	}
	if len(inputs) != len(pkgs) {
		return nil, fmt.Errorf("image build: dpkg-query -W listed %d of the packages %s", len(inputs), strings.Join(pkgs, ", "))
	}
	return inputs, nil
}

// fetchKernel returns the kernel package's file in CacheDir/debs,
// downloading it with apt-get download when it is not there.
func fetchKernel(ctx context.Context, t *tools, k Input, cacheDir string, log zerolog.Logger) (string, error) {
	debs := filepath.Join(cacheDir, "debs")
	if err := os.MkdirAll(debs, 0o755); err != nil {
		return "", fmt.Errorf("image build: %w", err)
	}
	file := filepath.Join(debs, fmt.Sprintf("%s_%s_%s.deb", k.Package, strings.ReplaceAll(k.Version, ":", "%3a"), k.Architecture))
	if err := checkDeb(ctx, t, file, k); err == nil {
		return file, nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		log.Warn().Err(err).Msg("cached package unusable, downloading it again")
	}
	tmp, err := os.MkdirTemp(debs, ".fetch-")
	if err != nil {
		return "", fmt.Errorf("image build: %w", err)
	}
	defer os.RemoveAll(tmp)
	log.Info().Str("package", k.Package).Str("version", k.Version).Msg("downloading the kernel")
	if _, err := run(ctx, tmp, t.aptGet, "download", "-q", k.Package+"="+k.Version); err != nil {
		return "", fmt.Errorf("image build: fetch the kernel: %w", err)
	}
	got, _ := filepath.Glob(filepath.Join(tmp, "*.deb"))
	if len(got) != 1 {
		return "", fmt.Errorf("image build: fetch the kernel: apt-get download left %d .deb files", len(got))
	}
	if err := checkDeb(ctx, t, got[0], k); err != nil {
		return "", err
	}
	if err := os.Rename(got[0], file); err != nil {
		return "", fmt.Errorf("image build: %w", err)
	}
	return file, nil
}

// checkDeb checks that a .deb file is the package k.
func checkDeb(ctx context.Context, t *tools, file string, k Input) error {
	if _, err := os.Stat(file); err != nil {
		return err
	}
	out, err := run(ctx, "", t.dpkgDeb, "-f", file, "Package", "Version", "Architecture")
	if err != nil {
		return fmt.Errorf("image build: %w", err)
	}
	want := fmt.Sprintf("Package: %s\nVersion: %s\nArchitecture: %s", k.Package, k.Version, k.Architecture)
	if strings.TrimSpace(string(out)) != want {
		return fmt.Errorf("image build: %s is not %s %s %s: %s", file, k.Package, k.Version, k.Architecture, out)
	}
	return nil
}

// build makes the image of plan p in the cache entry.
func build(ctx context.Context, t *tools, p *plan, cacheDir, entry string, log zerolog.Logger) error {
	deb, err := fetchKernel(ctx, t, p.kernel, cacheDir, log)
	if err != nil {
		return err
	}
	work, err := os.MkdirTemp(cacheDir, ".build-")
	if err != nil {
		return fmt.Errorf("image build: %w", err)
	}
	defer os.RemoveAll(work)
	pkgRoot := filepath.Join(work, "kernel")
	if _, err := run(ctx, "", t.dpkgDeb, "-x", deb, pkgRoot); err != nil {
		return fmt.Errorf("image build: unpack the kernel: %w", err)
	}
	vmlinuz, release, modDir, err := kernelFiles(pkgRoot)
	if err != nil {
		return fmt.Errorf("image build: %s: %w", p.kernel.Package, err)
	}
	mods, err := moduleOrder(modDir, release)
	if err != nil {
		return fmt.Errorf("image build: %s: %w", p.kernel.Package, err)
	}

	a, err := p.initramfs(ctx, release, modDir, mods)
	if err != nil {
		return err
	}
	out := filepath.Join(work, "image")
	if err := os.Mkdir(out, 0o755); err != nil {
		return fmt.Errorf("image build: %w", err)
	}
	initrd, err := writeInitrd(a, filepath.Join(out, initrdFile))
	if err != nil {
		return err
	}
	kernelSum, err := copyFile(vmlinuz, filepath.Join(out, kernelFile))
	if err != nil {
		return err
	}
	img := &Image{
		Kind: KindKernel, Kernel: kernelFile, KernelSHA256: kernelSum, Initrd: initrdFile, InitrdSHA256: initrd,
		Cmdline: BaseCmdline, KernelRelease: release, Recipe: Recipe, Inputs: p.inputs, InputsHash: "sha256:" + p.key,
	}
	if p.kind == KindDisk {
		// The initramfs's tree, and the marker that says so to the init
		// once it runs on the disk.
		if err := a.file(strings.TrimPrefix(OnDiskMarker, "/"), 0o644, []byte("the metasched guest image's root file system\n")); err != nil {
			return fmt.Errorf("image build: %w", err)
		}
		tree := filepath.Join(work, "tree")
		if err := a.writeTree(tree); err != nil {
			return err
		}
		var paths []string
		for _, n := range a.names() {
			if a.entries[n].mode&modeType != modeCharDev {
				paths = append(paths, n)
			}
		}
		sum, err := makeDisk(ctx, p.disk, diskSpec{tree: tree, paths: paths, work: work, key: p.key,
			out: filepath.Join(out, diskFile), label: "metasched-root", sizeMiB: DiskSizeMiB})
		if err != nil {
			return err
		}
		img.Kind, img.Disk, img.DiskSHA256, img.DiskFormat = KindDisk, diskFile, sum, FormatQCOW2
	}
	return writeEntry(img, out, entry)
}

// writeEntry writes the image file of img into dir, which holds its
// files, and moves dir to the cache entry.
func writeEntry(img *Image, out, entry string) error {
	text, err := img.Marshal()
	if err != nil {
		return err
	}
	if _, err := Parse(FileName, text); err != nil {
		return fmt.Errorf("image build: the image file written does not parse: %w", err)
	}
	if err := os.WriteFile(filepath.Join(out, FileName), text, 0o644); err != nil {
		return fmt.Errorf("image build: %w", err)
	}
	if err := os.RemoveAll(entry); err != nil {
		return fmt.Errorf("image build: %w", err)
	}
	if err := os.Rename(out, entry); err != nil {
		return fmt.Errorf("image build: %w", err)
	}
	return nil
}

// kernelFiles finds the kernel image and the modules directory of an
// unpacked kernel package: boot/vmlinuz-RELEASE and
// (usr/)lib/modules/RELEASE.
func kernelFiles(root string) (vmlinuz, release, modDir string, err error) {
	found, _ := filepath.Glob(filepath.Join(root, "boot", "vmlinuz-*"))
	if len(found) != 1 {
		return "", "", "", fmt.Errorf("%d files boot/vmlinuz-*, want 1", len(found))
	}
	vmlinuz = found[0]
	release = strings.TrimPrefix(filepath.Base(vmlinuz), "vmlinuz-")
	for _, d := range []string{"lib/modules", "usr/lib/modules"} {
		dir := filepath.Join(root, d, release)
		if fi, err := os.Stat(dir); err == nil && fi.IsDir() {
			return vmlinuz, release, dir, nil
		}
	}
	return "", "", "", fmt.Errorf("no lib/modules/%s", release)
}

// moduleOrder returns the files (relative to the modules directory) of
// the recipe's modules that are not built into the kernel, in the
// recipe's order, after checking each against its .modinfo: made for
// this kernel, its dependencies built in or loaded before it.
func moduleOrder(modDir, release string) ([]string, error) {
	builtin := map[string]bool{}
	if data, err := os.ReadFile(filepath.Join(modDir, "modules.builtin")); err == nil {
		for _, l := range strings.Fields(string(data)) {
			builtin[modName(filepath.Base(l))] = true
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	files := map[string]string{}
	err := filepath.WalkDir(modDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(p, ".ko") {
			rel, _ := filepath.Rel(modDir, p)
			files[modName(d.Name())] = rel
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	loaded := map[string]bool{}
	var order []string
	for _, m := range Modules {
		if builtin[m] {
			loaded[m] = true
			continue
		}
		rel, ok := files[m]
		if !ok {
			return nil, fmt.Errorf("module %s is neither built into %s nor in the package", m, release)
		}
		mi, err := readModInfo(filepath.Join(modDir, rel))
		if err != nil {
			return nil, err
		}
		if v, _, _ := strings.Cut(mi.vermagic, " "); v != release {
			return nil, fmt.Errorf("module %s is for kernel %q, not %s", m, v, release)
		}
		for _, dep := range mi.depends {
			if !loaded[modName(dep)] && !builtin[modName(dep)] {
				return nil, fmt.Errorf("module %s needs %s, which the recipe does not load before it", m, dep)
			}
		}
		loaded[m] = true
		order = append(order, rel)
	}
	return order, nil
}

// initramfs puts the initramfs together: directories, /dev/console, the
// programs with their shared objects, the modules, busybox's applets as
// links, the init and its cmdline.sh, /etc/passwd and /etc/group.
func (p *plan) initramfs(ctx context.Context, release, modDir string, mods []string) (*archive, error) {
	a := newArchive()
	var errs []error
	must := func(err error) { errs = append(errs, err) }
	for _, d := range []string{"bin", "sbin", "usr/bin", "usr/sbin", "lib", "lib64", "etc", "proc", "sys", "dev", "run", "var", "mnt"} {
		must(a.dir(d, 0o755))
	}
	must(a.dir("tmp", 0o1777))
	must(a.dir("root", 0o700))
	must(a.charDev("dev/console", 0o600, 5, 1))
	must(a.symlink("var/run", "../run"))
	must(a.file("etc/passwd", 0o644, []byte("root:x:0:0:root:/root:/bin/sh\n")))
	must(a.file("etc/group", 0o644, []byte("root:x:0:\n")))

	var init bytes.Buffer
	tmpl := template.Must(template.New("init").Parse(initTemplate))
	must(tmpl.Execute(&init, struct {
		Release, AgentPort, OnDisk string
		Modules                    []string
	}{release, AgentPort, OnDiskMarker, mods}))
	must(a.file("init", 0o755, init.Bytes()))
	must(a.file("lib/metasched/cmdline.sh", 0o644, []byte(cmdlineScript)))
	must(a.file(strings.TrimPrefix(RunnerPath, "/"), 0o755, []byte(runnerScript)))
	must(a.file(strings.TrimPrefix(TaskFarmPath, "/"), 0o755, p.taskfarm))

	take := func(guest, host string) {
		data, err := os.ReadFile(host)
		if err != nil {
			must(fmt.Errorf("image build: %w", err))
			return
		}
		fi, err := os.Stat(host)
		if err != nil {
			must(fmt.Errorf("image build: %w", err))
			return
		}
		must(a.file(guest, uint32(fi.Mode().Perm()), data))
	}
	for _, prog := range p.programs {
		take(prog, prog)
	}
	for _, o := range p.objects {
		gp, err := guestPath(o, p.interp)
		if err != nil {
			must(fmt.Errorf("image build: %w", err))
			continue
		}
		take(gp, o.real)
	}
	for _, m := range mods {
		take(filepath.Join("lib/modules", release, m), filepath.Join(modDir, m))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}

	// busybox's applets, each a link to it, except where a file is.
	out, err := run(ctx, "", BusyboxPath, "--list-full")
	if err != nil {
		return nil, fmt.Errorf("image build: %w", err)
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		name := strings.TrimSpace(sc.Text())
		if c, err := clean(name); err != nil || a.entries[c] != nil {
			continue
		}
		if err := a.symlink(name, BusyboxPath); err != nil {
			return nil, fmt.Errorf("image build: %w", err)
		}
	}
	return a, nil
}

// writeInitrd writes the archive gzip-compressed (no name, no time in
// the header: the same archive gives the same bytes) and returns its
// SHA-256.
func writeInitrd(a *archive, file string) (string, error) {
	f, err := os.Create(file)
	if err != nil {
		return "", fmt.Errorf("image build: %w", err)
	}
	h := sha256.New()
	zw, err := gzip.NewWriterLevel(io.MultiWriter(f, h), gzip.BestCompression)
	if err != nil {
		f.Close()
		return "", err
	}
	err = a.writeTo(zw)
	if cerr := zw.Close(); err == nil {
		err = cerr
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", fmt.Errorf("image build: initrd: %w", err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// copyFile copies a file (mode 0644) and returns its SHA-256.
func copyFile(src, dst string) (string, error) {
	in, err := os.Open(src)
	if err != nil {
		return "", fmt.Errorf("image: %w", err)
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return "", fmt.Errorf("image: %w", err)
	}
	h := sha256.New()
	_, err = io.Copy(io.MultiWriter(out, h), in)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", fmt.Errorf("image: copy %s: %w", src, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// copyImage copies the image of directory src to dst: the kernel, the
// initrd and the disk first, the image file last, so that a directory with an image
// file has the files it names.
func copyImage(src, dst string) error {
	if src == dst {
		return nil
	}
	img, err := Load(src)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return fmt.Errorf("image: out: %w", err)
	}
	// An image file already there no longer describes the directory.
	if err := os.Remove(filepath.Join(dst, FileName)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("image: out: %w", err)
	}
	for _, name := range []string{img.Kernel, img.Initrd, img.Disk, img.UserData, FileName} {
		if name == "" {
			continue
		}
		tmp := filepath.Join(dst, "."+filepath.Base(name)+".tmp")
		if _, err := copyFile(filepath.Join(src, name), tmp); err != nil {
			return err
		}
		if err := os.Rename(tmp, filepath.Join(dst, name)); err != nil {
			return fmt.Errorf("image: out: %w", err)
		}
	}
	return nil
}
