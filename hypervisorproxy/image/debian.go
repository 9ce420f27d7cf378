package image

import (
	"bytes"
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// The Debian image: a standard Debian 12 system (systemd, cloud-init,
// qemu-guest-agent, openssh-server, OpenMPI) made from Debian packages
// with mmdebstrap, contextualized by cloud-init like any cloud image
// (docs/internals/images.md, "The Debian image").
const (
	// BuildDebian is the build kind of the Debian image (Options.Kind).
	BuildDebian = "debian"
	// DebianRecipe is the version of the Debian recipe below.
	DebianRecipe = 3
	// DebianSuite is the Debian release the image is made of.
	DebianSuite = "bookworm"
	// DebianDiskMiB is the size of the Debian image's ext4 root file
	// system: the system (about 700 MiB) and room for the jobs (their
	// writes go to each VM's overlay; the qcow2 holds only what is used).
	DebianDiskMiB = 3072
	// DebianCmdline is the Debian image's kernel command line: the root on
	// the VM's disk, the console on the first serial port, and the
	// network interface named eth0 (the name network-config matches).
	DebianCmdline = "root=/dev/vda ro console=ttyS0 net.ifnames=0"
	// MPIProgramPath is the MPI example program in the Debian image, built
	// there with mpicc from guest/mpi-pi.c (its source is at
	// MPISourcePath).
	MPIProgramPath = "/usr/local/bin/mpi-pi"
	MPISourcePath  = "/usr/local/src/metasched/mpi-pi.c"
)

// DebianSources are the apt sources of the Debian image by default:
// Debian's own mirror network, with its updates and security suites.
const DebianSources = "deb http://deb.debian.org/debian bookworm main\n" +
	"deb http://deb.debian.org/debian bookworm-updates main\n" +
	"deb http://deb.debian.org/debian-security bookworm-security main\n"

// DebianPackages are the packages the Debian image is made of, beyond
// Debian's essential ones and apt (mmdebstrap's variant apt); their
// dependencies come with them, their recommendations do not.
var DebianPackages = []string{
	"systemd-sysv", "udev", "linux-image-cloud-amd64", "initramfs-tools", "e2fsprogs",
	"cloud-init", "qemu-guest-agent", "openssh-server", "ifupdown", "isc-dhcp-client", "iproute2", "procps",
	"openmpi-bin", "libopenmpi-dev", "gcc", "libc6-dev",
}

var (
	//go:embed guest/mpi-pi.c
	mpiSource string
	//go:embed guest/debian-customize.sh
	debianCustomize string
	//go:embed guest/90-metasched.cfg
	debianCloudConfig string
)

// debianTools are the programs the Debian build runs.
type debianTools struct {
	aptGet, mmdebstrap, dpkgQuery string
	disk                          *diskTools
}

// debianToolPackages are the Debian packages of the build's tools, whose
// versions are inputs of the image (their output is its bytes).
var debianToolPackages = []string{"mmdebstrap", "e2fsprogs", "qemu-utils"}

func findDebianTools() (*debianTools, error) {
	dt, err := findDiskTools()
	if err != nil {
		return nil, err
	}
	t := &debianTools{disk: dt}
	var missing []string
	for _, x := range []struct {
		name, pkg string
		dst       *string
	}{{"apt-get", "apt", &t.aptGet}, {"mmdebstrap", "mmdebstrap", &t.mmdebstrap}, {"dpkg-query", "dpkg", &t.dpkgQuery}} {
		p, err := exec.LookPath(x.name)
		if err != nil {
			missing = append(missing, fmt.Sprintf("%s (Debian package %s)", x.name, x.pkg))
			continue
		}
		*x.dst = p
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("image build: the Debian image needs %s: not found on PATH (make image-debian installs them)", strings.Join(missing, " and "))
	}
	return t, nil
}

// debianPlan is what a Debian build takes: the sources, the package lists
// fetched from them (in lists), the tools' versions, and the key.
type debianPlan struct {
	sources  string
	lists    string    // apt's lists of the sources, fetched into the cache
	released time.Time // the newest Date of the sources' Release files
	tools    []Input
	taskfarm []byte
	key      string
}

// buildDebian builds the Debian image (Options.Kind BuildDebian), or
// takes it from the cache. The key is the SHA-256 of the recipe (the
// packages, the scripts, the configuration, the MPI program's source),
// of the task farm, of the build tools' versions and of the Release
// files of the sources' suites as fetched now: the same mirror content
// gives the same key, and mmdebstrap installs from exactly those lists.
func buildDebian(ctx context.Context, opt Options) (*Result, error) {
	log := opt.Logger
	taskfarm, err := ReadTaskFarm(opt.TaskFarm)
	if err != nil {
		return nil, fmt.Errorf("image build: taskfarm: %w", err)
	}
	if opt.KernelPackage != "" {
		return nil, errors.New("image build: kernel package: the Debian image takes Debian's linux-image-cloud-amd64; --kernel-package is for the bundled image")
	}
	t, err := findDebianTools()
	if err != nil {
		return nil, err
	}
	sources := opt.Sources
	if sources == "" {
		sources = DebianSources
	}
	if err := checkSources(sources); err != nil {
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
	// A lock of its own: the Debian builds use their own part of the
	// cache (the fetched lists, their entries), so a bundled image is
	// built (or taken) while one runs.
	unlock, err := lockDir(ctx, opt.CacheDir, ".lock-debian")
	if err != nil {
		return nil, err
	}
	defer unlock()

	p := &debianPlan{sources: sources, taskfarm: taskfarm}
	if err := p.fetchLists(ctx, t, opt.CacheDir); err != nil {
		return nil, err
	}
	if p.tools, err = installedVersions(ctx, &tools{dpkgQuery: t.dpkgQuery}, debianToolPackages); err != nil {
		return nil, err
	}
	if p.key, err = p.inputsKey(); err != nil {
		return nil, err
	}
	entry := filepath.Join(opt.CacheDir, p.key[:16])
	cached := !opt.Rebuild && inCache(entry, p.key, log)
	if !cached {
		start := time.Now()
		log.Info().Str("entry", entry).Msg("building the Debian image (mmdebstrap, a minute or two)")
		if err := p.build(ctx, t, opt.CacheDir, entry); err != nil {
			return nil, err
		}
		log.Info().Str("entry", entry).Str("kind", BuildDebian).Dur("took", time.Since(start)).Msg("image built")
	}
	return finish(opt, entry, cached)
}

// checkSources checks the apt sources of a Debian build: one-line
// entries "deb URI SUITE COMPONENT…" of http(s) URIs, comments and blank
// lines.
func checkSources(sources string) error {
	n := 0
	for i, line := range strings.Split(sources, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if len(f) < 4 || f[0] != "deb" || !(strings.HasPrefix(f[1], "http://") || strings.HasPrefix(f[1], "https://")) {
			return fmt.Errorf("image build: sources: line %d: want \"deb http://MIRROR SUITE COMPONENT...\", not %q", i+1, clip(line))
		}
		n++
	}
	if n == 0 {
		return errors.New("image build: sources: no deb line")
	}
	return nil
}

// fetchLists fetches the package lists of the sources into the cache
// (apt-get update with its own sources and lists, the host's keyring),
// so that the key and the build both use exactly them.
func (p *debianPlan) fetchLists(ctx context.Context, t *debianTools, cacheDir string) error {
	dir := filepath.Join(cacheDir, "debian-apt")
	sum := sha256.Sum256([]byte(p.sources))
	p.lists = filepath.Join(dir, hex.EncodeToString(sum[:8]), "lists")
	cache := filepath.Join(filepath.Dir(p.lists), "cache")
	for _, d := range []string{filepath.Join(p.lists, "partial"), cache} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("image build: %w", err)
		}
	}
	srcFile := filepath.Join(filepath.Dir(p.lists), "sources.list")
	if err := os.WriteFile(srcFile, []byte(p.sources), 0o644); err != nil {
		return fmt.Errorf("image build: %w", err)
	}
	if _, err := run(ctx, "", t.aptGet, "update", "-q",
		"-o", "Dir::Etc::SourceList="+srcFile, "-o", "Dir::Etc::SourceParts=/nonexistent",
		"-o", "Dir::State::Lists="+p.lists, "-o", "Dir::Cache="+cache,
		"-o", "Acquire::Languages=none", "-o", "APT::Get::List-Cleanup=true"); err != nil {
		return fmt.Errorf("image build: the package lists of the sources: %w", err)
	}
	releases, err := p.releaseFiles()
	if err != nil {
		return err
	}
	for _, f := range releases {
		data, err := os.ReadFile(f)
		if err != nil {
			return fmt.Errorf("image build: %w", err)
		}
		if d, ok := releaseDate(data); ok && d.After(p.released) {
			p.released = d
		}
	}
	if p.released.IsZero() {
		return fmt.Errorf("image build: the Release files of the sources have no Date")
	}
	return nil
}

// releaseFiles are the InRelease (or Release) files in the lists, sorted.
func (p *debianPlan) releaseFiles() ([]string, error) {
	var out []string
	entries, err := os.ReadDir(p.lists)
	if err != nil {
		return nil, fmt.Errorf("image build: %w", err)
	}
	for _, e := range entries {
		if n := e.Name(); strings.HasSuffix(n, "_InRelease") || strings.HasSuffix(n, "_Release") {
			out = append(out, filepath.Join(p.lists, n))
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("image build: apt-get update fetched no Release file of the sources")
	}
	return out, nil
}

// releaseDate is the Date field of a Release file.
func releaseDate(data []byte) (time.Time, bool) {
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "Date: "); ok {
			d, err := time.Parse(time.RFC1123, strings.TrimSpace(v))
			if err != nil {
				d, err = time.Parse(time.RFC1123Z, strings.TrimSpace(v))
			}
			return d, err == nil
		}
	}
	return time.Time{}, false
}

// inputsKey is the hex SHA-256 of the recipe, the task farm, the tools'
// versions and the sources' Release files.
func (p *debianPlan) inputsKey() (string, error) {
	h := sha256.New()
	fmt.Fprintf(h, "metasched Debian image\nrecipe %d\nsuite %s\ncmdline %s\ndisk %s %d MiB ext4\npackages %s\n",
		DebianRecipe, DebianSuite, DebianCmdline, diskFile, DebianDiskMiB, strings.Join(DebianPackages, ","))
	fmt.Fprintf(h, "sources %x\ncustomize %x\ncloud.cfg %x\nmpi-pi.c %x\n", sha256.Sum256([]byte(p.sources)),
		sha256.Sum256([]byte(debianCustomize)), sha256.Sum256([]byte(debianCloudConfig)), sha256.Sum256([]byte(mpiSource)))
	fmt.Fprintf(h, "%s %x\n%s %x\n", RunnerPath, sha256.Sum256([]byte(runnerScript)), TaskFarmPath, sha256.Sum256(p.taskfarm))
	for _, in := range p.tools {
		fmt.Fprintf(h, "tool %s %s %s\n", in.Package, in.Architecture, in.Version)
	}
	releases, err := p.releaseFiles()
	if err != nil {
		return "", err
	}
	for _, f := range releases {
		data, err := os.ReadFile(f)
		if err != nil {
			return "", fmt.Errorf("image build: %w", err)
		}
		fmt.Fprintf(h, "release %s %x\n", filepath.Base(f), sha256.Sum256(data))
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// build makes the Debian image in the cache entry: the system tree with
// mmdebstrap from the fetched lists, its kernel and initrd, and the tree
// as the qcow2 disk.
func (p *debianPlan) build(ctx context.Context, t *debianTools, cacheDir, entry string) error {
	work, err := os.MkdirTemp(cacheDir, ".build-")
	if err != nil {
		return fmt.Errorf("image build: %w", err)
	}
	defer os.RemoveAll(work)
	files := filepath.Join(work, "files")
	if err := os.Mkdir(files, 0o755); err != nil {
		return fmt.Errorf("image build: %w", err)
	}
	for name, data := range map[string][]byte{
		"taskfarm": p.taskfarm, "metasched-run": []byte(runnerScript), "mpi-pi.c": []byte(mpiSource),
		"90-metasched.cfg": []byte(debianCloudConfig), "customize.sh": []byte(debianCustomize),
	} {
		if err := os.WriteFile(filepath.Join(files, name), data, 0o644); err != nil {
			return fmt.Errorf("image build: %w", err)
		}
	}
	tree := filepath.Join(work, "tree")
	epoch := strconv.FormatInt(p.released.Unix(), 10)
	args := []string{"--variant=apt", "--mode=root", "--quiet",
		"--include=" + strings.Join(DebianPackages, ","),
		"--aptopt=Acquire::Languages \"none\"",
		"--dpkgopt=path-exclude=/usr/share/doc/*", "--dpkgopt=path-include=/usr/share/doc/*/copyright",
		"--dpkgopt=path-exclude=/usr/share/man/*", "--dpkgopt=path-exclude=/usr/share/info/*",
		"--dpkgopt=path-exclude=/usr/share/locale/*", "--dpkgopt=path-include=/usr/share/locale/locale.alias",
		"--skip=update",
		`--setup-hook=mkdir -p "$1/var/lib/apt/lists" && cp ` + shellWord(p.lists) + `/*_* "$1/var/lib/apt/lists/"`,
		"--customize-hook=sh " + shellWord(filepath.Join(files, "customize.sh")) + ` "$1" ` + shellWord(files),
		DebianSuite, tree, filepath.Join(filepath.Dir(p.lists), "sources.list"),
	}
	cmd := exec.CommandContext(ctx, t.mmdebstrap, args...)
	cmd.Env = append(os.Environ(), "LC_ALL=C.UTF-8", "SOURCE_DATE_EPOCH="+epoch, "DEBIAN_FRONTEND=noninteractive")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(out.String())
		if len(msg) > 3000 {
			msg = "…" + msg[len(msg)-3000:]
		}
		return fmt.Errorf("image build: mmdebstrap: %w: %s", err, msg)
	}
	inputs, err := treePackages(ctx, t, tree)
	if err != nil {
		return err
	}
	img := &Image{Kind: KindDisk, Cmdline: DebianCmdline, Contextualization: ContextCloudInit,
		Recipe: DebianRecipe, Inputs: inputs, InputsHash: "sha256:" + p.key}
	dst := filepath.Join(work, "image")
	if err := os.Mkdir(dst, 0o755); err != nil {
		return fmt.Errorf("image build: %w", err)
	}
	if img.Kernel, img.KernelSHA256, img.Initrd, img.InitrdSHA256, img.KernelRelease, err = treeKernel(tree, dst); err != nil {
		return err
	}
	paths, err := clampTree(tree, p.released)
	if err != nil {
		return err
	}
	sum, err := makeDisk(ctx, t.disk, diskSpec{tree: tree, paths: paths, work: work, key: p.key,
		out: filepath.Join(dst, diskFile), label: "debian-root", sizeMiB: DebianDiskMiB, keepMtimes: true})
	if err != nil {
		return err
	}
	img.Disk, img.DiskSHA256, img.DiskFormat = diskFile, sum, FormatQCOW2
	return writeEntry(img, dst, entry)
}

// shellWord quotes s for sh.
func shellWord(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// treePackages are the packages installed in the tree, by name.
func treePackages(ctx context.Context, t *debianTools, tree string) ([]Input, error) {
	out, err := run(ctx, "", t.dpkgQuery, "--admindir", filepath.Join(tree, "var/lib/dpkg"), "-W",
		"-f", "${db:Status-Abbrev}\t${Package}\t${Version}\t${Architecture}\n")
	if err != nil {
		return nil, fmt.Errorf("image build: the packages of the tree: %w", err)
	}
	var ins []Input
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Split(line, "\t")
		if len(f) != 4 || !strings.HasPrefix(f[0], "ii") {
			continue
		}
		ins = append(ins, Input{Package: f[1], Version: f[2], Architecture: f[3]})
	}
	slices.SortFunc(ins, func(a, b Input) int { return strings.Compare(a.Package, b.Package) })
	if len(ins) == 0 || len(ins) > maxInputs {
		return nil, fmt.Errorf("image build: the tree has %d packages installed, want 1 to %d", len(ins), maxInputs)
	}
	return ins, nil
}

// treeKernel copies the tree's kernel and initrd (boot/vmlinuz-RELEASE,
// boot/initrd.img-RELEASE) into dst and returns their names, sums and
// the release.
func treeKernel(tree, dst string) (kernel, kernelSum, initrd, initrdSum, release string, err error) {
	vmlinuz, release, _, err := kernelFiles(tree)
	if err != nil {
		return "", "", "", "", "", fmt.Errorf("image build: the tree's kernel: %w", err)
	}
	if kernelSum, err = copyFile(vmlinuz, filepath.Join(dst, kernelFile)); err != nil {
		return "", "", "", "", "", err
	}
	if initrdSum, err = copyFile(filepath.Join(tree, "boot", "initrd.img-"+release), filepath.Join(dst, initrdFile)); err != nil {
		return "", "", "", "", "", err
	}
	return kernelFile, kernelSum, initrdFile, initrdSum, release, nil
}

// clampTree sets every time in the tree later than epoch to epoch (the
// files maintainer scripts made have the build's time; those of the
// packages keep theirs) and returns the tree's paths, relative, for the
// times mke2fs takes from the clock.
func clampTree(tree string, epoch time.Time) ([]string, error) {
	var paths []string
	var dirs []string
	ts := unix.NsecToTimespec(epoch.UnixNano())
	err := filepath.WalkDir(tree, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == tree {
			return nil
		}
		rel, _ := filepath.Rel(tree, p)
		paths = append(paths, rel)
		if d.IsDir() {
			dirs = append(dirs, p)
			return nil
		}
		return clampTime(p, ts, epoch)
	})
	if err != nil {
		return nil, fmt.Errorf("image build: the tree's times: %w", err)
	}
	// Directories last, children first: a change inside changes its time.
	for i := len(dirs) - 1; i >= 0; i-- {
		if err := clampTime(dirs[i], ts, epoch); err != nil {
			return nil, fmt.Errorf("image build: the tree's times: %w", err)
		}
	}
	if err := clampTime(tree, ts, epoch); err != nil {
		return nil, fmt.Errorf("image build: the tree's times: %w", err)
	}
	return paths, nil
}

// clampTime sets p's modification time to epoch when it is later, and its
// access time to its modification time, not following a link.
func clampTime(p string, ts unix.Timespec, epoch time.Time) error {
	var st unix.Stat_t
	if err := unix.Lstat(p, &st); err != nil {
		return err
	}
	m := st.Mtim
	if time.Unix(m.Sec, m.Nsec).After(epoch) {
		m = ts
	}
	return unix.UtimesNanoAt(unix.AT_FDCWD, p, []unix.Timespec{m, m}, unix.AT_SYMLINK_NOFOLLOW)
}
