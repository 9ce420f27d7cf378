package main

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// metasched completion bash, sourced in a plain bash (no bash-completion
// package), completes subcommands, their subcommands and flags, asking the
// real binary found on PATH as the script does.
func TestBashCompletion(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash on PATH")
	}
	bin := buildBinary(t)
	for _, tc := range []struct {
		words []string
		want  []string
	}{
		{[]string{"metasched", "sub"}, []string{"submit"}},
		{[]string{"metasched", "policy", "so"}, []string{"solve"}},
		{[]string{"metasched", "hosts", "dr"}, []string{"drain"}},
		{[]string{"metasched", "serve", "--exit-after"}, []string{"--exit-after-demo"}},
	} {
		t.Run(strings.Join(tc.words, " "), func(t *testing.T) {
			line := strings.Join(tc.words, " ")
			script := `source <(metasched completion bash)
COMP_WORDS=(` + line + `)
COMP_CWORD=` + strconv.Itoa(len(tc.words)-1) + `
COMP_LINE="` + line + `"
COMP_POINT=${#COMP_LINE}
__start_metasched 2>/dev/null
printf '%s\n' "${COMPREPLY[@]}"
`
			cmd := exec.Command(bash, "--norc", "--noprofile", "-c", script)
			cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(bin)+string(os.PathListSeparator)+os.Getenv("PATH"))
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("bash: %v\n%s", err, out)
			}
			got := strings.Fields(string(out))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("completions of %q (-want +got):\n%s", line, diff)
			}
		})
	}
}

// make install's man pages: one per command, named as man finds them
// (man metasched-serve), each a page of section 1 with the command's
// flags.
func TestManPages(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("SOURCE_DATE_EPOCH", "0")
	if err := writeManPages(newRoot(&env{stdout: io.Discard, stderr: io.Discard}), dir); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"metasched.1", "metasched-serve.1", "metasched-policy-solve.1", "metasched-completion-bash.1"} {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(string(data), `.nh`) || !strings.Contains(string(data), `.TH "METASCHED" "1" "Jan 1970"`) {
			t.Errorf("%s: not a man page of section 1 dated by SOURCE_DATE_EPOCH:\n%.300s", name, data)
		}
	}
	serve, err := os.ReadFile(filepath.Join(dir, "metasched-serve.1"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(serve), `exit-after-demo`) {
		t.Error("metasched-serve.1 does not document --exit-after-demo")
	}
	t.Setenv("SOURCE_DATE_EPOCH", "yesterday")
	if err := writeManPages(newRoot(&env{stdout: io.Discard, stderr: io.Discard}), dir); err == nil || !strings.Contains(err.Error(), "SOURCE_DATE_EPOCH") {
		t.Errorf("a bad SOURCE_DATE_EPOCH: %v", err)
	}
}

// The hidden docs commands write where they are told, and docs markdown
// without --out writes the repository's reference (here: a copy's).
func TestDocsCommands(t *testing.T) {
	dir := t.TempDir()
	if code, out, errOut := runCmd(t, "docs", "man", "--out", filepath.Join(dir, "man")); code != 0 {
		t.Fatalf("docs man: exit %d: %s%s", code, out, errOut)
	}
	if _, err := os.Stat(filepath.Join(dir, "man", "metasched-serve.1")); err != nil {
		t.Error(err)
	}
	if code, _, errOut := runCmd(t, "docs", "man"); code != 2 || !strings.Contains(errOut, "--out is required") {
		t.Errorf("docs man without --out: exit %d, %q", code, errOut)
	}
	t.Chdir(dir)
	if code, out, errOut := runCmd(t, "docs", "markdown"); code != 0 {
		t.Fatalf("docs markdown: exit %d: %s%s", code, out, errOut)
	}
	if _, err := os.Stat(filepath.Join(dir, cliReferenceDir, "metasched.md")); err != nil {
		t.Error(err)
	}
	if code, out, errOut := runCmd(t, "docs", "markdown", "--out", filepath.Join(dir, "md")); code != 0 {
		t.Fatalf("docs markdown: exit %d: %s%s", code, out, errOut)
	}
	if _, err := os.Stat(filepath.Join(dir, "md", "metasched_serve.md")); err != nil {
		t.Error(err)
	}
}
