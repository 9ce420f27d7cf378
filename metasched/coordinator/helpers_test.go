package coordinator

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

var t0 = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

func at(sec int) time.Time { return t0.Add(time.Duration(sec) * time.Second) }

// formatAction writes an action on one line for transcripts.
func formatAction(a Action) string {
	switch a := a.(type) {
	case Persist:
		sw := a.Record.Switch
		return fmt.Sprintf("persist %s %s", sw.ID, sw.Phase)
	case PrepareRelease:
		return fmt.Sprintf("prepare-release %s pool=%s exclude=[%s]", a.ID, a.Pool, strings.Join(a.Exclude, ","))
	case Reconfigure:
		return fmt.Sprintf("reconfigure %s host=%s pool=%s", a.ID, a.Host, a.Pool)
	case PrepareAdd:
		return fmt.Sprintf("prepare-add %s pool=%s host=%s", a.ID, a.Pool, a.Host)
	case CommitRelease:
		return fmt.Sprintf("commit-release %s pool=%s host=%s", a.ID, a.Pool, a.Host)
	case CommitAdd:
		return fmt.Sprintf("commit-add %s pool=%s host=%s", a.ID, a.Pool, a.Host)
	case Revert:
		return fmt.Sprintf("revert %s host=%s pool=%s", a.ID, a.Host, a.Pool)
	case AbortRelease:
		return fmt.Sprintf("abort-release %s pool=%s host=%s", a.ID, a.Pool, a.Host)
	case AbortAdd:
		return fmt.Sprintf("abort-add %s pool=%s host=%s", a.ID, a.Pool, a.Host)
	case MarkStranded:
		return fmt.Sprintf("mark-stranded %s host=%s reason=%q", a.ID, a.Host, a.Reason)
	case Rejoin:
		return fmt.Sprintf("rejoin %s host=%s pool=%s", a.ID, a.Host, a.Pool)
	}
	return fmt.Sprintf("unknown action %T", a)
}

// formatSwitch writes a switch on one line for transcripts; times are
// seconds after t0.
func formatSwitch(sw Switch) string {
	var b strings.Builder
	host := sw.Host
	if host == "" {
		host = "-"
	}
	fmt.Fprintf(&b, "%s %s->%s host=%s phase=%s", sw.ID, sw.From, sw.To, host, sw.Phase)
	if len(sw.Requeued) > 0 {
		fmt.Fprintf(&b, " requeued=[%s]", strings.Join(sw.Requeued, ","))
	}
	if sw.ReleaseCommitted {
		b.WriteString(" release-committed")
	}
	if sw.AddCommitted {
		b.WriteString(" add-committed")
	}
	if sw.FailedIn != "" {
		fmt.Fprintf(&b, " failed-in=%s reason=%q", sw.FailedIn, sw.Reason)
	}
	if sw.ClearedTo != "" {
		fmt.Fprintf(&b, " cleared-to=%s@%d", sw.ClearedTo, int(sw.Cleared.Sub(t0)/time.Second))
	}
	fmt.Fprintf(&b, " t=%d..%d", int(sw.Started.Sub(t0)/time.Second), int(sw.Updated.Sub(t0)/time.Second))
	return b.String()
}

// parseEvent reads one event in the transcript syntax:
//
//	start ID FROM TO
//	released ID HOST [jobs=J1,J2]
//	release-failed ID [err=TEXT]
//	reconfigured ID | reconfigure-failed ID [err=TEXT]
//	added ID | add-failed ID [err=TEXT]
//	committed ID release|add | commit-failed ID release|add [err=TEXT]
//	reverted ID | revert-failed ID [err=TEXT]
//	timeout ID
//	cleared HOST [pool=POOL]
//
// Any line may end with @SECONDS, the time after t0 (0 if absent). TEXT runs
// to the end of the line (before @SECONDS).
func parseEvent(line string) (Event, error) {
	line = strings.TrimSpace(line)
	when := t0
	if i := strings.LastIndex(line, " @"); i >= 0 {
		var sec int
		if _, err := fmt.Sscanf(line[i+2:], "%d", &sec); err != nil {
			return nil, fmt.Errorf("bad time in %q: %w", line, err)
		}
		when = at(sec)
		line = strings.TrimSpace(line[:i])
	}
	errText := ""
	if i := strings.Index(line, " err="); i >= 0 {
		errText = line[i+len(" err="):]
		line = line[:i]
	}
	f := strings.Fields(line)
	kv := map[string]string{}
	var pos []string
	for _, w := range f {
		if k, v, ok := strings.Cut(w, "="); ok {
			kv[k] = v
		} else {
			pos = append(pos, w)
		}
	}
	need := func(n int) error {
		if len(pos) != n {
			return fmt.Errorf("%q: want %d words, got %d", line, n, len(pos))
		}
		return nil
	}
	if len(pos) == 0 {
		return nil, fmt.Errorf("empty event")
	}
	var id SwitchID
	if len(pos) > 1 {
		id = SwitchID(pos[1])
	}
	switch pos[0] {
	case "start":
		if err := need(4); err != nil {
			return nil, err
		}
		return Start{ID: id, From: pos[2], To: pos[3], At: when}, nil
	case "released":
		if err := need(3); err != nil {
			return nil, err
		}
		var jobs []string
		if j := kv["jobs"]; j != "" {
			jobs = strings.Split(j, ",")
		}
		return Released{ID: id, Host: pos[2], Requeued: jobs, At: when}, nil
	case "cleared":
		if err := need(2); err != nil {
			return nil, err
		}
		return Cleared{Host: pos[1], Pool: kv["pool"], At: when}, nil
	case "committed", "commit-failed":
		if err := need(3); err != nil {
			return nil, err
		}
		if pos[0] == "committed" {
			return Committed{ID: id, Side: Side(pos[2]), At: when}, nil
		}
		return CommitFailed{ID: id, Side: Side(pos[2]), Err: errText, At: when}, nil
	}
	if err := need(2); err != nil {
		return nil, err
	}
	switch pos[0] {
	case "release-failed":
		return ReleaseFailed{ID: id, Err: errText, At: when}, nil
	case "reconfigured":
		return Reconfigured{ID: id, At: when}, nil
	case "reconfigure-failed":
		return ReconfigureFailed{ID: id, Err: errText, At: when}, nil
	case "added":
		return Added{ID: id, At: when}, nil
	case "add-failed":
		return AddFailed{ID: id, Err: errText, At: when}, nil
	case "reverted":
		return Reverted{ID: id, At: when}, nil
	case "revert-failed":
		return RevertFailed{ID: id, Err: errText, At: when}, nil
	case "timeout":
		return Timeout{ID: id, At: when}, nil
	}
	return nil, fmt.Errorf("unknown event %q", pos[0])
}

// world is a recording fake of the pool managers and agents: it answers each
// request with success unless its step is listed in fail.
type world struct {
	host    string          // the host PrepareRelease names
	fail    map[string]bool // "release", "reconfigure", "add", "commit-release", "commit-add", "revert"
	at      time.Time
	notices []Action // notifications received, in order
}

// answer returns the event answering a, or nil for a notification.
func (w *world) answer(a Action) Event {
	switch a := a.(type) {
	case PrepareRelease:
		if w.fail["release"] {
			return ReleaseFailed{ID: a.ID, Err: "no host", At: w.at}
		}
		return Released{ID: a.ID, Host: w.host, Requeued: []string{"j1"}, At: w.at}
	case Reconfigure:
		if w.fail["reconfigure"] {
			return ReconfigureFailed{ID: a.ID, Err: "agent down", At: w.at}
		}
		return Reconfigured{ID: a.ID, At: w.at}
	case PrepareAdd:
		if w.fail["add"] {
			return AddFailed{ID: a.ID, Err: "refused", At: w.at}
		}
		return Added{ID: a.ID, At: w.at}
	case CommitRelease:
		if w.fail["commit-release"] {
			return CommitFailed{ID: a.ID, Side: SideRelease, Err: "source lost", At: w.at}
		}
		return Committed{ID: a.ID, Side: SideRelease, At: w.at}
	case CommitAdd:
		if w.fail["commit-add"] {
			return CommitFailed{ID: a.ID, Side: SideAdd, Err: "destination lost", At: w.at}
		}
		return Committed{ID: a.ID, Side: SideAdd, At: w.at}
	case Revert:
		if w.fail["revert"] {
			return RevertFailed{ID: a.ID, Err: "disk gone", At: w.at}
		}
		return Reverted{ID: a.ID, At: w.at}
	case Persist:
		return nil
	}
	w.notices = append(w.notices, a)
	return nil
}

// drive carries out acts and every action that follows, answering requests
// from w in FIFO order, until nothing is left. It returns the journal
// records written. Late answers (ErrWrongPhase) are dropped as a real
// driver would; any other rejected answer is returned as an error.
func drive(c *Coordinator, w *world, acts []Action) ([]Record, error) {
	var journal []Record
	queue := append([]Action(nil), acts...)
	for len(queue) > 0 {
		a := queue[0]
		queue = queue[1:]
		if p, ok := a.(Persist); ok {
			journal = append(journal, p.Record)
			continue
		}
		ev := w.answer(a)
		if ev == nil {
			continue
		}
		more, err := c.Step(ev)
		if errors.Is(err, ErrWrongPhase) {
			continue // a late answer to a step given up on: a real driver drops it too
		}
		if err != nil {
			return journal, fmt.Errorf("answer to %s: %w", formatAction(a), err)
		}
		queue = append(queue, more...)
	}
	return journal, nil
}
