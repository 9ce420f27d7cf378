package image

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// lddObjects lists what ldd (ld.so itself, with its cache) loads for a
// program: the interpreter and the libraries, as paths, in ldd's order
// (the vDSO is left out: it is in the kernel).
func lddObjects(t *testing.T, program string) []string {
	t.Helper()
	out, err := exec.Command("ldd", program).CombinedOutput()
	if err != nil {
		t.Fatalf("ldd %s: %v\n%s", program, err, out)
	}
	var paths []string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		line = strings.TrimSpace(line)
		if _, after, ok := strings.Cut(line, "=> "); ok {
			line = after
		}
		p, _, _ := strings.Cut(line, " (")
		if strings.HasPrefix(p, "/") {
			paths = append(paths, p)
		}
	}
	return paths
}

// The closure of the host's programs is what ld.so loads for them, as
// ldd reports it: the same interpreter and libraries, found at the same
// paths. (ldd prints the interpreter where ld.so maps it; the closure
// puts it first.)
func TestClosureAgreesWithLdd(t *testing.T) {
	r, err := newResolver("/")
	if err != nil {
		t.Fatal(err)
	}
	for _, program := range []string{QemuGAPath, "/usr/bin/ls", "/usr/bin/ssh"} {
		if _, err := os.Stat(program); err != nil {
			t.Fatalf("%v (Debian packages qemu-guest-agent, coreutils, openssh-client)", err)
		}
		objs, err := r.closure(program)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, o := range objs {
			got = append(got, o.path)
		}
		want := lddObjects(t, program)
		if diff := cmp.Diff(sorted(want), sorted(got)); diff != "" {
			t.Errorf("%s: closure against ldd (-ldd +closure):\n%s", program, diff)
		}
		if len(got) == 0 || got[0] != "/lib64/ld-linux-x86-64.so.2" {
			t.Errorf("%s: closure starts with %v, want the interpreter", program, got)
		}
	}
}

func sorted(s []string) []string {
	c := append([]string(nil), s...)
	for i := range c {
		for j := i + 1; j < len(c); j++ {
			if c[j] < c[i] {
				c[i], c[j] = c[j], c[i]
			}
		}
	}
	return c
}

// A static program needs nothing.
func TestClosureStatic(t *testing.T) {
	r, err := newResolver("/")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(BusyboxPath); err != nil {
		t.Fatalf("%v (Debian package busybox-static)", err)
	}
	objs, err := r.closure(BusyboxPath)
	if err != nil || len(objs) != 0 {
		t.Errorf("closure of the static busybox = %v, %v; want nothing", objs, err)
	}
}

// ld.so.conf is read in order, with its includes (sorted, relative to
// the file's directory), comments, the old DIR=TYPE form and hwcap lines;
// a library missing from every directory is an error naming them all.
func TestResolverConf(t *testing.T) {
	root := t.TempDir()
	write := func(name, text string) {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("etc/ld.so.conf", "# top\n/opt/a/lib # first\ninclude ld.so.conf.d/*.conf\nhwcap 0 nosegneg\n/opt/z=libc6\n")
	write("etc/ld.so.conf.d/b.conf", "/opt/b\n/opt/a/lib\n")
	write("etc/ld.so.conf.d/a.conf", "/opt/c\ninclude /etc/ld.so.conf\n")
	r, err := newResolver(root)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"/opt/a/lib", "/opt/c", "/opt/b", "/opt/z"}, r.confDirs); diff != "" {
		t.Errorf("directories (-want +got):\n%s", diff)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	info, err := readELF(self)
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = r.find("libnothing.so.1", &elfInfo{}, nil, []string{"/x"}, info)
	want := "not found in /opt/a/lib:/opt/c:/opt/b:/opt/z:" + strings.Join(guestLibDirs, ":")
	if err == nil || err.Error() != want {
		t.Errorf("missing library: %v, want %q", err, want)
	}
}

// The guest's ld.so has no cache: a library found elsewhere than in its
// system directories is refused.
func TestGuestPath(t *testing.T) {
	for _, tc := range []struct {
		path, want string
	}{
		{"/lib/x86_64-linux-gnu/libc.so.6", ""},
		{"/lib64/ld-linux-x86-64.so.2", ""},
		{"/usr/local/lib/libx.so.1", "/usr/local/lib/libx.so.1 is not in a directory the guest's ld.so searches without a cache"},
	} {
		got, err := guestPath(sharedObject{path: tc.path}, "/lib64/ld-linux-x86-64.so.2")
		switch {
		case tc.want == "" && (err != nil || got != tc.path):
			t.Errorf("%s: %q, %v", tc.path, got, err)
		case tc.want != "" && (err == nil || !strings.HasPrefix(err.Error(), tc.want)):
			t.Errorf("%s: err = %v, want %q", tc.path, err, tc.want)
		}
	}
}
