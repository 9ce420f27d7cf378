package store

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/metasched/metasched/internal/etcdtest"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// clock is a fake clock advancing one second per reading.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(time.Second)
	return c.t
}

// engine is the engine the store's tests run on: bbolt, or with -store
// etcd a one-member etcd cluster started for the package (make test runs
// both).
var engine = flag.String("store", "bbolt", "the engine of the store's tests: bbolt or etcd")

var (
	etcdOnce    sync.Once
	etcdCluster *etcdtest.Cluster
	etcdClient  *clientv3.Client
	etcdSeq     atomic.Int64
)

func openTest(t testing.TB, opt Options) *Store {
	t.Helper()
	var s *Store
	var err error
	switch *engine {
	case "bbolt":
		s, err = Open(filepath.Join(t.TempDir(), "metasched.db"), opt)
	case "etcd":
		etcdOnce.Do(func() {
			if etcdCluster, err = etcdtest.StartShared(1); err == nil {
				etcdClient, err = etcdCluster.NewClient()
			}
		})
		if etcdClient == nil {
			t.Fatalf("etcd: %v", err)
		}
		s, err = OpenEtcd(etcdClient, EtcdOptions{Prefix: fmt.Sprintf("/storetest/%d/", etcdSeq.Add(1))}, opt)
	default:
		t.Fatalf("-store %q: want bbolt or etcd", *engine)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	})
	return s
}

func ids(jobs []Job) []string {
	out := []string{}
	for _, j := range jobs {
		out = append(out, j.ID)
	}
	return out
}

func TestSubmitGetList(t *testing.T) {
	ctx := context.Background()
	clk := newClock()
	s := openTest(t, Options{NoSync: true, Now: clk.Now})

	type sub struct{ typ, spec string }
	subs := []sub{{"render", `{"n":1}`}, {"sim", `{"n":2}`}, {"render", `{"n":3}`}, {"render", `{"n":4}`}}
	var got []Job
	for _, x := range subs {
		j, err := s.SubmitJob(ctx, x.typ, json.RawMessage(x.spec), "submitted by test")
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, j)
	}
	at := time.Date(2025, 1, 2, 3, 4, 6, 0, time.UTC)
	want := Job{
		ID: "j-000000000001", Type: "render", Spec: json.RawMessage(`{"n":1}`), State: Queued, Submitted: at,
		Transitions: []Transition{{From: "", To: Queued, At: at, Reason: "submitted by test"}},
	}
	if diff := cmp.Diff(want, got[0]); diff != "" {
		t.Errorf("SubmitJob (-want +got):\n%s", diff)
	}
	fetched, err := s.Job(ctx, got[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, fetched); diff != "" {
		t.Errorf("Job (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"j-000000000001", "j-000000000002", "j-000000000003", "j-000000000004"}, ids(got)); diff != "" {
		t.Errorf("IDs (-want +got):\n%s", diff)
	}
	if _, err := s.Transition(ctx, got[2].ID, Queued, Planned, "planned"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Transition(ctx, got[3].ID, Queued, Cancelled, "user"); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name   string
		filter JobFilter
		want   []string
	}{
		{"all", JobFilter{}, []string{"j-000000000001", "j-000000000002", "j-000000000003", "j-000000000004"}},
		{"type", JobFilter{Type: "render"}, []string{"j-000000000001", "j-000000000003", "j-000000000004"}},
		{"queued", JobFilter{States: []JobState{Queued}}, []string{"j-000000000001", "j-000000000002"}},
		{"live", JobFilter{States: []JobState{Planned, Queued}}, []string{"j-000000000001", "j-000000000002", "j-000000000003"}},
		{"live render", JobFilter{States: []JobState{Planned, Queued}, Type: "render"}, []string{"j-000000000001", "j-000000000003"}},
		{"terminal", JobFilter{States: []JobState{Done, Failed, Cancelled}}, []string{"j-000000000004"}},
		{"none", JobFilter{States: []JobState{Running}}, []string{}},
		{"limit", JobFilter{Limit: 2}, []string{"j-000000000001", "j-000000000002"}},
		{"after", JobFilter{After: "j-000000000002", Limit: 1}, []string{"j-000000000003"}},
		{"states after limit", JobFilter{States: []JobState{Queued, Planned, Cancelled}, After: "j-000000000001", Limit: 2}, []string{"j-000000000002", "j-000000000003"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			jobs, err := s.Jobs(ctx, tt.filter)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, ids(jobs)); diff != "" {
				t.Errorf("Jobs(%+v) (-want +got):\n%s", tt.filter, diff)
			}
		})
	}

	bad := []struct {
		name string
		call func() error
	}{
		{"unknown job", func() error { _, err := s.Job(ctx, "j-9"); return err }},
		{"empty type", func() error { _, err := s.SubmitJob(ctx, "", json.RawMessage(`{}`), ""); return err }},
		{"bad spec", func() error { _, err := s.SubmitJob(ctx, "x", json.RawMessage(`{`), ""); return err }},
		{"bad state filter", func() error { _, err := s.Jobs(ctx, JobFilter{States: []JobState{"lost"}}); return err }},
	}
	wantErr := []error{ErrNotFound, ErrInvalid, ErrInvalid, ErrInvalid}
	for i, tt := range bad {
		if err := tt.call(); !errors.Is(err, wantErr[i]) {
			t.Errorf("%s: got %v, want %v", tt.name, err, wantErr[i])
		}
	}

	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := s.SubmitJob(cancelled, "x", json.RawMessage(`{}`), ""); !errors.Is(err, context.Canceled) {
		t.Errorf("SubmitJob with cancelled context: got %v, want context.Canceled", err)
	}
}

// pathTo lists the transitions that take a fresh (queued) job to a state.
var pathTo = map[JobState][]JobState{
	Queued:       {},
	Planned:      {Planned},
	Provisioning: {Planned, Provisioning},
	Running:      {Planned, Provisioning, Running},
	Done:         {Planned, Provisioning, Running, Done},
	Failed:       {Failed},
	Cancelled:    {Cancelled},
}

func TestTransitionsEveryPair(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, Options{NoSync: true, Now: newClock().Now})
	allowedPairs := map[[2]JobState]bool{
		{Queued, Planned}: true, {Queued, Cancelled}: true, {Queued, Failed}: true,
		{Planned, Provisioning}: true, {Planned, Queued}: true, {Planned, Cancelled}: true, {Planned, Failed}: true,
		{Provisioning, Running}: true, {Provisioning, Queued}: true, {Provisioning, Cancelled}: true, {Provisioning, Failed}: true,
		{Running, Done}: true, {Running, Failed}: true, {Running, Cancelled}: true, {Running, Queued}: true,
	}
	for _, from := range States {
		for _, to := range append([]JobState{""}, States...) {
			t.Run(fmt.Sprintf("%s->%s", from, to), func(t *testing.T) {
				j, err := s.SubmitJob(ctx, "t", json.RawMessage(`{}`), "test")
				if err != nil {
					t.Fatal(err)
				}
				cur := Queued
				for _, st := range pathTo[from] {
					if j, err = s.Transition(ctx, j.ID, cur, st, "setup"); err != nil {
						t.Fatal(err)
					}
					cur = st
				}
				got, err := s.Transition(ctx, j.ID, from, to, "under test")
				want := allowedPairs[[2]JobState{from, to}]
				if got, want := CanTransition(from, to), want; got != want {
					t.Errorf("CanTransition = %v, want %v", got, want)
				}
				if !want {
					if !errors.Is(err, ErrInvalid) {
						t.Fatalf("got error %v, want ErrInvalid", err)
					}
					if msg := err.Error(); !strings.Contains(msg, fmt.Sprintf("%q", from)) || !strings.Contains(msg, fmt.Sprintf("%q", to)) {
						t.Errorf("error %q does not name both states", msg)
					}
					stored, err := s.Job(ctx, j.ID)
					if err != nil {
						t.Fatal(err)
					}
					if stored.State != from {
						t.Errorf("refused transition changed state to %s", stored.State)
					}
					return
				}
				if err != nil {
					t.Fatalf("got error %v, want success", err)
				}
				if got.State != to {
					t.Errorf("state = %s, want %s", got.State, to)
				}
				last := got.Transitions[len(got.Transitions)-1]
				if diff := cmp.Diff(Transition{From: from, To: to, At: last.At, Reason: "under test"}, last); diff != "" {
					t.Errorf("last transition (-want +got):\n%s", diff)
				}
				if diff := cmp.Diff(len(pathTo[from])+2, len(got.Transitions)); diff != "" {
					t.Errorf("transition count (-want +got):\n%s", diff)
				}
				// The state index follows the job.
				for _, st := range States {
					in, err := s.Jobs(ctx, JobFilter{States: []JobState{st}})
					if err != nil {
						t.Fatal(err)
					}
					found := false
					for _, x := range in {
						found = found || x.ID == j.ID
					}
					if found != (st == to) {
						t.Errorf("job listed under %s: %v", st, found)
					}
				}
			})
		}
	}
}

func TestTransitionConflict(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, Options{NoSync: true})
	if _, err := s.Transition(ctx, "j-000000000999", Queued, Planned, ""); !errors.Is(err, ErrNotFound) {
		t.Errorf("unknown job: got %v, want ErrNotFound", err)
	}
	j, err := s.SubmitJob(ctx, "t", json.RawMessage(`{}`), "")
	if err != nil {
		t.Fatal(err)
	}
	cur, err := s.Transition(ctx, j.ID, Planned, Provisioning, "stale")
	if !errors.Is(err, ErrConflict) {
		t.Fatalf("stale from: got %v, want ErrConflict", err)
	}
	if cur.State != Queued {
		t.Errorf("conflict returned state %s, want the current queued", cur.State)
	}

	// Racers: for each job, two goroutines try a transition from queued at
	// once (to the same or to different states); exactly one must win.
	const jobs = 100
	targets := [][2]JobState{{Planned, Planned}, {Planned, Cancelled}, {Failed, Cancelled}}
	for _, tg := range targets {
		t.Run(fmt.Sprintf("%s vs %s", tg[0], tg[1]), func(t *testing.T) {
			var idList []string
			for range jobs {
				j, err := s.SubmitJob(ctx, "t", json.RawMessage(`{}`), "")
				if err != nil {
					t.Fatal(err)
				}
				idList = append(idList, j.ID)
			}
			type result struct {
				to  JobState
				err error
			}
			results := make([][2]result, jobs)
			var wg sync.WaitGroup
			for i, id := range idList {
				for r := range 2 {
					wg.Go(func() {
						_, err := s.Transition(ctx, id, Queued, tg[r], fmt.Sprintf("racer %d", r))
						results[i][r] = result{tg[r], err}
					})
				}
			}
			wg.Wait()
			for i, id := range idList {
				wins, conflicts := 0, 0
				var winner JobState
				for _, r := range results[i] {
					switch {
					case r.err == nil:
						wins++
						winner = r.to
					case errors.Is(r.err, ErrConflict):
						conflicts++
					default:
						t.Errorf("%s: unexpected error %v", id, r.err)
					}
				}
				if wins != 1 || conflicts != 1 {
					t.Errorf("%s: %d wins, %d conflicts, want 1 and 1", id, wins, conflicts)
					continue
				}
				j, err := s.Job(ctx, id)
				if err != nil {
					t.Fatal(err)
				}
				if j.State != winner || len(j.Transitions) != 2 {
					t.Errorf("%s: state %s with %d transitions, want %s with 2", id, j.State, len(j.Transitions), winner)
				}
			}
		})
	}
}

func TestReopen(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "metasched.db")
	clk := newClock()
	s, err := Open(path, Options{Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	a, err := s.SubmitJob(ctx, "render", json.RawMessage(`{"a":1}`), "first")
	if err != nil {
		t.Fatal(err)
	}
	b, err := s.SubmitJob(ctx, "sim", json.RawMessage(`{"b":2}`), "second")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Commit(ctx, a.ID, Change{From: Queued, To: Planned, Reason: "plan found", Data: json.RawMessage(`{"vms":["v1"]}`)}); err != nil {
		t.Fatal(err)
	}
	three := 3
	if _, err := s.Commit(ctx, b.ID, Change{From: Queued, To: Queued, ExitCode: &three}); err != nil {
		t.Fatal(err)
	}
	if err := s.AppendLog(ctx, b.ID, []byte("hello\n")); err != nil {
		t.Fatal(err)
	}
	for i, rec := range []string{"releasing", "adding", "done"} {
		r := SwitchRecord{Num: uint64(i + 1), Host: "spain/h1", Open: rec != "done", Data: []byte(rec)}
		if !r.Open {
			r.Ended = clk.Now()
		}
		if err := s.PutSwitch(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.SetHost(ctx, "spain/h1", []byte("render")); err != nil {
		t.Fatal(err)
	}
	if err := s.SetHost(ctx, "spain/h2", []byte("stranded")); err != nil {
		t.Fatal(err)
	}
	tok, err := s.Token(ctx)
	if err != nil {
		t.Fatal(err)
	}
	wantJobs, err := s.Jobs(ctx, JobFilter{})
	if err != nil {
		t.Fatal(err)
	}
	wantSwitches, err := s.Switches(ctx, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("file mode: %v %v, want 0600", fi.Mode(), err)
	}

	s, err = Open(path, Options{Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close() // every write is committed: closing loses nothing
	gotJobs, err := s.Jobs(ctx, JobFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(wantJobs, gotJobs); diff != "" {
		t.Errorf("jobs after reopen (-want +got):\n%s", diff)
	}
	if len(gotJobs) != 2 || gotJobs[0].State != Planned || string(gotJobs[0].Data) != `{"vms":["v1"]}` || gotJobs[1].ExitCode == nil || *gotJobs[1].ExitCode != 3 {
		t.Errorf("reopened jobs lost fields: %+v", gotJobs)
	}
	gotSwitches, err := s.Switches(ctx, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(wantSwitches, gotSwitches); diff != "" || len(gotSwitches) != 3 {
		t.Errorf("switches after reopen (-want +got):\n%s", diff)
	}
	hosts, err := s.Hosts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string][]byte{"spain/h1": []byte("render"), "spain/h2": []byte("stranded")}, hosts); diff != "" {
		t.Errorf("hosts after reopen (-want +got):\n%s", diff)
	}
	logs, err := s.Logs(ctx, b.ID)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff("hello\n", string(logs)); diff != "" {
		t.Errorf("logs after reopen (-want +got):\n%s", diff)
	}
	tok2, err := s.Token(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if tok2 != tok {
		t.Errorf("token changed across reopen: %q then %q", tok, tok2)
	}
	// Numbering continues after the last ID.
	c, err := s.SubmitJob(ctx, "render", json.RawMessage(`{}`), "third")
	if err != nil {
		t.Fatal(err)
	}
	if c.ID != "j-000000000003" {
		t.Errorf("next ID after reopen = %s, want j-000000000003", c.ID)
	}
}

const helperEnv = "METASCHED_STORE_CRASH_HELPER"

// TestCrashHelper is not a test: run by TestCrash as a subprocess, it
// submits jobs from several goroutines until killed, printing "ack ID" for
// each one after SubmitJob returned.
func TestCrashHelper(t *testing.T) {
	path := os.Getenv(helperEnv)
	if path == "" {
		t.Skip("helper process for TestCrash")
	}
	s, err := Open(path, Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Go(func() {
			for i := 0; ; i++ {
				var (
					j   Job
					err error
				)
				if g%2 == 0 {
					j, err = s.SubmitJob(context.Background(), "crash", json.RawMessage(fmt.Sprintf(`{"g":%d,"i":%d}`, g, i)), "helper")
				} else {
					// Half the submissions carry an idempotency key.
					key := fmt.Sprintf("%d-%d", g, i)
					j, _, err = s.SubmitJobOnce(context.Background(), "", "crash", json.RawMessage(fmt.Sprintf(`{"g":%d,"i":%d,"key":%q}`, g, i, key)), "helper",
						idemKey(key, key))
				}
				if err != nil {
					fmt.Fprintln(os.Stderr, err)
					os.Exit(2)
				}
				mu.Lock()
				fmt.Fprintf(os.Stdout, "ack %s\n", j.ID) // one write, unbuffered
				mu.Unlock()
			}
		})
	}
	wg.Wait()
}

func TestCrash(t *testing.T) {
	if testing.Short() {
		t.Skip("subprocess crash test")
	}
	path := filepath.Join(t.TempDir(), "metasched.db")
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashHelper$", "-test.count=1")
	cmd.Env = append(os.Environ(), helperEnv+"="+path)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var acked []string
	sc := bufio.NewScanner(out)
	killed := false
	for sc.Scan() {
		id, ok := strings.CutPrefix(sc.Text(), "ack ")
		if !ok {
			continue
		}
		acked = append(acked, id)
		if len(acked) == 300 && !killed {
			// Kill mid-stream and keep reading what it had already acknowledged.
			if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			killed = true
		}
	}
	err = cmd.Wait()
	if !killed {
		t.Fatalf("helper ended before being killed: %v", err)
	}
	t.Logf("helper acknowledged %d jobs before SIGKILL", len(acked))

	s, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close() // every write is committed: closing loses nothing
	jobs, err := s.Jobs(context.Background(), JobFilter{})
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	keyed := 0
	for _, j := range jobs {
		have[j.ID] = true
		if j.State != Queued || len(j.Transitions) != 1 {
			t.Errorf("%s: recovered in state %s with %d transitions", j.ID, j.State, len(j.Transitions))
		}
		// A job submitted with a key has its key, which names it.
		var spec struct{ Key string }
		if err := json.Unmarshal(j.Spec, &spec); err != nil || spec.Key == "" {
			continue
		}
		keyed++
		if k, found, err := s.LookupKey(context.Background(), idemKey(spec.Key, spec.Key)); err != nil || !found || k.ID != j.ID {
			t.Errorf("%s: its key %s finds %q, %v, %v", j.ID, spec.Key, k.ID, found, err)
		}
	}
	// And no key is on file without its job.
	if n, err := s.Keys(context.Background()); err != nil || n != keyed {
		t.Errorf("%d keys on file (%v) for %d jobs submitted with one", n, err, keyed)
	}
	for _, id := range acked {
		if !have[id] {
			t.Errorf("acknowledged job %s lost in the crash", id)
		}
	}
	t.Logf("%d jobs on disk after reopening", len(jobs))
}

func TestLogBounding(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, Options{NoSync: true, MaxLogBytes: 10})
	j, err := s.SubmitJob(ctx, "t", json.RawMessage(`{}`), "")
	if err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		appendLine string
		want       string
	}{
		{"", ""},
		{"abc\n", "abc\n"},
		{"defg\n", "abc\ndefg\n"},
		{"hi\n", "c\ndefg\nhi\n"},
		{"j\n", "defg\nhi\nj\n"},
		{"0123456789ABCDEF", "6789ABCDEF"},
		{"x", "789ABCDEFx"},
	}
	for i, st := range steps {
		if err := s.AppendLog(ctx, j.ID, []byte(st.appendLine)); err != nil {
			t.Fatal(err)
		}
		got, err := s.Logs(ctx, j.ID)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(st.want, string(got)); diff != "" {
			t.Errorf("step %d, after appending %q (-want +got):\n%s", i, st.appendLine, diff)
		}
	}
	other, err := s.SubmitJob(ctx, "t", json.RawMessage(`{}`), "")
	if err != nil {
		t.Fatal(err)
	}
	if got, err := s.Logs(ctx, other.ID); err != nil || len(got) != 0 {
		t.Errorf("logs of a silent job: %q, %v", got, err)
	}
	if err := s.AppendLog(ctx, "j-404", []byte("x")); !errors.Is(err, ErrNotFound) {
		t.Errorf("AppendLog to unknown job: got %v, want ErrNotFound", err)
	}
	if _, err := s.Logs(ctx, "j-404"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Logs of unknown job: got %v, want ErrNotFound", err)
	}
}

func TestHostsAndToken(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, Options{NoSync: true})
	if err := s.SetHost(ctx, "h1", []byte("render")); err != nil {
		t.Fatal(err)
	}
	if err := s.SetHost(ctx, "h2", []byte("sim")); err != nil {
		t.Fatal(err)
	}
	if err := s.SetHost(ctx, "h1", []byte("sim")); err != nil {
		t.Fatal(err)
	}
	if err := s.SetHost(ctx, "h2", nil); err != nil {
		t.Fatal(err)
	}
	if err := s.SetHost(ctx, "", []byte("x")); !errors.Is(err, ErrInvalid) {
		t.Errorf("empty host name: got %v, want ErrInvalid", err)
	}
	hosts, err := s.Hosts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string][]byte{"h1": []byte("sim")}, hosts); diff != "" {
		t.Errorf("hosts (-want +got):\n%s", diff)
	}

	toks := make([]string, 8)
	var wg sync.WaitGroup
	for i := range toks {
		wg.Go(func() {
			tok, err := s.Token(ctx)
			if err != nil {
				t.Error(err)
			}
			toks[i] = tok
		})
	}
	wg.Wait()
	if len(toks[0]) != 43 {
		t.Errorf("token %q has %d characters, want 43 (32 bytes base64url)", toks[0], len(toks[0]))
	}
	for _, tok := range toks {
		if tok != toks[0] {
			t.Errorf("concurrent first calls got different tokens %q and %q", toks[0], tok)
		}
	}
}

func TestCountsAndRecent(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "metasched.db")
	s, err := Open(path, Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	var all []string
	for i := range 5 {
		j, err := s.SubmitJob(ctx, "render", json.RawMessage(fmt.Sprintf(`{"n":%d}`, i)), "submitted")
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, j.ID)
	}
	for _, id := range all[:3] {
		if _, err := s.Transition(ctx, id, Queued, Planned, "plan found"); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Transition(ctx, all[0], Planned, Cancelled, "cancelled"); err != nil {
		t.Fatal(err)
	}
	// A refused transition changes no count.
	if _, err := s.Transition(ctx, all[4], Planned, Provisioning, "wrong"); !errors.Is(err, ErrConflict) {
		t.Fatalf("transition from the wrong state: %v, want ErrConflict", err)
	}
	want := map[JobState]int{Queued: 2, Planned: 2, Provisioning: 0, Running: 0, Done: 0, Failed: 0, Cancelled: 1}
	if diff := cmp.Diff(want, s.Counts()); diff != "" {
		t.Errorf("counts (-want +got):\n%s", diff)
	}
	rec, err := s.Recent(ctx, 3)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{all[4], all[3], all[2]}, ids(rec)); diff != "" {
		t.Errorf("recent (-want +got):\n%s", diff)
	}
	rec, err = s.Recent(ctx, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(rec) != 5 {
		t.Errorf("recent 10 of 5 jobs: got %d", len(rec))
	}
	if _, err := s.Recent(ctx, -1); !errors.Is(err, ErrInvalid) {
		t.Errorf("recent -1: %v, want ErrInvalid", err)
	}
	s = reopen(t, s, path)
	defer s.Close() // every write is committed: closing loses nothing
	if diff := cmp.Diff(want, s.Counts()); diff != "" {
		t.Errorf("counts after reopening (-want +got):\n%s", diff)
	}
}
