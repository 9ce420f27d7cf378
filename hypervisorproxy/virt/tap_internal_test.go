package virt

import (
	"errors"
	"testing"

	"libvirt.org/go/libvirt"
)

// Only the lost race for a tap's name is retried.
func TestTapRace(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{libvirt.Error{Code: libvirt.ERR_INTERNAL_ERROR, Message: "Unable to create tap device vnet0: Device or resource busy"}, true},
		{libvirt.Error{Code: libvirt.ERR_INTERNAL_ERROR, Message: "Unable to create tap device vnet0: Operation not permitted"}, false},
		{libvirt.Error{Code: libvirt.ERR_INTERNAL_ERROR, Message: "process exited while connecting to monitor: could not open kernel file"}, false},
		{errors.New("busy"), false},
	} {
		if got := tapRace(tc.err); got != tc.want {
			t.Errorf("tapRace(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}
