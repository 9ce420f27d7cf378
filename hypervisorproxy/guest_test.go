package hypervisorproxy_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/rs/zerolog"

	hp "github.com/metasched/metasched/hypervisorproxy"
	"github.com/metasched/metasched/hypervisorproxy/virt"
)

// guestBadRequests are guest calls the agent refuses (with an agent of
// test-driver hosts that runs keepSpec), with the status and a part of the
// message (TestAgentGuestBadRequests), and seeds of FuzzAgentAPI.
var guestBadRequests = []badRequest{
	{"exec without path", "POST", "/v1/vms/keep/guest/exec", `{}`, "", 400, "path: is required"},
	{"exec relative path", "POST", "/v1/vms/keep/guest/exec", `{"path":"bin/sh"}`, "", 400, `path: must be a clean absolute path or a program's name (looked up in the guest's PATH), not "bin/sh"`},
	{"exec unclean path", "POST", "/v1/vms/keep/guest/exec", `{"path":"/bin/../bin/sh"}`, "", 400, "path: must be a clean absolute path"},
	{"exec NUL", "POST", "/v1/vms/keep/guest/exec", `{"path":"/bin/sh","args":["-c","a\u0000b"]}`, "", 400, "args[1]: must not contain NUL"},
	{"exec bad env", "POST", "/v1/vms/keep/guest/exec", `{"path":"/bin/sh","env":["A=1","NOEQUALS","=x"]}`, "", 400, `env[1]: must be NAME=value without NUL, not "NOEQUALS"`},
	{"exec every bad field", "POST", "/v1/vms/keep/guest/exec", `{"path":"","env":["=x"]}`, "", 400, "path: is required\nenv[0]: must be NAME=value"},
	{"exec input too big", "POST", "/v1/vms/keep/guest/exec", `{"path":"/bin/sh","input":"` + strings.Repeat("QUFB", (hp.MaxGuestInput+3)/3) + `"}`, "", 400, "input: must be at most 1048576 bytes, not 1048578"},
	{"exec input not base64", "POST", "/v1/vms/keep/guest/exec", `{"path":"/bin/sh","input":"!!"}`, "", 400, "invalid request"},
	{"exec unknown field", "POST", "/v1/vms/keep/guest/exec", `{"path":"/bin/sh","cwd":"/"}`, "", 400, `unknown field "cwd"`},
	{"exec body too big", "POST", "/v1/vms/keep/guest/exec", `{"path":"/bin/sh","args":["` + strings.Repeat("a", 3<<20) + `"]}`, "", 400, "the body exceeds"},
	{"exec unknown vm", "POST", "/v1/vms/ghost/guest/exec", `{"path":"/bin/true"}`, "", 404, "vm ghost: not found"},
	{"exec on the test driver", "POST", "/v1/vms/keep/guest/exec", `{"path":"/bin/true"}`, "", 422, "not supported by the hypervisor"},
	{"status pid not a number", "GET", "/v1/vms/keep/guest/exec/abc", "", "", 400, `pid: must be a process id (1 to 2147483647), not "abc"`},
	{"status pid zero", "GET", "/v1/vms/keep/guest/exec/0", "", "", 400, `pid: must be a process id`},
	{"status pid too big", "GET", "/v1/vms/keep/guest/exec/99999999999", "", "", 400, `pid: must be a process id`},
	{"status unknown vm", "GET", "/v1/vms/ghost/guest/exec/12", "", "", 404, "vm ghost: not found"},
	{"status on the test driver", "GET", "/v1/vms/keep/guest/exec/12", "", "", 422, "not supported by the hypervisor"},
	{"write without path", "PUT", "/v1/vms/keep/guest/file", "data", "", 400, "path: is required"},
	{"write relative path", "PUT", "/v1/vms/keep/guest/file?path=etc/x", "data", "", 400, `path: must be a clean absolute path of a file, not "etc/x"`},
	{"write dot-dot", "PUT", "/v1/vms/keep/guest/file?path=/run/../etc/x", "data", "", 400, "path: must be a clean absolute path"},
	{"write root", "PUT", "/v1/vms/keep/guest/file?path=/", "data", "", 400, "path: must be a clean absolute path"},
	{"write NUL", "PUT", "/v1/vms/keep/guest/file?path=/run/a%00b", "data", "", 400, "path: must not contain NUL"},
	{"write bad mode", "PUT", "/v1/vms/keep/guest/file?path=/run/x&mode=0999", "data", "", 400, `mode: must be octal permission bits (0 to 7777), not "0999"`},
	{"write mode too big", "PUT", "/v1/vms/keep/guest/file?path=/run/x&mode=17777", "data", "", 400, `mode: must be octal permission bits`},
	{"write unknown parameter", "PUT", "/v1/vms/keep/guest/file?path=/run/x&owner=root", "data", "", 400, `query: unknown parameter "owner" (known: path, mode)`},
	{"write path twice", "PUT", "/v1/vms/keep/guest/file?path=/run/x&path=/run/y", "data", "", 400, "path: given 2 times, must be given once"},
	{"write too big", "PUT", "/v1/vms/keep/guest/file?path=/run/x", strings.Repeat("x", hp.MaxGuestWrite+1), "", 400, "body: the file must be at most 8388608 bytes"},
	{"write unknown vm", "PUT", "/v1/vms/ghost/guest/file?path=/run/x", "data", "", 404, "vm ghost: not found"},
	{"write on the test driver", "PUT", "/v1/vms/keep/guest/file?path=/run/x&mode=0600", "data", "", 422, "not supported by the hypervisor"},
	{"read without path", "GET", "/v1/vms/keep/guest/file", "", "", 400, "path: is required"},
	{"read bad offset and max", "GET", "/v1/vms/keep/guest/file?path=/run/x&offset=-1&max=x", "", "", 400, "offset: must be a whole number >= 0, not \"-1\"\nmax: must be a whole number within 0 and 1048576 (0: 1048576), not \"x\""},
	{"read max too big", "GET", "/v1/vms/keep/guest/file?path=/run/x&max=1048577", "", "", 400, "max: must be a whole number within 0 and 1048576"},
	{"read bad query", "GET", "/v1/vms/keep/guest/file?path=%zz", "", "", 400, "query: invalid URL escape"},
	{"read unknown vm", "GET", "/v1/vms/ghost/guest/file?path=/run/x", "", "", 404, "vm ghost: not found"},
	{"read on the test driver", "GET", "/v1/vms/keep/guest/file?path=/run/x", "", "", 422, "not supported by the hypervisor"},
}

// Bad guest calls get a 4xx naming the field, and change nothing.
func TestAgentGuestBadRequests(t *testing.T) { checkBadRequests(t, guestBadRequests) }

// guestHV is the guest side of test-driver hosts, scripted by a test:
// files in a map, and a guest agent that can be made not to answer.
type guestHV struct {
	mu    sync.Mutex
	down  bool
	hang  bool // calls wait for their context to end
	files map[string][]byte
	modes map[string]os.FileMode
	calls []string
}

func (g *guestHV) call(ctx context.Context, format string, args ...any) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.calls = append(g.calls, fmt.Sprintf(format, args...))
	if g.hang {
		g.mu.Unlock()
		<-ctx.Done()
		g.mu.Lock()
		return fmt.Errorf("guest agent call: %w", ctx.Err())
	}
	if g.down {
		return fmt.Errorf("guest agent of the vm: %w: QEMU guest agent is not connected", hp.ErrGuestAgent)
	}
	return nil
}

func (g *guestHV) StartGuestProcess(ctx context.Context, name string, e hp.GuestExec) (int, error) {
	return 41, g.call(ctx, "exec %s %s %q %q %q", name, e.Path, e.Args, e.Env, e.Input)
}

func (g *guestHV) GuestProcessStatus(ctx context.Context, name string, pid int) (hp.GuestExecStatus, error) {
	return hp.GuestExecStatus{Exited: true, ExitCode: 3}, g.call(ctx, "status %s %d", name, pid)
}

func (g *guestHV) WriteGuestFile(ctx context.Context, name, path string, data []byte, mode os.FileMode) error {
	if err := g.call(ctx, "write %s %s %o", name, path, mode); err != nil {
		return err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.files[path], g.modes[path] = data, mode
	return nil
}

func (g *guestHV) ReadGuestFile(ctx context.Context, name, path string, offset int64, max int) (hp.GuestFileChunk, error) {
	if err := g.call(ctx, "read %s %s %d %d", name, path, offset, max); err != nil {
		return hp.GuestFileChunk{}, err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	data, ok := g.files[path]
	if !ok {
		return hp.GuestFileChunk{}, fmt.Errorf("open %s: %w: No such file or directory", path, hp.ErrNotFound)
	}
	data = data[min(int(offset), len(data)):]
	return hp.GuestFileChunk{Data: data[:min(max, len(data))], EOF: len(data) <= max}, nil
}

// The agent passes guest calls to its host's hypervisor, with the
// defaults of the contract (mode 0644, max 1 MiB), and maps what the
// hypervisor answers: a guest agent that does not answer is 503
// guest_agent, a missing file 404; the client reads both back as the
// agent's sentinels.
func TestAgentGuestCalls(t *testing.T) {
	ctx := context.Background()
	g := &guestHV{files: map[string][]byte{}, modes: map[string]os.FileMode{}}
	h := guestAgent(t, g)
	c := h.client
	if _, err := c.Create(ctx, keepSpec); err != nil {
		t.Fatal(err)
	}
	p, err := c.GuestExec(ctx, "keep", hp.GuestExec{Path: "/bin/sh", Args: []string{"-c", "exit 3"}, Env: []string{"A=1"}, Input: []byte("in")})
	if err != nil || p.PID != 41 {
		t.Fatalf("GuestExec = %+v, %v", p, err)
	}
	st, err := c.GuestExecStatus(ctx, "keep", 41)
	if err != nil || !st.Exited || st.ExitCode != 3 {
		t.Fatalf("GuestExecStatus = %+v, %v", st, err)
	}
	if err := c.GuestWriteFile(ctx, "keep", "/run/metasched/cmd", []byte("hello world"), 0o600); err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest("PUT", h.srv.URL+"/v1/vms/keep/guest/file?path=/run/dflt", strings.NewReader("x"))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+testToken)
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusNoContent {
		t.Fatalf("PUT without mode: %v, %v", resp, err)
	}
	chunk, err := c.GuestReadFile(ctx, "keep", "/run/metasched/cmd", 6, 0)
	if err != nil || string(chunk.Data) != "world" || !chunk.EOF {
		t.Fatalf("GuestReadFile = %+v, %v", chunk, err)
	}
	chunk, err = c.GuestReadFile(ctx, "keep", "/run/metasched/cmd", 0, 5)
	if err != nil || string(chunk.Data) != "hello" || chunk.EOF {
		t.Fatalf("GuestReadFile of 5 = %+v, %v", chunk, err)
	}
	chunk, err = c.GuestReadFile(ctx, "keep", "/run/metasched/cmd", 100, 5)
	if err != nil || chunk.Data == nil || len(chunk.Data) != 0 || !chunk.EOF {
		t.Fatalf("GuestReadFile beyond the end = %#v, %v", chunk, err)
	}
	if _, err := c.GuestReadFile(ctx, "keep", "/run/nothing", 0, 0); !errors.Is(err, hp.ErrNotFound) ||
		!strings.Contains(err.Error(), "guest read /run/nothing in vm keep on lab-0") {
		t.Errorf("read of a missing file: %v, want ErrNotFound naming the file, the vm and the host", err)
	}
	g.mu.Lock()
	g.down = true
	g.mu.Unlock()
	for what, err := range map[string]error{
		"exec":   second(c.GuestExec(ctx, "keep", hp.GuestExec{Path: "true"})),
		"status": second(c.GuestExecStatus(ctx, "keep", 41)),
		"write":  c.GuestWriteFile(ctx, "keep", "/run/x", nil, 0o644),
		"read":   second(c.GuestReadFile(ctx, "keep", "/run/x", 0, 0)),
	} {
		var re *hp.RemoteError
		if !errors.Is(err, hp.ErrGuestAgent) || !errors.As(err, &re) || re.Status != http.StatusServiceUnavailable {
			t.Errorf("%s with the guest agent down: %v, want 503 guest_agent", what, err)
		}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	want := []string{
		`exec keep /bin/sh ["-c" "exit 3"] ["A=1"] "in"`,
		"status keep 41",
		"write keep /run/metasched/cmd 600",
		"write keep /run/dflt 644",
		"read keep /run/metasched/cmd 6 1048576",
		"read keep /run/metasched/cmd 0 5",
		"read keep /run/metasched/cmd 100 5",
		"read keep /run/nothing 0 1048576",
	}
	if diff := cmp.Diff(want, g.calls[:len(want)]); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}
	if string(g.files["/run/metasched/cmd"]) != "hello world" || g.modes["/run/dflt"] != 0o644 {
		t.Errorf("files %q, modes %v", g.files, g.modes)
	}
}

// guestAgent is the agent of startAgent whose hosts' hypervisors have
// the guest calls of g.
func guestAgent(t *testing.T, g *guestHV) *harness {
	site, grid := labSite(t, t.TempDir(), "")
	log := zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.InfoLevel)
	connect := virt.Connector(log)
	withGuest := func(ctx context.Context, uri string, onReconnect func()) (hp.Hypervisor, error) {
		hv, err := connect(ctx, uri, onReconnect)
		if err != nil {
			return nil, err
		}
		return &guestHost{Hypervisor: hv, g: g}, nil
	}
	return serveAgent(t, hp.Config{Site: site, Token: testToken, Grid: grid, Connect: withGuest, Logger: log})
}

// guestHost is one host's hypervisor with the guest calls of g.
type guestHost struct {
	hp.Hypervisor
	g *guestHV
}

func (h *guestHost) StartGuestProcess(ctx context.Context, name string, e hp.GuestExec) (int, error) {
	return h.g.StartGuestProcess(ctx, name, e)
}

func (h *guestHost) GuestProcessStatus(ctx context.Context, name string, pid int) (hp.GuestExecStatus, error) {
	return h.g.GuestProcessStatus(ctx, name, pid)
}

func (h *guestHost) WriteGuestFile(ctx context.Context, name, path string, data []byte, mode os.FileMode) error {
	return h.g.WriteGuestFile(ctx, name, path, data, mode)
}

func (h *guestHost) ReadGuestFile(ctx context.Context, name, path string, offset int64, max int) (hp.GuestFileChunk, error) {
	return h.g.ReadGuestFile(ctx, name, path, offset, max)
}

// A guest call that hangs is cut after GuestCallTimeout: 503
// guest_agent, not a caller held for as long as the guest agent hangs.
func TestAgentGuestCallTimeout(t *testing.T) {
	g := &guestHV{files: map[string][]byte{}, modes: map[string]os.FileMode{}, hang: true}
	h := guestAgent(t, g)
	if _, err := h.client.Create(context.Background(), keepSpec); err != nil {
		t.Fatal(err)
	}
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		_, err := h.agent.GuestReadFile(context.Background(), "keep", "/run/x", 0, 0)
		if !errors.Is(err, hp.ErrGuestAgent) || !strings.Contains(err.Error(), "no answer within 30s") {
			t.Errorf("a hung call: %v, want ErrGuestAgent after 30 s", err)
		}
		if took := time.Since(start); took != hp.GuestCallTimeout {
			t.Errorf("the call was cut after %v, want %v", took, hp.GuestCallTimeout)
		}
		// A caller that goes away first gets its own context's error.
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if _, err := h.agent.GuestExec(ctx, "keep", hp.GuestExec{Path: "true"}); errors.Is(err, hp.ErrGuestAgent) ||
			!errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("a call whose caller gave up: %v, want the caller's deadline", err)
		}
	})
}

func second[T any](_ T, err error) error { return err }
