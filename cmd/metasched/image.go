package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/metasched/metasched/hypervisorproxy/image"
)

func newImageCmd(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "image",
		Short: "Build guest images",
		Args:  noArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(newImageBuildCmd(e))
	return cmd
}

func newImageBuildCmd(e *env) *cobra.Command {
	var out, cacheDir, kernel, logFormat, logLevel string
	var rebuild bool
	cmd := &cobra.Command{
		Use:   "build --out DIR",
		Short: "Build the bundled guest image from Debian packages",
		Long: `build makes metasched's guest image in DIR: a Debian cloud kernel (vmlinuz), an
initramfs (initrd.img) with busybox, QEMU's guest agent and the virtio modules,
and the image file (image.yaml) that says what they are and what they were built
from (see docs/design.md, "Guest image").

It needs Debian's apt and dpkg: the kernel package (by default the newest
linux-image-6.1.0-N-cloud-amd64 apt knows) is fetched with apt-get download;
busybox-static and qemu-guest-agent must be installed (make image installs
them). Images are cached by their inputs (the packages' versions and the build
recipe) in --cache-dir: a second build of the same inputs copies the cached
image.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if out == "" {
				return usagef("--out: required (the image's directory)")
			}
			log, err := newLogger(e.stderr, logFormat, logLevel)
			if err != nil {
				return err
			}
			start := time.Now()
			res, err := image.Build(cmd.Context(), image.Options{
				Out: out, CacheDir: cacheDir, KernelPackage: kernel, Rebuild: rebuild, Logger: log,
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
	cmd.Flags().StringVar(&logFormat, "log-format", "auto", "log format: json, console, or auto (console on a terminal)")
	cmd.Flags().StringVar(&logLevel, "log-level", "info", "log level: debug, info, warn or error")
	return cmd
}
