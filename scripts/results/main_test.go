package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// fakeRegistry has two default sections and one that runs only by name.
var fakeRegistry = []entry{
	{Name: "fast", Default: true, Timeout: time.Minute, Commands: []string{"fast-cmd"}},
	{Name: "also-fast", Default: true, Timeout: time.Minute, Commands: []string{"first", "second"}},
	{Name: "slow", Timeout: time.Minute, Needs: "QEMU", Commands: []string{"slow-cmd"}},
}

// fakeRun prints "ran COMMAND" and fails the command "fail".
func fakeRun(calls *[]string) runFunc {
	return func(_ context.Context, c string) (string, error) {
		*calls = append(*calls, c)
		if c == "fail" {
			return "", os.ErrInvalid
		}
		return "ran " + c + "\n", nil
	}
}

const page = "# Results\r\n" +
	"\n" +
	"Intro, kept.  Trailing spaces too.   \n" +
	"<!-- results fast -->\n" +
	"old fast body\n" +
	"<!-- /results fast -->\n" +
	"between\n" +
	"<!-- results slow -->\n" +
	"| hand | measured |\n" +
	"<!-- /results slow -->\n" +
	"<!-- results also-fast -->\n" +
	"<!-- /results also-fast -->\n" +
	"no newline at the end"

func writePage(t *testing.T, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "results.md")
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestParse(t *testing.T) {
	secs, err := parse("p.md", []byte(page))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range secs {
		got = append(got, s.name+":"+page[s.bodyStart:s.bodyEnd])
	}
	want := []string{"fast:old fast body\n", "slow:| hand | measured |\n", "also-fast:"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("sections %q, want %q", got, want)
	}
	if secs[0].line != 4 || secs[1].line != 8 || secs[2].line != 11 {
		t.Errorf("lines %d %d %d, want 4 8 11", secs[0].line, secs[1].line, secs[2].line)
	}
}

func TestParseErrors(t *testing.T) {
	for _, tc := range []struct{ name, page, want string }{
		{"not closed", "a\n<!-- results x -->\nb\n", "p.md:2: section \"x\" is not closed"},
		{"close without open", "a\nb\n<!-- /results x -->\n", "p.md:3: <!-- /results x --> closes a section that is not open"},
		{"wrong close", "<!-- results x -->\n<!-- /results y -->\n", "p.md:2: <!-- /results y --> closes section \"x\" (opened on line 1)"},
		{"nested", "<!-- results x -->\n\n<!-- results y -->\n", "p.md:3: <!-- results y --> opens inside section \"x\" (line 1)"},
		{"twice", "<!-- results x -->\n<!-- /results x -->\n<!-- results x -->\n<!-- /results x -->\n", "p.md:3: section \"x\" is marked twice (first on line 1)"},
		{"malformed", "a\n<!-- results  x -->\n", "p.md:2: malformed marker"},
		{"malformed close", "<!-- results x -->\n<!--/results x-->\n", "p.md:2: malformed marker"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parse("p.md", []byte(tc.page))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestRunDefaultKeepsTheRest(t *testing.T) {
	p := writePage(t, page)
	var calls []string
	if err := run(context.Background(), p, "", false, fakeRegistry, fakeRun(&calls), os.Stdout, t.Logf); err != nil {
		t.Fatal(err)
	}
	if strings.Join(calls, ",") != "fast-cmd,first,second" {
		t.Errorf("ran %q, want the default sections' commands", calls)
	}
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	got := string(b)
	// Outside the regenerated bodies, the page is what it was, byte for byte.
	secs, err := parse(p, b)
	if err != nil {
		t.Fatal(err)
	}
	fast, slow, also := secs[0], secs[1], secs[2]
	if got[:fast.bodyStart] != page[:strings.Index(page, "old fast body")] {
		t.Errorf("the page before the first section changed:\n%q", got[:fast.bodyStart])
	}
	if got[fast.bodyEnd:also.bodyStart] != page[strings.Index(page, "<!-- /results fast -->"):strings.Index(page, "<!-- /results also-fast -->")] {
		t.Errorf("the page between the sections changed:\n%q", got[fast.bodyEnd:also.bodyStart])
	}
	if got[also.bodyEnd:] != "<!-- /results also-fast -->\nno newline at the end" {
		t.Errorf("the page's end changed: %q", got[also.bodyEnd:])
	}
	if body := got[slow.bodyStart:slow.bodyEnd]; body != "| hand | measured |\n" {
		t.Errorf("the section not run changed: %q", body)
	}
	body := got[fast.bodyStart:fast.bodyEnd]
	for _, want := range []string{"`make results RESULTS=fast`", "(`nproc`), CPU model ", "at commit ", "`fast-cmd`", "```text\nran fast-cmd\n```\n"} {
		if !strings.Contains(body, want) {
			t.Errorf("fast's body lacks %q:\n%s", want, body)
		}
	}
	if strings.Contains(body, "old fast body") {
		t.Errorf("fast's old body is kept:\n%s", body)
	}
	if body := got[also.bodyStart:also.bodyEnd]; !strings.Contains(body, "ran first\n") || !strings.Contains(body, "ran second\n") {
		t.Errorf("also-fast's body lacks a command's output:\n%s", body)
	}

	// A second run replaces the bodies it wrote, and nothing else.
	if err := run(context.Background(), p, "fast", false, fakeRegistry, fakeRun(&calls), os.Stdout, t.Logf); err != nil {
		t.Fatal(err)
	}
	again, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	secs2, err := parse(p, again)
	if err != nil {
		t.Fatal(err)
	}
	if string(again[secs2[0].bodyEnd:]) != got[fast.bodyEnd:] || string(again[:secs2[0].bodyStart]) != got[:fast.bodyStart] {
		t.Errorf("a second run changed more than its section:\n%s", again)
	}
}

func TestRunOnly(t *testing.T) {
	for _, tc := range []struct{ only, calls string }{
		{"slow", "slow-cmd"},
		{"slow,fast", "slow-cmd,fast-cmd"},
		{"all", "fast-cmd,first,second,slow-cmd"},
	} {
		p := writePage(t, page)
		var calls []string
		if err := run(context.Background(), p, tc.only, false, fakeRegistry, fakeRun(&calls), os.Stdout, t.Logf); err != nil {
			t.Fatal(err)
		}
		if strings.Join(calls, ",") != tc.calls {
			t.Errorf("-only %s ran %q, want %s", tc.only, calls, tc.calls)
		}
	}
}

func TestRunErrors(t *testing.T) {
	for _, tc := range []struct{ name, page, only, want string }{
		{"unknown name in -only", page, "fast,nosuch", `unknown section "nosuch" in -only`},
		{"name not on the page", "<!-- results fast -->\n<!-- /results fast -->\n", "slow", `section "slow" is not marked on`},
		{"section unknown to the registry", page + "\n<!-- results other -->\n<!-- /results other -->\n", "", `:14: section "other" has no commands`},
		{"unbalanced", "x\n<!-- results fast -->\n", "", `:2: section "fast" is not closed`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := writePage(t, tc.page)
			var calls []string
			err := run(context.Background(), p, tc.only, false, fakeRegistry, fakeRun(&calls), os.Stdout, t.Logf)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one containing %q", err, tc.want)
			}
			if len(calls) != 0 {
				t.Errorf("ran %q before the error", calls)
			}
			if b, _ := os.ReadFile(p); string(b) != tc.page {
				t.Errorf("the page changed")
			}
		})
	}
}

func TestRunFailedCommandKeepsItsSection(t *testing.T) {
	reg := []entry{
		{Name: "fast", Default: true, Timeout: time.Minute, Commands: []string{"fail"}},
		{Name: "also-fast", Default: true, Timeout: time.Minute, Commands: []string{"ok"}},
		{Name: "slow", Timeout: time.Minute, Commands: []string{"x"}},
	}
	p := writePage(t, page)
	var calls []string
	err := run(context.Background(), p, "", false, reg, fakeRun(&calls), os.Stdout, t.Logf)
	if err == nil || !strings.Contains(err.Error(), "fast: fail") {
		t.Errorf("error %v, want the failed command's", err)
	}
	b, _ := os.ReadFile(p)
	if !strings.Contains(string(b), "<!-- results fast -->\nold fast body\n<!-- /results fast -->") {
		t.Errorf("the failed section changed:\n%s", b)
	}
	if !strings.Contains(string(b), "ran ok") {
		t.Errorf("the other section was not written:\n%s", b)
	}
}

func TestRegistry(t *testing.T) {
	seen := map[string]bool{}
	for _, e := range registry {
		if seen[e.Name] || !openRE.MatchString("<!-- results "+e.Name+" -->") || len(e.Commands) == 0 || e.Timeout <= 0 || e.Needs == "" {
			t.Errorf("entry %+v: a name twice or malformed, or no commands, timeout or needs", e)
		}
		seen[e.Name] = true
	}
}

// TestPage checks that docs/results.md parses and marks only sections the
// registry knows.
func TestPage(t *testing.T) {
	const file = "../../docs/results.md"
	b, err := os.ReadFile(file)
	if os.IsNotExist(err) {
		t.Skip("no docs/results.md")
	}
	if err != nil {
		t.Fatal(err)
	}
	secs, err := parse(file, b)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := selectSections(file, registry, secs, "all"); err != nil {
		t.Fatal(err)
	}
}

func TestTrim(t *testing.T) {
	in := "goos: linux\ngoarch: amd64\npkg: example/p\ncpu: Some CPU\nBenchmarkX-2   \t 10\t 5 ns/op\nPASS\nok  \texample/p\t1.0s\n"
	want := "pkg: example/p\nBenchmarkX-2   \t 10\t 5 ns/op\nok  \texample/p\t1.0s\n"
	if got := trim(in); got != want {
		t.Errorf("trim:\n%q\nwant\n%q", got, want)
	}
}

// The page shows no path of the machine that measured it.
func TestScrub(t *testing.T) {
	paths := []pathName{{"/home/ana/src/metasched", "."}, {"/tmp", "$TMPDIR"}, {"/home/ana", "~"}}
	got := scrub("data in /home/ana/src/metasched/metasched-data\ntoken /tmp/tmp.x1/data/token\ncache /home/ana/.cache, /var/tmp, /tmp\n", paths)
	want := "data in ./metasched-data\ntoken $TMPDIR/tmp.x1/data/token\ncache ~/.cache, /var/tmp, $TMPDIR\n"
	if got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}
