package image

import (
	"bufio"
	"bytes"
	"debug/elf"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// guestLibDirs are the directories the guest's ld.so searches without a
// cache (Debian's glibc on amd64: `ld.so --help`, "system search path").
// The guest has no /etc/ld.so.cache, so a library the host found anywhere
// else could not be found in the guest.
var guestLibDirs = []string{"/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib", "/usr/lib"}

// sharedObject is one ELF object a program needs at run time.
type sharedObject struct {
	path string // where ld.so finds it, and where it goes in the guest
	real string // the file behind path's symbolic links
}

// resolver finds the shared objects of programs the way the host's
// ld.so does (ld.so(8), "search order"), but without its cache: for each
// DT_NEEDED name of an object, the object's DT_RPATH and those of the
// objects that loaded it (when it has no DT_RUNPATH), its DT_RUNPATH,
// the directories of /etc/ld.so.conf (the cache is built from them, in
// that order) and the system directories. $ORIGIN is the object's own
// directory. A candidate counts only if it is an ELF file of the
// program's class and machine, as ld.so skips the others.
// LD_LIBRARY_PATH is ignored: the image does not depend on the builder's
// environment.
type resolver struct {
	root     string   // "/" for the host; tests may use another tree
	confDirs []string // from ld.so.conf, in order
}

// newResolver reads root's /etc/ld.so.conf (and the files it includes).
func newResolver(root string) (*resolver, error) {
	r := &resolver{root: root}
	seen := map[string]bool{}
	if err := r.readConf("/etc/ld.so.conf", seen); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("ld.so.conf: %w", err)
	}
	return r, nil
}

// readConf appends the directories of one ld.so.conf file: one per line
// (comments after #), and "include GLOB" lines (relative to the file's
// directory).
func (r *resolver) readConf(name string, seen map[string]bool) error {
	if seen[name] {
		return nil
	}
	seen[name] = true
	data, err := os.ReadFile(r.host(name))
	if err != nil {
		return err
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line, _, _ := strings.Cut(sc.Text(), "#")
		f := strings.Fields(line)
		switch {
		case len(f) == 0, f[0] == "hwcap":
		case f[0] == "include":
			for _, pat := range f[1:] {
				if !filepath.IsAbs(pat) {
					pat = filepath.Join(filepath.Dir(name), pat)
				}
				matches, err := filepath.Glob(r.host(pat))
				if err != nil {
					return fmt.Errorf("%s: include %s: %w", name, pat, err)
				}
				slices.Sort(matches)
				for _, m := range matches {
					rel, _ := filepath.Rel(r.root, m)
					if err := r.readConf("/"+rel, seen); err != nil {
						return err
					}
				}
			}
		default:
			for _, d := range f {
				d, _, _ = strings.Cut(d, "=") // old "DIR=TYPE" form
				if filepath.IsAbs(d) && !slices.Contains(r.confDirs, filepath.Clean(d)) {
					r.confDirs = append(r.confDirs, filepath.Clean(d))
				}
			}
		}
	}
	return sc.Err()
}

// host is a guest-style absolute path in root.
func (r *resolver) host(p string) string { return filepath.Join(r.root, p) }

// elfInfo is what the resolver reads of one ELF object.
type elfInfo struct {
	class   elf.Class
	machine elf.Machine
	interp  string
	soname  string
	needed  []string
	rpath   []string
	runpath []string
}

func readELF(file string) (*elfInfo, error) {
	f, err := elf.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	info := &elfInfo{class: f.Class, machine: f.Machine}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			b := make([]byte, p.Filesz)
			if _, err := p.ReadAt(b, 0); err != nil {
				return nil, fmt.Errorf("%s: PT_INTERP: %w", file, err)
			}
			info.interp = string(bytes.TrimRight(b, "\x00"))
		}
	}
	if f.Section(".dynamic") == nil {
		return info, nil // static
	}
	if info.needed, err = f.ImportedLibraries(); err != nil {
		return nil, fmt.Errorf("%s: DT_NEEDED: %w", file, err)
	}
	if sonames, err := f.DynString(elf.DT_SONAME); err != nil {
		return nil, fmt.Errorf("%s: DT_SONAME: %w", file, err)
	} else if len(sonames) > 0 {
		info.soname = sonames[0]
	}
	for _, tag := range []elf.DynTag{elf.DT_RPATH, elf.DT_RUNPATH} {
		vals, err := f.DynString(tag)
		if err != nil {
			return nil, fmt.Errorf("%s: %v: %w", file, tag, err)
		}
		var dirs []string
		for _, v := range vals {
			dirs = append(dirs, strings.Split(v, ":")...)
		}
		if tag == elf.DT_RPATH {
			info.rpath = dirs
		} else {
			info.runpath = dirs
		}
	}
	return info, nil
}

// closure returns the shared objects program needs: its interpreter and
// every library it loads, directly or not, in the order ld.so loads them
// (breadth first), each once. A static program needs none.
func (r *resolver) closure(program string) ([]sharedObject, error) {
	main, err := readELF(r.host(program))
	if err != nil {
		return nil, err
	}
	var out []sharedObject
	found := map[string]bool{} // by path
	add := func(p string) error {
		if found[p] {
			return nil
		}
		real, err := filepath.EvalSymlinks(r.host(p))
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(r.root, real)
		found[p] = true
		out = append(out, sharedObject{path: p, real: "/" + rel})
		return nil
	}
	loaded := map[string]bool{} // by DT_NEEDED name and DT_SONAME
	if main.interp != "" {
		if err := add(main.interp); err != nil {
			return nil, fmt.Errorf("%s: interpreter: %w", program, err)
		}
		interp, err := readELF(r.host(main.interp))
		if err != nil {
			return nil, fmt.Errorf("%s: interpreter: %w", program, err)
		}
		// Objects already loaded are matched by their SONAME: libc's
		// DT_NEEDED ld-linux-x86-64.so.2 is the interpreter.
		loaded[interp.soname] = true
	}

	type item struct {
		path    string
		info    *elfInfo
		rpaths  [][]string // DT_RPATH of the loaders, the object's own first
		origins []string
	}
	queue := []item{{program, main, [][]string{main.rpath}, []string{filepath.Dir(program)}}}
	for len(queue) > 0 {
		it := queue[0]
		queue = queue[1:]
		for _, name := range it.info.needed {
			if loaded[name] {
				continue
			}
			p, info, err := r.find(name, it.info, it.rpaths, it.origins, main)
			if err != nil {
				return nil, fmt.Errorf("%s: %s (needed by %s): %w", program, name, it.path, err)
			}
			loaded[name] = true
			if info.soname != "" {
				loaded[info.soname] = true
			}
			if err := add(p); err != nil {
				return nil, fmt.Errorf("%s: %s: %w", program, name, err)
			}
			queue = append(queue, item{p, info,
				append([][]string{info.rpath}, it.rpaths...),
				append([]string{filepath.Dir(p)}, it.origins...)})
		}
	}
	return out, nil
}

// find looks for one DT_NEEDED name of obj.
func (r *resolver) find(name string, obj *elfInfo, rpaths [][]string, origins []string, main *elfInfo) (string, *elfInfo, error) {
	var dirs []string
	expand := func(list []string, origin string) {
		for _, d := range list {
			d = strings.ReplaceAll(strings.ReplaceAll(d, "${ORIGIN}", origin), "$ORIGIN", origin)
			if d != "" {
				dirs = append(dirs, d)
			}
		}
	}
	if strings.Contains(name, "/") {
		dirs, name = []string{filepath.Dir(name)}, filepath.Base(name)
	} else {
		if len(obj.runpath) == 0 {
			for i, rp := range rpaths {
				expand(rp, origins[i])
			}
		}
		expand(obj.runpath, origins[0])
		dirs = append(dirs, r.confDirs...)
		dirs = append(dirs, guestLibDirs...)
	}
	for _, d := range dirs {
		if strings.Contains(d, "$") {
			return "", nil, fmt.Errorf("search directory %s: only $ORIGIN is supported", d)
		}
		p := filepath.Join(d, name)
		info, err := readELF(r.host(p))
		if err != nil || info.class != main.class || info.machine != main.machine {
			continue
		}
		return p, info, nil
	}
	return "", nil, fmt.Errorf("not found in %s", strings.Join(dirs, ":"))
}

// guestPath checks that the guest's ld.so, which has no cache, finds a
// library where the host found it, and returns that path.
func guestPath(o sharedObject, interp string) (string, error) {
	if o.path == interp || slices.Contains(guestLibDirs, filepath.Dir(o.path)) {
		return o.path, nil
	}
	return "", fmt.Errorf("%s is not in a directory the guest's ld.so searches without a cache (%s)",
		o.path, strings.Join(guestLibDirs, ", "))
}

// modInfo is what the image needs of a kernel module's .modinfo section.
type modInfo struct {
	name     string
	depends  []string
	vermagic string // its first word is the kernel release
}

// readModInfo reads a module's .modinfo section: NUL-separated key=value
// strings.
func readModInfo(file string) (*modInfo, error) {
	f, err := elf.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	sec := f.Section(".modinfo")
	if sec == nil {
		return nil, fmt.Errorf("%s: no .modinfo section", file)
	}
	data, err := sec.Data()
	if err != nil {
		return nil, fmt.Errorf("%s: .modinfo: %w", file, err)
	}
	mi := &modInfo{}
	for _, kv := range bytes.Split(data, []byte{0}) {
		k, v, ok := strings.Cut(string(kv), "=")
		if !ok {
			continue
		}
		switch k {
		case "name":
			mi.name = v
		case "depends":
			for _, d := range strings.Split(v, ",") {
				if d != "" {
					mi.depends = append(mi.depends, d)
				}
			}
		case "vermagic":
			mi.vermagic = v
		}
	}
	if mi.name == "" {
		mi.name = modName(filepath.Base(file))
	}
	return mi, nil
}

// modName is a module's name from its file name: without .ko, with '-'
// read as '_' as the kernel does.
func modName(file string) string {
	return strings.ReplaceAll(strings.TrimSuffix(file, ".ko"), "-", "_")
}
