package hypervisorproxy

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"unicode/utf8"
)

// Sentinel errors. Drivers wrap them (errors.Is works through every
// layer); the HTTP API maps them to status codes (see Status) and the client
// maps the codes back, so a caller of the client can test errors.Is(err,
// ErrNotFound) as it would against an in-process agent.
var (
	// ErrInvalid: a request field is missing or out of range.
	ErrInvalid = errors.New("invalid request")
	// ErrNotFound: no such VM or host.
	ErrNotFound = errors.New("not found")
	// ErrExists: a VM of that name exists already.
	ErrExists = errors.New("already exists")
	// ErrCapacity: the host has not enough free vCPUs or memory.
	ErrCapacity = errors.New("not enough free capacity")
	// ErrWrongPool: the host is in another pool than the VM's (it was
	// reconfigured since the caller last looked).
	ErrWrongPool = errors.New("host in another pool")
	// ErrLimit: a resize beyond the VM's maximum vCPUs or memory.
	ErrLimit = errors.New("beyond the vm's maximum")
	// ErrUnsupported: the hypervisor cannot do this (vCPU unplug on QEMU,
	// a balloon change that did not take, a migration between hosts of
	// two kinds, guest calls or a guest image on the test driver). A
	// migration between two test-driver hosts is not refused: it is a
	// cold move (Live false).
	ErrUnsupported = errors.New("not supported by the hypervisor")
	// ErrBusy: the VM or host is in the middle of another operation, or a
	// host runs VMs of a job the coordinator has not released.
	ErrBusy = errors.New("busy")
	// ErrConnLost: the connection to a host's hypervisor is lost.
	ErrConnLost = errors.New("hypervisor connection lost")
	// ErrAborted: a migration was aborted (progress timeout or cancel); the
	// VM still runs on its source host.
	ErrAborted = errors.New("aborted")
	// ErrUnauthorized: missing or wrong bearer token.
	ErrUnauthorized = errors.New("unauthorized")
	// ErrForbidden: the client's certificate names a party that may not
	// make this call (another agent outside the probe sink, a user's
	// client).
	ErrForbidden = errors.New("forbidden")
	// ErrGuestAgent: the guest agent of a VM does not answer (not yet
	// started, not connected, or timed out).
	ErrGuestAgent = errors.New("guest agent not answering")
	// ErrBoot: a VM was made but its image did not boot: QEMU could not
	// start it, or its guest agent did not answer within the site's
	// boot_timeout. The VM is gone.
	ErrBoot = errors.New("the guest did not boot")
	// ErrStaleLeader: the request came from a daemon that no longer leads
	// (its leader epoch is lower than one the agent has seen; leader.go).
	ErrStaleLeader = errors.New("the daemon no longer leads")
)

// codes are the machine-readable names of the sentinels in API errors.
var codes = []struct {
	err    error
	code   string
	status int
}{
	{ErrInvalid, "invalid", http.StatusBadRequest},
	{ErrNotFound, "not_found", http.StatusNotFound},
	{ErrExists, "exists", http.StatusConflict},
	{ErrCapacity, "capacity", http.StatusConflict},
	{ErrWrongPool, "wrong_pool", http.StatusConflict},
	{ErrLimit, "limit", http.StatusUnprocessableEntity},
	{ErrUnsupported, "unsupported", http.StatusUnprocessableEntity},
	{ErrBusy, "busy", http.StatusConflict},
	{ErrConnLost, "conn_lost", http.StatusBadGateway},
	{ErrAborted, "aborted", http.StatusGatewayTimeout},
	{ErrUnauthorized, "unauthorized", http.StatusUnauthorized},
	{ErrForbidden, "forbidden", http.StatusForbidden},
	{ErrBoot, "boot_failed", http.StatusBadGateway},
	{ErrGuestAgent, "guest_agent", http.StatusServiceUnavailable},
	{ErrStaleLeader, "stale_leader", http.StatusConflict},
}

// Status returns the HTTP status and the error code of err: the first
// sentinel it wraps, else 500 "internal".
func Status(err error) (int, string) {
	for _, c := range codes {
		if errors.Is(err, c.err) {
			return c.status, c.code
		}
	}
	return http.StatusInternalServerError, "internal"
}

// Sentinel returns the sentinel error of an API error code, or nil.
func Sentinel(code string) error {
	for _, c := range codes {
		if c.code == code {
			return c.err
		}
	}
	return nil
}

// DecodeError turns an agent's error response (status and body) into a
// *RemoteError that wraps the sentinel of its code; the client uses it.
func DecodeError(status int, body []byte) error {
	var e APIError
	if json.Unmarshal(body, &e) != nil || e.Error == "" {
		msg := strings.TrimSpace(string(body))
		if len(msg) > 200 {
			cut := 200 // at the start of a letter: the message stays UTF-8
			for cut > 0 && !utf8.RuneStart(msg[cut]) {
				cut--
			}
			msg = msg[:cut] + "…"
		}
		return fmt.Errorf("http %d: %s", status, msg)
	}
	if s := Sentinel(e.Code); s != nil {
		return &RemoteError{Status: status, Code: e.Code, Message: e.Error, sentinel: s}
	}
	return &RemoteError{Status: status, Code: e.Code, Message: e.Error}
}

// RemoteError is an error an agent answered with. errors.Is matches the
// sentinel of its code.
type RemoteError struct {
	Status   int
	Code     string
	Message  string
	sentinel error
}

func (e *RemoteError) Error() string { return e.Message }

// Unwrap returns the sentinel of the error's code.
func (e *RemoteError) Unwrap() error { return e.sentinel }
