package executor

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// The files of one attempt of a command, in Run.Dir/attempt-N:
//
//	lock            flock'd (exclusive) by the supervisor from before it
//	                starts until it has recorded the exit: held means a
//	                supervisor runs the attempt
//	supervisor      "PID STARTTIME": the supervisor's process, to signal it
//	output          the command's standard output and error, capped
//	exit            the exit record (JSON), written once, atomically and
//	                durably, when the command has ended
//	supervisor.log  the supervisor's own log
//	cgroup          the path of the cgroup (v2) the command runs in,
//	                written before its supervisor starts
const (
	cgroupFile = "cgroup"
	lockName   = "lock"
	pidName    = "supervisor"
	outputName = "output"
	exitName   = "exit"
	slogName   = "supervisor.log"
)

// AttemptDir is the directory of one attempt's files in a run's directory.
func AttemptDir(dir string, attempt int) string {
	return filepath.Join(dir, "attempt-"+strconv.Itoa(attempt))
}

// OutputFile is the file that holds the output of an attempt.
func OutputFile(dir string, attempt int) string {
	return filepath.Join(AttemptDir(dir, attempt), outputName)
}

// exitRecord is how an attempt's command ended, as its supervisor saw it.
type exitRecord struct {
	Attempt  int    `json:"attempt"`
	ExitCode int    `json:"exit_code"`
	Reason   string `json:"reason,omitempty"`
	// StartError says why the command could not be started (Errno its
	// errno); the command then never ran.
	StartError string `json:"start_error,omitempty"`
	Errno      int    `json:"errno,omitempty"`
	// Stopped: the supervisor had been told to stop the command (SIGTERM)
	// before it ended.
	Stopped bool `json:"stopped,omitempty"`
	// OutputKept is the bytes of output in the output file (the note of a
	// cut included); OutputRead what the supervisor read from the
	// command's pipe.
	OutputKept int64     `json:"output_kept"`
	OutputRead int64     `json:"output_read"`
	Ended      time.Time `json:"ended"`
}

func (r exitRecord) result() Result { return Result{ExitCode: r.ExitCode, Reason: r.Reason} }

// readExit reads the attempt's exit record; fs.ErrNotExist when there is
// none.
func readExit(adir string) (exitRecord, error) {
	data, err := os.ReadFile(filepath.Join(adir, exitName))
	if err != nil {
		return exitRecord{}, err
	}
	var r exitRecord
	if err := json.Unmarshal(data, &r); err != nil {
		return exitRecord{}, fmt.Errorf("exit record %s: %w", filepath.Join(adir, exitName), err)
	}
	return r, nil
}

// writeDurably writes data to dir/name so that a reader finds the whole
// file or none, and a crash of the machine keeps it once this returned:
// a temporary file written and fsync'd, renamed over name, and the
// directory fsync'd.
func writeDurably(dir, name string, data []byte) error {
	tmp, err := os.CreateTemp(dir, "."+name+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // once renamed, nothing to remove
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), filepath.Join(dir, name)); err != nil {
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// supervisorRef is a supervisor process: its PID and start time.
type supervisorRef struct {
	pid   int
	start uint64
}

func writeSupervisorRef(adir string) error {
	pid := os.Getpid()
	st, err := startTime(pid)
	if err != nil {
		return err
	}
	// Read by a daemon that starts while this one runs: written whole.
	return writeDurably(adir, pidName, fmt.Appendf(nil, "%d %d\n", pid, st))
}

func readSupervisorRef(adir string) (supervisorRef, error) {
	data, err := os.ReadFile(filepath.Join(adir, pidName))
	if err != nil {
		return supervisorRef{}, err
	}
	f := strings.Fields(string(data))
	if len(f) != 2 {
		return supervisorRef{}, fmt.Errorf("%s: %q is not PID STARTTIME", filepath.Join(adir, pidName), data)
	}
	pid, err1 := strconv.Atoi(f[0])
	st, err2 := strconv.ParseUint(f[1], 10, 64)
	if err := errors.Join(err1, err2); err != nil || pid <= 0 {
		return supervisorRef{}, fmt.Errorf("%s: %q is not PID STARTTIME", filepath.Join(adir, pidName), data)
	}
	return supervisorRef{pid: pid, start: st}, nil
}

// alive reports whether the process is still the supervisor (not a
// process that got its PID since).
func (s supervisorRef) alive() bool {
	st, err := startTime(s.pid)
	return err == nil && st == s.start
}

// started reports whether a supervisor ever started in adir.
func started(adir string) bool {
	for _, n := range []string{pidName, outputName} {
		if _, err := os.Stat(filepath.Join(adir, n)); !errors.Is(err, fs.ErrNotExist) {
			return true
		}
	}
	return false
}

// cgroupPrefix begins the name of every cgroup the executor makes.
const cgroupPrefix = "metasched-"

// readCgroup reads the path of the attempt's cgroup. Only a directory
// below a cgroup v2 mount named by the executor's prefix is taken.
func readCgroup(adir string) (string, error) {
	data, err := os.ReadFile(filepath.Join(adir, cgroupFile))
	if err != nil {
		return "", err
	}
	cg := strings.TrimSuffix(string(data), "\n")
	if !filepath.IsAbs(cg) || filepath.Clean(cg) != cg || !strings.HasPrefix(filepath.Base(cg), cgroupPrefix) {
		return "", fmt.Errorf("%s: %q is not a cgroup of a job", filepath.Join(adir, cgroupFile), data)
	}
	return cg, nil
}
