package image

import (
	"bytes"
	"debug/elf"
	"errors"
	"fmt"
	"os"
)

// TaskFarmPath is where the guest has the task farm, the program of
// task-farm jobs (cmd/taskfarm).
const TaskFarmPath = "/usr/bin/taskfarm"

// TaskFarmBuild says how to build the task farm the image takes.
const TaskFarmBuild = "build it with make build, or CGO_ENABLED=0 go build -o bin/taskfarm ./cmd/taskfarm"

// maxTaskFarm bounds the task farm binary the build reads.
const maxTaskFarm = 256 << 20

// ErrTaskFarm: the task farm binary is missing or is not one the guest
// can run: a static x86-64 ELF executable (the guest has the libraries of
// qemu-ga only).
var ErrTaskFarm = errors.New("unusable task farm binary")

// ReadTaskFarm reads the task farm binary at path and checks that it is
// a static x86-64 Linux executable: no interpreter, no shared library.
// Its error says what is wrong and how to build it.
func ReadTaskFarm(path string) ([]byte, error) {
	if path == "" {
		return nil, fmt.Errorf("%w: no path given: %s", ErrTaskFarm, TaskFarmBuild)
	}
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %w: %s", ErrTaskFarm, err, TaskFarmBuild)
	}
	if !fi.Mode().IsRegular() || fi.Size() > maxTaskFarm {
		return nil, fmt.Errorf("%w: %s is not a regular file of at most %d bytes: %s", ErrTaskFarm, path, maxTaskFarm, TaskFarmBuild)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrTaskFarm, err)
	}
	f, err := elf.NewFile(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("%w: %s is not an ELF executable (%v): %s", ErrTaskFarm, path, err, TaskFarmBuild)
	}
	defer f.Close()
	switch {
	case f.Class != elf.ELFCLASS64 || f.Machine != elf.EM_X86_64:
		return nil, fmt.Errorf("%w: %s is for %v %v, the guest is x86-64: %s", ErrTaskFarm, path, f.Class, f.Machine, TaskFarmBuild)
	case f.Type != elf.ET_EXEC && f.Type != elf.ET_DYN:
		return nil, fmt.Errorf("%w: %s is a %v, not an executable: %s", ErrTaskFarm, path, f.Type, TaskFarmBuild)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			interp, _ := readInterp(p)
			return nil, fmt.Errorf("%w: %s is dynamically linked (its interpreter is %s), the guest needs it static: %s",
				ErrTaskFarm, path, interp, TaskFarmBuild)
		}
	}
	if libs, err := f.ImportedLibraries(); err == nil && len(libs) > 0 {
		return nil, fmt.Errorf("%w: %s needs the shared libraries %v, the guest needs it static: %s", ErrTaskFarm, path, libs, TaskFarmBuild)
	}
	return data, nil
}

// readInterp is a PT_INTERP segment's path.
func readInterp(p *elf.Prog) (string, error) {
	b := make([]byte, min(p.Filesz, 4096))
	if _, err := p.ReadAt(b, 0); err != nil {
		return "", err
	}
	return string(bytes.TrimRight(b, "\x00")), nil
}
