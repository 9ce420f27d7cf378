package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/metasched/metasched/hypervisorproxy/image"
)

// metasched image build writes the image to --out, from its cache the
// second time, and says what it built.
func TestImageBuild(t *testing.T) {
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
		{[]string{"image", "build", "--out", "x", "--kind", "iso"}, "", exitUsage, "metasched: --kind: must be kernel or disk, not \"iso\"\n"},
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
