package virt

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	hp "github.com/metasched/metasched/hypervisorproxy"
	"github.com/metasched/metasched/hypervisorproxy/qga"
)

var _ hp.GuestAgentHypervisor = (*Host)(nil)

// writeChunk is how much of a file one guest-file-write carries (as
// base64 in one libvirt call). The guest agent of the bundled image
// (QEMU 7.2's) answered writes of 128 KiB and never answered one of
// 256 KiB (libvirt then reports the agent unavailable); 64 KiB pieces
// write about 2.4 MB/s under TCG.
const writeChunk = 64 << 10

// guestError maps what the guest says about a file or a process to the
// agent's sentinels: a file, directory or program it does not have, or a
// process it does not know (any more), is hp.ErrNotFound; a path that is
// a directory or not allowed is hp.ErrInvalid. libvirt carries the
// agent's error replies as its own errors with the agent's description.
func guestError(err error) error {
	if _, code := hp.Status(err); err == nil || code != "internal" {
		return err // nil, or a sentinel already (a lost connection, an agent not answering)
	}
	msg := err.Error()
	switch {
	case strings.Contains(msg, "No such file or directory"), strings.Contains(msg, "Not a directory"),
		strings.Contains(msg, "Invalid parameter 'pid'"):
		return fmt.Errorf("%w: %w", hp.ErrNotFound, err)
	case strings.Contains(msg, "Is a directory"), strings.Contains(msg, "Permission denied"):
		return fmt.Errorf("%w: %w", hp.ErrInvalid, err)
	}
	return err
}

// StartGuestProcess starts a program in a VM through its guest agent
// (guest-exec) and returns its pid at once.
func (h *Host) StartGuestProcess(ctx context.Context, name string, e hp.GuestExec) (int, error) {
	cmd, err := qga.Exec{Path: e.Path, Args: e.Args, Env: e.Env, Input: e.Input, CaptureOutput: e.CaptureOutput}.Command()
	if err != nil {
		return 0, fmt.Errorf("guest exec in %s: %w: %w", name, hp.ErrInvalid, err)
	}
	out, err := h.AgentCommand(ctx, name, cmd, AgentCallTimeout)
	if err != nil {
		return 0, guestError(err)
	}
	pid, err := qga.ParseExec(out)
	if err != nil {
		return 0, guestError(fmt.Errorf("guest exec %s in %s: %w", e.Path, name, err))
	}
	return pid, nil
}

// GuestProcessStatus reads the state of a program started in a VM
// (guest-exec-status). A program killed by signal N has Signal N and
// ExitCode 128+N, as a shell reports it.
func (h *Host) GuestProcessStatus(ctx context.Context, name string, pid int) (hp.GuestExecStatus, error) {
	out, err := h.AgentCommand(ctx, name, qga.ExecStatus(pid), AgentCallTimeout)
	if err != nil {
		return hp.GuestExecStatus{}, guestError(err)
	}
	st, err := qga.ParseExecStatus(out)
	if err != nil {
		return hp.GuestExecStatus{}, guestError(fmt.Errorf("guest exec status of pid %d in %s: %w", pid, name, err))
	}
	res := hp.GuestExecStatus{Exited: st.Exited, ExitCode: st.ExitCode, Signal: st.Signal,
		Truncated: st.StdoutTruncated || st.StderrTruncated}
	if st.Signal > 0 {
		res.ExitCode = 128 + st.Signal
	}
	if len(st.Stdout) > 0 {
		res.Stdout = st.Stdout
	}
	if len(st.Stderr) > 0 {
		res.Stderr = st.Stderr
	}
	return res, nil
}

// openGuestFile opens a file in a VM and returns its handle and a
// function that closes it (errors are logged: the data is already read or
// written by then; a close that fails leaves a handle in the agent, which
// the agent drops when it restarts).
func (h *Host) openGuestFile(ctx context.Context, name, path, mode string) (int64, func() error, error) {
	out, err := h.AgentCommand(ctx, name, qga.FileOpen(path, mode), AgentCallTimeout)
	if err != nil {
		return 0, nil, guestError(err)
	}
	fh, err := qga.ParseFileOpen(out)
	if err != nil {
		return 0, nil, guestError(fmt.Errorf("open %s in %s: %w", path, name, err))
	}
	closeFile := func() error {
		// Closed even when ctx has ended: the handle must not leak.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), AgentCallTimeout)
		defer cancel()
		out, err := h.AgentCommand(cctx, name, qga.FileClose(fh), AgentCallTimeout)
		if err == nil {
			err = qga.ParseFileClose(out)
		}
		if err != nil {
			return fmt.Errorf("close %s in %s: %w", path, name, err)
		}
		return nil
	}
	return fh, closeFile, nil
}

// WriteGuestFile replaces a file in a VM with data (guest-file-open "w",
// guest-file-write in pieces of 1 MiB, guest-file-close) and gives it
// mode (0 to 07777, as chmod(1) reads it) with chmod in the guest: the
// agent creates files 0600 and keeps the mode of a file it truncates.
func (h *Host) WriteGuestFile(ctx context.Context, name, path string, data []byte, mode os.FileMode) (err error) {
	fh, closeFile, err := h.openGuestFile(ctx, name, path, "w")
	if err != nil {
		return err
	}
	defer func() {
		if cerr := closeFile(); cerr != nil {
			err = errors.Join(err, cerr)
		}
	}()
	for rest := data; len(rest) > 0; {
		piece := rest[:min(len(rest), writeChunk)]
		out, err := h.AgentCommand(ctx, name, qga.FileWrite(fh, piece), AgentCallTimeout)
		if err != nil {
			return guestError(err)
		}
		n, err := qga.ParseFileWrite(out)
		if err != nil {
			return guestError(fmt.Errorf("write %s in %s: %w", path, name, err))
		}
		if n == 0 || n > len(piece) {
			return fmt.Errorf("write %s in %s: the guest agent wrote %d of %d bytes", path, name, n, len(piece))
		}
		rest = rest[n:]
	}
	if err := closeFile(); err != nil {
		return err
	}
	closeFile = func() error { return nil }
	st, err := h.GuestExec(ctx, name, qga.Exec{Path: "chmod", Args: []string{fmt.Sprintf("%04o", uint32(mode)), path}, CaptureOutput: true})
	if err != nil {
		return guestError(fmt.Errorf("chmod %s in %s: %w", path, name, err))
	}
	if st.Signal != 0 || st.ExitCode != 0 {
		return fmt.Errorf("chmod %s in %s: exit %d, signal %d: %s", path, name, st.ExitCode, st.Signal, strings.TrimSpace(string(st.Stderr)))
	}
	return nil
}

// ReadGuestFile reads at most max bytes of a file in a VM from offset
// (guest-file-open "r", guest-file-seek, guest-file-read, guest-file-close).
// It asks for one byte more than max: EOF is true exactly when the data
// reaches the file's end.
func (h *Host) ReadGuestFile(ctx context.Context, name, path string, offset int64, max int) (c hp.GuestFileChunk, err error) {
	fh, closeFile, err := h.openGuestFile(ctx, name, path, "r")
	if err != nil {
		return hp.GuestFileChunk{}, err
	}
	defer func() {
		if cerr := closeFile(); cerr != nil {
			err = errors.Join(err, cerr)
		}
	}()
	if offset > 0 {
		out, err := h.AgentCommand(ctx, name, qga.FileSeek(fh, offset), AgentCallTimeout)
		if err != nil {
			return hp.GuestFileChunk{}, guestError(err)
		}
		pos, err := qga.ParseFileSeek(out)
		if err != nil {
			return hp.GuestFileChunk{}, guestError(fmt.Errorf("seek %s in %s: %w", path, name, err))
		}
		if pos != offset {
			return hp.GuestFileChunk{}, fmt.Errorf("seek %s in %s to %d: the guest agent is at %d", path, name, offset, pos)
		}
	}
	out, err := h.AgentCommand(ctx, name, qga.FileRead(fh, max+1), AgentCallTimeout)
	if err != nil {
		return hp.GuestFileChunk{}, guestError(err)
	}
	data, _, err := qga.ParseFileRead(out)
	if err != nil {
		return hp.GuestFileChunk{}, guestError(fmt.Errorf("read %s in %s: %w", path, name, err))
	}
	if len(data) > max {
		return hp.GuestFileChunk{Data: data[:max]}, nil
	}
	return hp.GuestFileChunk{Data: data, EOF: true}, nil
}
