package coordinator

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite the expected output of testdata/*.txt")

// TestTranscripts runs the scripts in testdata/*.txt. A script is a list of
// blocks: comment lines starting with "#", one command line starting with
// "> ", and the expected output after it. A command is an event (see
// parseEvent) or "restore", which rebuilds the coordinator from the journal
// written so far and prints the actions to re-issue. The output lists the
// actions returned (or the error) and then every switch and the stranded
// hosts. Run with -update to rewrite the expected output.
func TestTranscripts(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "*.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no transcripts in testdata")
	}
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".txt"), func(t *testing.T) {
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			blocks := parseBlocks(string(data))
			var out strings.Builder
			c := New()
			var journal []Record
			for _, b := range blocks {
				for _, cm := range b.comments {
					out.WriteString(cm + "\n")
				}
				out.WriteString("> " + b.cmd + "\n")
				got := runCommand(t, &c, &journal, b.cmd)
				out.WriteString(got)
				out.WriteString("\n")
				if !*update {
					if diff := cmp.Diff(strings.TrimSpace(b.want), strings.TrimSpace(got)); diff != "" {
						t.Errorf("%s: > %s: output mismatch (-want +got):\n%s", file, b.cmd, diff)
					}
				}
			}
			if *update {
				if err := os.WriteFile(file, []byte(out.String()), 0o644); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

type block struct {
	comments []string
	cmd      string
	want     string
}

func parseBlocks(s string) []block {
	var blocks []block
	var comments []string
	var cur *block
	for line := range strings.Lines(s) {
		line = strings.TrimRight(line, "\n")
		switch {
		case strings.HasPrefix(line, "#"):
			comments = append(comments, line)
		case strings.HasPrefix(line, "> "):
			blocks = append(blocks, block{comments: comments, cmd: strings.TrimPrefix(line, "> ")})
			comments = nil
			cur = &blocks[len(blocks)-1]
		case strings.TrimSpace(line) == "":
		case cur != nil:
			cur.want += line + "\n"
		}
	}
	return blocks
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
