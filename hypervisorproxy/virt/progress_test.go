package virt

import (
	"errors"
	"testing"
	"time"

	"libvirt.org/go/libvirt"

	hp "github.com/metasched/metasched/hypervisorproxy"
)

func TestProgress(t *testing.T) {
	t0 := time.Unix(1000, 0)
	p := progress{timeout: 2 * time.Second}
	steps := []struct {
		at        time.Duration
		processed uint64
		moving    bool
	}{
		{0, 0, true},
		{time.Second, 0, true},              // nothing yet, within the timeout
		{2 * time.Second, 0, true},          // exactly the timeout
		{2*time.Second + 1, 0, false},       // stalled
		{3 * time.Second, 10, true},         // moving again
		{4 * time.Second, 10, true},         //
		{5*time.Second + 1, 10, false},      // stalled since 3 s
		{6 * time.Second, 5, false},         // less than before is no progress
		{7 * time.Second, 1 << 30, true},    // a burst
		{9 * time.Second, 1 << 30, true},    // 2 s
		{9*time.Second + 1, 1 << 30, false}, // stalled
	}
	for _, s := range steps {
		if got := p.moved(s.processed, t0.Add(s.at)); got != s.moving {
			t.Errorf("at %v with %d bytes: moved = %v, want %v", s.at, s.processed, got, s.moving)
		}
	}
}

func TestErrorMapping(t *testing.T) {
	for _, tc := range []struct {
		code libvirt.ErrorNumber
		want error
	}{
		{libvirt.ERR_NO_DOMAIN, hp.ErrNotFound},
		{libvirt.ERR_DOM_EXIST, hp.ErrExists},
		{libvirt.ERR_OPERATION_UNSUPPORTED, hp.ErrUnsupported},
		{libvirt.ERR_NO_SUPPORT, hp.ErrUnsupported},
		{libvirt.ERR_INVALID_ARG, hp.ErrInvalid},
		{libvirt.ERR_OPERATION_ABORTED, hp.ErrAborted},
		{libvirt.ERR_INVALID_CONN, hp.ErrConnLost},
		{libvirt.ERR_RPC, hp.ErrConnLost},
	} {
		err := wrap(libvirt.Error{Code: tc.code, Message: "boom"}, "op %d", 1)
		if !errors.Is(err, tc.want) {
			t.Errorf("code %d: %v is not %v", tc.code, err, tc.want)
		}
		var lv libvirt.Error
		if !errors.As(err, &lv) || lv.Code != tc.code {
			t.Errorf("code %d: the libvirt error is lost: %v", tc.code, err)
		}
		if got, want := err.Error(), "op 1: "+tc.want.Error()+": boom"; got != want {
			t.Errorf("message %q, want %q", got, want)
		}
	}
	if err := wrap(libvirt.Error{Code: libvirt.ERR_INTERNAL_ERROR, Message: "x"}, "op"); errors.Is(err, hp.ErrNotFound) || err.Error() != "op: x" {
		t.Errorf("an unmapped code: %v", err)
	}
	if wrap(nil, "op") != nil {
		t.Error("wrap(nil) is not nil")
	}
}
