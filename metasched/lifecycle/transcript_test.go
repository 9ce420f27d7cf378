package lifecycle

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/metasched/metasched/gramvm"
	"github.com/metasched/metasched/internal/transcript"
	"github.com/metasched/metasched/selection"
)

// TestTranscripts runs the scripts in testdata/*.txt. A script is a list of
// blocks: comment lines starting with "#", one command line starting with
// "> " and the expected output after it. A command is an event (see
// parseEvent) fed to the one job of the script, "new ID TYPE" to start a
// job, or "fail-commit EVENT", which feeds the event and then drops the job
// it returned, as a driver does when the store refuses the commit. The
// output lists the actions (or the error) and then the job. Run with
// -update to rewrite the expected output.
func TestTranscripts(t *testing.T) {
	transcript.Run(t, "testdata", *transcript.Update, func(t *testing.T) func(string) string {
		var j Job
		return func(cmd string) string { return run(t, &j, cmd) }
	})
}

func run(t *testing.T, j *Job, cmd string) string {
	t.Helper()
	if rest, ok := strings.CutPrefix(cmd, "new "); ok {
		id, typ, _ := strings.Cut(rest, " ")
		*j = New(id, typ)
		return "job: " + formatJob(*j)
	}
	dropped := false
	if rest, ok := strings.CutPrefix(cmd, "fail-commit "); ok {
		cmd, dropped = rest, true
	}
	ev, err := parseEvent(*j, cmd)
	if err != nil {
		t.Fatalf("bad command %q: %v", cmd, err)
	}
	before := *j
	next, acts, err := j.Step(ev)
	var b strings.Builder
	if err != nil {
		if diff := cmp.Diff(before, next); diff != "" {
			t.Errorf("%q: a rejected event changed the job (-before +after):\n%s", cmd, diff)
		}
		b.WriteString("error: " + err.Error() + "\n")
		if !errors.Is(err, ErrNotAllowed) {
			t.Errorf("%q: error %v is not ErrNotAllowed", cmd, err)
		}
	} else {
		b.WriteString("actions:\n")
	}
	if diff := cmp.Diff(before, *j); diff != "" {
		t.Errorf("%q: Step changed its receiver (-before +after):\n%s", cmd, diff)
	}
	for i, a := range acts {
		if c, ok := a.(Commit); ok {
			if i != 0 {
				t.Errorf("%q: commit is action %d, not the first", cmd, i)
			}
			if diff := cmp.Diff(next, c.Job); diff != "" {
				t.Errorf("%q: the commit's job is not the job returned (-returned +committed):\n%s", cmd, diff)
			}
		}
		b.WriteString("  " + formatAction(a) + "\n")
	}
	if dropped {
		b.WriteString("commit refused: the job stays as it was\n")
	} else {
		*j = next
	}
	b.WriteString("job: " + formatJob(*j))
	return b.String()
}

// parseEvent reads "NAME [args] [key=value ...] [@SECONDS]". Values may be
// quoted. Events:
//
//	plan HOST[,HOST...] predicted=S [reason=R] [tasks=T rates=SITE:R,...]
//	     (VMs JOB-aN-m, -w1, ... on the hosts; site = host up to its last "-"; a plan of T tasks
//	     whose clusters, each with one worker, do R tasks/s)
//	provision
//	created aN | create-failed aN err=E [permanent] [boot]
//	exited aN [code=C] [reason=R] [err=E] [done=SITE:N,...]   (the tasks done per site of a task-farm summary)
//	resume
//	moved VM HOST
//	stop STATE [preempted] reason=R [attempt=N]
//	worker-lost VM [preempted] reason=R [attempt=N]   (the host is the VM's in the record)
func parseEvent(j Job, cmd string) (Event, error) {
	words := split(cmd)
	if len(words) == 0 {
		return nil, fmt.Errorf("empty")
	}
	at := transcript.Epoch
	kv := map[string]string{}
	var pos []string
	for _, w := range words[1:] {
		switch k, v, ok := strings.Cut(w, "="); {
		case strings.HasPrefix(w, "@"):
			s, err := strconv.ParseFloat(w[1:], 64)
			if err != nil {
				return nil, err
			}
			at = transcript.At(s)
		case ok:
			kv[k] = v
		default:
			pos = append(pos, w)
		}
	}
	attempt := func() (int, error) {
		if len(pos) == 0 || !strings.HasPrefix(pos[0], "a") {
			return 0, fmt.Errorf("want the attempt aN")
		}
		return strconv.Atoi(pos[0][1:])
	}
	switch words[0] {
	case "plan":
		if len(pos) != 1 {
			return nil, fmt.Errorf("plan: want the hosts")
		}
		hosts := strings.Split(pos[0], ",")
		pl := &gramvm.Placement{Master: ref(hosts[0])}
		n := j.Record.Attempts + 1
		vms := []VM{{Name: fmt.Sprintf("%s-a%d-m", j.ID, n), Site: ref(hosts[0]).Site, Host: hosts[0], Master: true}}
		for i, h := range hosts[1:] {
			pl.Workers = append(pl.Workers, ref(h))
			vms = append(vms, VM{Name: fmt.Sprintf("%s-a%d-w%d", j.ID, n, i+1), Site: ref(h).Site, Host: h})
		}
		var p float64
		if s, ok := kv["predicted"]; ok {
			var err error
			if p, err = strconv.ParseFloat(s, 64); err != nil {
				return nil, fmt.Errorf("predicted: %w", err)
			}
		}
		if r, ok := kv["rates"]; ok {
			if s, ok := kv["tasks"]; ok {
				var err error
				if pl.Plan.Tasks, err = strconv.Atoi(s); err != nil {
					return nil, fmt.Errorf("tasks: %w", err)
				}
			}
			for _, part := range strings.Split(r, ",") {
				site, x, _ := strings.Cut(part, ":")
				rate, err := strconv.ParseFloat(x, 64)
				if err != nil {
					return nil, fmt.Errorf("rates: %w", err)
				}
				pl.Plan.Clusters = append(pl.Plan.Clusters, selection.ClusterPlan{Name: site, Machines: 1, Rate: rate})
				pl.Plan.Rate += rate
			}
		}
		reason := kv["reason"]
		if reason == "" {
			reason = "planned"
		}
		return Plan{Placement: pl, VMs: vms, Predicted: p, Reason: reason, At: at}, nil
	case "provision":
		return Provision{At: at}, nil
	case "created", "create-failed":
		n, err := attempt()
		if err != nil {
			return nil, err
		}
		vms := j.Record.VMs
		if words[0] == "created" {
			return Created{Attempt: n, VMs: vms, At: at}, nil
		}
		return CreateFailed{Attempt: n, VMs: vms, Err: kv["err"], Permanent: slices.Contains(pos[1:], "permanent"),
			Boot: slices.Contains(pos[1:], "boot"), At: at}, nil
	case "exited":
		n, err := attempt()
		if err != nil {
			return nil, err
		}
		e := Exited{Attempt: n, Reason: kv["reason"], Err: kv["err"], At: at}
		if d, ok := kv["done"]; ok {
			e.TasksDone = map[string]int{}
			for _, part := range strings.Split(d, ",") {
				site, x, _ := strings.Cut(part, ":")
				if e.TasksDone[site], err = strconv.Atoi(x); err != nil {
					return nil, fmt.Errorf("done: %w", err)
				}
			}
		}
		if c, ok := kv["code"]; ok {
			code, err := strconv.Atoi(c)
			if err != nil {
				return nil, err
			}
			e.Code = &code
		}
		return e, nil
	case "resume":
		return Resume{At: at}, nil
	case "moved":
		if len(pos) != 2 {
			return nil, fmt.Errorf("moved: want VM HOST")
		}
		return Moved{VM: pos[0], Site: ref(pos[1]).Site, Host: pos[1], At: at}, nil
	case "worker-lost":
		if len(pos) < 1 || len(pos) > 2 || (len(pos) == 2 && pos[1] != "preempted") {
			return nil, fmt.Errorf("worker-lost: want the VM, and preempted or nothing")
		}
		e := WorkerLost{VM: pos[0], Reason: kv["reason"], Preempted: len(pos) == 2, At: at}
		for _, v := range j.Record.VMs {
			if v.Name == e.VM {
				e.Host = v.Host
			}
		}
		if a, ok := kv["attempt"]; ok {
			n, err := strconv.Atoi(a)
			if err != nil {
				return nil, err
			}
			e.Attempt = n
		}
		return e, nil
	case "stop":
		if len(pos) < 1 || len(pos) > 2 || (len(pos) == 2 && pos[1] != "preempted") {
			return nil, fmt.Errorf("stop: want the state, and preempted or nothing")
		}
		e := Stop{To: State(pos[0]), Reason: kv["reason"], At: at}
		if a, ok := kv["attempt"]; ok {
			n, err := strconv.Atoi(a)
			if err != nil {
				return nil, err
			}
			e.Attempt = n
		}
		e.Preempted = len(pos) == 2
		return e, nil
	}
	return nil, fmt.Errorf("unknown event %q", words[0])
}

func ref(host string) gramvm.HostRef {
	return gramvm.HostRef{Site: host[:strings.LastIndex(host, "-")], Host: host}
}

// split splits on spaces, keeping quoted values ("a b") whole.
func split(s string) []string {
	var out []string
	var cur strings.Builder
	quoted := false
	for _, r := range s {
		switch {
		case r == '"':
			quoted = !quoted
		case r == ' ' && !quoted:
			if cur.Len() > 0 {
				out = append(out, cur.String())
				cur.Reset()
			}
		default:
			cur.WriteRune(r)
		}
	}
	if cur.Len() > 0 {
		out = append(out, cur.String())
	}
	return out
}

func seconds(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return strconv.FormatFloat(t.Sub(transcript.Epoch).Seconds(), 'g', -1, 64)
}

func vmList(vms []VM) string {
	parts := make([]string, len(vms))
	for i, v := range vms {
		parts[i] = v.Name + "@" + v.Host
	}
	return "[" + strings.Join(parts, " ") + "]"
}

func formatJob(j Job) string {
	s := fmt.Sprintf("%s %s reason=%q attempts=%d vms=%s predicted=%g started=%s finished=%s",
		j.ID, j.State, j.Reason, j.Record.Attempts, vmList(j.Record.VMs), j.Record.Predicted,
		seconds(j.Record.Started), seconds(j.Record.Finished))
	if j.Record.Placement != nil {
		s += " master=" + j.Record.Placement.Master.Host
	}
	if j.ExitCode != nil {
		s += fmt.Sprintf(" exit=%d", *j.ExitCode)
	}
	if j.Record.Preemptions > 0 {
		s += fmt.Sprintf(" preemptions=%d", j.Record.Preemptions)
	}
	if len(j.Record.Tasks) > 0 {
		parts := make([]string, len(j.Record.Tasks))
		for i, c := range j.Record.Tasks {
			done := "-"
			if c.Done != nil {
				done = strconv.Itoa(*c.Done)
			}
			parts[i] = fmt.Sprintf("%s:%g/%s", c.Name, c.Predicted, done)
		}
		s += " tasks=[" + strings.Join(parts, " ") + "]"
	}
	if len(j.Record.LostWorkers) > 0 {
		parts := make([]string, len(j.Record.LostWorkers))
		for i, l := range j.Record.LostWorkers {
			parts[i] = fmt.Sprintf("%s@%s@%s(%s)", l.Name, l.Host, seconds(l.At), l.Reason)
		}
		s += " lost=[" + strings.Join(parts, " ") + "]"
	}
	return s
}

func formatAction(a Action) string {
	switch a := a.(type) {
	case Commit:
		if a.From == a.To && a.Reason == "" {
			return fmt.Sprintf("commit %s (record only)", a.To)
		}
		return fmt.Sprintf("commit %s -> %s %q", a.From, a.To, a.Reason)
	case Reserve:
		return "reserve " + vmList(a.VMs)
	case Unreserve:
		return "unreserve " + vmList(a.VMs)
	case Next:
		return fmt.Sprintf("next %s", strings.ToLower(strings.TrimPrefix(fmt.Sprintf("%T", a.Event), "lifecycle.")))
	case CreateVMs:
		return fmt.Sprintf("create-vms a%d %s", a.Attempt, vmList(a.VMs))
	case Execute:
		resume := ""
		if a.Resume {
			resume = " resume"
		}
		return fmt.Sprintf("execute a%d %s elapsed=%s%s", a.Attempt, vmList(a.VMs), a.Elapsed, resume)
	case StopRun:
		return fmt.Sprintf("stop-run a%d", a.Attempt)
	case DestroyVMs:
		return "destroy-vms " + vmList(a.VMs)
	}
	return fmt.Sprintf("%#v", a)
}
