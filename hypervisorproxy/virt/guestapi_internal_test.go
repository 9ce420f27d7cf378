package virt

import (
	"errors"
	"fmt"
	"testing"

	"libvirt.org/go/libvirt"

	hp "github.com/metasched/metasched/hypervisorproxy"
)

// What the guest says about files and processes maps to the agent's
// sentinels; errors that have one already keep it.
func TestGuestError(t *testing.T) {
	agentErr := func(desc string) error {
		return wrap(libvirt.Error{Code: libvirt.ERR_INTERNAL_ERROR,
			Message: "internal error: unable to execute QEMU agent command 'guest-file-open': " + desc}, "guest agent of vm-1")
	}
	for _, tc := range []struct {
		err  error
		want error
	}{
		{agentErr("failed to open file '/x' (mode: 'r'): No such file or directory"), hp.ErrNotFound},
		{agentErr("failed to open file '/x/y' (mode: 'w'): Not a directory"), hp.ErrNotFound},
		{agentErr("Invalid parameter 'pid'"), hp.ErrNotFound},
		{agentErr("failed to read file: Is a directory"), hp.ErrInvalid},
		{agentErr("failed to open file '/x': Permission denied"), hp.ErrInvalid},
		// A lost connection whose message names a missing socket stays lost.
		{wrap(libvirt.Error{Code: libvirt.ERR_SYSTEM_ERROR, Message: "Failed to connect socket: No such file or directory"}, "guest agent of vm-1"), hp.ErrConnLost},
		{wrap(libvirt.Error{Code: libvirt.ERR_AGENT_UNRESPONSIVE, Message: "Guest agent is not responding: No such file or directory"}, "x"), hp.ErrGuestAgent},
	} {
		got := guestError(tc.err)
		if !errors.Is(got, tc.want) {
			t.Errorf("guestError(%v) = %v, want %v", tc.err, got, tc.want)
		}
		if _, code := hp.Status(got); code != mustCode(tc.want) {
			t.Errorf("guestError(%v) has code %s, want %s", tc.err, code, mustCode(tc.want))
		}
	}
	if err := guestError(fmt.Errorf("guest agent: GenericError: something else")); mustCode(err) != "internal" {
		t.Errorf("an unknown guest error: %v has code %s, want internal", err, mustCode(err))
	}
	if guestError(nil) != nil {
		t.Error("guestError(nil) is not nil")
	}
}

func mustCode(s error) string {
	_, code := hp.Status(s)
	return code
}
