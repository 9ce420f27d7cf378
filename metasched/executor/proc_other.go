//go:build !linux

package executor

import (
	"errors"
	"os"
	"syscall"
	"time"

	"github.com/rs/zerolog"
)

var errNotLinux = errors.New("the host-command executor runs on Linux only")

// BecomeSubreaper makes the calling process a child subreaper on Linux;
// elsewhere it fails.
func BecomeSubreaper() error { return errNotLinux }

func supported() error { return errNotLinux }

func commandAttr(*commandIDs, *os.File) *syscall.SysProcAttr { return nil }

func noSearch(os.FileInfo, account) string { return "" }

func supervisorAttr() *syscall.SysProcAttr { return nil }

func tryLock(*os.File, bool) (bool, error) { return false, errNotLinux }

func unlock(*os.File) {}

func closeOnExec(uintptr) {}

func startTime(int) (uint64, error) { return 0, errNotLinux }

func errnoOf(error) int { return 0 }

func errnoError(int) error { return nil }

func findCgroupParent() (string, error) { return "", errNotLinux }

func checkCgroupParent(string) error { return errNotLinux }

func cgroupName(string, string) (string, error) { return "", errNotLinux }

func makeCgroup(string) error { return errNotLinux }

func openCgroup(string) (*os.File, error) { return nil, errNotLinux }

func populated(string) bool { return false }

func signalCgroup(string, syscall.Signal) {}

func killCgroup(string) error { return errNotLinux }

func clearCgroup(zerolog.Logger, string, time.Duration, time.Time, time.Time) error {
	return errNotLinux
}

func endCgroup(string) error { return errNotLinux }

func removeCgroup(string) error { return errNotLinux }

func exitResult(ps *os.ProcessState) Result {
	if ps.ExitCode() == 0 {
		return Result{}
	}
	return Result{ExitCode: ps.ExitCode(), Reason: ps.String()}
}
