package hypervisorproxy

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// ResizeVM changes a VM's vCPUs and memory live, within its maxima and the
// host's free capacity, and reports the sizes read back. On a failure the
// VM keeps the sizes it has (read back where the hypervisor allows).
func (a *Agent) ResizeVM(ctx context.Context, name string, r Resize) (VM, error) {
	var errs []error
	if r.VCPUs < 0 {
		errs = append(errs, fmt.Errorf("vcpus: must be >= 1, not %d", r.VCPUs))
	}
	if r.MemoryMiB < 0 {
		errs = append(errs, fmt.Errorf("memory_mib: must be >= 1, not %d", r.MemoryMiB))
	}
	if r.VCPUs == 0 && r.MemoryMiB == 0 && len(errs) == 0 {
		errs = append(errs, errors.New("vcpus, memory_mib: give at least one"))
	}
	if len(errs) > 0 {
		return VM{}, fmt.Errorf("resize vm %s: %w: %w", name, ErrInvalid, errors.Join(errs...))
	}
	v, h, err := a.acquire(name, "resize")
	if err != nil {
		return VM{}, err
	}
	defer a.release(v)
	a.mu.Lock()
	s := v.spec
	a.mu.Unlock()
	if r.VCPUs > s.MaxVCPUs || r.MemoryMiB > s.MaxMemoryMiB {
		return VM{}, fmt.Errorf("resize vm %s to %d vcpus, %d MiB: %w (max_vcpus %d, max_memory_mib %d)",
			name, r.VCPUs, r.MemoryMiB, ErrLimit, s.MaxVCPUs, s.MaxMemoryMiB)
	}
	sts := a.observe(ctx, h.cfg.Name)
	a.mu.Lock()
	freeC, freeM := a.freeLocked(sts[0])
	growC, growM := max(r.VCPUs-s.VCPUs, 0), max(r.MemoryMiB-s.MemoryMiB, 0) // 0 leaves a size as it is
	if growC > freeC || growM > freeM {
		a.mu.Unlock()
		return VM{}, fmt.Errorf("resize vm %s: %w on %s: %d more vcpus and %d MiB asked, %d and %d free",
			name, ErrCapacity, h.cfg.Name, growC, growM, freeC, freeM)
	}
	// Reserve the growth while the hypervisor works.
	v.spec.VCPUs += growC
	v.spec.MemoryMiB += growM
	hv := h.hv
	a.mu.Unlock()

	l := a.opLog("resize", s)
	start := time.Now()
	var d Domain
	if r.VCPUs != 0 {
		d, err = hv.SetVCPUs(ctx, name, r.VCPUs)
	}
	if err == nil && r.MemoryMiB != 0 {
		d, err = hv.SetMemory(ctx, name, r.MemoryMiB)
	}
	if gh, ok := hv.(GuestAgentHypervisor); ok && err == nil && v.boot > 0 {
		err = onlineGuest(ctx, gh, name)
	}
	a.mu.Lock()
	if d.Name == name {
		v.spec.VCPUs, v.spec.MemoryMiB = d.VCPUs, d.MemoryMiB
	} else {
		v.spec.VCPUs, v.spec.MemoryMiB = s.VCPUs, s.MemoryMiB
	}
	a.touchLocked(name)
	out := a.vmLocked(v, map[string]Domain{d.Name: d})
	a.mu.Unlock()
	logDone(l.With().Int("vcpus", out.VCPUs).Int("memory_mib", out.MemoryMiB).Logger(), start, err, "vm resized")
	if err != nil {
		return out, fmt.Errorf("resize vm %s: %w", name, err)
	}
	return out, nil
}

// onlineScript brings every offline CPU and memory block of a Linux guest
// online (without udev, nothing else does after a hot-plug), and prints
// how many CPUs are online.
const onlineScript = `for f in /sys/devices/system/cpu/cpu[0-9]*/online; do
	[ -e "$f" ] && [ "$(cat "$f")" = 0 ] && echo 1 >"$f"
done
for f in /sys/devices/system/memory/memory[0-9]*/state; do
	[ -e "$f" ] && [ "$(cat "$f")" = offline ] && echo online >"$f"
done
grep -c ^processor /proc/cpuinfo`

// onlineGuest brings the vCPUs and memory a resize added online in the
// guest of a booted VM, through its guest agent, so that its programs can
// use them.
func onlineGuest(ctx context.Context, gh GuestAgentHypervisor, name string) error {
	ctx, cancel := context.WithTimeout(ctx, GuestCallTimeout)
	defer cancel()
	pid, err := gh.StartGuestProcess(ctx, name, GuestExec{Path: "/bin/sh", Args: []string{"-c", onlineScript}, CaptureOutput: true})
	for wait := 10 * time.Millisecond; err == nil; wait = min(2*wait, 500*time.Millisecond) {
		var st GuestExecStatus
		if st, err = gh.GuestProcessStatus(ctx, name, pid); err != nil || st.Exited {
			if err == nil && st.ExitCode != 0 {
				err = fmt.Errorf("exit %d: %s", st.ExitCode, st.Stderr)
			}
			break
		}
		select {
		case <-ctx.Done():
			err = ctx.Err()
		case <-time.After(wait):
		}
	}
	if err != nil {
		return fmt.Errorf("%w: the guest did not bring its new vCPUs and memory online: %w", ErrGuestAgent, err)
	}
	return nil
}
