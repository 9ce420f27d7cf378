package virt

import (
	"errors"
	"fmt"

	"libvirt.org/go/libvirt"

	hp "github.com/metasched/metasched/hypervisorproxy"
)

// Error is a libvirt error mapped to a sentinel of package hypervisorproxy.
// errors.Is matches the sentinel; errors.As finds the libvirt.Error.
type Error struct {
	Op       string // what the driver was doing: "create vm-1", "set vcpus of vm-1 to 3"
	Sentinel error  // a hypervisorproxy sentinel, or nil
	Err      error  // the libvirt error
	// Hint says what the host needs, when the driver can tell from the
	// error (the certificates of a migration over TLS); "" else.
	Hint string
}

func (e *Error) Error() string {
	var lv libvirt.Error
	msg := e.Err.Error()
	if errors.As(e.Err, &lv) {
		msg = lv.Message
	}
	if e.Hint != "" {
		msg += "; " + e.Hint
	}
	if e.Sentinel != nil {
		return fmt.Sprintf("%s: %v: %s", e.Op, e.Sentinel, msg)
	}
	return fmt.Sprintf("%s: %s", e.Op, msg)
}

// Unwrap returns the sentinel and the libvirt error.
func (e *Error) Unwrap() []error {
	if e.Sentinel == nil {
		return []error{e.Err}
	}
	return []error{e.Sentinel, e.Err}
}

// sentinels maps libvirt error codes to the agent's sentinels.
var sentinels = map[libvirt.ErrorNumber]error{
	libvirt.ERR_NO_DOMAIN:             hp.ErrNotFound,
	libvirt.ERR_DOM_EXIST:             hp.ErrExists,
	libvirt.ERR_NO_SUPPORT:            hp.ErrUnsupported,
	libvirt.ERR_OPERATION_UNSUPPORTED: hp.ErrUnsupported,
	libvirt.ERR_ARGUMENT_UNSUPPORTED:  hp.ErrUnsupported,
	libvirt.ERR_CONFIG_UNSUPPORTED:    hp.ErrUnsupported,
	libvirt.ERR_MIGRATE_UNSAFE:        hp.ErrUnsupported,
	libvirt.ERR_INVALID_ARG:           hp.ErrInvalid,
	libvirt.ERR_OPERATION_INVALID:     hp.ErrBusy,
	libvirt.ERR_OPERATION_ABORTED:     hp.ErrAborted,
	libvirt.ERR_OPERATION_TIMEOUT:     hp.ErrAborted,
	libvirt.ERR_NO_CONNECT:            hp.ErrConnLost,
	libvirt.ERR_INVALID_CONN:          hp.ErrConnLost,
	libvirt.ERR_RPC:                   hp.ErrConnLost,
	libvirt.ERR_SYSTEM_ERROR:          hp.ErrConnLost,
	libvirt.ERR_AUTH_FAILED:           hp.ErrConnLost,
	libvirt.ERR_AUTH_UNAVAILABLE:      hp.ErrConnLost,
	libvirt.ERR_AUTH_CANCELLED:        hp.ErrConnLost,
	libvirt.ERR_AGENT_UNRESPONSIVE:    hp.ErrGuestAgent,
	libvirt.ERR_AGENT_UNSYNCED:        hp.ErrGuestAgent,
	libvirt.ERR_AGENT_COMMAND_TIMEOUT: hp.ErrGuestAgent,
}

// wrap maps a libvirt error to an *Error; nil stays nil.
func wrap(err error, format string, args ...any) error {
	if err == nil {
		return nil
	}
	e := &Error{Op: fmt.Sprintf(format, args...), Err: err}
	var lv libvirt.Error
	if errors.As(err, &lv) {
		e.Sentinel = sentinels[lv.Code]
	}
	return e
}

// code is the libvirt error code of err, or ERR_OK.
func code(err error) libvirt.ErrorNumber {
	var lv libvirt.Error
	if errors.As(err, &lv) {
		return lv.Code
	}
	return libvirt.ERR_OK
}
