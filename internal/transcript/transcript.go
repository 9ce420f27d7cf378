// Package transcript runs scripted transcripts of state machines (the
// switch coordinator's, the job lifecycle's), in the manner of etcd raft's
// testdata: a script is a list of blocks, each of comment lines starting
// with "#", one command line starting with "> " and the output expected
// after it. The design is described in docs/internals/tests.md of the
// repository, "How the tests are built".
package transcript

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// Update is the -update flag of the tests that run scripts: rewrite the
// scripts' expected output (Run's update).
var Update = flag.Bool("update", false, "rewrite the expected output of testdata/*.txt")

// Epoch is time 0 of the scripts' "@SECONDS".
var Epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// At is the time "@SECONDS" names.
func At(seconds float64) time.Time { return Epoch.Add(time.Duration(seconds * float64(time.Second))) }

// Block is one command of a script with the comments before it and the
// output expected after it.
type Block struct {
	Comments []string
	Cmd      string
	Want     string
}

// Parse reads a script.
func Parse(s string) []Block {
	var blocks []Block
	var comments []string
	for line := range strings.Lines(s) {
		line = strings.TrimRight(line, "\n")
		switch {
		case strings.HasPrefix(line, "#"):
			comments = append(comments, line)
		case strings.HasPrefix(line, "> "):
			blocks = append(blocks, Block{Comments: comments, Cmd: strings.TrimPrefix(line, "> ")})
			comments = nil
		case strings.TrimSpace(line) == "":
		case len(blocks) > 0:
			blocks[len(blocks)-1].Want += line + "\n"
		}
	}
	return blocks
}

// Run runs every script matching dir/*.txt as a subtest: newRun makes a
// fresh runner per script, and the runner's output for each command must
// equal the output the script expects. With update set, the scripts are
// rewritten with the output the runner gives instead.
func Run(t *testing.T, dir string, update bool, newRun func(t *testing.T) func(cmd string) string) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatalf("no transcripts in %s", dir)
	}
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".txt"), func(t *testing.T) {
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			run := newRun(t)
			var out strings.Builder
			for _, b := range Parse(string(data)) {
				for _, c := range b.Comments {
					out.WriteString(c + "\n")
				}
				out.WriteString("> " + b.Cmd + "\n")
				got := run(b.Cmd)
				out.WriteString(got + "\n")
				if !update {
					if diff := cmp.Diff(strings.TrimSpace(b.Want), strings.TrimSpace(got)); diff != "" {
						t.Errorf("%s: > %s: output mismatch (-want +got):\n%s", file, b.Cmd, diff)
					}
				}
			}
			if update {
				if err := os.WriteFile(file, []byte(out.String()), 0o644); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}
