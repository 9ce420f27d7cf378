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
	"github.com/metasched/metasched/hypervisorproxy/cloudinit"
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

// Where cloud-init says how far it got (its documented run files).
const (
	// cloudInitResult is written once cloud-init's last stage has run,
	// with the errors of every stage ({"v1": {"errors": [...]}}).
	cloudInitResult = "/run/cloud-init/result.json"
	// cloudInitDisabled is made when cloud-init's generator found no data
	// source: cloud-init does not run.
	cloudInitDisabled = "/run/cloud-init/disabled"
	// cloudInitPoll is how often the result is looked for.
	cloudInitPoll = time.Second
)

// WaitCloudInit waits for cloud-init in a booted guest to finish: it
// reads cloud-init's result file through the guest agent every second
// (a read costs the guest nothing; cloud-init status --wait is a Python
// process polling for as long, and its start alone takes seconds of an
// emulated CPU). It returns nil once the result has no errors; an error
// with cloud-init status --long (run once then) when it has some; an
// error at once when the guest has no cloud-init on its guest agent's
// PATH, and when cloud-init is disabled (it found no data source).
func (h *Host) WaitCloudInit(ctx context.Context, name string) error {
	st, err := h.GuestExec(ctx, name, qga.Exec{Path: "/bin/sh", Args: []string{"-c", "command -v cloud-init"}, CaptureOutput: true})
	switch {
	case err != nil:
		return fmt.Errorf("cloud-init in %s: %w", name, err)
	case st.ExitCode != 0 || st.Signal != 0:
		return fmt.Errorf("%s has no cloud-init (no program cloud-init on its guest agent's PATH): "+
			"an image of contextualization cloud-init needs cloud-init with its NoCloud data source", name)
	}
	for {
		c, err := h.ReadGuestFile(ctx, name, cloudInitResult, 0, 1<<20)
		switch {
		case err == nil:
			return h.cloudInitResult(ctx, name, c.Data)
		case !errors.Is(err, hp.ErrNotFound):
			return fmt.Errorf("cloud-init in %s: %s: %w", name, cloudInitResult, err)
		}
		if _, err := h.ReadGuestFile(ctx, name, cloudInitDisabled, 0, 4096); err == nil {
			return fmt.Errorf("cloud-init in %s is disabled: it found no data source (the seed, a disk labelled cidata, was not seen); %s",
				name, h.cloudInitStatus(ctx, name))
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("cloud-init in %s: not done: %w; %s", name, ctx.Err(), h.cloudInitStatus(context.WithoutCancel(ctx), name))
		case <-time.After(cloudInitPoll):
		}
	}
}

// cloudInitResult is nil for a result without errors, else an error with
// them and cloud-init's status.
func (h *Host) cloudInitResult(ctx context.Context, name string, data []byte) error {
	r, err := cloudinit.ParseResult(data)
	if err != nil {
		return fmt.Errorf("cloud-init in %s: %w", name, err)
	}
	if len(r.Errors) == 0 {
		return nil
	}
	return fmt.Errorf("cloud-init in %s failed: %s; %s", name, strings.Join(r.Errors, "; "), h.cloudInitStatus(ctx, name))
}

// cloudInitStatus is what cloud-init status --long says in the guest
// (at most 30 s), for an error.
func (h *Host) cloudInitStatus(ctx context.Context, name string) string {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	st, err := h.GuestExec(ctx, name, qga.Exec{Path: "/bin/sh", Args: []string{"-c", "cloud-init status --long 2>&1"}, CaptureOutput: true})
	if err != nil {
		return fmt.Sprintf("cloud-init status: %v", err)
	}
	return "cloud-init status --long:\n" + strings.TrimSpace(string(st.Stdout))
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
