package image

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const goodImage = `# a guest image
kind: kernel
kernel: vmlinuz
kernel_sha256: 51349501a3d1ff83836437d2b365fd2d57f2feb8642d315e5181dec23d4c3275
initrd: boot/initrd.img
initrd_sha256: 3fd3faa76205e247a6d8e9a0a5ae82a634e532aa62b75ceb536baa0ad0b7a860
cmdline: console=ttyS0 quiet
kernel_release: 6.1.0-56-cloud-amd64
recipe: 1
inputs:
  - {package: busybox-static, version: "1:1.35.0-4+deb12u1+b1", architecture: amd64}
  - {package: linux-image-6.1.0-56-cloud-amd64, version: 6.1.192-2}
inputs_hash: sha256:3d74c468018e71c56ec8e5ae370bd8f69ddea16ed34dab9cda9b43a44a58fb11
`

var goodParsed = &Image{
	Kind: KindKernel, Kernel: "vmlinuz", KernelSHA256: "51349501a3d1ff83836437d2b365fd2d57f2feb8642d315e5181dec23d4c3275",
	Initrd: "boot/initrd.img", InitrdSHA256: "3fd3faa76205e247a6d8e9a0a5ae82a634e532aa62b75ceb536baa0ad0b7a860",
	Cmdline: "console=ttyS0 quiet", KernelRelease: "6.1.0-56-cloud-amd64", Recipe: 1,
	Inputs: []Input{
		{Package: "busybox-static", Version: "1:1.35.0-4+deb12u1+b1", Architecture: "amd64"},
		{Package: "linux-image-6.1.0-56-cloud-amd64", Version: "6.1.192-2"},
	},
	InputsHash: "sha256:3d74c468018e71c56ec8e5ae370bd8f69ddea16ed34dab9cda9b43a44a58fb11",
}

const goodDiskImage = `kind: disk
kernel: vmlinuz
initrd: initrd.img
cmdline: console=ttyS0 quiet
disk: rootfs.qcow2
disk_sha256: 77aa0f3b7f0d1f6b0ad3e3d4f2b55c3b3c8b0ad9e1f1c7c0a6a3b0d5f2e4c1a9
disk_format: qcow2
`

// A disk image: with a kernel (the root on the disk) or alone (its own
// boot loader).
func TestParseDiskImage(t *testing.T) {
	img, err := Parse("image.yaml", []byte(goodDiskImage))
	if err != nil {
		t.Fatal(err)
	}
	want := &Image{Kind: KindDisk, Kernel: "vmlinuz", Initrd: "initrd.img", Cmdline: "console=ttyS0 quiet", Disk: "rootfs.qcow2",
		DiskSHA256: "77aa0f3b7f0d1f6b0ad3e3d4f2b55c3b3c8b0ad9e1f1c7c0a6a3b0d5f2e4c1a9", DiskFormat: FormatQCOW2}
	if diff := cmp.Diff(want, img); diff != "" {
		t.Errorf("Parse (-want +got):\n%s", diff)
	}
	text, err := img.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if back, err := Parse("again.yaml", text); err != nil || !cmp.Equal(img, back) {
		t.Errorf("Parse(Marshal()) = %+v, %v\n%s", back, err, text)
	}
	alone, err := Parse("alone.yaml", []byte("kind: disk\ndisk: base.qcow2\n"))
	if err != nil || alone.KernelPath() != "" || alone.Disk != "base.qcow2" {
		t.Errorf("a disk image without a kernel: %+v, %v", alone, err)
	}
	// The agent's keys: the root on the VM's disk when the image's
	// kernel boots it; nothing of the kind for a kernel image.
	line, err := img.GuestCmdline(Guest{Hostname: "vm-1"})
	if err != nil || line != "console=ttyS0 quiet metasched.root=/dev/vda metasched.hostname=vm-1" {
		t.Errorf("GuestCmdline of a disk image = %q, %v", line, err)
	}
	line, err = goodParsed.GuestCmdline(Guest{})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(line, KeyRoot) {
		t.Errorf("GuestCmdline of a kernel image = %q", line)
	}
}

// A cloud image: contextualized by cloud-init, its own command line
// (naming its root) with nothing of the agent's; a bare qcow2 file is one.
func TestCloudImage(t *testing.T) {
	img, err := Parse("image.yaml", []byte("kind: disk\ndisk: rootfs.qcow2\nkernel: vmlinuz\n"+
		"cmdline: root=/dev/vda ro metasched.note=x\ncontextualization: cloud-init\n"))
	if err != nil || !img.CloudInit() || img.Cmdline != "root=/dev/vda ro metasched.note=x" {
		t.Fatalf("a cloud image: %+v, %v", img, err)
	}
	text, err := img.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if back, err := Parse("again.yaml", text); err != nil || !cmp.Equal(img, back) {
		t.Errorf("Parse(Marshal()) = %+v, %v\n%s", back, err, text)
	}
	dir := t.TempDir()
	qcow := filepath.Join(dir, "debian-12-genericcloud-amd64.qcow2")
	if err := os.WriteFile(qcow, append([]byte("QFI\xfb"), make([]byte, 508)...), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := Load(qcow)
	want := &Image{Kind: KindDisk, Disk: filepath.Base(qcow), DiskFormat: FormatQCOW2, Contextualization: ContextCloudInit, Dir: dir}
	if err != nil || !cmp.Equal(got, want) {
		t.Errorf("Load of a qcow2 file: %+v, %v; want %+v", got, err, want)
	}
	// An image's own cloud-config, read and checked by Load.
	imgDir := t.TempDir()
	if err := os.WriteFile(filepath.Join(imgDir, "base.qcow2"), []byte("QFI\xfb"), 0o644); err != nil {
		t.Fatal(err)
	}
	write := func(userData string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(imgDir, "extra.yaml"), []byte(userData), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(imgDir, FileName), []byte("kind: disk\ndisk: base.qcow2\ncontextualization: cloud-init\nuser_data: extra.yaml\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("#cloud-config\nruncmd: [[touch, /run/x]]\n")
	if img, err := Load(imgDir); err != nil || string(img.CloudConfig) != "#cloud-config\nruncmd: [[touch, /run/x]]\n" {
		t.Errorf("Load with user_data: %+v, %v", img, err)
	}
	write("users: [default]\n")
	if _, err := Load(imgDir); err == nil || !strings.Contains(err.Error(), "image.yaml: user_data: must not set users") {
		t.Errorf("Load with user_data that sets users: %v", err)
	}
	if _, err := Parse("f.yaml", []byte("kind: disk\ndisk: d.qcow2\nuser_data: u.yaml\n")); err == nil ||
		!strings.Contains(err.Error(), "f.yaml: user_data: is for contextualization cloud-init") {
		t.Errorf("user_data without cloud-init: %v", err)
	}
	raw := filepath.Join(dir, "disk.img")
	if err := os.WriteFile(raw, make([]byte, 512), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(raw); err == nil || !strings.Contains(err.Error(), "not a qcow2 disk: an image is a directory with image.yaml, or a cloud image's qcow2 file") {
		t.Errorf("Load of a raw file: %v", err)
	}
}

func TestParseImage(t *testing.T) {
	img, err := Parse("image.yaml", []byte(goodImage))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(goodParsed, img); diff != "" {
		t.Errorf("Parse (-want +got):\n%s", diff)
	}
	// Marshal and Parse give it back; so does the JSON form.
	text, err := img.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	back, err := Parse("again.yaml", text)
	if err != nil {
		t.Fatalf("Parse(Marshal()): %v\n%s", err, text)
	}
	if diff := cmp.Diff(img, back); diff != "" {
		t.Errorf("Parse(Marshal()) (-want +got):\n%s", diff)
	}
	minimal, err := Parse("min.json", []byte(`{"kind": "kernel", "kernel": "k"}`))
	if err != nil || minimal.Kernel != "k" || minimal.InitrdPath() != "" {
		t.Errorf("minimal image: %+v, %v", minimal, err)
	}
}

// badImages are image files with problems, and the problems, each
// naming its field. They seed FuzzParse.
var badImages = []struct {
	name, text string
	want       []string
}{
	{"empty", "", []string{"f.yaml: empty document"}},
	{"not a mapping", "- kernel\n", []string{"f.yaml: must be a mapping"}},
	{"nothing", "{}", []string{"f.yaml: kind: missing required field", "f.yaml: kernel: missing required field"}},
	{"unknown field and kind", "kind: iso\nkernel: k\nbootloader: grub\n", []string{
		`f.yaml: kind: must be "kernel" (direct kernel boot) or "disk" (a qcow2 disk), not "iso"`, "f.yaml: bootloader: unknown field"}},
	{"disk fields of a kernel image", "kind: kernel\nkernel: k\ndisk: a.qcow2\ndisk_sha256: x\ndisk_format: qcow2\n", []string{
		"f.yaml: disk: is only for kind disk",
		"f.yaml: disk_sha256: is only for kind disk",
		`f.yaml: disk_sha256: must be 64 lowercase hex digits (a SHA-256), not "x"`,
		"f.yaml: disk_format: is only for kind disk"}},
	{"disk without its disk", "kind: disk\nkernel: k\n", []string{"f.yaml: disk: missing required field"}},
	{"disk format and path", "kind: disk\ndisk: ../base.img\ndisk_format: raw\n", []string{
		`f.yaml: disk: must be a clean path inside the image's directory, not "../base.img"`,
		`f.yaml: disk_format: must be "qcow2", not "raw"`}},
	{"disk boot fields without kernel", "kind: disk\ndisk: d.qcow2\ninitrd: i\ncmdline: quiet\nkernel_release: 6.1.0\n", []string{
		"f.yaml: initrd: needs kernel (a disk image without one boots with its own boot loader)",
		"f.yaml: cmdline: needs kernel (a disk image without one boots with its own boot loader)",
		"f.yaml: kernel_release: needs kernel (a disk image without one boots with its own boot loader)"}},
	{"duplicate", "kind: kernel\nkernel: a\nkernel: b\n", []string{"f.yaml: kernel: duplicate field"}},
	{"contextualization", "kind: disk\ndisk: d.qcow2\ncontextualization: ignition\n", []string{
		`f.yaml: contextualization: must be "metasched" (the bundled init reads the kernel command line) or "cloud-init" (a NoCloud seed), not "ignition"`}},
	{"cloud-init kernel image", "kind: kernel\nkernel: k\ncontextualization: cloud-init\n", []string{
		"f.yaml: contextualization: cloud-init is for kind disk (a cloud image's disk)"}},
	{"paths", "kind: kernel\nkernel: /boot/vmlinuz\ninitrd: ../initrd\n", []string{
		`f.yaml: kernel: must be a clean path inside the image's directory, not "/boot/vmlinuz"`,
		`f.yaml: initrd: must be a clean path inside the image's directory, not "../initrd"`}},
	{"unclean path", "kind: kernel\nkernel: a//b\ninitrd: \"\"\n", []string{
		`f.yaml: kernel: must be a clean path inside the image's directory, not "a//b"`,
		"f.yaml: initrd: must not be empty"}},
	{"control character", "kind: kernel\nkernel: \"a\\tb\"\n", []string{`f.yaml: kernel: "a\tb" has control characters or is not UTF-8`}},
	{"long path", "kind: kernel\nkernel: " + strings.Repeat("k", 256) + "\n", []string{"f.yaml: kernel: must be at most 255 bytes, not 256"}},
	{"types", "kind: kernel\nkernel: 7\ncmdline: [a]\nrecipe: one\ninputs: x\n", []string{
		"f.yaml: kernel: must be a string", "f.yaml: cmdline: must be a string",
		"f.yaml: recipe: must be a number", "f.yaml: inputs: must be a list"}},
	{"sums", "kind: kernel\nkernel: k\nkernel_sha256: ABC\ninitrd_sha256: \"" + strings.Repeat("0", 64) + "\"\n", []string{
		`f.yaml: kernel_sha256: must be 64 lowercase hex digits (a SHA-256), not "ABC"`,
		"f.yaml: initrd_sha256: given without initrd"}},
	{"cmdline", "kind: kernel\nkernel: k\ncmdline: \"console=ttyS0\\nquiet\"\n", []string{
		"f.yaml: cmdline: character U+000A at byte 13 is not allowed (no control characters)"}},
	{"cmdline reserved", "kind: kernel\nkernel: k\ncmdline: quiet metasched.hostname=x\n", []string{
		"f.yaml: cmdline: must not set metasched.hostname: the metasched. keys are the agent's"}},
	{"cmdline long", "kind: kernel\nkernel: k\ncmdline: " + strings.Repeat("q", 513) + "\n", []string{
		"f.yaml: cmdline: must be at most 512 bytes, not 513"}},
	{"release and recipe", "kind: kernel\nkernel: k\nkernel_release: 6.1 x\nrecipe: 0\n", []string{
		`f.yaml: kernel_release: must be 1 to 64 printable ASCII characters without spaces, not "6.1 x"`,
		"f.yaml: recipe: must be >= 1, not 0"}},
	{"inputs", `kind: kernel
kernel: k
inputs:
  - {package: Busybox, version: "1.0"}
  - {package: libc6, version: "not a version", architecture: AMD64}
  - {package: libc6, version: "2.36"}
  - {version: "1", extra: 2}
  - 7
inputs_hash: md5:abc
`, []string{
		`f.yaml: inputs[0].package: "Busybox" is not a Debian package name`,
		`f.yaml: inputs[1].version: "not a version" is not a Debian version`,
		`f.yaml: inputs[1].architecture: "AMD64" is not a Debian architecture`,
		"f.yaml: inputs[2].package: libc6 is listed twice (also inputs[1])",
		"f.yaml: inputs[3].package: missing required field",
		"f.yaml: inputs[3].extra: unknown field",
		"f.yaml: inputs[4]: must be a mapping",
		`f.yaml: inputs_hash: must be sha256: and 64 lowercase hex digits, not "md5:abc"`}},
}

func TestParseImageErrors(t *testing.T) {
	for _, tc := range badImages {
		t.Run(tc.name, func(t *testing.T) {
			img, err := Parse("f.yaml", []byte(tc.text))
			if err == nil {
				t.Fatalf("Parse = %+v, want an error", img)
			}
			if img != nil {
				t.Errorf("Parse returned an image with the error")
			}
			if diff := cmp.Diff(tc.want, strings.Split(err.Error(), "\n")); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}

// Load finds the files the image file names, and Verify their sums.
func TestLoadAndVerify(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(FileName, goodImage)
	_, err := Load(dir)
	file := filepath.Join(dir, FileName)
	want := file + ": kernel: stat " + filepath.Join(dir, "vmlinuz") + ": no such file or directory\n" +
		file + ": initrd: stat " + filepath.Join(dir, "boot/initrd.img") + ": no such file or directory"
	if err == nil || err.Error() != want {
		t.Errorf("Load without the files: %v, want\n%s", err, want)
	}
	write("vmlinuz", "kernel")
	write("boot/initrd.img", "initrd")
	img, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if img.KernelPath() != filepath.Join(dir, "vmlinuz") || img.InitrdPath() != filepath.Join(dir, "boot/initrd.img") {
		t.Errorf("paths %s %s", img.KernelPath(), img.InitrdPath())
	}
	err = img.Verify()
	if err == nil || !strings.Contains(err.Error(), "kernel: "+img.KernelPath()+" has SHA-256 ") ||
		!strings.Contains(err.Error(), "initrd: "+img.InitrdPath()+" has SHA-256 ") {
		t.Errorf("Verify of files with other sums: %v", err)
	}
	img.KernelSHA256, img.InitrdSHA256 = sha("kernel"), sha("initrd")
	if err := img.Verify(); err != nil {
		t.Errorf("Verify: %v", err)
	}
	if _, err := Load(t.TempDir()); err == nil || !strings.Contains(err.Error(), "no such file") {
		t.Errorf("Load of an empty directory: %v", err)
	}
}

// FuzzParse: an image file is refused with every problem naming the file
// (and a field, or the line of a syntax error), and nothing returned; or
// it is accepted, and its own text gives it back.
func FuzzParse(f *testing.F) {
	f.Add(goodImage)
	f.Add(goodDiskImage)
	for _, tc := range badImages {
		f.Add(tc.text)
	}
	f.Fuzz(func(t *testing.T, text string) {
		img, err := Parse("f.yaml", []byte(text))
		if err != nil {
			if img != nil {
				t.Fatalf("an image with the error %v", err)
			}
			for _, line := range strings.Split(err.Error(), "\n") {
				if !strings.HasPrefix(line, "f.yaml: ") {
					t.Fatalf("problem %q does not name the file", line)
				}
			}
			return
		}
		switch {
		case img.Kind == KindKernel && (checkRelPath(img.Kernel) != "" || img.Disk != "" || img.DiskFormat != "" || img.DiskSHA256 != ""),
			img.Kind == KindDisk && (checkRelPath(img.Disk) != "" || img.Kernel != "" && checkRelPath(img.Kernel) != "" ||
				img.Kernel == "" && (img.Initrd != "" || img.Cmdline != "") || img.DiskFormat != "" && img.DiskFormat != FormatQCOW2),
			img.Kind != KindKernel && img.Kind != KindDisk, len(img.Cmdline) > MaxBaseCmdline:
			t.Fatalf("accepted %+v", img)
		}
		out, err := img.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		back, err := Parse("f.yaml", out)
		if err != nil {
			t.Fatalf("Parse(Marshal()): %v\n%s", err, out)
		}
		if diff := cmp.Diff(img, back); diff != "" {
			t.Fatalf("Parse(Marshal()) (-want +got):\n%s", diff)
		}
	})
}

func sha(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

// CopyTo copies an image whole (its sums kept and true), or with files
// replaced (its sums dropped); it refuses to replace a file it has not.
func TestCopyTo(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "boot"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "vmlinuz"), []byte("kernel"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "boot/initrd.img"), []byte("initrd"), 0o644); err != nil {
		t.Fatal(err)
	}
	img := &Image{Kind: "kernel", Dir: dir, Kernel: "vmlinuz", Initrd: "boot/initrd.img", KernelSHA256: sha("kernel"), InitrdSHA256: sha("initrd")}
	c, err := img.CopyTo(filepath.Join(t.TempDir(), "copy"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Verify(); err != nil || c.KernelSHA256 != img.KernelSHA256 || c.Initrd != "initrd.img" {
		t.Errorf("whole copy %+v: %v", c, err)
	}
	c, err = img.CopyTo(filepath.Join(t.TempDir(), "junk"), map[string][]byte{"vmlinuz": []byte("junk")})
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(c.KernelPath())
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != "junk" || c.KernelSHA256 != "" || c.InitrdSHA256 != "" {
		t.Errorf("copy with a junk kernel: %+v, kernel %q", c, got)
	}
	if _, err := img.CopyTo(t.TempDir(), map[string][]byte{"bzImage": nil}); err == nil || !strings.Contains(err.Error(), `no file "bzImage"`) {
		t.Errorf("replace a file the copy has not: %v", err)
	}
}

// Load finds a disk image's disk, and Verify checks its sum; CopyTo
// copies it.
func TestLoadAndVerifyDisk(t *testing.T) {
	dir := t.TempDir()
	text := "kind: disk\ndisk: rootfs.qcow2\ndisk_sha256: " + sha("disk") + "\n"
	if err := os.WriteFile(filepath.Join(dir, FileName), []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(dir); err == nil || !strings.Contains(err.Error(), "disk: stat "+filepath.Join(dir, "rootfs.qcow2")) {
		t.Errorf("Load without the disk: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "rootfs.qcow2"), []byte("changed"), 0o644); err != nil {
		t.Fatal(err)
	}
	img, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := img.Verify(); err == nil || !strings.Contains(err.Error(), "disk: "+img.DiskPath()+" has SHA-256 "+sha("changed")) {
		t.Errorf("Verify of a changed disk: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "rootfs.qcow2"), []byte("disk"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := img.Verify(); err != nil {
		t.Errorf("Verify: %v", err)
	}
	c, err := img.CopyTo(filepath.Join(t.TempDir(), "copy"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Verify(); err != nil || c.Kernel != "" || c.DiskSHA256 != sha("disk") {
		t.Errorf("copy %+v: %v", c, err)
	}
}
