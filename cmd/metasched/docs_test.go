package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/metasched/metasched/graph"
	hp "github.com/metasched/metasched/hypervisorproxy"
	"github.com/metasched/metasched/metasched"
	"github.com/metasched/metasched/metasched/httpapi/apidoc"
	"github.com/metasched/metasched/selection"
	"github.com/metasched/metasched/switching"
	"go.yaml.in/yaml/v3"
)

// The checks that keep the docs true: every relative link and anchor of
// the repository's Markdown resolves, the generated CLI reference is what
// the command tree generates, the internals' table of imports is what go
// list says, and every example of the docs parses (YAML files with the
// real decoders, metasched command lines against the command tree).

// moduleRoot is the repository's root, from this package's directory.
const moduleRoot = "../.."

// markdownFiles lists the Markdown files under root that the docs checks
// read: everything but build outputs, test data and the data of a run.
func markdownFiles(t *testing.T, root string) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case ".git", "bin", "results", "metasched-data", "testdata", "node_modules":
				return filepath.SkipDir
			}
			if strings.HasPrefix(d.Name(), "metasched-data.") {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(p, ".md") {
			files = append(files, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

func TestDocsLinks(t *testing.T) {
	files := markdownFiles(t, moduleRoot)
	if len(files) < 10 {
		t.Fatalf("found %d Markdown files under %s", len(files), moduleRoot)
	}
	for _, p := range checkLinks(files) {
		t.Error(p)
	}
}

// The link check finds what it is for: a missing page, a missing anchor
// in another page and in the same page; links in code are not links.
func TestDocsLinksFindBrokenLinks(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("a.md", "# Top\n\n## The `store`: on etcd\n\nSee [b](guide/b.md#running-it), [c](c.md), [gone](guide/b.md#gone),\n"+
		"[here](#the-store-on-etcd), [nowhere](#nowhere), [web](https://example.org/x.md) and `[code](x.md)`.\n\n"+
		"```sh\n[also code](y.md)\n```\n")
	write("guide/b.md", "# B\n\n## Running it\n\nBack to [the top](../a.md#top) and [the image](../pic.png).\n")
	got := checkLinks([]string{filepath.Join(dir, "a.md"), filepath.Join(dir, "guide/b.md")})
	for i := range got {
		got[i] = strings.ReplaceAll(got[i], dir+string(filepath.Separator), "")
	}
	want := []string{
		`a.md:5: link "c.md": no such file`,
		`a.md:5: link "guide/b.md#gone": no heading or anchor "gone" in guide/b.md`,
		`a.md:6: link "#nowhere": no heading or anchor "nowhere" in a.md`,
		`guide/b.md:5: link "../pic.png": no such file`,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("problems found (-want +got):\n%s", diff)
	}
}

var (
	// inline links and images: [text](target "title")
	inlineLink = regexp.MustCompile(`!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)`)
	// reference definitions: [label]: target
	refLink  = regexp.MustCompile(`^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s.*)?$`)
	htmlID   = regexp.MustCompile(`<a\s+(?:id|name)="([^"]+)"`)
	codeSpan = regexp.MustCompile("`+[^`]*`+")
	scheme   = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9+.-]*:`)
)

// checkLinks returns a line per link of files that does not resolve.
func checkLinks(files []string) []string {
	anchors := map[string]map[string]bool{}
	anchorsOf := func(p string) (map[string]bool, error) {
		if a, ok := anchors[p]; ok {
			return a, nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		a := markdownAnchors(string(data))
		anchors[p] = a
		return a, nil
	}
	var problems []string
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			problems = append(problems, err.Error())
			continue
		}
		for n, line := range proseLines(string(data)) {
			if line == "" {
				continue
			}
			line = codeSpan.ReplaceAllString(line, "")
			var targets []string
			for _, m := range inlineLink.FindAllStringSubmatch(line, -1) {
				targets = append(targets, m[1])
			}
			if m := refLink.FindStringSubmatch(line); m != nil {
				targets = append(targets, m[1])
			}
			for _, target := range targets {
				if scheme.MatchString(target) {
					continue
				}
				path, frag, _ := strings.Cut(target, "#")
				dest := f
				if path != "" {
					dest = filepath.Join(filepath.Dir(f), filepath.FromSlash(path))
					if _, err := os.Stat(dest); err != nil {
						problems = append(problems, fmt.Sprintf("%s:%d: link %q: no such file", f, n+1, target))
						continue
					}
				}
				if frag == "" {
					continue
				}
				if !strings.HasSuffix(dest, ".md") {
					problems = append(problems, fmt.Sprintf("%s:%d: link %q: an anchor in a file that is not Markdown", f, n+1, target))
					continue
				}
				a, err := anchorsOf(dest)
				if err != nil {
					problems = append(problems, fmt.Sprintf("%s:%d: link %q: %v", f, n+1, target, err))
					continue
				}
				if !a[frag] {
					problems = append(problems, fmt.Sprintf("%s:%d: link %q: no heading or anchor %q in %s", f, n+1, target, frag,
						filepath.ToSlash(strings.TrimPrefix(dest, filepath.Dir(f)+string(filepath.Separator)))))
				}
			}
		}
	}
	return problems
}

// proseLines returns the file's lines with those of fenced code blocks
// blanked, so that line numbers stay those of the file.
func proseLines(text string) []string {
	lines := strings.Split(text, "\n")
	fence := ""
	for i, l := range lines {
		trimmed := strings.TrimSpace(l)
		switch {
		case fence == "" && (strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~")):
			fence = trimmed[:3]
			lines[i] = ""
		case fence != "":
			if strings.HasPrefix(trimmed, fence) {
				fence = ""
			}
			lines[i] = ""
		}
	}
	return lines
}

// markdownAnchors returns the anchors a Markdown page has: its headings'
// slugs as GitHub makes them (repeats numbered -1, -2…) and explicit
// <a id="…"> anchors.
func markdownAnchors(text string) map[string]bool {
	a := map[string]bool{}
	seen := map[string]int{}
	for _, l := range proseLines(text) {
		for _, m := range htmlID.FindAllStringSubmatch(l, -1) {
			a[m[1]] = true
		}
		trimmed := strings.TrimLeft(l, " ")
		if !strings.HasPrefix(trimmed, "#") {
			continue
		}
		level := len(trimmed) - len(strings.TrimLeft(trimmed, "#"))
		if level > 6 || len(trimmed) == level || trimmed[level] != ' ' {
			continue
		}
		s := slug(trimmed[level:])
		if n := seen[s]; n > 0 {
			a[fmt.Sprintf("%s-%d", s, n)] = true
		} else {
			a[s] = true
		}
		seen[s]++
	}
	return a
}

var linkText = regexp.MustCompile(`!?\[([^\]]*)\]\([^)]*\)`)

// slug is GitHub's anchor of a heading: apidoc.Slug (the generated API
// page's) of its text as shown, without link targets, code marks or
// emphasis.
func slug(heading string) string {
	h := strings.TrimSpace(strings.TrimRight(strings.TrimSpace(heading), "#"))
	h = linkText.ReplaceAllString(h, "$1")
	return apidoc.Slug(strings.NewReplacer("`", "", "*", "").Replace(h))
}

// TestCLIReference fails when docs/reference/cli is not what the command
// tree generates; make docs writes it anew.
func TestCLIReference(t *testing.T) {
	for _, p := range compareCLIReference(t, filepath.Join(moduleRoot, cliReferenceDir)) {
		t.Error(p)
	}
}

// A page that differs, a page missing and a page too many are all found.
func TestCLIReferenceFindsStalePages(t *testing.T) {
	dir := t.TempDir()
	if err := writeCLIMarkdown(newRoot(&env{stdout: io.Discard, stderr: io.Discard}), dir); err != nil {
		t.Fatal(err)
	}
	if p := compareCLIReference(t, dir); len(p) != 0 {
		t.Fatalf("a fresh reference is stale: %v", p)
	}
	page := filepath.Join(dir, "metasched_serve.md")
	data, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(page, bytes.Replace(data, []byte("--config"), []byte("--configuration"), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, "metasched_jobs.md")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "metasched_gone.md"), []byte("# gone\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	got := compareCLIReference(t, dir)
	want := []string{
		"metasched_gone.md: no such command any more",
		"metasched_jobs.md: missing",
		"metasched_serve.md: differs from what the command tree generates",
	}
	for i := range got {
		got[i], _, _ = strings.Cut(got[i], " (")
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("problems (-want +got):\n%s", diff)
	}
}

// compareCLIReference returns a line per page of dir that is not what the
// command tree generates.
func compareCLIReference(t *testing.T, dir string) []string {
	t.Helper()
	fresh := t.TempDir()
	if err := writeCLIMarkdown(newRoot(&env{stdout: io.Discard, stderr: io.Discard}), fresh); err != nil {
		t.Fatal(err)
	}
	read := func(d string) map[string][]byte {
		pages := map[string][]byte{}
		files, err := filepath.Glob(filepath.Join(d, "*.md"))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			pages[filepath.Base(f)] = data
		}
		return pages
	}
	want, got := read(fresh), read(dir)
	var names []string
	for n := range want {
		names = append(names, n)
	}
	for n := range got {
		if _, ok := want[n]; !ok {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	const fix = " (docs/reference/cli is stale: run make docs)"
	var problems []string
	for _, n := range names {
		w, inWant := want[n]
		g, inGot := got[n]
		switch {
		case !inGot:
			problems = append(problems, n+": missing"+fix)
		case !inWant:
			problems = append(problems, n+": no such command any more"+fix)
		case !bytes.Equal(w, g):
			problems = append(problems, n+": differs from what the command tree generates"+fix)
		}
	}
	return problems
}

// TestDocsImports holds the internals' table of packages and their imports
// to what go list says.
func TestDocsImports(t *testing.T) {
	page := filepath.Join(moduleRoot, "docs/internals/architecture.md")
	data, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	documented, err := importsTable(string(data))
	if err != nil {
		t.Fatalf("%s: %v", page, err)
	}
	actual := moduleImports(t)
	if diff := cmp.Diff(actual, documented); diff != "" {
		t.Errorf("%s, \"Packages and their imports\", is not what go list says (-go list +page):\n%s", page, diff)
	}
}

func TestImportsTableParse(t *testing.T) {
	page := "# A\n\n## Packages and their imports\n\n| package | holds | imports of this module |\n| --- | --- | --- |\n" +
		"| `graph` | graphs | — |\n| `metasched/lifecycle` | the lifecycle | `gramvm`, `graph` |\n\nMore.\n"
	got, err := importsTable(page)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{"graph": nil, "metasched/lifecycle": {"gramvm", "graph"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Error(diff)
	}
	for _, bad := range []string{
		"# A\n",
		"## Packages and their imports\n\n| package | holds |\n| --- | --- |\n| `graph` | x |\n",
		"## Packages and their imports\n\n| package | holds | imports of this module |\n| --- | --- | --- |\n| graph | x | — |\n",
	} {
		if _, err := importsTable(bad); err == nil {
			t.Errorf("no error for %q", bad)
		}
	}
}

// importsTable reads the table of the section "Packages and their
// imports": package → its imports inside the module.
func importsTable(page string) (map[string][]string, error) {
	_, section, ok := strings.Cut(page, "\n## Packages and their imports\n")
	if !ok && !strings.HasPrefix(page, "## Packages and their imports\n") {
		return nil, fmt.Errorf("no section \"## Packages and their imports\"")
	}
	if !ok {
		section = strings.TrimPrefix(page, "## Packages and their imports\n")
	}
	if i := strings.Index(section, "\n## "); i >= 0 {
		section = section[:i]
	}
	table := map[string][]string{}
	header := false
	for n, l := range strings.Split(section, "\n") {
		if !strings.HasPrefix(l, "|") {
			if len(table) > 0 {
				break
			}
			continue
		}
		cells := strings.Split(strings.Trim(strings.TrimSpace(l), "|"), "|")
		if !header {
			if len(cells) != 3 || strings.TrimSpace(cells[2]) != "imports of this module" {
				return nil, fmt.Errorf("the table's header %q: want | package | holds | imports of this module |", l)
			}
			header = true
			continue
		}
		if strings.HasPrefix(strings.TrimSpace(cells[0]), "---") {
			continue
		}
		if len(cells) != 3 {
			return nil, fmt.Errorf("section line %d: %d cells, want 3", n+1, len(cells))
		}
		pkg := strings.TrimSpace(cells[0])
		if !strings.HasPrefix(pkg, "`") || !strings.HasSuffix(pkg, "`") {
			return nil, fmt.Errorf("section line %d: package %q: want it in backticks", n+1, pkg)
		}
		pkg = strings.Trim(pkg, "`")
		var imports []string
		if cell := strings.TrimSpace(cells[2]); cell != "—" {
			for _, imp := range strings.Split(cell, ",") {
				imp = strings.TrimSpace(imp)
				if !strings.HasPrefix(imp, "`") || !strings.HasSuffix(imp, "`") {
					return nil, fmt.Errorf("section line %d: import %q: want it in backticks", n+1, imp)
				}
				imports = append(imports, strings.Trim(imp, "`"))
			}
		}
		if _, dup := table[pkg]; dup {
			return nil, fmt.Errorf("section line %d: package %s twice", n+1, pkg)
		}
		table[pkg] = imports
	}
	if len(table) == 0 {
		return nil, fmt.Errorf("the section has no table")
	}
	return table, nil
}

// moduleImports is go list's answer: each package of the module and its
// direct non-test imports inside the module, paths relative to the module.
func moduleImports(t *testing.T) map[string][]string {
	t.Helper()
	cmd := exec.Command("go", "list", "-json=ImportPath,Imports", "./...")
	cmd.Dir = moduleRoot
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	const mod = "github.com/metasched/metasched/"
	got := map[string][]string{}
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p struct {
			ImportPath string
			Imports    []string
		}
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		var imports []string
		for _, imp := range p.Imports {
			if rel, ok := strings.CutPrefix(imp, mod); ok {
				imports = append(imports, rel)
			}
		}
		sort.Strings(imports)
		got[strings.TrimPrefix(p.ImportPath, mod)] = imports
	}
	return got
}

// TestDocsExamples parses every example of the docs: a YAML block whose
// info string names a kind (```yaml site) with that kind's decoder, any
// other YAML block as YAML, and every metasched command line of a shell
// block against the command tree (its subcommand and flags must exist).
func TestDocsExamples(t *testing.T) {
	var files []string
	for _, f := range markdownFiles(t, moduleRoot) {
		rel, err := filepath.Rel(moduleRoot, f)
		if err != nil {
			t.Fatal(err)
		}
		if rel == "README.md" || strings.HasPrefix(rel, "docs"+string(filepath.Separator)) {
			files = append(files, f)
		}
	}
	blocks := 0
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range codeBlocks(string(data)) {
			blocks++
			for _, p := range checkBlock(b) {
				t.Errorf("%s:%d: %s", f, b.line, p)
			}
		}
	}
	if blocks == 0 {
		t.Fatal("no code blocks found in the docs")
	}
}

func TestDocsExamplesFindBadOnes(t *testing.T) {
	page := "# P\n\n```yaml site\nname: spain\nhosts: [\n```\n\n```sh\nmetasched serve --no-such-flag\nmetasched jobz\n" +
		"metasched submit examples/job-render.yaml   # fine\n```\n\n```yaml excerpt\na: [\n```\n\n```yaml\nx: 1\n```\n\n```yaml nosuchkind\nx: 1\n```\n"
	var got []string
	for _, b := range codeBlocks(page) {
		for _, p := range checkBlock(b) {
			got = append(got, fmt.Sprintf("%d: %s", b.line, strings.SplitN(p, ":", 2)[0]))
		}
	}
	want := []string{
		"3: yaml site",
		"8: metasched serve --no-such-flag",
		"8: metasched jobz",
		"14: yaml excerpt",
		"18: a YAML block without a kind (```yaml serve, site, job, grid or model for a whole file, ```yaml excerpt for a part)",
		"22: yaml nosuchkind",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("problems (-want +got):\n%s", diff)
	}
}

type codeBlock struct {
	info string // the fence's info string: "yaml site"
	text string
	line int // the fence's line
}

func codeBlocks(text string) []codeBlock {
	var blocks []codeBlock
	var cur *codeBlock
	var body []string
	for n, l := range strings.Split(text, "\n") {
		trimmed := strings.TrimSpace(l)
		switch {
		case cur == nil && strings.HasPrefix(trimmed, "```"):
			cur = &codeBlock{info: strings.TrimSpace(strings.TrimPrefix(trimmed, "```")), line: n + 1}
			body = nil
		case cur != nil && trimmed == "```":
			cur.text = strings.Join(body, "\n") + "\n"
			blocks = append(blocks, *cur)
			cur = nil
		case cur != nil:
			body = append(body, l)
		}
	}
	return blocks
}

// exampleDecoders are the decoders of the file kinds a YAML block may name.
var exampleDecoders = map[string]func(file string, data []byte) error{
	"serve": func(f string, b []byte) error { _, err := metasched.ParseConfig(f, b); return err },
	"site":  func(f string, b []byte) error { _, err := hp.ParseSite(f, b); return err },
	"grid":  func(f string, b []byte) error { _, err := graph.ParseGrid(f, b); return err },
	"model": func(f string, b []byte) error { _, err := switching.ParseModel(f, b); return err },
	"job":   func(f string, b []byte) error { _, err := selection.ParseJob(f, b); return err },
}

func checkBlock(b codeBlock) []string {
	fields := strings.Fields(b.info)
	if len(fields) == 0 {
		return nil
	}
	switch fields[0] {
	case "yaml", "yml":
		if len(fields) < 2 {
			return []string{"a YAML block without a kind (```yaml serve, site, job, grid or model for a whole file, ```yaml excerpt for a part)"}
		}
		kind := fields[1]
		if kind == "excerpt" {
			var v any
			if err := yaml.Unmarshal([]byte(b.text), &v); err != nil {
				return []string{"yaml excerpt: not valid YAML: " + err.Error()}
			}
			return nil
		}
		decode, ok := exampleDecoders[kind]
		if !ok {
			return []string{fmt.Sprintf("yaml %s: no such kind of file (serve, site, job, grid, model or excerpt)", kind)}
		}
		if err := decode("example", []byte(b.text)); err != nil {
			return []string{fmt.Sprintf("yaml %s: %v", kind, err)}
		}
	case "sh", "bash", "shell", "console":
		var problems []string
		for _, line := range commandLines(b.text) {
			if err := checkCommandLine(line); err != nil {
				problems = append(problems, fmt.Sprintf("%s: %v", strings.Join(line, " "), err))
			}
		}
		return problems
	}
	return nil
}

// commandLines returns the metasched invocations of a shell block, as
// words: continued lines joined, comments, a prompt, variable assignments
// and sudo before the command, and what follows a pipe or a redirection
// dropped.
func commandLines(text string) [][]string {
	var lines [][]string
	sc := bufio.NewScanner(strings.NewReader(strings.ReplaceAll(text, "\\\n", " ")))
	for sc.Scan() {
		for _, part := range strings.Split(sc.Text(), "&&") {
			words := shellWords(part)
			for len(words) > 0 && (words[0] == "$" || words[0] == "#" || words[0] == "sudo" || strings.Contains(words[0], "=") && !strings.HasPrefix(words[0], "-")) {
				words = words[1:]
			}
			if len(words) == 0 {
				continue
			}
			switch words[0] {
			case "metasched", "bin/metasched", "./bin/metasched":
			default:
				continue
			}
			lines = append(lines, append([]string{"metasched"}, words[1:]...))
		}
	}
	return lines
}

// shellWords splits a line into words as a shell would, enough for the
// docs' commands: quotes, a comment, and stops at a pipe, a redirection,
// a ; or a command substitution.
func shellWords(line string) []string {
	var words []string
	var cur strings.Builder
	inWord := false
	quote := rune(0)
	flush := func() {
		if inWord {
			words = append(words, cur.String())
		}
		cur.Reset()
		inWord = false
	}
	for i, r := range line {
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			} else {
				cur.WriteRune(r)
			}
		case r == '\'' || r == '"':
			quote, inWord = r, true
		case r == ' ' || r == '\t':
			flush()
		case r == '#' && !inWord:
			flush()
			return words
		case r == '|' || r == '>' || r == '<' || r == ';' || r == '&' || r == '$' && i+1 < len(line) && line[i+1] == '(':
			flush()
			return words
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	flush()
	return words
}

// checkCommandLine checks that args (metasched …) name a command that
// runs (not a group whose subcommand is wrong) and flags it has.
func checkCommandLine(args []string) error {
	root := newRoot(&env{stdout: io.Discard, stderr: io.Discard})
	cmd, rest, err := root.Find(args[1:])
	if err != nil {
		return err
	}
	if !cmd.Runnable() && len(rest) > 0 {
		return fmt.Errorf("no command %q", strings.Join(append(strings.Fields(cmd.CommandPath()), rest[0]), " "))
	}
	if cmd == root && len(rest) > 0 && !slices.ContainsFunc(rest, func(s string) bool { return strings.HasPrefix(s, "-") }) {
		return fmt.Errorf("no command %q", rest[0])
	}
	if err := cmd.ParseFlags(rest); err != nil {
		return err
	}
	return nil
}

// isPlaceholder says a word of a command is a synopsis's placeholder:
// [flags], FILE.
func isPlaceholder(w string) bool {
	return w == "[flags]" || w != "" && strings.ToUpper(w) == w && strings.ToLower(w) != w
}

var docsSolveStates = flag.Int("docs-solve-states", 10_000, "TestDocsPolicySolveExamples: run the examples of models of at most this many states (make soak: 0, every one)")

// TestDocsPolicySolveExamples runs every policy solve the README and the
// docs show, as a reader would from the checkout: each exits 0, and none
// says NOT CONVERGED, but a solve whose example caps its sweeps
// (--max-sweeps, to show a method that barely moves) may stop there.
// make test runs those of models of up to 10,000 states (the analysis on
// stiff models is held by the switching package's tests), make soak every
// one (a few minutes).
func TestDocsPolicySolveExamples(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the docs' policy solves take minutes on two cores")
	}
	// Parallel: with the package's longest tests, once its others are
	// done (runCmd writes to buffers of its own; the saved tables go to
	// a directory of its own).
	t.Parallel()
	root, err := filepath.Abs(moduleRoot)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	var runs [][]string
	for _, f := range markdownFiles(t, root) {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range codeBlocks(string(data)) {
			for _, args := range commandLines(b.text) {
				if len(args) < 3 || args[1] != "policy" || args[2] != "solve" || seen[strings.Join(args, " ")] ||
					slices.ContainsFunc(args, isPlaceholder) {
					continue // another command, one run already, or a synopsis (--model FILE [flags])
				}
				seen[strings.Join(args, " ")] = true
				runs = append(runs, args)
			}
		}
	}
	if len(runs) < 5 {
		t.Fatalf("found %d policy solve examples in the docs, want at least 5", len(runs))
	}
	for _, args := range runs {
		cmdline := strings.Join(args, " ")
		dir := t.TempDir()
		for i, a := range args {
			switch {
			case strings.HasPrefix(a, "examples/"):
				args[i] = filepath.Join(root, a)
			case i > 0 && args[i-1] == "--save":
				args[i] = filepath.Join(dir, a) // a parallel test cannot chdir
			}
		}
		if i := slices.Index(args, "--model"); *docsSolveStates > 0 && i > 0 && i+1 < len(args) {
			m, err := loadModel(args[i+1])
			if err != nil {
				t.Fatalf("%s: %v", cmdline, err)
			}
			if _, states, ok := switching.CountStates(m); !ok || states > uint64(*docsSolveStates) {
				t.Logf("%s: %d states, over -docs-solve-states: not run (make soak runs it)", cmdline, states)
				continue
			}
		}
		start := time.Now()
		code, out, errOut := runCmd(t, args[1:]...)
		t.Logf("%s: exit %d in %s", cmdline, code, time.Since(start).Round(time.Second))
		if code != 0 {
			t.Errorf("%s: exit %d: %s", cmdline, code, errOut)
			continue
		}
		capped := slices.Contains(args, "--max-sweeps")
		if strings.Contains(out, "long run:  NOT CONVERGED") || strings.Contains(out, `"converged": false`) && !capped ||
			strings.Contains(out, "NOT CONVERGED") && !capped {
			t.Errorf("%s: not converged:\n%s", cmdline, out)
		}
	}
}
