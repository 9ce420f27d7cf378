package virt

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"libvirt.org/go/libvirt"

	hp "github.com/metasched/metasched/hypervisorproxy"
	"github.com/metasched/metasched/hypervisorproxy/domxml"
	"github.com/metasched/metasched/hypervisorproxy/qga"
)

// Bounds of the guest agent calls.
const (
	// AgentCallTimeout bounds one guest agent command that should answer
	// at once (guest-exec, guest-exec-status).
	AgentCallTimeout = 10 * time.Second
	// agentPingTimeout bounds one guest-ping while waiting for an agent.
	agentPingTimeout = time.Second
	// agentPollEvery is the pause between pings while waiting for an
	// agent to come up.
	agentPollEvery = 100 * time.Millisecond
	// execPollFirst and execPollMax pace guest-exec-status: quick at
	// first (a short command answers in about 0.1 s under TCG), then
	// doubling.
	execPollFirst = 10 * time.Millisecond
	execPollMax   = 500 * time.Millisecond
)

// CreateDomain defines (persistent) and starts a domain described in
// full by d: a guest that boots a kernel, logs its console and has a
// guest agent, for example. d.Type "" is the host's type; another type
// than the host's is ErrInvalid, as is a d that does not validate. A
// domain that fails to start (a kernel file QEMU cannot read, say) is
// undefined again: nothing is left, and the error carries libvirt's
// reason.
func (h *Host) CreateDomain(ctx context.Context, d domxml.Domain) (hp.Domain, error) {
	if d.Type == "" {
		d.Type = h.typ
	}
	if d.Type != h.typ {
		return hp.Domain{}, fmt.Errorf("create %s: %w: type: must be %s on %s, not %q", d.Name, hp.ErrInvalid, h.typ, h.uri, d.Type)
	}
	x, err := d.XML()
	if err != nil {
		return hp.Domain{}, fmt.Errorf("create %s: %w: %w", d.Name, hp.ErrInvalid, err)
	}
	return h.define(ctx, d.Name, x)
}

// AgentCommand sends one command (JSON, see package qga) to the guest
// agent of a running VM through libvirt and returns the agent's reply.
// It waits at most timeout, rounded up to whole seconds (libvirt's
// unit) and cut to ctx's deadline; the call cannot be interrupted
// sooner. An agent that is not connected (the guest has not started it
// yet) or does not answer in time is hp.ErrGuestAgent; a VM without an
// agent channel is hp.ErrUnsupported; a VM that does not run is
// hp.ErrBusy.
func (h *Host) AgentCommand(ctx context.Context, name, command string, timeout time.Duration) (string, error) {
	if dl, ok := ctx.Deadline(); ok {
		timeout = min(timeout, time.Until(dl))
	}
	secs := max(1, int(math.Ceil(timeout.Seconds())))
	dom, err := h.lookup(ctx, name)
	if err != nil {
		return "", err
	}
	defer dom.Free()
	out, err := dom.QemuAgentCommand(command, libvirt.DomainQemuAgentCommandTimeout(secs), 0)
	if err != nil {
		return "", wrap(err, "guest agent of %s on %s", name, h.uri)
	}
	return out, nil
}

// WaitAgent pings the guest agent of a VM that is booting until it
// answers. It returns at once when the VM has no agent channel or is not
// running (it crashed, or powered off), and when ctx ends, with the last
// answer.
func (h *Host) WaitAgent(ctx context.Context, name string) error {
	for {
		out, err := h.AgentCommand(ctx, name, qga.Ping(), agentPingTimeout)
		if err == nil {
			if err = qga.ParsePing(out); err == nil {
				return nil
			}
			err = fmt.Errorf("guest agent of %s: %w: %w", name, hp.ErrGuestAgent, err)
		}
		if !errors.Is(err, hp.ErrGuestAgent) {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for the guest agent of %s: %w (last answer: %w)", name, ctx.Err(), err)
		case <-time.After(agentPollEvery):
		}
	}
}

// WaitCloudInit waits for cloud-init in a booted guest to finish, with
// cloud-init status --wait --long run through the guest agent: nil once
// it says done (or, from cloud-init 23.4, degraded done: recoverable
// errors, logged), an error with its status for the rest (error,
// disabled: it found no data source), or saying that the guest has no
// cloud-init.
func (h *Host) WaitCloudInit(ctx context.Context, name string) error {
	st, err := h.GuestExec(ctx, name, qga.Exec{Path: "cloud-init", Args: []string{"status", "--wait", "--long"}, CaptureOutput: true})
	if err != nil {
		if strings.Contains(err.Error(), "No such file or directory") {
			return fmt.Errorf("%s has no cloud-init (its guest agent found no program cloud-init on its PATH): "+
				"an image of contextualization cloud-init needs cloud-init with its NoCloud data source", name)
		}
		return fmt.Errorf("cloud-init status in %s: %w", name, err)
	}
	out := strings.TrimSpace(string(st.Stdout) + "\n" + string(st.Stderr))
	status := ""
	for _, line := range strings.Split(out, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimLeft(line, ". "), "status:"); ok {
			status = strings.TrimSpace(v)
			break
		}
	}
	switch {
	case st.Signal == 0 && (st.ExitCode == 0 || st.ExitCode == 2) && status == "done":
		return nil
	case st.Signal == 0 && st.ExitCode == 2 && strings.HasSuffix(status, "done"):
		h.log.Warn().Str("vm", name).Str("status", out).Msg("cloud-init finished with recoverable errors")
		return nil
	case status == "disabled":
		return fmt.Errorf("cloud-init in %s is disabled: it found no data source (the seed, a disk labelled cidata, was not seen); cloud-init status:\n%s", name, out)
	}
	how := fmt.Sprintf("exit %d", st.ExitCode)
	if st.Signal != 0 {
		how = fmt.Sprintf("signal %d", st.Signal)
	}
	return fmt.Errorf("cloud-init in %s failed (cloud-init status --long, %s):\n%s", name, how, out)
}

// GuestExec runs a program in a VM through its guest agent (guest-exec)
// and waits for it to exit (guest-exec-status, every 10 ms at first,
// doubling up to 0.5 s). With e.CaptureOutput the status has its output
// (at most 16 MiB of each stream, kept by the agent until the exit). When
// ctx ends first, the error says so and the process goes on in the
// guest: the agent cannot stop it.
func (h *Host) GuestExec(ctx context.Context, name string, e qga.Exec) (qga.Status, error) {
	cmd, err := e.Command()
	if err != nil {
		return qga.Status{}, fmt.Errorf("guest exec in %s: %w: %w", name, hp.ErrInvalid, err)
	}
	out, err := h.AgentCommand(ctx, name, cmd, AgentCallTimeout)
	if err != nil {
		return qga.Status{}, err
	}
	pid, err := qga.ParseExec(out)
	if err != nil {
		return qga.Status{}, fmt.Errorf("guest exec %s in %s: %w", e.Path, name, err)
	}
	pause := execPollFirst
	for {
		select {
		case <-ctx.Done():
			return qga.Status{}, fmt.Errorf("guest exec %s (pid %d) in %s: %w (it goes on in the guest)", e.Path, pid, name, ctx.Err())
		case <-time.After(pause):
		}
		out, err := h.AgentCommand(ctx, name, qga.ExecStatus(pid), AgentCallTimeout)
		if err != nil {
			return qga.Status{}, err
		}
		st, err := qga.ParseExecStatus(out)
		if err != nil {
			return qga.Status{}, fmt.Errorf("guest exec %s (pid %d) in %s: %w", e.Path, pid, name, err)
		}
		if st.Exited {
			return st, nil
		}
		pause = min(2*pause, execPollMax)
	}
}
