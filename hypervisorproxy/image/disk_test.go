package image

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/metasched/metasched/internal/taskfarmtest"
)

// The disk form of the bundled image: the kernel and initramfs of the
// kernel form and a qcow2 disk holding the initramfs's tree in ext4, with
// the marker that tells the init it runs on the disk (which the initrd
// does not have); from the cache the second time, and a rebuild gives
// the same bytes.
func TestBuildDisk(t *testing.T) {
	skipShortBuild(t)
	ctx := t.Context()
	out := t.TempDir()
	tf := taskfarmtest.Binary(t)
	res, err := Build(ctx, Options{Out: out, Kind: KindDisk, TaskFarm: tf})
	if err != nil {
		t.Fatal(err)
	}
	img := res.Image
	if img.Kind != KindDisk || img.Disk != diskFile || img.DiskFormat != FormatQCOW2 || img.DiskSHA256 == "" ||
		img.Kernel == "" || img.Initrd == "" || img.Cmdline != BaseCmdline {
		t.Fatalf("image file: %+v", img)
	}
	if err := img.Verify(); err != nil {
		t.Error(err)
	}
	kernelRes, err := Build(ctx, Options{TaskFarm: tf})
	if err != nil {
		t.Fatal(err)
	}
	if kernelRes.Entry == res.Entry {
		t.Errorf("the kernel and the disk form share the cache entry %s", res.Entry)
	}
	if kernelRes.Image.KernelSHA256 != img.KernelSHA256 || kernelRes.Image.InitrdSHA256 != img.InitrdSHA256 {
		t.Errorf("the disk form's kernel or initrd differ from the kernel form's")
	}
	for _, pkg := range diskToolPackages {
		found := false
		for _, in := range img.Inputs {
			found = found || in.Package == pkg
		}
		if !found {
			t.Errorf("inputs lack %s: %+v", pkg, img.Inputs)
		}
	}
	files, _ := readInitrd(t, img.InitrdPath())
	if _, ok := files[strings.TrimPrefix(OnDiskMarker, "/")]; ok {
		t.Errorf("the initrd has %s", OnDiskMarker)
	}

	info, err := exec.Command("qemu-img", "info", img.DiskPath()).CombinedOutput()
	if err != nil || !bytes.Contains(info, []byte("file format: qcow2")) {
		t.Fatalf("qemu-img info: %v\n%s", err, info)
	}
	// Its file system, read back with debugfs from a raw copy.
	raw := filepath.Join(t.TempDir(), "raw")
	if out, err := exec.Command("qemu-img", "convert", "-O", "raw", img.DiskPath(), raw).CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if out, err := exec.Command("e2fsck", "-fn", raw).CombinedOutput(); err != nil {
		t.Errorf("e2fsck -fn of the disk: %v\n%s", err, out)
	}
	debugfs := func(req string) string {
		out, err := exec.Command("debugfs", "-R", req, raw).Output()
		if err != nil {
			t.Fatalf("debugfs -R %q: %v", req, err)
		}
		return string(out)
	}
	if got := debugfs("cat " + OnDiskMarker); !strings.Contains(got, "root file system") {
		t.Errorf("marker on the disk: %q", got)
	}
	if got := debugfs("cat /init"); got != string(files["init"].data) {
		t.Errorf("the disk's /init differs from the initrd's")
	}
	if got := debugfs("cat " + RunnerPath); got != runnerScript {
		t.Errorf("the disk's %s differs from the package's", RunnerPath)
	}
	if got := debugfs("stat /tmp"); !strings.Contains(got, "Mode:  01777") {
		t.Errorf("the disk's /tmp:\n%s", got)
	}
	if got := debugfs("stat /bin/sh"); !strings.Contains(got, "Type: symlink") {
		t.Errorf("the disk's /bin/sh:\n%s", got)
	}

	res2, err := Build(ctx, Options{Out: t.TempDir(), Kind: KindDisk, TaskFarm: tf})
	if err != nil {
		t.Fatal(err)
	}
	if !res2.Cached || res2.Entry != res.Entry {
		t.Errorf("second build: cached %v, entry %s (first %s)", res2.Cached, res2.Entry, res.Entry)
	}
	res3, err := Build(ctx, Options{Kind: KindDisk, Rebuild: true, TaskFarm: tf})
	if err != nil {
		t.Fatal(err)
	}
	if res3.Image.DiskSHA256 != img.DiskSHA256 {
		t.Errorf("a rebuild's disk has SHA-256 %s, the first %s", res3.Image.DiskSHA256, img.DiskSHA256)
	}
	sameFiles(t, out, res3.Dir)
	a, err := os.ReadFile(img.DiskPath())
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(res3.Image.DiskPath())
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a, b) {
		t.Error("the rebuild's disk differs")
	}
}

// Without mke2fs or qemu-img the disk form is not built, and the error
// names the program and its Debian package.
func TestBuildDiskTools(t *testing.T) {
	tf := taskfarmtest.Binary(t)
	// Only qemu-img missing.
	bin := t.TempDir()
	for _, name := range []string{"mke2fs", "debugfs"} {
		p, err := exec.LookPath(name)
		if err != nil {
			for _, d := range diskToolDirs {
				if _, serr := os.Stat(filepath.Join(d, name)); serr == nil {
					p, err = filepath.Join(d, name), nil
				}
			}
		}
		if err != nil {
			t.Fatalf("%s: %v (Debian package e2fsprogs)", name, err)
		}
		if err := os.Symlink(p, filepath.Join(bin, name)); err != nil {
			t.Fatal(err)
		}
	}
	saved := diskToolDirs
	diskToolDirs = nil
	t.Cleanup(func() { diskToolDirs = saved })
	t.Setenv("PATH", bin)
	out := filepath.Join(t.TempDir(), "out")
	_, err := Build(t.Context(), Options{Out: out, Kind: KindDisk, TaskFarm: tf})
	want := "image build: the disk form needs qemu-img (Debian package qemu-utils): not found on PATH (make image installs them)"
	if err == nil || err.Error() != want {
		t.Errorf("Build without qemu-img: %v, want %q", err, want)
	}
	t.Setenv("PATH", t.TempDir())
	_, err = Build(t.Context(), Options{Out: out, Kind: KindDisk, TaskFarm: tf})
	want = "image build: the disk form needs mke2fs and debugfs (Debian package e2fsprogs) and qemu-img (Debian package qemu-utils): not found on PATH (make image installs them)"
	if err == nil || err.Error() != want {
		t.Errorf("Build without the disk tools: %v, want %q", err, want)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("out directory after failed builds: %v", err)
	}
	if _, err := Build(t.Context(), Options{Kind: "iso"}); err == nil || err.Error() != `image build: kind: must be "kernel", "disk" or "debian", not "iso"` {
		t.Errorf("Build of kind iso: %v", err)
	}
}

// BenchmarkBuildDiskRebuild is a build of the disk form whose kernel
// package is cached: the initramfs, the ext4 file system, its times set
// to 0 and the qcow2 conversion.
func BenchmarkBuildDiskRebuild(b *testing.B) {
	tf := taskfarmtest.Binary(b)
	cache := b.TempDir()
	if _, err := Build(b.Context(), Options{CacheDir: cache, Kind: KindDisk, TaskFarm: tf}); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := Build(b.Context(), Options{CacheDir: cache, Kind: KindDisk, Rebuild: true, TaskFarm: tf}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkBuildDiskCached is a build of the disk form from the cache,
// copied to an out directory (the disk's sum checked on the way).
func BenchmarkBuildDiskCached(b *testing.B) {
	tf := taskfarmtest.Binary(b)
	cache := b.TempDir()
	if _, err := Build(b.Context(), Options{CacheDir: cache, Kind: KindDisk, TaskFarm: tf}); err != nil {
		b.Fatal(err)
	}
	out := b.TempDir()
	for b.Loop() {
		res, err := Build(b.Context(), Options{CacheDir: cache, Out: out, Kind: KindDisk, TaskFarm: tf})
		if err != nil || !res.Cached {
			b.Fatal(res, err)
		}
	}
}
