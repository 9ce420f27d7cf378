// Package qga writes the commands of QEMU's guest agent (qemu-ga) and
// reads its replies: the JSON that libvirt's QemuAgentCommand carries to
// and from the agent in a guest. It is pure (no I/O, no libvirt): the
// libvirt driver (package virt) sends what it writes.
//
// A command is {"execute": NAME, "arguments": {...}}; a reply is
// {"return": VALUE} or {"error": {"class": ..., "desc": ...}} (the QEMU
// guest agent protocol, qapi/qga). guest-exec starts a program and
// returns its pid; guest-exec-status reports whether it has exited, its
// exit code or signal and, when output was captured, its standard output
// and error (base64, at most 16 MiB each, after the exit only). The agent
// forgets a process once it has reported its exit.
//
// The design is described in docs/internals/images.md of the
// repository, "The domain and the guest agent".
package qga

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// Error is an error reply of the agent.
type Error struct {
	Class string
	Desc  string
}

func (e *Error) Error() string { return fmt.Sprintf("guest agent: %s: %s", e.Class, e.Desc) }

// command renders one command.
func command(name string, args any) string {
	c := struct {
		Execute   string `json:"execute"`
		Arguments any    `json:"arguments,omitempty"`
	}{name, args}
	b, err := json.Marshal(c)
	if err != nil {
		panic(err) // the argument types below always marshal
	}
	return string(b)
}

// reply decodes a reply's return value into v, or returns its error.
func reply(name, text string, v any) error {
	var r struct {
		Return json.RawMessage `json:"return"`
		Error  *struct {
			Class string `json:"class"`
			Desc  string `json:"desc"`
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(text), &r); err != nil {
		return fmt.Errorf("guest agent: %s reply: %w", name, err)
	}
	if r.Error != nil {
		return &Error{Class: r.Error.Class, Desc: r.Error.Desc}
	}
	if r.Return == nil {
		return fmt.Errorf("guest agent: %s reply has no return value: %s", name, clip(text))
	}
	if v == nil {
		return nil
	}
	if err := json.Unmarshal(r.Return, v); err != nil {
		return fmt.Errorf("guest agent: %s reply: %w", name, err)
	}
	return nil
}

func clip(s string) string {
	if len(s) > 200 {
		return s[:200] + "…"
	}
	return s
}

// Ping is guest-ping: the agent answers an empty return value.
func Ping() string { return command("guest-ping", nil) }

// ParsePing reads the reply of guest-ping.
func ParsePing(text string) error { return reply("guest-ping", text, nil) }

// Exec is a program to start in the guest with guest-exec.
type Exec struct {
	Path          string   // the program; without a '/', looked up in the agent's PATH
	Args          []string // its arguments, after the program's name
	Env           []string // NAME=value; empty: the agent's environment
	Input         []byte   // its standard input; empty: /dev/null
	CaptureOutput bool     // keep its standard output and error for guest-exec-status
}

// MaxInput bounds Exec.Input: a command crosses libvirt's RPC, whose
// strings are limited (4 MiB), as base64.
const MaxInput = 2 << 20

// ArgvProblems names what is wrong with a program's arguments and
// environment (args[i]: a NUL; env[i]: not NAME=value, or a NUL).
func ArgvProblems(args, env []string) []error {
	var errs []error
	for i, a := range args {
		if strings.ContainsRune(a, 0) {
			errs = append(errs, fmt.Errorf("args[%d]: must not contain NUL", i))
		}
	}
	for i, v := range env {
		name, _, ok := strings.Cut(v, "=")
		if !ok || name == "" || strings.ContainsRune(v, 0) {
			if len(v) > 64 {
				v = v[:64] + "…"
			}
			errs = append(errs, fmt.Errorf("env[%d]: must be NAME=value without NUL, not %q", i, v))
		}
	}
	return errs
}

// Command returns the guest-exec command, or what is wrong with e (every
// problem, each naming its field: path, args[i], env[i], input).
func (e Exec) Command() (string, error) {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", field, fmt.Sprintf(format, args...)))
	}
	if e.Path == "" {
		bad("path", "must not be empty")
	} else if strings.ContainsRune(e.Path, 0) {
		bad("path", "must not contain NUL")
	}
	errs = append(errs, ArgvProblems(e.Args, e.Env)...)
	if len(e.Input) > MaxInput {
		bad("input", "must be at most %d bytes, not %d", MaxInput, len(e.Input))
	}
	if err := errors.Join(errs...); err != nil {
		return "", err
	}
	args := struct {
		Path          string   `json:"path"`
		Arg           []string `json:"arg,omitempty"`
		Env           []string `json:"env,omitempty"`
		InputData     string   `json:"input-data,omitempty"`
		CaptureOutput bool     `json:"capture-output,omitempty"`
	}{e.Path, e.Args, e.Env, "", e.CaptureOutput}
	if len(e.Input) > 0 {
		args.InputData = base64.StdEncoding.EncodeToString(e.Input)
	}
	return command("guest-exec", args), nil
}

// ParseExec reads the reply of guest-exec: the process's pid.
func ParseExec(text string) (int, error) {
	var r struct {
		PID *int `json:"pid"`
	}
	if err := reply("guest-exec", text, &r); err != nil {
		return 0, err
	}
	if r.PID == nil || *r.PID <= 0 {
		return 0, fmt.Errorf("guest agent: guest-exec reply has no pid: %s", clip(text))
	}
	return *r.PID, nil
}

// ExecStatus is guest-exec-status for the process pid.
func ExecStatus(pid int) string {
	return command("guest-exec-status", struct {
		PID int `json:"pid"`
	}{pid})
}

// Status is what guest-exec-status reports of a process.
type Status struct {
	Exited   bool
	ExitCode int // when Exited and Signal is 0
	Signal   int // the signal that ended it, or 0
	Stdout   []byte
	Stderr   []byte
	// The agent keeps at most 16 MiB of each: the rest is lost.
	StdoutTruncated, StderrTruncated bool
}

// ParseExecStatus reads the reply of guest-exec-status.
func ParseExecStatus(text string) (Status, error) {
	var r struct {
		Exited       *bool  `json:"exited"`
		ExitCode     *int   `json:"exitcode"`
		Signal       *int   `json:"signal"`
		OutData      string `json:"out-data"`
		ErrData      string `json:"err-data"`
		OutTruncated bool   `json:"out-truncated"`
		ErrTruncated bool   `json:"err-truncated"`
	}
	if err := reply("guest-exec-status", text, &r); err != nil {
		return Status{}, err
	}
	if r.Exited == nil {
		return Status{}, fmt.Errorf("guest agent: guest-exec-status reply has no exited: %s", clip(text))
	}
	st := Status{Exited: *r.Exited, StdoutTruncated: r.OutTruncated, StderrTruncated: r.ErrTruncated}
	if st.Exited {
		switch {
		case r.Signal != nil && *r.Signal > 0:
			st.Signal = *r.Signal
		case r.ExitCode != nil:
			st.ExitCode = *r.ExitCode
		default:
			return Status{}, fmt.Errorf("guest agent: guest-exec-status reply of an exited process has neither exitcode nor signal: %s", clip(text))
		}
	}
	var err error
	if st.Stdout, err = base64.StdEncoding.DecodeString(r.OutData); err != nil {
		return Status{}, fmt.Errorf("guest agent: guest-exec-status out-data: %w", err)
	}
	if st.Stderr, err = base64.StdEncoding.DecodeString(r.ErrData); err != nil {
		return Status{}, fmt.Errorf("guest agent: guest-exec-status err-data: %w", err)
	}
	return st, nil
}
