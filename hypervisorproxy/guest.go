package hypervisorproxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"net/http"
	"net/url"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/metasched/metasched/hypervisorproxy/qga"
)

// The guest calls: programs started and files read and written inside a
// VM the agent manages, through its QEMU guest agent (see "Guest calls" in
// docs/internals/agent.md). They do not hold the VM: several may run at
// once, and alongside a resize. A call waits while the VM is being
// migrated (its domain leaves the source host at the end, before the
// agent's record follows it), and then goes to the host it is on; a call
// that a migration cut is ErrGuestAgent, which the caller may try again.

// GuestAgentHypervisor is a Hypervisor that reaches the guest agent of
// its VMs (the libvirt driver). A VM whose agent does not answer is
// ErrGuestAgent; one without an agent channel, or a driver without guest
// agents (libvirt's test driver), ErrUnsupported; a file or process the
// guest does not have, ErrNotFound.
type GuestAgentHypervisor interface {
	Hypervisor
	// StartGuestProcess starts a program (guest-exec) and returns its pid.
	StartGuestProcess(ctx context.Context, name string, e GuestExec) (int, error)
	// GuestProcessStatus reads a program's state (guest-exec-status).
	GuestProcessStatus(ctx context.Context, name string, pid int) (GuestExecStatus, error)
	// WriteGuestFile replaces the file at path with data and gives it
	// mode (its parent directory must exist).
	WriteGuestFile(ctx context.Context, name, path string, data []byte, mode os.FileMode) error
	// ReadGuestFile reads at most max bytes of a file from offset.
	ReadGuestFile(ctx context.Context, name, path string, offset int64, max int) (GuestFileChunk, error)
}

// GuestCallTimeout bounds one guest call of the agent: a guest agent that
// hangs keeps the caller no longer than that.
const GuestCallTimeout = 30 * time.Second

// maxGuestPath bounds a path inside a guest (Linux's PATH_MAX).
const maxGuestPath = 4096

// checkGuestPath checks a path of a file inside a guest: absolute, clean
// (no "..", no "//", no trailing '/'), without NUL.
func checkGuestPath(field, p string) error {
	switch {
	case p == "":
		return fmt.Errorf("%s: is required", field)
	case len(p) > maxGuestPath:
		return fmt.Errorf("%s: must be at most %d bytes, not %d", field, maxGuestPath, len(p))
	case strings.ContainsRune(p, 0):
		return fmt.Errorf("%s: must not contain NUL", field)
	case !path.IsAbs(p) || path.Clean(p) != p || p == "/":
		return fmt.Errorf("%s: must be a clean absolute path of a file, not %q", field, p)
	}
	return nil
}

// checkGuestExec names every bad field of e.
func checkGuestExec(e GuestExec) error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", field, fmt.Sprintf(format, args...)))
	}
	switch {
	case e.Path == "":
		bad("path", "is required")
	case strings.ContainsRune(e.Path, 0):
		bad("path", "must not contain NUL")
	case len(e.Path) > maxGuestPath:
		bad("path", "must be at most %d bytes, not %d", maxGuestPath, len(e.Path))
	case strings.Contains(e.Path, "/") && (!path.IsAbs(e.Path) || path.Clean(e.Path) != e.Path):
		bad("path", "must be a clean absolute path or a program's name (looked up in the guest's PATH), not %q", e.Path)
	}
	errs = append(errs, qga.ArgvProblems(e.Args, e.Env)...)
	if len(e.Input) > MaxGuestInput {
		bad("input", "must be at most %d bytes, not %d", MaxGuestInput, len(e.Input))
	}
	return errors.Join(errs...)
}

func clipString(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// guestHypervisor returns the hypervisor and the host of a VM the agent
// manages, for the guest call op.
func (a *Agent) guestHypervisor(name, op string) (GuestAgentHypervisor, string, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	v, ok := a.vms[name]
	if !ok {
		return nil, "", fmt.Errorf("%s vm %s: %w", op, name, ErrNotFound)
	}
	h := a.host(v.spec.Host)
	if h.hv == nil {
		return nil, "", fmt.Errorf("%s vm %s: host %s: %w", op, name, h.cfg.Name, errors.Join(ErrConnLost, h.err))
	}
	gh, ok := h.hv.(GuestAgentHypervisor)
	if !ok {
		return nil, "", fmt.Errorf("%s vm %s: %w: the hypervisor of host %s has no guest agent calls", op, name, ErrUnsupported, h.cfg.Name)
	}
	return gh, h.cfg.Name, nil
}

// waitNotMoving returns when the VM is not being migrated (or is not the
// agent's), or with ctx's error.
func (a *Agent) waitNotMoving(ctx context.Context, name string) error {
	for {
		a.mu.Lock()
		v, ok := a.vms[name]
		moving := ok && v.moving != ""
		a.mu.Unlock()
		if !moving {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// movedFrom says the VM is being migrated, or is on another host than
// host now.
func (a *Agent) movedFrom(name, host string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	v, ok := a.vms[name]
	return ok && (v.moving != "" || v.spec.Host != host)
}

// guestCall runs f on the VM's hypervisor within GuestCallTimeout. A
// call cut by that timeout (not by the caller) is ErrGuestAgent.
func guestCall[T any](ctx context.Context, a *Agent, name, op string, f func(ctx context.Context, gh GuestAgentHypervisor) (T, error)) (T, error) {
	var zero T
	cctx, cancel := context.WithTimeout(ctx, GuestCallTimeout)
	defer cancel()
	start := time.Now()
	if err := a.waitNotMoving(cctx, name); err != nil {
		return zero, fmt.Errorf("%s vm %s: %w: it is being migrated: %w", op, name, ErrGuestAgent, err)
	}
	gh, host, err := a.guestHypervisor(name, op)
	if err != nil {
		return zero, err
	}
	out, err := f(cctx, gh)
	if err != nil && ctx.Err() == nil && cctx.Err() != nil && !errors.Is(err, ErrGuestAgent) {
		err = fmt.Errorf("%w: no answer within %v: %w", ErrGuestAgent, GuestCallTimeout, err)
	}
	if err != nil && !errors.Is(err, ErrGuestAgent) && a.movedFrom(name, host) {
		err = fmt.Errorf("%w: the vm was migrated during the call: %w", ErrGuestAgent, err)
	}
	l := a.log.Debug()
	if err != nil && !errors.Is(err, ErrNotFound) {
		// A file or process not there is an answer (a run's exit file
		// before the run ends), not a failure.
		l = a.log.Warn().Err(err)
	} else if err != nil {
		l = l.Err(err)
	}
	l.Str("op", op).Str("vm", name).Str("host", host).
		Float64("duration_ms", float64(time.Since(start).Microseconds())/1000).Msg("guest call")
	if err != nil {
		return zero, fmt.Errorf("%s vm %s on %s: %w", op, name, host, err)
	}
	return out, nil
}

// GuestExec starts a program inside a VM through its guest agent and
// returns its pid; GuestExecStatus reads its state.
func (a *Agent) GuestExec(ctx context.Context, vm string, e GuestExec) (GuestProcess, error) {
	if err := checkGuestExec(e); err != nil {
		return GuestProcess{}, fmt.Errorf("guest exec in vm %s: %w: %w", vm, ErrInvalid, err)
	}
	return guestCall(ctx, a, vm, "guest exec "+e.Path+" in", func(ctx context.Context, gh GuestAgentHypervisor) (GuestProcess, error) {
		pid, err := gh.StartGuestProcess(ctx, vm, e)
		return GuestProcess{PID: pid}, err
	})
}

// GuestExecStatus reads the state of a program GuestExec started. The
// guest agent forgets a program once it has reported its exit: a second
// call is ErrNotFound.
func (a *Agent) GuestExecStatus(ctx context.Context, vm string, pid int) (GuestExecStatus, error) {
	if pid < 1 || pid > math.MaxInt32 {
		return GuestExecStatus{}, fmt.Errorf("guest exec status in vm %s: %w: pid: must be a process id (1 to %d), not %d", vm, ErrInvalid, math.MaxInt32, pid)
	}
	return guestCall(ctx, a, vm, fmt.Sprintf("guest exec status of pid %d in", pid), func(ctx context.Context, gh GuestAgentHypervisor) (GuestExecStatus, error) {
		return gh.GuestProcessStatus(ctx, vm, pid)
	})
}

// GuestWriteFile replaces a file inside a VM with data (at most
// MaxGuestWrite bytes) and gives it mode (permission bits only). Its
// parent directory must exist.
func (a *Agent) GuestWriteFile(ctx context.Context, vm, path string, data []byte, mode os.FileMode) error {
	var errs []error
	if err := checkGuestPath("path", path); err != nil {
		errs = append(errs, err)
	}
	if mode&^os.FileMode(0o7777) != 0 {
		errs = append(errs, fmt.Errorf("mode: must be permission bits (0 to 7777 in octal), not %v", mode))
	}
	if len(data) > MaxGuestWrite {
		errs = append(errs, fmt.Errorf("body: the file must be at most %d bytes, not %d", MaxGuestWrite, len(data)))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("guest write file in vm %s: %w: %w", vm, ErrInvalid, err)
	}
	_, err := guestCall(ctx, a, vm, "guest write "+path+" in", func(ctx context.Context, gh GuestAgentHypervisor) (struct{}, error) {
		return struct{}{}, gh.WriteGuestFile(ctx, vm, path, data, mode)
	})
	return err
}

// GuestReadFile reads at most max bytes (0: MaxGuestRead) of a file
// inside a VM from offset. A missing file is ErrNotFound.
func (a *Agent) GuestReadFile(ctx context.Context, vm, path string, offset int64, max int) (GuestFileChunk, error) {
	var errs []error
	if err := checkGuestPath("path", path); err != nil {
		errs = append(errs, err)
	}
	if offset < 0 {
		errs = append(errs, fmt.Errorf("offset: must be >= 0, not %d", offset))
	}
	if max < 0 || max > MaxGuestRead {
		errs = append(errs, fmt.Errorf("max: must be within 0 and %d (0: %d), not %d", MaxGuestRead, MaxGuestRead, max))
	}
	if err := errors.Join(errs...); err != nil {
		return GuestFileChunk{}, fmt.Errorf("guest read file in vm %s: %w: %w", vm, ErrInvalid, err)
	}
	if max == 0 {
		max = MaxGuestRead
	}
	return guestCall(ctx, a, vm, "guest read "+path+" in", func(ctx context.Context, gh GuestAgentHypervisor) (GuestFileChunk, error) {
		c, err := gh.ReadGuestFile(ctx, vm, path, offset, max)
		if err == nil && c.Data == nil {
			c.Data = []byte{}
		}
		return c, err
	})
}

// guestRoutes adds the routes of the guest calls to the API (see Handler).
func (a *Agent) guestRoutes(api *http.ServeMux) {
	api.HandleFunc("POST /v1/vms/{name}/guest/exec", func(w http.ResponseWriter, r *http.Request) {
		var e GuestExec
		if !decodeLimited(w, r, &e, guestExecBody) {
			return
		}
		p, err := a.GuestExec(r.Context(), r.PathValue("name"), e)
		reply(w, http.StatusOK, p, err)
	})
	api.HandleFunc("GET /v1/vms/{name}/guest/exec/{pid}", func(w http.ResponseWriter, r *http.Request) {
		s := r.PathValue("pid")
		pid, err := strconv.Atoi(s)
		if err != nil || pid < 1 || pid > math.MaxInt32 {
			writeError(w, http.StatusBadRequest, "invalid", fmt.Sprintf("invalid request: pid: must be a process id (1 to %d), not %q", math.MaxInt32, clipString(s, 32)))
			return
		}
		st, err := a.GuestExecStatus(r.Context(), r.PathValue("name"), pid)
		reply(w, http.StatusOK, st, err)
	})
	api.HandleFunc("PUT /v1/vms/{name}/guest/file", func(w http.ResponseWriter, r *http.Request) {
		q, err := query(r.URL, "path", "mode")
		if err != nil {
			reply(w, 0, nil, err)
			return
		}
		mode := os.FileMode(0o644)
		if s, ok := q["mode"]; ok {
			m, err := strconv.ParseUint(s, 8, 32)
			if err != nil || m > 0o7777 {
				writeError(w, http.StatusBadRequest, "invalid", fmt.Sprintf("invalid request: mode: must be octal permission bits (0 to 7777), not %q", clipString(s, 32)))
				return
			}
			mode = os.FileMode(m)
		}
		if err := checkGuestPath("path", q["path"]); err != nil {
			writeError(w, http.StatusBadRequest, "invalid", "invalid request: "+err.Error())
			return
		}
		data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxGuestWrite))
		if err != nil {
			var me *http.MaxBytesError
			msg := fmt.Sprintf("invalid request: body: %v", err)
			switch {
			case errors.As(err, &me):
				msg = fmt.Sprintf("invalid request: body: the file must be at most %d bytes", me.Limit)
			case errors.Is(err, os.ErrDeadlineExceeded):
				msg = "invalid request: body: did not arrive within the server's read timeout: the request is dropped"
			}
			writeError(w, http.StatusBadRequest, "invalid", msg)
			return
		}
		err = a.GuestWriteFile(r.Context(), r.PathValue("name"), q["path"], data, mode)
		reply(w, http.StatusNoContent, nil, err)
	})
	api.HandleFunc("GET /v1/vms/{name}/guest/file", func(w http.ResponseWriter, r *http.Request) {
		q, err := query(r.URL, "path", "offset", "max")
		if err != nil {
			reply(w, 0, nil, err)
			return
		}
		var errs []error
		var offset int64
		var max int
		if s, ok := q["offset"]; ok {
			if offset, err = strconv.ParseInt(s, 10, 64); err != nil || offset < 0 {
				errs = append(errs, fmt.Errorf("offset: must be a whole number >= 0, not %q", clipString(s, 32)))
			}
		}
		if s, ok := q["max"]; ok {
			if max, err = strconv.Atoi(s); err != nil || max < 0 || max > MaxGuestRead {
				errs = append(errs, fmt.Errorf("max: must be a whole number within 0 and %d (0: %d), not %q", MaxGuestRead, MaxGuestRead, clipString(s, 32)))
			}
		}
		if err := checkGuestPath("path", q["path"]); err != nil {
			errs = append(errs, err)
		}
		if err := errors.Join(errs...); err != nil {
			reply(w, 0, nil, fmt.Errorf("%w: %w", ErrInvalid, err))
			return
		}
		c, err := a.GuestReadFile(r.Context(), r.PathValue("name"), q["path"], offset, max)
		reply(w, http.StatusOK, c, err)
	})
}

// guestExecBody bounds the body of a guest exec: its input, as base64,
// and the rest within the agent's usual bound.
const guestExecBody = MaxGuestInput/3*4 + 4 + maxBody

// query returns the query parameters of u, each given once, all among
// allowed; else an ErrInvalid naming the parameter.
func query(u *url.URL, allowed ...string) (map[string]string, error) {
	vals, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return nil, fmt.Errorf("%w: query: %w", ErrInvalid, err)
	}
	out := map[string]string{}
	var errs []error
	for _, k := range slices.Sorted(maps.Keys(vals)) {
		vs := vals[k]
		switch {
		case !slices.Contains(allowed, k):
			errs = append(errs, fmt.Errorf("query: unknown parameter %q (known: %s)", clipString(k, 32), strings.Join(allowed, ", ")))
		case len(vs) != 1:
			errs = append(errs, fmt.Errorf("%s: given %d times, must be given once", k, len(vs)))
		default:
			out[k] = vs[0]
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return out, nil
}
