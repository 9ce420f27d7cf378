package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/rs/zerolog"
	"github.com/spf13/cobra"

	hp "github.com/metasched/metasched/hypervisorproxy"
	"github.com/metasched/metasched/hypervisorproxy/cloudinit"
	"github.com/metasched/metasched/hypervisorproxy/image"
	"github.com/metasched/metasched/hypervisorproxy/virt"
	"github.com/metasched/metasched/metasched/executor"
)

func newImageCheckCmd(e *env) *cobra.Command {
	var uri, logFormat, logLevel string
	var bootTimeout time.Duration
	var memory int
	cmd := &cobra.Command{
		Use:   "check IMAGE [--connect URI]",
		Short: "Check an image, and boot it once on a QEMU host",
		Long: `check reads an image as a site file's images would name it: a directory with
image.yaml (made by metasched image build, or by hand), or a cloud image's
qcow2 file (contextualized by cloud-init), and checks its files against their
sums.

With --connect (a libvirt URI of a QEMU host: qemu:///system) it boots the
image once as a site's agent would, in a VM of its own (1 vCPU, --memory-mib)
without a network: a cloud image gets its NoCloud seed with a job user and a
key made for the check. It says how long the guest agent took to answer and,
on a cloud image, cloud-init to finish, and what the guest has of what jobs
need (the job user and its key, cloud-init's status, sshd, mpirun); then it
destroys the VM. A guest that does not get there within --boot-timeout, an
image without a guest agent or without cloud-init, and a cloud-init that
fails are errors with the reason (the console's last lines, cloud-init's
status). It exits 0 when the image is usable (see docs/guide/images.md, "Bring
your own image", for what an image must contain).`,
		Args: exactArgs(1, "one image (a directory or a qcow2 file)"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if bootTimeout <= 0 {
				return usagef("--boot-timeout: must be positive, not %s", bootTimeout)
			}
			if memory < 128 {
				return usagef("--memory-mib: must be at least 128, not %d", memory)
			}
			img, err := image.Load(args[0])
			if err == nil {
				err = img.Verify()
			}
			if err != nil {
				return err
			}
			describeImage(e, img)
			if uri == "" {
				fmt.Fprintln(e.stdout, "not booted: give --connect URI (a QEMU host, qemu:///system) to boot it once")
				return nil
			}
			log, err := newLogger(e.stderr, logFormat, logLevel)
			if err != nil {
				return err
			}
			where, err := filepath.Abs(args[0])
			if err != nil {
				return err
			}
			return bootCheck(cmd.Context(), e, img, where, uri, bootTimeout, memory, log)
		},
	}
	cmd.Flags().StringVar(&uri, "connect", "", "libvirt URI of the QEMU host to boot the image on (none: only the files are checked)")
	cmd.Flags().DurationVar(&bootTimeout, "boot-timeout", 10*time.Minute, "longest wait for the guest to be ready")
	cmd.Flags().IntVar(&memory, "memory-mib", 1024, "memory of the VM")
	cmd.Flags().StringVar(&logFormat, "log-format", "auto", "log format: json, console, or auto (console on a terminal)")
	cmd.Flags().StringVar(&logLevel, "log-level", "warn", "log level: debug, info, warn or error")
	return cmd
}

// describeImage says what an image is.
func describeImage(e *env, img *image.Image) {
	ctx := img.Contextualization
	if ctx == "" {
		ctx = image.ContextMetasched
	}
	fmt.Fprintf(e.stdout, "image %s: kind %s, contextualization %s\n", img.Dir, img.Kind, ctx)
	for _, f := range []struct{ what, path string }{{"kernel", img.KernelPath()}, {"initrd", img.InitrdPath()}, {"disk", img.DiskPath()}} {
		if f.path == "" {
			continue
		}
		size := "?"
		if fi, err := os.Stat(f.path); err == nil {
			size = fmt.Sprintf("%.1f MiB", float64(fi.Size())/(1<<20))
		}
		fmt.Fprintf(e.stdout, "  %s %s (%s)\n", f.what, f.path, size)
	}
	switch {
	case img.Kernel == "" && img.Disk != "":
		fmt.Fprintln(e.stdout, "  boots with the disk's own boot loader")
	case img.Cmdline != "":
		fmt.Fprintf(e.stdout, "  command line %q\n", img.Cmdline)
	}
}

// bootCheck boots img once on the host at uri through an agent of its
// own (a site of one host, under a temporary directory), reports, and
// destroys the VM.
func bootCheck(ctx context.Context, e *env, img *image.Image, where, uri string, bootTimeout time.Duration, memory int, log zerolog.Logger) error {
	dir, err := os.MkdirTemp("", "metasched-image-check-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if err := os.Chmod(dir, 0o755); err != nil { // the hypervisor's QEMU writes the console in it
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "token"), []byte("image-check-token-not-served"), 0o600); err != nil {
		return err
	}
	siteFile := filepath.Join(dir, "site.yaml")
	site, err := hp.ParseSite(siteFile, fmt.Appendf(nil, `site: check
listen: 127.0.0.1:0
token_file: token
insecure_http: true
data_dir: agent
boot_timeout: %s
images: {check: %q}
hosts:
  - {name: check, uri: %q, pool: check}
`, bootTimeout, where, uri))
	if err != nil {
		return err
	}
	a, err := hp.New(ctx, hp.Config{Site: site, Token: "image-check-token-not-served", Connect: virt.Connector(log), Logger: log})
	if err != nil {
		return err
	}
	defer a.Close()
	key, err := executor.AttemptSSHKey(dir, 1, "image-check")
	if err != nil {
		return err
	}
	name := fmt.Sprintf("check-%d", os.Getpid()%100000) // short: libvirt puts the agent's socket under a directory named after it
	fmt.Fprintf(e.stdout, "booting %s on %s (1 vCPU, %d MiB, at most %s)...\n", name, uri, memory, bootTimeout)
	vm, err := a.CreateVM(ctx, hp.VMSpec{Name: name, Host: "check", Pool: "check", VCPUs: 1, MemoryMiB: memory,
		Image: "check", SSHKeys: []string{key.Authorized}})
	if err != nil {
		return fmt.Errorf("the image did not boot: %w", err)
	}
	defer func() {
		if err := a.DestroyVM(context.WithoutCancel(ctx), name); err != nil {
			fmt.Fprintf(e.stderr, "destroy %s: %v\n", name, err)
		}
	}()
	fmt.Fprintf(e.stdout, "guest agent answered after %.1f s\n", vm.AgentSeconds)
	if !img.CloudInit() {
		fmt.Fprintf(e.stdout, "ready after %.1f s\nOK: usable\n", vm.BootSeconds)
		return nil
	}
	fmt.Fprintf(e.stdout, "cloud-init done after %.1f s\n", vm.BootSeconds)
	var problems []string
	for _, c := range []struct{ what, script string }{
		{"kernel", "uname -r"},
		{"job user " + cloudinit.User, "id " + cloudinit.User},
		{"its key", "grep -c metasched-job- /home/" + cloudinit.User + "/.ssh/authorized_keys"},
		{"cloud-init", "cloud-init status --long | head -3 | tr '\\n' ' '"},
		{"sshd (mpirun reaches the workers with ssh)", "command -v sshd || ls /usr/sbin/sshd"},
		{"mpirun", "command -v mpirun"},
	} {
		out, err := guestShell(ctx, a, name, c.script)
		if err != nil {
			problems = append(problems, c.what)
			fmt.Fprintf(e.stdout, "  %-44s missing (%v)\n", c.what+":", err)
			continue
		}
		fmt.Fprintf(e.stdout, "  %-44s %s\n", c.what+":", out)
	}
	// mpirun is only for MPI jobs: its absence is said, not an error.
	if problems = slices.DeleteFunc(problems, func(p string) bool { return p == "mpirun" }); len(problems) > 0 {
		return fmt.Errorf("the guest lacks %s", strings.Join(problems, ", "))
	}
	fmt.Fprintln(e.stdout, "OK: usable")
	return nil
}

// guestShell runs a shell command line in a VM through the agent and
// returns its output, or an error with its status and error output.
func guestShell(ctx context.Context, a *hp.Agent, vm, script string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	p, err := a.GuestExec(ctx, vm, hp.GuestExec{Path: "/bin/sh", Args: []string{"-c", script}, CaptureOutput: true})
	if err != nil {
		return "", err
	}
	for {
		st, err := a.GuestExecStatus(ctx, vm, p.PID)
		if err != nil {
			return "", err
		}
		if st.Exited {
			out := strings.TrimSpace(string(st.Stdout))
			if st.ExitCode != 0 || st.Signal != 0 {
				return "", errors.New(strings.TrimSpace(fmt.Sprintf("exit %d %s", st.ExitCode, st.Stderr)))
			}
			return out, nil
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}
