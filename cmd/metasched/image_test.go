package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/metasched/metasched/hypervisorproxy/image"
	"github.com/metasched/metasched/hypervisorproxy/libvirtdtest"
)

// metasched image build writes the image to --out, from its cache the
// second time, and says what it built.
func TestImageBuild(t *testing.T) {
	skipShortImageBuild(t)
	out := filepath.Join(t.TempDir(), "img")
	cache := t.TempDir()
	tf := buildTaskFarm(t, t.TempDir())
	code, stdout, stderr := runCmd(t, "image", "build", "--out", out, "--cache-dir", cache, "--log-format", "json", "--taskfarm", tf)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	img, err := image.Load(out)
	if err != nil {
		t.Fatal(err)
	}
	if err := img.Verify(); err != nil {
		t.Error(err)
	}
	for _, want := range []string{"Image in " + out + ", built in ", "kernel " + img.KernelRelease + " (vmlinuz), initrd initrd.img",
		"inputs " + img.InputsHash + ":\n", "  busybox-static ", "  qemu-guest-agent ", "task farm " + tf + " (sha256 ", ") at /usr/bin/taskfarm\n"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, stdout)
		}
	}
	if !strings.Contains(stderr, `"message":"downloading the kernel"`) {
		t.Errorf("log lacks the download:\n%s", stderr)
	}
	code, stdout, stderr = runCmd(t, "image", "build", "--out", out, "--cache-dir", cache, "--taskfarm", tf)
	if code != 0 || !strings.Contains(stdout, ", taken from the cache in ") {
		t.Errorf("second build: exit %d\n%s%s", code, stdout, stderr)
	}
}

// metasched image build --disk writes the disk form (from the user's
// cache, where the other tests build it too).
func TestImageBuildDisk(t *testing.T) {
	skipShortImageBuild(t)
	out := filepath.Join(t.TempDir(), "img")
	code, stdout, stderr := runCmd(t, "image", "build", "--out", out, "--disk", "--taskfarm", buildTaskFarm(t, t.TempDir()))
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	img, err := image.Load(out)
	if err != nil {
		t.Fatal(err)
	}
	if err := img.Verify(); err != nil {
		t.Error(err)
	}
	if img.Kind != image.KindDisk || !strings.Contains(stdout, "disk rootfs.qcow2 (qcow2, sha256 "+img.DiskSHA256+")") {
		t.Errorf("image %+v, output:\n%s", img, stdout)
	}
}

// Without --out, apt-get, a known kernel package, or a static task farm,
// the command says so.
func TestImageBuildErrors(t *testing.T) {
	skipShortImageBuild(t)
	cache := t.TempDir()
	tf := buildTaskFarm(t, t.TempDir())
	exe, err := os.Executable() // this test's binary: dynamically linked (libvirt, through cgo)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		path string
		code int
		want string
	}{
		{[]string{"image", "build"}, "", exitUsage, "metasched: --out: required (the image's directory)\n"},
		{[]string{"image", "build", "--out", "x", "--kind", "iso"}, "", exitUsage, "metasched: --kind: must be kernel, disk or debian, not \"iso\"\n"},
		{[]string{"image", "build", "--out", "x", "--kind", "kernel", "--disk"}, "", exitUsage, "metasched: --disk: contradicts --kind kernel\n"},
		{[]string{"image", "build", "--out", "x", "--cache-dir", cache, "--kernel-package", "linux-image-0-none", "--taskfarm", tf}, "", exitFailure,
			"metasched: image build: kernel package linux-image-0-none: apt-cache show --no-all-versions linux-image-0-none: exit status 100: "},
		{[]string{"image", "build", "--out", "x", "--cache-dir", cache}, "", exitUsage,
			"metasched: --taskfarm: unusable task farm binary: stat " + filepath.Join(filepath.Dir(exe), "taskfarm") +
				": no such file or directory: build it with make build, or CGO_ENABLED=0 go build -o bin/taskfarm ./cmd/taskfarm\n"},
		{[]string{"image", "build", "--out", "x", "--cache-dir", cache, "--taskfarm", exe}, "", exitUsage,
			"metasched: --taskfarm: unusable task farm binary: " + exe + " is dynamically linked (its interpreter is /lib64/ld-linux-x86-64.so.2), the guest needs it static: build it with make build"},
		{[]string{"image", "build", "--out", "x", "--cache-dir", cache, "--taskfarm", "image_test.go"}, "", exitUsage,
			"metasched: --taskfarm: unusable task farm binary: image_test.go is not an ELF executable (bad magic number"},
		{[]string{"image", "build", "--out", "x", "--cache-dir", cache, "--taskfarm", tf}, t.TempDir(), exitFailure,
			"metasched: image build: apt-get, apt-cache, dpkg-deb, dpkg-query not found on PATH: the image is built from Debian packages with Debian's apt and dpkg\n"},
	} {
		if tc.path != "" {
			t.Setenv("PATH", tc.path)
		}
		code, _, stderr := runCmd(t, tc.args...)
		if code != tc.code || !strings.HasPrefix(stderr, tc.want) {
			t.Errorf("%v: exit %d, %q; want %d, %q", tc.args, code, stderr, tc.code, tc.want)
		}
	}
	if _, err := os.Stat("x"); !os.IsNotExist(err) {
		t.Errorf("failed builds left x: %v", err)
	}
}

// metasched image check reads an image (a directory, or a cloud image's
// qcow2 file) and says what it is; a file that is neither is refused.
func TestImageCheckFiles(t *testing.T) {
	out := filepath.Join(t.TempDir(), "img")
	if code, _, stderr := runCmd(t, "image", "build", "--out", out, "--taskfarm", buildTaskFarm(t, t.TempDir())); code != 0 {
		t.Fatalf("build: exit %d: %s", code, stderr)
	}
	code, stdout, stderr := runCmd(t, "image", "check", out)
	if code != 0 || !strings.Contains(stdout, "image "+out+": kind kernel, contextualization metasched\n") ||
		!strings.Contains(stdout, "not booted: give --connect URI") {
		t.Errorf("check of the bundled image: exit %d\n%s%s", code, stdout, stderr)
	}
	qcow := filepath.Join(t.TempDir(), "cloud.qcow2")
	if err := os.WriteFile(qcow, append([]byte("QFI\xfb"), make([]byte, 100)...), 0o644); err != nil {
		t.Fatal(err)
	}
	code, stdout, _ = runCmd(t, "image", "check", qcow)
	if code != 0 || !strings.Contains(stdout, "kind disk, contextualization cloud-init") || !strings.Contains(stdout, "boots with the disk's own boot loader") {
		t.Errorf("check of a cloud image: exit %d\n%s", code, stdout)
	}
	raw := filepath.Join(t.TempDir(), "disk.img")
	if err := os.WriteFile(raw, make([]byte, 100), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, stderr = runCmd(t, "image", "check", raw)
	if code == 0 || !strings.Contains(stderr, "not a qcow2 disk") {
		t.Errorf("check of a raw file: exit %d: %s", code, stderr)
	}
	code, _, stderr = runCmd(t, "image", "check", out, "--boot-timeout", "0s")
	if code != 2 || !strings.Contains(stderr, "--boot-timeout: must be positive") {
		t.Errorf("check with no boot timeout: exit %d: %s", code, stderr)
	}
}

// metasched image check --connect boots the image once on a QEMU host:
// the bundled image is usable; the bundled disk image declared as a cloud
// image is refused at once (it has no cloud-init), and nothing is left.
func TestImageCheckBoot(t *testing.T) {
	libvirtdtest.SkipShort(t)
	if err := libvirtdtest.Check(); err != nil {
		t.Fatal(err)
	}
	d, err := libvirtdtest.Start(context.Background(), libvirtdtest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := d.Stop(); err != nil {
			t.Error(err)
		}
	})
	tf := buildTaskFarm(t, t.TempDir())
	dir := filepath.Join(d.Dir(), "images") // where the daemon's QEMU reads
	res, err := image.Build(context.Background(), image.Options{Out: filepath.Join(dir, "disk"), Kind: image.KindDisk, TaskFarm: tf})
	if err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := runCmd(t, "image", "check", res.Dir, "--connect", d.URI(), "--boot-timeout", "3m", "--memory-mib", "256")
	if code != 0 || !strings.Contains(stdout, "guest agent answered after ") || !strings.Contains(stdout, "OK: usable") {
		t.Errorf("check of the bundled disk image: exit %d\n%s%s", code, stdout, stderr)
	}
	img := *res.Image
	img.Contextualization = image.ContextCloudInit
	img.Cmdline += " metasched.root=/dev/vda"
	cloud, err := img.CopyTo(filepath.Join(dir, "not-cloud"), nil)
	if err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr = runCmd(t, "image", "check", cloud.Dir, "--connect", d.URI(), "--boot-timeout", "3m", "--memory-mib", "256")
	if code == 0 || !strings.Contains(stderr, "the image did not boot") || !strings.Contains(stderr, "has no cloud-init") {
		t.Errorf("check of a cloud image without cloud-init: exit %d\n%s%s", code, stdout, stderr)
	}
	if pids, err := d.GuestPIDs(); err != nil || len(pids) > 0 {
		t.Errorf("QEMU processes after the checks: %v %v", pids, err)
	}
}
