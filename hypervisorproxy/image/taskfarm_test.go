package image

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/metasched/metasched/internal/taskfarmtest"
)

// The image takes only a static x86-64 task farm; every other file is
// refused, saying what is wrong and how to build it. The binary's bytes
// are in the image's key.
func TestReadTaskFarm(t *testing.T) {
	tf := taskfarmtest.Binary(t)
	data, err := ReadTaskFarm(tf)
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(tf)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(data, want) {
		t.Error("ReadTaskFarm did not return the file's bytes")
	}
	text := filepath.Join(t.TempDir(), "taskfarm")
	if err := os.WriteFile(text, []byte("#!/bin/sh\necho not a task farm\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ path, want string }{
		{"", "no path given: " + TaskFarmBuild},
		{filepath.Join(t.TempDir(), "none"), "no such file or directory: " + TaskFarmBuild},
		{t.TempDir(), "is not a regular file"},
		{text, text + " is not an ELF executable"},
		{QemuGAPath, QemuGAPath + " is dynamically linked (its interpreter is /lib64/ld-linux-x86-64.so.2), the guest needs it static: " + TaskFarmBuild},
	} {
		_, err := ReadTaskFarm(c.path)
		if !errors.Is(err, ErrTaskFarm) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ReadTaskFarm(%q) = %v, want ErrTaskFarm saying %q", c.path, err, c.want)
		}
	}
	in := []Input{{Package: "busybox-static", Version: "1:1.35.0-4+b3", Architecture: "amd64"}}
	if inputsKey(KindKernel, in, []byte("one")) == inputsKey(KindKernel, in, []byte("two")) {
		t.Error("two task farms give the same image key")
	}
	if _, err := Build(t.Context(), Options{TaskFarm: text}); !errors.Is(err, ErrTaskFarm) || !strings.HasPrefix(err.Error(), "image build: taskfarm: ") {
		t.Errorf("Build with a script as task farm: %v", err)
	}
}
