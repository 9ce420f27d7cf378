//go:build !linux

package executor

import (
	"errors"
	"os"
	"syscall"
)

var errNotLinux = errors.New("the command executor runs on Linux only")

// BecomeSubreaper makes the calling process a child subreaper on Linux;
// elsewhere it fails.
func BecomeSubreaper() error { return errNotLinux }

func supported() error { return errNotLinux }

func sysProcAttr() *syscall.SysProcAttr { return nil }

func signalGroup(int, syscall.Signal) {}

func groupAlive(int) bool { return false }

func reapGroup(int) {}

func exitResult(ps *os.ProcessState) Result {
	if ps.ExitCode() == 0 {
		return Result{}
	}
	return Result{ExitCode: ps.ExitCode(), Reason: ps.String()}
}
