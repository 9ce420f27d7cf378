package image

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// sampleArchive has every kind of entry, and names and contents of every
// length modulo 4 (each pads differently).
func sampleArchive(t *testing.T, reverse bool) *archive {
	t.Helper()
	type op func(a *archive) error
	ops := []op{
		func(a *archive) error { return a.file("/init", 0o755, []byte("#!/bin/sh\necho hi\n")) },
		func(a *archive) error { return a.file("etc/a", 0o644, []byte("1")) },
		func(a *archive) error { return a.file("etc/ab", 0o600, []byte("12")) },
		func(a *archive) error { return a.file("etc/abc", 0o644, []byte("123")) },
		func(a *archive) error { return a.file("etc/abcd", 0o644, []byte("1234")) },
		func(a *archive) error { return a.file("etc/empty", 0o644, nil) },
		func(a *archive) error { return a.symlink("bin/sh", "busybox") },
		func(a *archive) error { return a.file("bin/busybox", 0o755, bytes.Repeat([]byte{0, 1, 2}, 1000)) },
		func(a *archive) error { return a.dir("tmp", 0o1777) },
		func(a *archive) error { return a.symlink("var/run", "../run") },
		func(a *archive) error { return a.charDev("dev/console", 0o600, 5, 1) },
		func(a *archive) error { return a.dir("dev", 0o755) },
	}
	a := newArchive()
	for i := range ops {
		if reverse {
			i = len(ops) - 1 - i
		}
		if err := ops[i](a); err != nil {
			t.Fatal(err)
		}
	}
	return a
}

func archiveBytes(t *testing.T, a *archive) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := a.writeTo(&b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// The same tree gives the same bytes, whatever the order it was put
// together in.
func TestArchiveDeterministic(t *testing.T) {
	one, two := archiveBytes(t, sampleArchive(t, false)), archiveBytes(t, sampleArchive(t, true))
	if !bytes.Equal(one, two) {
		t.Fatalf("archives of one tree differ (%d and %d bytes)", len(one), len(two))
	}
	if len(one)%4 != 0 {
		t.Errorf("archive of %d bytes is not padded to 4", len(one))
	}
	if !bytes.HasPrefix(one, []byte("070701")) {
		t.Errorf("archive starts with %q, want the newc magic", one[:6])
	}
}

func TestArchiveErrors(t *testing.T) {
	a := newArchive()
	if err := a.file("etc/x", 0o644, nil); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"twice", a.file("/etc/x", 0o644, []byte("y")), "initramfs: etc/x given twice"},
		{"file over a dir", a.file("etc", 0o644, nil), "initramfs: etc given twice"},
		{"dir over a file", a.dir("etc/x", 0o755), "initramfs: etc/x given twice"},
		{"root", a.file("/", 0o644, nil), `initramfs: bad path "/"`},
		{"dot dot", a.file("../..", 0o644, nil), `initramfs: bad path "../.."`},
		{"nul", a.file("a\x00b", 0o644, nil), `initramfs: bad path "a\x00b"`},
		{"link without target", a.symlink("bin/x", ""), "initramfs: symbolic link bin/x has no target"},
	} {
		if tc.err == nil || tc.err.Error() != tc.want {
			t.Errorf("%s: err = %v, want %q", tc.name, tc.err, tc.want)
		}
	}
	// A directory given twice is fine.
	if err := a.dir("etc", 0o755); err != nil {
		t.Errorf("directory given twice: %v", err)
	}
}

// GNU cpio reads the archive back: the listing shows every entry with
// its type, mode, owner, size and link target, and extracting it gives
// the files' contents.
func TestArchiveReadByCpio(t *testing.T) {
	cpio, err := exec.LookPath("cpio")
	if err != nil {
		t.Fatal("the cpio tool is missing (Debian package cpio; make test installs it)")
	}
	data := archiveBytes(t, sampleArchive(t, false))
	dir := t.TempDir()
	arc := filepath.Join(dir, "a.cpio")
	if err := os.WriteFile(arc, data, 0o644); err != nil {
		t.Fatal(err)
	}

	list := exec.Command(cpio, "-itv", "--quiet", "--numeric-uid-gid", "-F", arc)
	out, err := list.CombinedOutput()
	if err != nil {
		t.Fatalf("cpio -itv: %v\n%s", err, out)
	}
	var got []string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		// mode links uid gid size-or-device date... name [-> target]
		f := strings.Fields(line)
		if len(f) < 9 {
			t.Fatalf("cpio listing line %q", line)
		}
		size := f[4]
		nameAt := 8
		if strings.HasSuffix(f[4], ",") { // a device: "5, 1"
			size, nameAt = f[4]+f[5], 9
		}
		got = append(got, strings.Join(append([]string{f[0], f[1], f[2], f[3], size}, f[nameAt:]...), " "))
	}
	want := []string{
		"drwxr-xr-x 2 0 0 0 bin",
		"-rwxr-xr-x 1 0 0 3000 bin/busybox",
		"lrwxrwxrwx 1 0 0 7 bin/sh -> busybox",
		"drwxr-xr-x 2 0 0 0 dev",
		"crw------- 1 0 0 5,1 dev/console",
		"drwxr-xr-x 2 0 0 0 etc",
		"-rw-r--r-- 1 0 0 1 etc/a",
		"-rw------- 1 0 0 2 etc/ab",
		"-rw-r--r-- 1 0 0 3 etc/abc",
		"-rw-r--r-- 1 0 0 4 etc/abcd",
		"-rw-r--r-- 1 0 0 0 etc/empty",
		"-rwxr-xr-x 1 0 0 18 init",
		"drwxrwxrwt 2 0 0 0 tmp",
		"drwxr-xr-x 2 0 0 0 var",
		"lrwxrwxrwx 1 0 0 6 var/run -> ../run",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("cpio -itv (-want +got):\n%s", diff)
	}

	// Extract everything but the device (which needs mknod).
	root := filepath.Join(dir, "root")
	if err := os.Mkdir(root, 0o755); err != nil {
		t.Fatal(err)
	}
	ext := exec.Command(cpio, "-id", "--quiet", "--no-absolute-filenames", "-F", arc, "-f", "dev/console")
	ext.Dir = root
	if out, err := ext.CombinedOutput(); err != nil {
		t.Fatalf("cpio -id: %v\n%s", err, out)
	}
	for name, want := range map[string]string{
		"init":        "#!/bin/sh\necho hi\n",
		"etc/abcd":    "1234",
		"etc/empty":   "",
		"bin/busybox": strings.Repeat("\x00\x01\x02", 1000),
	} {
		b, err := os.ReadFile(filepath.Join(root, name))
		if err != nil || string(b) != want {
			t.Errorf("%s: read %d bytes (%v), want %d", name, len(b), err, len(want))
		}
	}
	if target, err := os.Readlink(filepath.Join(root, "bin/sh")); err != nil || target != "busybox" {
		t.Errorf("bin/sh -> %q (%v), want busybox", target, err)
	}
}
