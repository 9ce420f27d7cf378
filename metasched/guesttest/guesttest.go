// Package guesttest is a stand-in for the guests of a site's VMs, for
// tests of the daemon with the guest executor that boot no guest: a site
// agent whose guest API is held in memory.
package guesttest

import (
	"context"
	"fmt"
	"os"
	"path"
	"regexp"
	"strings"
	"sync"

	hp "github.com/metasched/metasched/hypervisorproxy"
	"github.com/metasched/metasched/metasched"
	"github.com/metasched/metasched/metasched/executor"
)

// Site is a site agent with a guest API held in memory: its VMs get
// addresses in the inventory (10.77.Net.N/16, N given in the order the
// VMs are first seen; none when Net is 0), their files are a map, every
// program exits 0 at once, and the runner's start plays a command that ran
// at once: DIR/output says what the command's environment held and what
// the guest's hostfile holds, DIR/exit its status ("exit N" in the command
// line, else 0), and a "cp A B" of the command line copies A to B in the
// working directory. A command line with the word "hold" runs on (no
// DIR/exit) until Exit ends it. A VM destroyed through the site is gone:
// its guest calls fail with hp.ErrNotFound, as an agent's for a VM it does
// not have.
type Site struct {
	metasched.SiteAgent
	Net int

	mu    sync.Mutex
	files map[string]map[string][]byte // VM, path
	addrs map[string]int               // VM, the last byte of its address
	procs int
	held  map[string]string // VM → the runner's directory of its held command
	gone  map[string]bool   // VMs destroyed
	execs []string          // "VM PATH ARGS..." of every GuestExec
}

var (
	exitRE = regexp.MustCompile(`exit (\d+)`)
	cpRE   = regexp.MustCompile(`cp ([\w./-]+) ([\w./-]+)`)
	holdRE = regexp.MustCompile(`\bhold\b`)
)

// Inventory is the agent's, with the VMs' addresses.
func (s *Site) Inventory(ctx context.Context) (hp.Inventory, error) {
	inv, err := s.SiteAgent.Inventory(ctx)
	if s.Net == 0 {
		return inv, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.addrs == nil {
		s.addrs = map[string]int{}
	}
	for h := range inv.Hosts {
		for i := range inv.Hosts[h].VMs {
			vm := &inv.Hosts[h].VMs[i]
			n, ok := s.addrs[vm.Name]
			if !ok {
				n = 10 + len(s.addrs)
				s.addrs[vm.Name] = n
			}
			vm.Address = fmt.Sprintf("10.77.%d.%d/16", s.Net, n)
		}
	}
	return inv, err
}

// DestroyVM destroys the VM through the agent; its guest is gone (File
// still reads what it held).
func (s *Site) DestroyVM(ctx context.Context, name string) error {
	err := s.SiteAgent.DestroyVM(ctx, name)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.gone == nil {
		s.gone = map[string]bool{}
	}
	s.gone[name] = true // its files stay, for File
	delete(s.held, name)
	return err
}

// goneErr is the error of a guest call to a VM destroyed.
func (s *Site) goneErr(vm string) error {
	if s.gone[vm] {
		return fmt.Errorf("guest call: vm %s: %w", vm, hp.ErrNotFound)
	}
	return nil
}

// Exit ends the held command of vm with code; false when vm runs none.
func (s *Site) Exit(vm string, code int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	dir, ok := s.held[vm]
	if !ok {
		return false
	}
	delete(s.held, vm)
	s.vm(vm)[path.Join(dir, "exit")] = fmt.Appendf(nil, "%d\n", code)
	return true
}

// Execs lists every program started in the site's guests, as "VM PATH
// ARGS...".
func (s *Site) Execs() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.execs...)
}

// File returns a file of a VM's guest, nil when it has none.
func (s *Site) File(vm, p string) []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.vm(vm)[p]
}

func (s *Site) vm(name string) map[string][]byte {
	if s.files == nil {
		s.files = map[string]map[string][]byte{}
	}
	if s.files[name] == nil {
		s.files[name] = map[string][]byte{}
	}
	return s.files[name]
}

// GuestExec plays the runner's start (see Site); other programs do
// nothing.
func (s *Site) GuestExec(ctx context.Context, vm string, e hp.GuestExec) (hp.GuestProcess, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.goneErr(vm); err != nil {
		return hp.GuestProcess{}, err
	}
	files := s.vm(vm)
	s.procs++
	s.execs = append(s.execs, strings.Join(append([]string{vm, e.Path}, e.Args...), " "))
	if e.Path == executor.GuestRunner && len(e.Args) == 4 && e.Args[0] == "start" {
		dir, work := e.Args[1], e.Args[2]
		env := map[string]string{}
		for _, kv := range e.Env {
			k, v, _ := strings.Cut(kv, "=")
			env[k] = v
		}
		command := files[path.Join(dir, "command")]
		files[path.Join(dir, "pid")] = []byte("100\n")
		files[path.Join(dir, "output")] = fmt.Appendf(nil, "rank=%s role=%s master=%s\n%s", env["METASCHED_RANK"], env["METASCHED_ROLE"],
			env["METASCHED_MASTER"], files[env["METASCHED_HOSTFILE"]])
		code := "0"
		if sm := exitRE.FindSubmatch(command); sm != nil {
			code = string(sm[1])
		}
		if holdRE.Match(command) {
			if s.held == nil {
				s.held = map[string]string{}
			}
			s.held[vm] = dir
		} else {
			files[path.Join(dir, "exit")] = []byte(code + "\n")
		}
		if sm := cpRE.FindSubmatch(command); sm != nil {
			if data, ok := files[path.Join(work, string(sm[1]))]; ok {
				files[path.Join(work, string(sm[2]))] = data
			}
		}
	}
	return hp.GuestProcess{PID: s.procs}, nil
}

// GuestExecStatus says every program has exited 0.
func (s *Site) GuestExecStatus(ctx context.Context, vm string, pid int) (hp.GuestExecStatus, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.goneErr(vm); err != nil {
		return hp.GuestExecStatus{}, err
	}
	return hp.GuestExecStatus{Exited: true}, nil
}

// GuestWriteFile keeps a copy of data as the VM's file p.
func (s *Site) GuestWriteFile(ctx context.Context, vm, p string, data []byte, mode os.FileMode) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.goneErr(vm); err != nil {
		return err
	}
	s.vm(vm)[p] = append([]byte(nil), data...)
	return nil
}

// GuestReadFile reads the VM's file p; a missing one is hp.ErrNotFound.
func (s *Site) GuestReadFile(ctx context.Context, vm, p string, offset int64, max int) (hp.GuestFileChunk, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.goneErr(vm); err != nil {
		return hp.GuestFileChunk{}, err
	}
	data, ok := s.vm(vm)[p]
	if !ok {
		return hp.GuestFileChunk{}, fmt.Errorf("%s: %w", p, hp.ErrNotFound)
	}
	data = data[min(offset, int64(len(data))):]
	if max > 0 && len(data) > max {
		return hp.GuestFileChunk{Data: data[:max]}, nil
	}
	return hp.GuestFileChunk{Data: data, EOF: true}, nil
}
