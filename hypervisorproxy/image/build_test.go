package image

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/metasched/metasched/internal/taskfarmtest"
)

// newcEntry is one entry of a newc archive, as the tests read it.
type newcEntry struct {
	name        string
	mode, nlink uint32
	uid, mtime  uint32
	rmaj, rmin  uint32
	data        []byte
}

// readNewc reads a newc archive up to its trailer.
func readNewc(data []byte) ([]newcEntry, error) {
	var out []newcEntry
	off := 0
	align := func(n int) int { return (n + 3) &^ 3 }
	for {
		if off+110 > len(data) || string(data[off:off+6]) != "070701" {
			return nil, fmt.Errorf("no newc header at %d", off)
		}
		var f [13]uint32
		for i := range f {
			v, err := strconv.ParseUint(string(data[off+6+8*i:off+14+8*i]), 16, 32)
			if err != nil {
				return nil, fmt.Errorf("header at %d: %w", off, err)
			}
			f[i] = uint32(v)
		}
		nameEnd := off + 110 + int(f[11])
		if nameEnd > len(data) || data[nameEnd-1] != 0 {
			return nil, fmt.Errorf("bad name at %d", off)
		}
		name := string(data[off+110 : nameEnd-1])
		start := align(nameEnd)
		end := start + int(f[6])
		if end > len(data) {
			return nil, fmt.Errorf("%s: truncated", name)
		}
		if name == "TRAILER!!!" {
			return out, nil
		}
		out = append(out, newcEntry{name: name, mode: f[1], uid: f[2], nlink: f[4], mtime: f[5],
			rmaj: f[9], rmin: f[10], data: data[start:end]})
		off = align(end)
	}
}

func readInitrd(t *testing.T, path string) (map[string]newcEntry, []string) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	data, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	entries, err := readNewc(data)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]newcEntry{}
	var names []string
	for _, e := range entries {
		byName[e.name] = e
		names = append(names, e.name)
	}
	return byName, names
}

// skipShortBuild skips a test that builds an image in -short mode: the
// build runs Debian's apt and dpkg, and downloads packages into a cold
// cache.
func skipShortBuild(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: builds the guest image with apt and dpkg (downloads on a cold cache); make test runs it")
	}
}

// The bundled image from the user's cache (built when missing): an image
// file naming its inputs and files, an initramfs with the init, busybox
// and its applets, qemu-ga and its libraries, the modules the init loads
// in order; a second build comes from the cache with the same bytes, and
// a rebuild gives the same bytes again.
func TestBuild(t *testing.T) {
	skipShortBuild(t)
	ctx := t.Context()
	out := t.TempDir()
	tf := taskfarmtest.Binary(t)
	res, err := Build(ctx, Options{Out: out, TaskFarm: tf})
	if err != nil {
		t.Fatal(err)
	}
	img := res.Image
	if res.Dir != out || img.Dir != out {
		t.Errorf("image in %s (%s), want %s", res.Dir, img.Dir, out)
	}
	if err := img.Verify(); err != nil {
		t.Error(err)
	}
	if img.Kind != KindKernel || img.Cmdline != BaseCmdline || img.Recipe != Recipe ||
		!strings.HasPrefix(img.InputsHash, "sha256:"+filepath.Base(res.Entry)) {
		t.Errorf("image file: %+v (entry %s)", img, res.Entry)
	}
	var pkgs []string
	for _, in := range img.Inputs {
		pkgs = append(pkgs, in.Package)
	}
	if !slices.IsSorted(pkgs) {
		t.Errorf("inputs not sorted: %v", pkgs)
	}
	kernelPkg := "linux-image-" + img.KernelRelease
	for _, want := range []string{kernelPkg, "busybox-static", "qemu-guest-agent", "libc6", "libglib2.0-0"} {
		if !slices.Contains(pkgs, want) {
			t.Errorf("inputs %v lack %s", pkgs, want)
		}
	}
	if !KernelPackageRE.MatchString(kernelPkg) {
		t.Errorf("kernel package %s", kernelPkg)
	}

	files, names := readInitrd(t, img.InitrdPath())
	for _, name := range names {
		e := files[name]
		if e.uid != 0 || e.mtime != 0 {
			t.Errorf("%s: uid %d, mtime %d", name, e.uid, e.mtime)
		}
	}
	if !slices.IsSorted(names) {
		t.Error("entries not in path order")
	}
	for name, mode := range map[string]uint32{
		"init": modeRegular | 0o755, "bin/busybox": modeRegular | 0o755, "usr/sbin/qemu-ga": modeRegular | 0o755,
		"lib64/ld-linux-x86-64.so.2": modeRegular | 0o755, "lib/metasched/cmdline.sh": modeRegular | 0o644,
		"usr/bin/metasched-run": modeRegular | 0o755, "usr/bin/taskfarm": modeRegular | 0o755,
		"dev/console": modeCharDev | 0o600, "bin/sh": modeSymlink | 0o777, "sbin/insmod": modeSymlink | 0o777,
		"tmp": modeDir | 0o1777, "var/run": modeSymlink | 0o777, "lib/x86_64-linux-gnu/libglib-2.0.so.0": modeRegular,
	} {
		e, ok := files[name]
		if !ok {
			t.Errorf("initrd lacks %s", name)
			continue
		}
		if e.mode != mode && !(mode == modeRegular && e.mode&modeType == modeRegular) {
			t.Errorf("%s: mode %o, want %o", name, e.mode, mode)
		}
	}
	if e := files["dev/console"]; e.rmaj != 5 || e.rmin != 1 {
		t.Errorf("dev/console is %d,%d", e.rmaj, e.rmin)
	}
	if string(files["bin/sh"].data) != BusyboxPath {
		t.Errorf("bin/sh -> %q", files["bin/sh"].data)
	}
	if string(files["lib/metasched/cmdline.sh"].data) != cmdlineScript {
		t.Error("cmdline.sh differs from the package's")
	}
	if string(files["usr/bin/metasched-run"].data) != runnerScript {
		t.Error("metasched-run differs from the package's")
	}
	if want, err := os.ReadFile(tf); err != nil || !bytes.Equal(files["usr/bin/taskfarm"].data, want) {
		t.Errorf("usr/bin/taskfarm differs from the task farm built (%v)", err)
	}
	// The init loads every module in the initrd, in the recipe's order.
	init := string(files["init"].data)
	last, loads := -1, 0
	for _, m := range Modules {
		rel := ""
		for _, name := range names {
			if strings.HasSuffix(name, "/"+strings.ReplaceAll(m, "_", "_")+".ko") &&
				strings.HasPrefix(name, "lib/modules/"+img.KernelRelease+"/") {
				rel = strings.TrimPrefix(name, "lib/modules/"+img.KernelRelease+"/")
			}
		}
		if rel == "" {
			continue // built in
		}
		at := strings.Index(init, " "+rel)
		if at < 0 || at < last {
			t.Errorf("init loads %s at %d, after %d", rel, at, last)
		}
		last = at
		loads++
	}
	if loads < 5 || !strings.Contains(init, "insmod \"/lib/modules/"+img.KernelRelease+"/$m\"") {
		t.Errorf("init loads %d modules:\n%s", loads, init)
	}

	// Again: from the cache, the same bytes.
	out2 := t.TempDir()
	res2, err := Build(ctx, Options{Out: out2, TaskFarm: tf})
	if err != nil {
		t.Fatal(err)
	}
	if !res2.Cached || res2.Entry != res.Entry {
		t.Errorf("second build: cached %v, entry %s (first %s)", res2.Cached, res2.Entry, res.Entry)
	}
	sameFiles(t, out, out2)

	// A rebuild from the same inputs gives the same bytes.
	res3, err := Build(ctx, Options{Rebuild: true, TaskFarm: tf})
	if err != nil {
		t.Fatal(err)
	}
	if res3.Cached || res3.Dir != res.Entry {
		t.Errorf("rebuild: cached %v, dir %s", res3.Cached, res3.Dir)
	}
	sameFiles(t, out, res3.Dir)
}

func sameFiles(t *testing.T, a, b string) {
	t.Helper()
	for _, name := range []string{FileName, kernelFile, initrdFile} {
		x, err := os.ReadFile(filepath.Join(a, name))
		if err != nil {
			t.Fatal(err)
		}
		y, err := os.ReadFile(filepath.Join(b, name))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(x, y) {
			t.Errorf("%s differs between %s and %s", name, a, b)
		}
	}
}

// Without apt and dpkg, or with a kernel package apt does not know, the
// build stops with an error that says so, and leaves nothing in the out
// directory.
func TestBuildErrors(t *testing.T) {
	skipShortBuild(t)
	ctx := t.Context()
	out := filepath.Join(t.TempDir(), "out")
	tf := taskfarmtest.Binary(t)
	_, err := Build(ctx, Options{Out: out, CacheDir: t.TempDir(), KernelPackage: "linux-image-6.1.0-999-cloud-amd64", TaskFarm: tf})
	if err == nil || !strings.HasPrefix(err.Error(), "image build: kernel package linux-image-6.1.0-999-cloud-amd64: apt-cache show --no-all-versions linux-image-6.1.0-999-cloud-amd64: exit status 100: E: No packages found") {
		t.Errorf("unknown kernel package: %v", err)
	}
	if _, err := Build(ctx, Options{Out: out, CacheDir: t.TempDir(), KernelPackage: "Linux image", TaskFarm: tf}); err == nil ||
		err.Error() != `image build: kernel package: "Linux image" is not a Debian package name` {
		t.Errorf("bad kernel package name: %v", err)
	}
	t.Setenv("PATH", t.TempDir())
	_, err = Build(ctx, Options{Out: out, CacheDir: t.TempDir(), TaskFarm: tf})
	want := "image build: apt-get, apt-cache, dpkg-deb, dpkg-query not found on PATH: the image is built from Debian packages with Debian's apt and dpkg"
	if err == nil || err.Error() != want {
		t.Errorf("no apt: %v, want %q", err, want)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("out directory after failed builds: %v", err)
	}
}

// BenchmarkBuildCold is a build with an empty cache: the kernel package
// downloaded and unpacked, the initramfs made.
func BenchmarkBuildCold(b *testing.B) {
	tf := taskfarmtest.Binary(b)
	for b.Loop() {
		cache := b.TempDir()
		if _, err := Build(b.Context(), Options{CacheDir: cache, TaskFarm: tf}); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		if err := os.RemoveAll(cache); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
}

// BenchmarkBuildCached is a build whose image is in the cache, copied to
// an out directory.
func BenchmarkBuildCached(b *testing.B) {
	cache := b.TempDir()
	tf := taskfarmtest.Binary(b)
	if _, err := Build(b.Context(), Options{CacheDir: cache, TaskFarm: tf}); err != nil {
		b.Fatal(err)
	}
	out := b.TempDir()
	for b.Loop() {
		res, err := Build(b.Context(), Options{CacheDir: cache, Out: out, TaskFarm: tf})
		if err != nil || !res.Cached {
			b.Fatal(res, err)
		}
	}
}
