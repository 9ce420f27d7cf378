package coordinator

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/metasched/metasched/internal/transcript"
)

// TestTranscripts runs the scripts in testdata/*.txt. A script is a list of
// blocks: comment lines starting with "#", one command line starting with
// "> ", and the expected output after it. A command is an event (see
// parseEvent) or "restore", which rebuilds the coordinator from the journal
// written so far and prints the actions to re-issue. The output lists the
// actions returned (or the error) and then every switch and the stranded
// hosts. Run with -update to rewrite the expected output.
func TestTranscripts(t *testing.T) {
	transcript.Run(t, "testdata", *transcript.Update, func(t *testing.T) func(string) string {
		c := New()
		var journal []Record
		return func(cmd string) string { return runCommand(t, &c, &journal, cmd) }
	})
}

func runCommand(t *testing.T, c **Coordinator, journal *[]Record, cmd string) string {
	t.Helper()
	var b strings.Builder
	var acts []Action
	if cmd == "restore" {
		nc, re, err := Restore(*journal)
		if err != nil {
			return "error: " + err.Error() + "\n"
		}
		*c = nc
		acts = re
		b.WriteString("re-issue:\n")
	} else {
		ev, err := parseEvent(cmd)
		if err != nil {
			t.Fatalf("bad command %q: %v", cmd, err)
		}
		before := (*c).Switches()
		acts, err = (*c).Step(ev)
		if err != nil {
			if diff := cmp.Diff(before, (*c).Switches()); diff != "" {
				t.Errorf("%q: state changed by a rejected event (-before +after):\n%s", cmd, diff)
			}
			b.WriteString("error: " + err.Error() + "\n")
		} else {
			b.WriteString("actions:\n")
		}
	}
	for _, a := range acts {
		if p, ok := a.(Persist); ok {
			*journal = append(*journal, p.Record)
		}
		b.WriteString("  " + formatAction(a) + "\n")
	}
	b.WriteString("switches:\n")
	for _, sw := range (*c).Switches() {
		b.WriteString("  " + formatSwitch(sw) + "\n")
	}
	b.WriteString("stranded: [" + strings.Join((*c).Stranded(), ",") + "]\n")
	return b.String()
}
