package image

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"

	"github.com/metasched/metasched/hypervisorproxy/cloudinit"
	"github.com/metasched/metasched/internal/yamlx"
)

// FileName is the image file in an image's directory.
const FileName = "image.yaml"

// Kinds of image.
const (
	// KindKernel is an image booted directly from a kernel and an initrd.
	KindKernel = "kernel"
	// KindDisk is a disk image (qcow2) each VM boots from its own
	// copy-on-write overlay; with a kernel, the disk is the root file
	// system of a direct kernel boot, without one its own boot loader
	// boots it.
	KindDisk = "disk"
)

// How a guest learns who it is (Image.Contextualization).
const (
	// ContextMetasched: the bundled init reads the metasched.* keys of the
	// kernel command line (the default).
	ContextMetasched = "metasched"
	// ContextCloudInit: cloud-init reads a NoCloud seed the agent makes
	// for each VM (a disk image with cloud-init and qemu-guest-agent).
	ContextCloudInit = "cloud-init"
)

// FormatQCOW2 is the one format of a disk image.
const FormatQCOW2 = "qcow2"

// RootDevice is the guest's device of a disk image's overlay (its first
// virtio disk, the domain's target vda): the key KeyRoot tells the
// bundled init to switch to the root file system on it.
const RootDevice = "/dev/vda"

// Bounds of an image file.
const (
	// MaxCmdline is the longest kernel command line Linux takes on x86
	// (COMMAND_LINE_SIZE 2048, its NUL included): the image's own and
	// the metasched keys together.
	MaxCmdline = 2047
	// MaxBaseCmdline bounds the image's own command line, leaving the
	// rest to the metasched keys.
	MaxBaseCmdline = 512
	maxFileName    = 255
	maxRelease     = 64 // uname's release field holds 64 bytes and a NUL
	maxInputs      = 1000
	maxLabel       = 256
)

// Image is an image file: what the image is, where its files are (relative
// to the file's directory) and what it was built from.
//
//	kind: kernel                     # direct kernel boot, or disk: a qcow2 disk
//	kernel: vmlinuz                  # relative to this file's directory; optional for kind disk
//	kernel_sha256: 5f1c…             # optional: checked by Verify
//	initrd: initrd.img               # optional
//	initrd_sha256: 9a0b…             # optional
//	cmdline: console=ttyS0 quiet     # optional; the agent appends the metasched.* keys
//	kernel_release: 6.1.0-56-cloud-amd64   # optional: what uname -r says in the guest
//	recipe: 1                        # optional: version of metasched's build recipe
//	inputs:                          # optional: the Debian packages it was built from
//	  - {package: linux-image-6.1.0-56-cloud-amd64, version: 6.1.192-2, architecture: amd64}
//	inputs_hash: sha256:…            # optional: the hash of the recipe and the inputs (the cache key)
//
// A disk image (kind: disk) also has:
//
//	disk: rootfs.qcow2               # the base every VM's overlay is backed by
//	disk_sha256: 77aa…               # optional: checked by Verify
//	disk_format: qcow2               # optional: the only format
//	contextualization: cloud-init    # optional: metasched (the default) or cloud-init
//
// and its kernel, initrd and cmdline, when it has them, boot the guest
// with its root file system on the disk (the agent adds
// metasched.root=/dev/vda to the command line of a metasched image; a
// cloud-init image's command line names its root itself).
type Image struct {
	Kind          string  `yaml:"kind"`
	Kernel        string  `yaml:"kernel,omitempty"`
	KernelSHA256  string  `yaml:"kernel_sha256,omitempty"`
	Initrd        string  `yaml:"initrd,omitempty"`
	InitrdSHA256  string  `yaml:"initrd_sha256,omitempty"`
	Cmdline       string  `yaml:"cmdline,omitempty"`
	KernelRelease string  `yaml:"kernel_release,omitempty"`
	Recipe        int     `yaml:"recipe,omitempty"`
	Inputs        []Input `yaml:"inputs,omitempty"`
	InputsHash    string  `yaml:"inputs_hash,omitempty"`
	Disk          string  `yaml:"disk,omitempty"`
	DiskSHA256    string  `yaml:"disk_sha256,omitempty"`
	DiskFormat    string  `yaml:"disk_format,omitempty"`
	// Contextualization is ContextMetasched ("" too) or ContextCloudInit.
	Contextualization string `yaml:"contextualization,omitempty"`
	// UserData is a cloud-init image's own cloud-config file (relative),
	// merged into every VM's user-data; CloudConfig is its content, read
	// and checked by Load.
	UserData    string `yaml:"user_data,omitempty"`
	CloudConfig []byte `yaml:"-"`

	// Dir is the image's directory, set by Load; not in the file.
	Dir string `yaml:"-"`
}

// Input is one Debian package an image was built from.
type Input struct {
	Package      string `yaml:"package"`
	Version      string `yaml:"version"`
	Architecture string `yaml:"architecture,omitempty"`
}

// KernelPath is the kernel's absolute path (Dir must be absolute), or ""
// when there is none (a disk image with its own boot loader).
func (img *Image) KernelPath() string {
	if img.Kernel == "" {
		return ""
	}
	return filepath.Join(img.Dir, img.Kernel)
}

// DiskPath is the disk's absolute path, or "" when there is none (a
// kernel image).
func (img *Image) DiskPath() string {
	if img.Disk == "" {
		return ""
	}
	return filepath.Join(img.Dir, img.Disk)
}

// InitrdPath is the initrd's absolute path, or "" when there is none.
func (img *Image) InitrdPath() string {
	if img.Initrd == "" {
		return ""
	}
	return filepath.Join(img.Dir, img.Initrd)
}

var (
	imageFields = []string{"kind", "kernel", "kernel_sha256", "initrd", "initrd_sha256", "cmdline",
		"kernel_release", "recipe", "inputs", "inputs_hash", "disk", "disk_sha256", "disk_format", "contextualization", "user_data"}
	inputFields = []string{"package", "version", "architecture"}

	// Debian policy 5.6.1, 5.6.12; architectures are lowercase names.
	packageRE = regexp.MustCompile(`^[a-z0-9][a-z0-9+.-]+$`)
	versionRE = regexp.MustCompile(`^([0-9]+:)?[0-9][A-Za-z0-9.+~-]*$`)
	archRE    = regexp.MustCompile(`^[a-z0-9][a-z0-9-]*$`)
	hexRE     = regexp.MustCompile(`^[0-9a-f]{64}$`)
)

// Parse decodes an image file strictly: unknown fields, wrong types and
// bad values are errors, every one reported as "FILE: FIELD.PATH:
// problem".
func Parse(file string, data []byte) (*Image, error) {
	d, root, err := yamlx.Parse(file, data)
	if err != nil {
		return nil, err
	}
	top, ok := root.Map(imageFields...)
	if !ok {
		return nil, d.Err()
	}
	img := &Image{}
	if kind, ok := top.Str("kind", true); ok {
		if kind != KindKernel && kind != KindDisk {
			top.Errorf("kind", "must be %q (direct kernel boot) or %q (a qcow2 disk), not %q", KindKernel, KindDisk, clip(kind))
		}
		img.Kind = kind
	}
	relPath := func(key string, required bool) string {
		s, ok := top.Str(key, required)
		if !ok {
			return ""
		}
		if msg := checkRelPath(s); msg != "" {
			top.Errorf(key, "%s", msg)
		}
		return s
	}
	img.Kernel = relPath("kernel", img.Kind != KindDisk)
	img.Initrd = relPath("initrd", false)
	img.Disk = relPath("disk", img.Kind == KindDisk)
	if img.Kind == KindKernel {
		for _, k := range []string{"disk", "disk_sha256", "disk_format"} {
			if top.Has(k) {
				top.Errorf(k, "is only for kind %s", KindDisk)
			}
		}
	}
	if img.Kind == KindDisk && !top.Has("kernel") {
		for _, k := range []string{"initrd", "initrd_sha256", "cmdline", "kernel_sha256", "kernel_release"} {
			if top.Has(k) {
				top.Errorf(k, "needs kernel (a disk image without one boots with its own boot loader)")
			}
		}
	}
	if s, ok := top.Str("contextualization", false); ok {
		switch {
		case s != ContextMetasched && s != ContextCloudInit:
			top.Errorf("contextualization", "must be %q (the bundled init reads the kernel command line) or %q (a NoCloud seed), not %q",
				ContextMetasched, ContextCloudInit, clip(s))
		case s == ContextCloudInit && img.Kind != KindDisk:
			top.Errorf("contextualization", "%s is for kind %s (a cloud image's disk)", ContextCloudInit, KindDisk)
		}
		img.Contextualization = s
	}
	if top.Has("user_data") {
		img.UserData = relPath("user_data", false)
		if img.Contextualization != ContextCloudInit {
			top.Errorf("user_data", "is for contextualization %s", ContextCloudInit)
		}
	}
	if s, ok := top.Str("disk_format", false); ok {
		if s != FormatQCOW2 {
			top.Errorf("disk_format", "must be %q, not %q", FormatQCOW2, clip(s))
		}
		img.DiskFormat = s
	}
	sum := func(key string) string {
		s, ok := top.Str(key, false)
		if ok && !hexRE.MatchString(s) {
			top.Errorf(key, "must be 64 lowercase hex digits (a SHA-256), not %q", clip(s))
		}
		return s
	}
	img.KernelSHA256 = sum("kernel_sha256")
	img.InitrdSHA256 = sum("initrd_sha256")
	img.DiskSHA256 = sum("disk_sha256")
	if top.Has("initrd_sha256") && !top.Has("initrd") {
		top.Errorf("initrd_sha256", "given without initrd")
	}
	if s, ok := top.Str("cmdline", false); ok {
		if msg := checkCmdline(s, MaxBaseCmdline); msg != "" {
			top.Errorf("cmdline", "%s", msg)
		} else if k := reservedKey(s); k != "" && img.Contextualization != ContextCloudInit {
			top.Errorf("cmdline", "must not set %s: the metasched. keys are the agent's", k)
		}
		img.Cmdline = s
	}
	if s, ok := top.Str("kernel_release", false); ok {
		if s == "" || len(s) > maxRelease || strings.IndexFunc(s, func(r rune) bool { return r <= ' ' || r > '~' }) >= 0 {
			top.Errorf("kernel_release", "must be 1 to %d printable ASCII characters without spaces, not %q", maxRelease, clip(s))
		}
		img.KernelRelease = s
	}
	if n, ok := top.Int("recipe", false); ok {
		if n < 1 {
			top.Errorf("recipe", "must be >= 1, not %d", n)
		}
		img.Recipe = n
	}
	if items, ok := top.Seq("inputs", false); ok {
		if len(items) > maxInputs {
			top.Errorf("inputs", "must have at most %d entries, not %d", maxInputs, len(items))
			items = nil
		}
		seen := map[string]int{}
		for i, it := range items {
			m, ok := it.Map(inputFields...)
			if !ok {
				continue
			}
			var in Input
			if s, ok := m.Str("package", true); ok {
				if !packageRE.MatchString(s) || len(s) > maxLabel {
					m.Errorf("package", "%q is not a Debian package name", clip(s))
				} else if j, dup := seen[s]; dup {
					m.Errorf("package", "%s is listed twice (also inputs[%d])", s, j)
				} else {
					seen[s] = i
				}
				in.Package = s
			}
			if s, ok := m.Str("version", true); ok {
				if !versionRE.MatchString(s) || len(s) > maxLabel {
					m.Errorf("version", "%q is not a Debian version", clip(s))
				}
				in.Version = s
			}
			if s, ok := m.Str("architecture", false); ok {
				if !archRE.MatchString(s) || len(s) > maxLabel {
					m.Errorf("architecture", "%q is not a Debian architecture", clip(s))
				}
				in.Architecture = s
			}
			img.Inputs = append(img.Inputs, in)
		}
	}
	if s, ok := top.Str("inputs_hash", false); ok {
		h, found := strings.CutPrefix(s, "sha256:")
		if !found || !hexRE.MatchString(h) {
			top.Errorf("inputs_hash", "must be sha256: and 64 lowercase hex digits, not %q", clip(s))
		}
		img.InputsHash = s
	}
	if err := d.Err(); err != nil {
		return nil, err
	}
	return img, nil
}

// clip shortens a bad value quoted in a message.
func clip(s string) string {
	if len(s) <= 80 {
		return s
	}
	i := 80
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i] + "…"
}

// checkRelPath returns what is wrong with a path relative to the image's
// directory, or "".
func checkRelPath(s string) string {
	switch {
	case s == "":
		return "must not be empty"
	case len(s) > maxFileName:
		return fmt.Sprintf("must be at most %d bytes, not %d", maxFileName, len(s))
	case !utf8.ValidString(s) || strings.IndexFunc(s, unicode.IsControl) >= 0:
		return fmt.Sprintf("%q has control characters or is not UTF-8", clip(s))
	case !filepath.IsLocal(s) || filepath.Clean(s) != s:
		return fmt.Sprintf("must be a clean path inside the image's directory, not %q", clip(s))
	}
	return ""
}

// checkCmdline returns what is wrong with a kernel command line, or "".
func checkCmdline(s string, max int) string {
	switch {
	case len(s) > max:
		return fmt.Sprintf("must be at most %d bytes, not %d", max, len(s))
	case !utf8.ValidString(s):
		return "must be valid UTF-8"
	}
	for i, r := range s {
		if unicode.IsControl(r) {
			return fmt.Sprintf("character %U at byte %d is not allowed (no control characters)", r, i)
		}
	}
	return ""
}

// reservedKey returns the first metasched. key of a command line, or "".
func reservedKey(cmdline string) string {
	for _, w := range strings.Fields(cmdline) {
		if strings.HasPrefix(w, keyPrefix) {
			k, _, _ := strings.Cut(w, "=")
			return k
		}
	}
	return ""
}

// Marshal returns the image file's text.
func (img *Image) Marshal() ([]byte, error) {
	var b bytes.Buffer
	b.WriteString("# A metasched guest image (docs/internals/images.md, \"The image file\").\n")
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(img); err != nil {
		return nil, fmt.Errorf("image file: %w", err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("image file: %w", err)
	}
	return b.Bytes(), nil
}

// Load reads DIR/image.yaml and checks that the files it names are
// there. Dir of the result is DIR made absolute. A qcow2 file given
// instead of a directory is a cloud image: a disk image booted by its own
// boot loader and contextualized by cloud-init (LoadCloudImage).
func Load(dir string) (*Image, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("image %s: %w", dir, err)
	}
	if fi, err := os.Stat(abs); err == nil && fi.Mode().IsRegular() {
		return LoadCloudImage(abs)
	}
	file := filepath.Join(abs, FileName)
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("image %s: %w", dir, err)
	}
	img, err := Parse(file, data)
	if err != nil {
		return nil, err
	}
	img.Dir = abs
	var errs []error
	for _, f := range []struct{ key, path string }{{"kernel", img.KernelPath()}, {"initrd", img.InitrdPath()}, {"disk", img.DiskPath()}} {
		if f.path == "" {
			continue
		}
		fi, err := os.Stat(f.path)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("%s: %s: %w", file, f.key, err))
		case !fi.Mode().IsRegular():
			errs = append(errs, fmt.Errorf("%s: %s: %s is not a regular file", file, f.key, f.path))
		}
	}
	if img.UserData != "" {
		data, err := os.ReadFile(filepath.Join(abs, img.UserData))
		if err == nil {
			err = cloudinit.CheckUserData(data)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: user_data: %w", file, err))
		}
		img.CloudConfig = data
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return img, nil
}

// qcow2Magic starts every qcow2 file.
var qcow2Magic = []byte("QFI\xfb")

// LoadCloudImage makes the image of a cloud image's qcow2 file: kind
// disk, booted by its own boot loader, contextualized by cloud-init. A
// file that is not a qcow2 is an error saying what an image is.
func LoadCloudImage(file string) (*Image, error) {
	abs, err := filepath.Abs(file)
	if err != nil {
		return nil, fmt.Errorf("image %s: %w", file, err)
	}
	f, err := os.Open(abs)
	if err != nil {
		return nil, fmt.Errorf("image %s: %w", file, err)
	}
	defer f.Close()
	head := make([]byte, len(qcow2Magic))
	if _, err := io.ReadFull(f, head); err != nil || !bytes.Equal(head, qcow2Magic) {
		return nil, fmt.Errorf("image %s: not a qcow2 disk: an image is a directory with %s, or a cloud image's qcow2 file", file, FileName)
	}
	return &Image{Kind: KindDisk, Disk: filepath.Base(abs), DiskFormat: FormatQCOW2,
		Contextualization: ContextCloudInit, Dir: filepath.Dir(abs)}, nil
}

// CloudInit says the image's guests are contextualized by cloud-init.
func (img *Image) CloudInit() bool { return img.Contextualization == ContextCloudInit }

// Verify checks the kernel's, the initrd's and the disk's SHA-256
// against the image file, when it gives them.
func (img *Image) Verify() error {
	var errs []error
	for _, f := range []struct{ key, path, want string }{
		{"kernel", img.KernelPath(), img.KernelSHA256},
		{"initrd", img.InitrdPath(), img.InitrdSHA256},
		{"disk", img.DiskPath(), img.DiskSHA256},
	} {
		if f.want == "" || f.path == "" {
			continue
		}
		got, err := FileSHA256(f.path)
		if err != nil {
			errs = append(errs, fmt.Errorf("image %s: %s: %w", img.Dir, f.key, err))
		} else if got != f.want {
			errs = append(errs, fmt.Errorf("image %s: %s: %s has SHA-256 %s, the image file says %s", img.Dir, f.key, f.path, got, f.want))
		}
	}
	return errors.Join(errs...)
}

// FileSHA256 is the SHA-256 of a file's content, in hex.
func FileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// CopyTo writes a copy of the image into dir (made if missing): its
// kernel as vmlinuz, its initrd as initrd.img, its disk as rootfs.qcow2
// and its image file, and returns the copy, loaded from dir. replace
// gives other contents to some of the copy's files, by their names there
// (vmlinuz, initrd.img, rootfs.qcow2); a copy with a replaced file has no
// sums (tests make images that do not boot this way).
func (img *Image) CopyTo(dir string, replace map[string][]byte) (*Image, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("copy image: %w", err)
	}
	c := *img
	files := map[string]string{}
	if img.Kernel != "" {
		c.Kernel = "vmlinuz"
		files[c.Kernel] = img.KernelPath()
	}
	if img.Initrd != "" {
		c.Initrd = "initrd.img"
		files[c.Initrd] = img.InitrdPath()
	}
	if img.Disk != "" {
		c.Disk = "rootfs.qcow2"
		files[c.Disk] = img.DiskPath()
	}
	if img.UserData != "" {
		c.UserData = "user-data.yaml"
		files[c.UserData] = filepath.Join(img.Dir, img.UserData)
	}
	for name := range replace {
		if _, ok := files[name]; !ok {
			return nil, fmt.Errorf("copy image: replace: the copy has no file %q", name)
		}
	}
	if len(replace) > 0 {
		c.KernelSHA256, c.InitrdSHA256, c.DiskSHA256 = "", "", ""
	}
	for name, from := range files {
		data, ok := replace[name]
		if !ok {
			var err error
			if data, err = os.ReadFile(from); err != nil {
				return nil, fmt.Errorf("copy image: %w", err)
			}
		}
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			return nil, fmt.Errorf("copy image: %w", err)
		}
	}
	data, err := c.Marshal()
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, FileName), data, 0o644); err != nil {
		return nil, fmt.Errorf("copy image: %w", err)
	}
	return Load(dir)
}
