// Package image builds and reads metasched's guest images: what a VM
// boots.
//
// # The image file
//
// An image is a directory with an image file, image.yaml (YAML or JSON,
// parsed strictly by [Parse]: every problem named with its field), and the
// files it names, relative to it. Kind "kernel" is direct kernel boot from
// a kernel, an optional initrd and a command line; kind "disk" is a qcow2
// disk (every VM boots from its own copy-on-write overlay of it), with
// the kernel, initrd and command line that boot it with its root on the
// disk, or none (its own boot loader boots it). The
// file also says what the guest's kernel release is and what the image
// was built from (Debian packages and versions, the recipe's version, and
// the hash of all of them, which is the cache key). [Load] reads an image
// and checks that its files are there; [Image.Verify] checks their
// SHA-256.
//
// # The bundled image
//
// [Build] makes metasched's own image from Debian packages only, with
// Debian's tools: the newest linux-image-6.1.0-N-cloud-amd64 apt knows
// (fetched with apt-get download into the cache, unpacked with
// dpkg-deb -x), and an initramfs with the installed busybox-static
// (busybox and a link per applet), qemu-guest-agent's qemu-ga and its
// shared libraries, the virtio modules in [Modules] that are not built
// into the kernel, an /init, a busybox shell script, and the task farm
// at [TaskFarmPath], the program of task-farm jobs (cmd/taskfarm: the
// build takes it from Options.TaskFarm and refuses one that is not a
// static x86-64 executable, [ReadTaskFarm]). The libraries are
// found by reading the programs' ELF dynamic sections (DT_NEEDED, DT_RPATH,
// DT_RUNPATH, PT_INTERP) with debug/elf and resolving them as ld.so does
// without its cache (the directories of /etc/ld.so.conf stand in for the
// cache, which is built from them), not by running ldd; the tests check the
// result against ldd. Each module's .modinfo is read to check that it is
// for this kernel and that the order loads its dependencies first.
//
// The initramfs is a newc cpio archive written by this package (the
// library writers leave out device numbers, which /dev/console needs): the
// entries sorted by path, owner root, time 0, inode numbers in order, so
// the same inputs give the same bytes; gzip adds no name and no time.
//
// Images are cached under the user's cache directory
// (os.UserCacheDir()/metasched/images/KEY), KEY being the start of the
// SHA-256 of the recipe (its version, the init, the module list, the
// command line) and of every input package's name, architecture and
// version: the kernel's, busybox-static's, qemu-guest-agent's and those of
// qemu-ga's libraries, and of the task farm binary's SHA-256. A build
// whose key is cached copies the cached image.
//
// With Options.Kind "disk" the build also writes the initramfs's tree into
// an ext4 file system with mke2fs -d and converts it to qcow2 with
// qemu-img (the versions of e2fsprogs and qemu-utils are inputs too); its
// UUID and hash seed come from the key and every time in it is set to 0
// (debugfs, and a rewrite of the superblocks), so that it too is
// reproducible.
//
// # The guest's init and its command line
//
// [Image.GuestCmdline] appends to the image's command line the keys the
// init reads from /proc/cmdline: metasched.hostname, metasched.ip (eth0's
// IPv4 address/prefix), metasched.gw (the default gateway) and
// metasched.hosts (name=addr,... written to /etc/hosts), each checked,
// and the whole line bounded by Linux's 2,047 bytes; for a disk image with
// a kernel, metasched.root=/dev/vda, on which the init mounts the root
// file system and switch_roots to it. The init mounts
// /proc, /sys, /dev (devtmpfs), /run and /tmp (tmpfs), loads the modules,
// sets the host name and /etc/hosts, brings lo and eth0 up, finds the
// guest agent's virtio port (the /sys/class/virtio-ports entry named
// org.qemu.guest_agent.0) and runs qemu-ga on it, again if it exits.
//
// The design is described in docs/internals/images.md of the
// repository.
package image

// Programs of the host the image carries.
const (
	BusyboxPath = "/bin/busybox"      // Debian busybox-static
	QemuGAPath  = "/usr/sbin/qemu-ga" // Debian qemu-guest-agent
)
