package main

import (
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/metasched/metasched/hypervisorproxy/image"
)

func newImageCmd(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "image",
		Short: "Build and check guest images",
		Args:  noArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(newImageBuildCmd(e), newImageCheckCmd(e))
	return cmd
}

func newImageBuildCmd(e *env) *cobra.Command {
	var out, cacheDir, kernel, kind, logFormat, logLevel, taskfarm, sourcesFile string
	var rebuild, disk bool
	cmd := &cobra.Command{
		Use:   "build --out DIR",
		Short: "Build the bundled guest image, or the Debian image, from Debian packages",
		Long: `build makes metasched's guest image in DIR: a Debian cloud kernel (vmlinuz), an
initramfs (initrd.img) with busybox, QEMU's guest agent, the virtio modules and
the task farm (/usr/bin/taskfarm, the program of task-farm jobs), and the image
file (image.yaml) that says what they are and what they were built from (see
docs/internals/images.md, "The bundled image").

The task farm is taken from --taskfarm, by default the file taskfarm beside
this metasched binary; it must be static (make build builds bin/taskfarm with
CGO_ENABLED=0 beside bin/metasched).

It needs Debian's apt and dpkg: the kernel package (by default the newest
linux-image-6.1.0-N-cloud-amd64 apt knows) is fetched with apt-get download;
busybox-static and qemu-guest-agent must be installed (make image installs
them). Images are cached by their inputs (the packages' versions and the build
recipe) in --cache-dir: a second build of the same inputs copies the cached
image.

With --kind disk (or --disk) it also makes the disk form: the initramfs's tree
as an ext4 file system (mke2fs -d) in a qcow2 disk (rootfs.qcow2, made with
qemu-img convert), the root file system of the guest that the same kernel and
initramfs boot; each VM gets its own copy-on-write overlay of it. It needs
mke2fs and debugfs (Debian package e2fsprogs) and qemu-img (qemu-utils).

With --kind debian it makes the Debian image instead: a standard Debian 12
system (systemd, cloud-init, qemu-guest-agent, openssh-server, OpenMPI with
mpicc, the task farm and the MPI example /usr/local/bin/mpi-pi) made with
mmdebstrap from Debian's packages, as a qcow2 disk with its own kernel and
initrd, contextualized by cloud-init like any cloud image. Its packages come
from --sources (a sources.list of one-line "deb" entries; default Debian's
mirror network, bookworm with its updates and security suites); it is cached
by the Release files of those sources as fetched at the build, the recipe and
the task farm. It needs mmdebstrap, e2fsprogs and qemu-utils (make
image-debian installs them) and root (mmdebstrap's chroot mode).`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if out == "" {
				return usagef("--out: required (the image's directory)")
			}
			switch {
			case kind != image.KindKernel && kind != image.KindDisk && kind != image.BuildDebian:
				return usagef("--kind: must be %s, %s or %s, not %q", image.KindKernel, image.KindDisk, image.BuildDebian, kind)
			case sourcesFile != "" && kind != image.BuildDebian:
				return usagef("--sources: only for --kind %s", image.BuildDebian)
			case disk && cmd.Flags().Changed("kind") && kind != image.KindDisk:
				return usagef("--disk: contradicts --kind %s", kind)
			case disk:
				kind = image.KindDisk
			}
			log, err := newLogger(e.stderr, logFormat, logLevel)
			if err != nil {
				return err
			}
			if taskfarm == "" {
				exe, err := os.Executable()
				if err != nil {
					return usagef("--taskfarm: not given, and this program's own path is unknown (%v)", err)
				}
				taskfarm = filepath.Join(filepath.Dir(exe), "taskfarm")
			}
			tf, err := image.ReadTaskFarm(taskfarm)
			if err != nil {
				return usagef("--taskfarm: %w", err)
			}
			var sources string
			if sourcesFile != "" {
				data, err := os.ReadFile(sourcesFile)
				if err != nil {
					return usagef("--sources: %w", err)
				}
				sources = string(data)
			}
			start := time.Now()
			res, err := image.Build(cmd.Context(), image.Options{
				Out: out, CacheDir: cacheDir, KernelPackage: kernel, Rebuild: rebuild, Kind: kind, TaskFarm: taskfarm, Logger: log,
				Sources: sources,
			})
			if err != nil {
				return err
			}
			how := "built"
			if res.Cached {
				how = "taken from the cache"
			}
			img := res.Image
			fmt.Fprintf(e.stdout, "Image in %s, %s in %.1f s (cache %s)\n", res.Dir, how, time.Since(start).Seconds(), res.Entry)
			fmt.Fprintf(e.stdout, "kernel %s (%s), initrd %s, command line %q\n", img.KernelRelease, img.Kernel, img.Initrd, img.Cmdline)
			if img.CloudInit() {
				fmt.Fprintf(e.stdout, "contextualization: %s (a NoCloud seed per VM)\n", img.Contextualization)
			}
			if img.Disk != "" {
				fmt.Fprintf(e.stdout, "disk %s (%s, sha256 %s): the root file system\n", img.Disk, img.DiskFormat, img.DiskSHA256)
			}
			fmt.Fprintf(e.stdout, "task farm %s (sha256 %x) at %s\n", taskfarm, sha256.Sum256(tf), image.TaskFarmPath)
			fmt.Fprintf(e.stdout, "inputs %s:\n", img.InputsHash)
			for _, in := range img.Inputs {
				fmt.Fprintf(e.stdout, "  %s %s %s\n", in.Package, in.Version, in.Architecture)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&out, "out", "", "directory the image is written to")
	cmd.Flags().StringVar(&cacheDir, "cache-dir", "", "cache of packages and images (default: the user's cache directory/metasched/images)")
	cmd.Flags().StringVar(&kernel, "kernel-package", "", "Debian kernel package (default: the newest linux-image-6.1.0-N-cloud-amd64 apt knows)")
	cmd.Flags().BoolVar(&rebuild, "rebuild", false, "build even when the cache has the image")
	cmd.Flags().StringVar(&kind, "kind", image.KindKernel, "form of the image: kernel (direct kernel boot), disk (also a qcow2 root disk) or debian (a Debian system with cloud-init and OpenMPI)")
	cmd.Flags().StringVar(&sourcesFile, "sources", "", "apt sources of --kind debian: a sources.list file of one-line deb entries (default Debian's mirror network)")
	cmd.Flags().BoolVar(&disk, "disk", false, "the disk form (--kind disk)")
	cmd.Flags().StringVar(&taskfarm, "taskfarm", "", "the static task farm binary the image holds (default: taskfarm beside this program)")
	cmd.Flags().StringVar(&logFormat, "log-format", "auto", "log format: json, console, or auto (console on a terminal)")
	cmd.Flags().StringVar(&logLevel, "log-level", "info", "log level: debug, info, warn or error")
	return cmd
}
