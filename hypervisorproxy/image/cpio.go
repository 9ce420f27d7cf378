package image

import (
	"bufio"
	"fmt"
	"io"
	"path"
	"slices"
	"strings"
)

// File types of a newc archive entry (the S_IF* bits of the mode).
const (
	modeDir     = 0o040000
	modeRegular = 0o100000
	modeSymlink = 0o120000
	modeCharDev = 0o020000
	modeType    = 0o170000
)

// archive is the tree of an initramfs being put together: a set of
// entries by path, written as a newc ("070701") cpio archive in path
// order with fixed owners, times and inode numbers, so the same tree
// always gives the same bytes.
type archive struct {
	entries map[string]*cpioEntry
}

// cpioEntry is one file, directory, symbolic link or device of an
// archive.
type cpioEntry struct {
	name         string // relative, cleaned: "bin/busybox"
	mode         uint32 // type and permission bits
	data         []byte // a file's content or a link's target
	major, minor uint32 // a device's number
}

func newArchive() *archive { return &archive{entries: map[string]*cpioEntry{}} }

// clean checks and cleans an archive path: absolute or relative, it names
// something below the root.
func clean(p string) (string, error) {
	c := strings.TrimPrefix(path.Clean("/"+p), "/")
	if c == "" || strings.ContainsRune(p, 0) {
		return "", fmt.Errorf("initramfs: bad path %q", p)
	}
	return c, nil
}

// add puts e in the archive with its parent directories (mode 0755). A
// path given twice is an error, unless both are directories.
func (a *archive) add(e *cpioEntry) error {
	name, err := clean(e.name)
	if err != nil {
		return err
	}
	e.name = name
	if dir := path.Dir(name); dir != "." {
		if err := a.dir(dir, 0o755); err != nil {
			return err
		}
	}
	if old, ok := a.entries[name]; ok {
		if old.mode&modeType == modeDir && e.mode&modeType == modeDir {
			return nil
		}
		return fmt.Errorf("initramfs: %s given twice", name)
	}
	a.entries[name] = e
	return nil
}

func (a *archive) dir(p string, perm uint32) error {
	return a.add(&cpioEntry{name: p, mode: modeDir | perm&0o7777})
}

func (a *archive) file(p string, perm uint32, data []byte) error {
	return a.add(&cpioEntry{name: p, mode: modeRegular | perm&0o7777, data: data})
}

func (a *archive) symlink(p, target string) error {
	if target == "" {
		return fmt.Errorf("initramfs: symbolic link %s has no target", p)
	}
	return a.add(&cpioEntry{name: p, mode: modeSymlink | 0o777, data: []byte(target)})
}

func (a *archive) charDev(p string, perm, major, minor uint32) error {
	return a.add(&cpioEntry{name: p, mode: modeCharDev | perm&0o7777, major: major, minor: minor})
}

// names returns the paths of the archive in the order they are written.
func (a *archive) names() []string {
	names := make([]string, 0, len(a.entries))
	for n := range a.entries {
		names = append(names, n)
	}
	// Byte order puts a directory before everything in it.
	slices.Sort(names)
	return names
}

// writeTo writes the archive in the newc format the kernel unpacks
// (Documentation/driver-api/early-userspace/buffer-format.rst): entries in
// path order, inode numbers 1, 2, ... in that order, owner root, time 0,
// one link per file (the kernel treats a file with more links as a hard
// link), then the TRAILER!!! entry.
func (a *archive) writeTo(w io.Writer) error {
	bw := bufio.NewWriter(w)
	for i, name := range a.names() {
		e := a.entries[name]
		nlink := uint32(1)
		if e.mode&modeType == modeDir {
			nlink = 2
		}
		if err := writeNewc(bw, uint32(i+1), e.mode, nlink, e.major, e.minor, name, e.data); err != nil {
			return err
		}
	}
	if err := writeNewc(bw, 0, 0, 1, 0, 0, "TRAILER!!!", nil); err != nil {
		return err
	}
	return bw.Flush()
}

// writeNewc writes one newc header, the name and the data, each padded to
// a multiple of 4 bytes. Device numbers other than rdev are 0.
func writeNewc(w *bufio.Writer, ino, mode, nlink, rmajor, rminor uint32, name string, data []byte) error {
	if uint64(len(data)) > 0xffffffff {
		return fmt.Errorf("initramfs: %s is larger than 4 GiB", name)
	}
	fields := [13]uint32{
		ino, mode, 0 /* uid */, 0 /* gid */, nlink, 0, /* mtime */
		uint32(len(data)), 0, 0 /* dev */, rmajor, rminor,
		uint32(len(name) + 1), 0, /* check */
	}
	w.WriteString("070701")
	for _, f := range fields {
		fmt.Fprintf(w, "%08x", f)
	}
	w.WriteString(name)
	w.WriteByte(0)
	pad(w, 110+len(name)+1)
	w.Write(data)
	pad(w, len(data))
	// bufio.Writer keeps its first error.
	_, err := w.Write(nil)
	return err
}

// pad writes the zeros that bring n bytes to a multiple of 4.
func pad(w *bufio.Writer, n int) {
	for range (4 - n%4) % 4 {
		w.WriteByte(0)
	}
}
