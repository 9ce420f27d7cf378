package image

import (
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// The disk form of the bundled image.
const (
	// OnDiskMarker is the file that tells the init it runs on a disk
	// image's root file system (after the switch from the initramfs). The
	// initramfs does not have it.
	OnDiskMarker = "/lib/metasched/on-disk"
	// DiskSizeMiB is the size of the disk's ext4 file system: the tree
	// and room for what a VM writes (into its own overlay).
	DiskSizeMiB = 256
	diskFile    = "rootfs.qcow2"
)

// diskTools are the programs that make the disk: mke2fs (Debian package
// e2fsprogs) and qemu-img (qemu-utils).
type diskTools struct {
	mke2fs, debugfs, qemuImg string
}

// diskToolPackages are the Debian packages of the disk tools, whose
// versions are inputs of a disk image (their output is its bytes).
var diskToolPackages = []string{"e2fsprogs", "qemu-utils"}

// diskToolDirs are searched for the disk tools after PATH (/usr/sbin and
// /sbin are not on every user's PATH).
var diskToolDirs = []string{"/usr/sbin", "/sbin", "/usr/bin"}

// findDiskTools finds mke2fs, debugfs and qemu-img on PATH or in
// diskToolDirs.
func findDiskTools() (*diskTools, error) {
	look := func(name string) string {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
		for _, d := range diskToolDirs {
			p := filepath.Join(d, name)
			if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0 {
				return p
			}
		}
		return ""
	}
	t := &diskTools{mke2fs: look("mke2fs"), debugfs: look("debugfs"), qemuImg: look("qemu-img")}
	var missing []string
	if t.mke2fs == "" || t.debugfs == "" {
		missing = append(missing, "mke2fs and debugfs (Debian package e2fsprogs)")
	}
	if t.qemuImg == "" {
		missing = append(missing, "qemu-img (Debian package qemu-utils)")
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("image build: the disk form needs %s: not found on PATH (make image installs them)", strings.Join(missing, " and "))
	}
	return t, nil
}

// writeTree writes the archive's files, directories and symbolic links
// under dir (which must not exist), with the archive's permissions and
// every time set to 0; devices are left out (the guest's /dev is the
// initramfs's devtmpfs, moved onto the disk).
func (a *archive) writeTree(dir string) error {
	if err := os.Mkdir(dir, 0o755); err != nil {
		return fmt.Errorf("image build: disk tree: %w", err)
	}
	names := a.names()
	for _, name := range names {
		e := a.entries[name]
		p := filepath.Join(dir, name)
		var err error
		switch e.mode & modeType {
		case modeDir:
			if err = os.Mkdir(p, 0o700); err == nil {
				err = os.Chmod(p, os.FileMode(e.mode&0o777)|modeBits(e.mode))
			}
		case modeRegular:
			if err = os.WriteFile(p, e.data, 0o600); err == nil {
				err = os.Chmod(p, os.FileMode(e.mode&0o777)|modeBits(e.mode))
			}
		case modeSymlink:
			err = os.Symlink(string(e.data), p)
		default:
			continue
		}
		if err != nil {
			return fmt.Errorf("image build: disk tree: %w", err)
		}
	}
	// Times last, children before their directories (writing into a
	// directory changes its time).
	for i := len(names) - 1; i >= 0; i-- {
		if a.entries[names[i]].mode&modeType == modeCharDev {
			continue
		}
		if err := zeroTimes(filepath.Join(dir, names[i])); err != nil {
			return err
		}
	}
	return zeroTimes(dir)
}

// modeBits are the setuid, setgid and sticky bits of an archive mode as
// an os.FileMode.
func modeBits(mode uint32) os.FileMode {
	var m os.FileMode
	if mode&0o4000 != 0 {
		m |= os.ModeSetuid
	}
	if mode&0o2000 != 0 {
		m |= os.ModeSetgid
	}
	if mode&0o1000 != 0 {
		m |= os.ModeSticky
	}
	return m
}

// zeroTimes sets a path's access and modification times to 0, not
// following a symbolic link.
func zeroTimes(p string) error {
	ts := []unix.Timespec{{}, {}}
	if err := unix.UtimesNanoAt(unix.AT_FDCWD, p, ts, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return fmt.Errorf("image build: disk tree: times of %s: %w", p, err)
	}
	return nil
}

// diskUUID is the file system's UUID (and its directory hash seed), made
// from the image's key so that the same inputs give the same bytes.
func diskUUID(key string) string {
	return key[0:8] + "-" + key[8:12] + "-" + key[12:16] + "-" + key[16:20] + "-" + key[20:32]
}

// diskSpec is what makeDisk makes: the tree (and its paths, relative)
// written into an ext4 file system of sizeMiB labelled label, in a raw
// file under work, converted to the qcow2 out; key makes its UUID. With
// keepMtimes the files keep their modification times (a Debian system's
// compiled Python modules are checked against their sources' times);
// else they are 0 too.
type diskSpec struct {
	tree       string
	paths      []string
	work, key  string
	out, label string
	sizeMiB    int
	keepMtimes bool
}

// makeDisk writes the tree into an ext4 file system (mke2fs -d) in a raw
// file under work, converts it to qcow2 at out and returns the qcow2's
// SHA-256. The same tree and key give the same bytes: the file system's
// UUID and hash seed come from the key, the tree's times are fixed, and
// the times mke2fs takes from the clock (every inode's change and
// creation times, the superblocks' times) are set to 0 afterwards, with
// debugfs (e2fsprogs 1.47.0 has no SOURCE_DATE_EPOCH) and by rewriting
// the superblocks.
func makeDisk(ctx context.Context, dt *diskTools, s diskSpec) (string, error) {
	tree, paths, work, key, out := s.tree, s.paths, s.work, s.key, s.out
	raw := filepath.Join(work, "rootfs.raw")
	uuid := diskUUID(key)
	args := []string{"-q", "-F", "-t", "ext4", "-L", s.label, "-U", uuid,
		"-E", "root_owner=0:0,hash_seed=" + uuid + ",lazy_itable_init=0,lazy_journal_init=0",
		"-d", tree, raw, fmt.Sprintf("%dM", s.sizeMiB)}
	cmd := exec.CommandContext(ctx, dt.mke2fs, args...)
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("image build: mke2fs %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	// Every inode's times: the reserved ones (1 to 11, the root and
	// lost+found among them: mke2fs gives both the clock's time, the root
	// when it makes lost+found in it) all 0, and the tree's; with
	// keepMtimes, the tree's keep their modification times.
	var req strings.Builder
	all := []string{"atime", "mtime", "ctime", "crtime"}
	fields := all
	if s.keepMtimes {
		fields = []string{"atime", "ctime", "crtime"}
	}
	set := func(ref string, fields []string) {
		for _, f := range fields {
			fmt.Fprintf(&req, "set_inode_field %s %s 0\n", ref, f)
		}
	}
	for i := 1; i <= 11; i++ {
		set(fmt.Sprintf("<%d>", i), all)
	}
	for _, p := range paths {
		set(`"/`+p+`"`, fields)
	}
	reqFile := filepath.Join(work, "debugfs.req")
	if err := os.WriteFile(reqFile, []byte(req.String()), 0o644); err != nil {
		return "", fmt.Errorf("image build: %w", err)
	}
	// debugfs reports a bad request on its standard error and goes on.
	dcmd := exec.CommandContext(ctx, dt.debugfs, "-w", "-f", reqFile, raw)
	dcmd.Env = append(os.Environ(), "LC_ALL=C")
	var derr strings.Builder
	dcmd.Stderr = &derr
	if err := dcmd.Run(); err != nil {
		return "", fmt.Errorf("image build: debugfs: %w: %s", err, strings.TrimSpace(derr.String()))
	}
	for _, l := range strings.Split(derr.String(), "\n") {
		if l != "" && !strings.HasPrefix(l, "debugfs ") {
			return "", fmt.Errorf("image build: debugfs: %s", l)
		}
	}
	if err := zeroSuperTimes(raw); err != nil {
		return "", err
	}
	if _, err := run(ctx, work, dt.qemuImg, "convert", "-f", "raw", "-O", FormatQCOW2, raw, out); err != nil {
		return "", fmt.Errorf("image build: %w", err)
	}
	if err := os.Remove(raw); err != nil {
		return "", fmt.Errorf("image build: %w", err)
	}
	if err := os.Chmod(out, 0o644); err != nil {
		return "", fmt.Errorf("image build: %w", err)
	}
	sum, err := FileSHA256(out)
	if err != nil {
		return "", fmt.Errorf("image build: %w", err)
	}
	return sum, nil
}

// Offsets in an ext4 superblock (Documentation/filesystems/ext4/super.rst).
const (
	sbMagicOff    = 0x38
	sbMagic       = 0xEF53
	sbChecksumOff = 0x3FC
	sbSize        = 1024
)

// zeroSuperTimes sets the times of every copy of the ext4 superblock in
// the file (mount, write, last check and creation, with their high
// bytes) to 0 and writes its checksum again.
func zeroSuperTimes(file string) error {
	f, err := os.OpenFile(file, os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("image build: %w", err)
	}
	defer f.Close()
	sb := make([]byte, sbSize)
	if _, err := f.ReadAt(sb, 1024); err != nil {
		return fmt.Errorf("image build: superblock: %w", err)
	}
	le := binary.LittleEndian
	if le.Uint16(sb[sbMagicOff:]) != sbMagic {
		return fmt.Errorf("image build: %s has no ext4 superblock", file)
	}
	blockSize := int64(1024) << le.Uint32(sb[0x18:])
	perGroup := int64(le.Uint32(sb[0x20:]))
	firstData := int64(le.Uint32(sb[0x14:]))
	blocks := int64(le.Uint32(sb[0x04:])) | int64(le.Uint32(sb[0x150:]))<<32
	groups := (blocks - firstData + perGroup - 1) / perGroup
	castagnoli := crc32.MakeTable(crc32.Castagnoli)
	for g := int64(0); g < groups; g++ {
		off := (firstData + g*perGroup) * blockSize
		if g == 0 {
			off = 1024
		}
		if _, err := f.ReadAt(sb, off); err != nil {
			return fmt.Errorf("image build: superblock of group %d: %w", g, err)
		}
		if le.Uint16(sb[sbMagicOff:]) != sbMagic || int64(le.Uint16(sb[0x5A:])) != g {
			continue // no copy in this group (sparse_super)
		}
		csum := le.Uint32(sb[0x64:])&0x400 != 0 // RO_COMPAT_METADATA_CSUM
		if csum && le.Uint32(sb[sbChecksumOff:]) != ^crc32.Checksum(sb[:sbChecksumOff], castagnoli) {
			return fmt.Errorf("image build: the superblock of group %d has a checksum this build does not compute", g)
		}
		for _, o := range []int{0x2C, 0x30, 0x40, 0x108} { // s_mtime, s_wtime, s_lastcheck, s_mkfs_time
			le.PutUint32(sb[o:], 0)
		}
		for _, o := range []int{0x274, 0x275, 0x276, 0x277} { // their high bytes
			sb[o] = 0
		}
		// crc32c of the superblock before its checksum, seed ~0, not
		// inverted at the end (ext4's metadata_csum).
		if csum {
			le.PutUint32(sb[sbChecksumOff:], ^crc32.Checksum(sb[:sbChecksumOff], castagnoli))
		}
		if _, err := f.WriteAt(sb, off); err != nil {
			return fmt.Errorf("image build: superblock of group %d: %w", g, err)
		}
	}
	return f.Sync()
}
