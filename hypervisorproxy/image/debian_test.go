package image

import (
	"flag"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/metasched/metasched/internal/taskfarmtest"
)

func TestCheckSources(t *testing.T) {
	if err := checkSources(DebianSources); err != nil {
		t.Errorf("the default sources: %v", err)
	}
	for _, c := range []struct{ sources, want string }{
		{"", "image build: sources: no deb line"},
		{"# nothing\n\n", "image build: sources: no deb line"},
		{"deb-src http://deb.debian.org/debian bookworm main\n", `line 1: want "deb http://MIRROR SUITE COMPONENT...", not "deb-src http://deb.debian.org/debian bookworm main"`},
		{"deb http://deb.debian.org/debian bookworm main\ndeb file:/srv/debian bookworm main\n", `line 2: want "deb http://MIRROR SUITE COMPONENT..."`},
		{"deb http://deb.debian.org/debian bookworm\n", `line 1: want`},
	} {
		if err := checkSources(c.sources); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("checkSources(%q) = %v, want %q", c.sources, err, c.want)
		}
	}
}

func TestReleaseDate(t *testing.T) {
	d, ok := releaseDate([]byte("Origin: Debian\nSuite: stable\nDate: Sat, 08 Nov 2025 09:48:51 UTC\nValid-Until: x\n"))
	if !ok || !d.Equal(time.Date(2025, 11, 8, 9, 48, 51, 0, time.UTC)) {
		t.Errorf("releaseDate = %v, %v", d, ok)
	}
	if _, ok := releaseDate([]byte("Origin: Debian\n")); ok {
		t.Error("a Release file without a Date has one")
	}
}

// The Debian image, built from Debian's packages (cached by its inputs in
// the user's cache, as every test that boots it takes it): a cloud-init
// disk image with its own kernel, of the packages the recipe names.
func TestBuildDebian(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a Debian system (a few minutes the first time)")
	}
	tf := taskfarmtest.Binary(t)
	res, err := Build(t.Context(), Options{Kind: BuildDebian, TaskFarm: tf})
	if err != nil {
		t.Fatal(err)
	}
	img := res.Image
	if img.Kind != KindDisk || !img.CloudInit() || img.Cmdline != DebianCmdline || img.KernelRelease == "" || img.DiskSHA256 == "" {
		t.Errorf("the Debian image: %+v", img)
	}
	for _, p := range []string{"cloud-init", "qemu-guest-agent", "openssh-server", "openmpi-bin", "libopenmpi-dev", "systemd-sysv"} {
		if !slices.ContainsFunc(img.Inputs, func(in Input) bool { return in.Package == p }) {
			t.Errorf("the Debian image has no %s", p)
		}
	}
	if err := img.Verify(); err != nil {
		t.Error(err)
	}
	again, err := Build(t.Context(), Options{Kind: BuildDebian, TaskFarm: tf})
	if err != nil || !again.Cached || again.Image.DiskSHA256 != img.DiskSHA256 {
		t.Errorf("a second build: cached %v, %v", again != nil && again.Cached, err)
	}
	if _, err := Build(t.Context(), Options{Kind: BuildDebian, TaskFarm: tf, KernelPackage: "linux-image-amd64"}); err == nil ||
		!strings.Contains(err.Error(), "kernel package: the Debian image takes Debian's linux-image-cloud-amd64") {
		t.Errorf("a Debian build with a kernel package: %v", err)
	}
	if _, err := Build(t.Context(), Options{Kind: BuildDebian, TaskFarm: tf, Sources: "deb ftp://x bookworm main\n"}); err == nil ||
		!strings.Contains(err.Error(), "sources: line 1") {
		t.Errorf("a Debian build with bad sources: %v", err)
	}
}

var debianRebuild = flag.Bool("debian-rebuild", false, "TestBuildDebianReproducible: build the Debian image a second time and compare its bytes (make soak)")

// Two builds of the Debian image from the same inputs give the same
// bytes: its kernel, its initrd and its disk (make soak: a build takes
// minutes).
func TestBuildDebianReproducible(t *testing.T) {
	if !*debianRebuild {
		t.Skip("builds the Debian image twice: make soak (-debian-rebuild)")
	}
	tf := taskfarmtest.Binary(t)
	// The first build's files are kept apart (Out): the rebuild replaces
	// the cache entry, and a difference is to be looked at.
	keep, err := os.MkdirTemp("", "metasched-debian-first-")
	if err != nil {
		t.Fatal(err)
	}
	first, err := Build(t.Context(), Options{Kind: BuildDebian, TaskFarm: tf, Out: keep})
	if err != nil {
		t.Fatal(err)
	}
	a := *first.Image
	again, err := Build(t.Context(), Options{Kind: BuildDebian, TaskFarm: tf, Rebuild: true})
	if err != nil {
		t.Fatal(err)
	}
	b := *again.Image
	if again.Cached || again.Entry != first.Entry {
		t.Fatalf("the rebuild: cached %v, entry %s, want a build into %s", again.Cached, again.Entry, first.Entry)
	}
	for _, f := range []struct{ what, a, b string }{
		{"kernel", a.KernelSHA256, b.KernelSHA256}, {"initrd", a.InitrdSHA256, b.InitrdSHA256}, {"disk", a.DiskSHA256, b.DiskSHA256},
	} {
		if f.a != f.b {
			t.Errorf("the Debian image's %s differs between two builds of key %s: %s (kept in %s), then %s", f.what, a.InputsHash, f.a, keep, f.b)
		}
	}
	if !t.Failed() {
		if err := os.RemoveAll(keep); err != nil {
			t.Error(err)
		}
	}
	if !t.Failed() {
		t.Logf("two builds of %s: the same kernel, initrd and disk (%s)", a.InputsHash, b.DiskSHA256)
	}
}
