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
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	hp "github.com/metasched/metasched/hypervisorproxy"
	"github.com/metasched/metasched/metasched"
	"github.com/metasched/metasched/metasched/executor"
)

// Site is a site agent with a guest API held in memory: its VMs get
// addresses in the inventory and from CreateVM (10.77.Net.N/16, N given in
// the order the VMs are first seen; none when Net is 0), their files are a
// map, every program exits 0 at once unless Run says otherwise, and the
// runner's start plays a command that ran at once: DIR/output says what
// the command's environment held and what the guest's hostfile holds,
// DIR/exit its status ("exit N" in the command line, else 0), and a "cp A
// B" of the command line copies A to B in the working directory. A command
// line with the word "hold" runs on (no DIR/exit) until Exit ends it. A VM
// destroyed through the site is gone: its guest calls fail with
// hp.ErrNotFound, as an agent's for a VM it does not have.
type Site struct {
	metasched.SiteAgent
	Net int
	// Images are the images its VMs boot: a VM created with one of them
	// (a host reconfigured for a pool of one) is created (reconfigured)
	// without it by the agent below (libvirt's test driver boots
	// nothing), and its guest API is this fake's; another image is
	// refused as the agent refuses an image it does not have. With Images, the site says it boots guests (BootsGuests), and
	// the daemon calibrates it.
	Images []string
	// Run, when set, plays every program started in a VM other than the
	// runner: what it prints and how it ends, as GuestExecStatus reports
	// it once (an answer with Exited false is reported for ever: the
	// program never ends); an error is GuestExec's own (the guest agent
	// failed). Unset, every such program exits 0 at once with no output.
	Run func(vm string, e hp.GuestExec) (hp.GuestExecStatus, error)
	// Down, while set, makes Inventory fail as an agent that does not
	// answer.
	Down atomic.Bool

	mu        sync.Mutex
	files     map[string]map[string][]byte // VM, path
	addrs     map[string]int               // VM, the last byte of its address
	procs     int
	held      map[string]string          // VM → the runner's directory of its held command
	gone      map[string]bool            // VMs destroyed
	execs     []string                   // "VM PATH ARGS..." of every GuestExec
	status    map[int]hp.GuestExecStatus // programs Run played, by PID
	forgotten map[int]bool               // those whose exit was reported
}

var (
	exitRE = regexp.MustCompile(`exit (\d+)`)
	cpRE   = regexp.MustCompile(`cp ([\w./-]+) ([\w./-]+)`)
	holdRE = regexp.MustCompile(`\bhold\b`)
)

// Inventory is the agent's, with the VMs' addresses; an error while Down.
func (s *Site) Inventory(ctx context.Context) (hp.Inventory, error) {
	if s.Down.Load() {
		return hp.Inventory{}, fmt.Errorf("inventory: the agent does not answer (test)")
	}
	inv, err := s.SiteAgent.Inventory(ctx)
	if s.Net == 0 {
		return inv, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for h := range inv.Hosts {
		for i := range inv.Hosts[h].VMs {
			vm := &inv.Hosts[h].VMs[i]
			vm.Address = s.addressLocked(vm.Name)
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

// addressLocked is the VM's address, given when first asked.
func (s *Site) addressLocked(vm string) string {
	if s.addrs == nil {
		s.addrs = map[string]int{}
	}
	n, ok := s.addrs[vm]
	if !ok {
		n = 10 + len(s.addrs)
		s.addrs[vm] = n
	}
	return fmt.Sprintf("10.77.%d.%d/16", s.Net, n)
}

// BootsGuests says whether the site's VMs boot their images: it has
// Images.
func (s *Site) BootsGuests() bool { return len(s.Images) > 0 }

// CreateVM creates the VM through the agent below, without its image
// when it is one of Images (see Site), with its address.
func (s *Site) CreateVM(ctx context.Context, spec hp.VMSpec) (hp.VM, error) {
	if spec.Image != "" {
		if !slices.Contains(s.Images, spec.Image) {
			return hp.VM{}, fmt.Errorf("create vm %s: %w: image: %q is not an image of this site (it has %v)", spec.Name, hp.ErrInvalid, spec.Image, s.Images)
		}
		spec.Image = ""
	}
	v, err := s.SiteAgent.CreateVM(ctx, spec)
	if err != nil || s.Net == 0 {
		return v, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	v.Address = s.addressLocked(v.Name)
	return v, nil
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

// ReconfigureHost reconfigures the host through the agent below, without
// the new pool's image when it is one of Images (see Site).
func (s *Site) ReconfigureHost(ctx context.Context, host string, r hp.Reconfigure) (hp.Reconfigured, error) {
	if r.Image != "" {
		if !slices.Contains(s.Images, r.Image) {
			return hp.Reconfigured{}, fmt.Errorf("reconfigure host %s: %w: image: %q is not an image of this site (it has %v)", host, hp.ErrInvalid, r.Image, s.Images)
		}
		r.Image = ""
	}
	return s.SiteAgent.ReconfigureHost(ctx, host, r)
}

// GuestExec plays the runner's start (see Site); other programs are
// Run's, or do nothing.
func (s *Site) GuestExec(ctx context.Context, vm string, e hp.GuestExec) (hp.GuestProcess, error) {
	if s.Run != nil && e.Path != executor.GuestRunner {
		s.mu.Lock()
		gone := s.goneErr(vm)
		s.mu.Unlock()
		if gone != nil {
			return hp.GuestProcess{}, gone
		}
		st, err := s.Run(vm, e)
		if err != nil {
			return hp.GuestProcess{}, err
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		s.procs++
		s.execs = append(s.execs, strings.Join(append([]string{vm, e.Path}, e.Args...), " "))
		if s.status == nil {
			s.status, s.forgotten = map[int]hp.GuestExecStatus{}, map[int]bool{}
		}
		s.status[s.procs] = st
		return hp.GuestProcess{PID: s.procs}, nil
	}
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

// GuestExecStatus reports what Run said of the program, once it has
// exited (then it is forgotten: hp.ErrNotFound after, as the guest agent
// does); every other program has exited 0.
func (s *Site) GuestExecStatus(ctx context.Context, vm string, pid int) (hp.GuestExecStatus, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.goneErr(vm); err != nil {
		return hp.GuestExecStatus{}, err
	}
	if st, ok := s.status[pid]; ok {
		if st.Exited {
			s.forgotten[pid] = true
			delete(s.status, pid)
		}
		return st, nil
	}
	if s.forgotten[pid] {
		return hp.GuestExecStatus{}, fmt.Errorf("guest exec status of pid %d in %s: %w", pid, vm, hp.ErrNotFound)
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
