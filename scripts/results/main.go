// Command results regenerates the measured figures of docs/results.md.
//
// The page marks each set of figures with a pair of HTML comments:
//
//	<!-- results NAME -->
//	... the figures ...
//	<!-- /results NAME -->
//
// For each section it is asked for, it runs the section's commands (the
// registry below: NAME → commands, timeout, what they need) and replaces
// the body between the markers with what they printed: the commands, the
// date, the machine's CPUs and CPU model, the commit, then their output.
// The markers and everything outside them are kept byte for byte.
//
//	go run ./scripts/results -page docs/results.md              # the default sections
//	go run ./scripts/results -page docs/results.md -only all    # every section
//	go run ./scripts/results -page docs/results.md -only solver,planner
//	go run ./scripts/results -page docs/results.md -list
//
// The default sections need no QEMU, libvirtd, etcd or root and take a few
// minutes at most in all; the others are run only when named (or with
// -only all). A command that fails leaves its section as it was; the
// others are still written, and results exits 1.
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"time"
)

// entry is one section of the registry.
type entry struct {
	Name     string
	Commands []string // each run by sh -c from the repository's root
	Timeout  time.Duration
	Needs    string // what the commands need, shown by -list and in the section
	Default  bool   // run by make results without RESULTS
}

// registry is every section the page may mark. The commands use the
// binaries make build leaves in bin/ (make results builds first).
var registry = []entry{
	// The default set: no QEMU, no libvirtd, no etcd, no root.
	{Name: "planner", Default: true, Timeout: 10 * time.Minute, Needs: "about a minute",
		Commands: []string{"go test -run '^$' -bench 'HillClimb1000|HillClimbScale|Exhaustive16' ./selection"}},
	{Name: "solver", Default: true, Timeout: 10 * time.Minute, Needs: "about a minute",
		Commands: []string{
			"go test -run '^$' -bench 'Sweep|Precondition' ./switching/",
			"bin/metasched policy solve --model examples/fisher-fig4-n5.yaml --criterion discounted --boundary=false",
		}},
	{Name: "simulator", Default: true, Timeout: 5 * time.Minute, Needs: "under a minute",
		Commands: []string{"go test -run '^$' -bench HeuristicFig4 ./switching/sim"}},
	{Name: "api", Default: true, Timeout: 15 * time.Minute, Needs: "about two minutes",
		Commands: []string{
			"go test -run '^$' -bench 'FiguresSubmitClients|FiguresBacklog|FiguresSubscribers' -benchtime 1x ./metasched/",
			"go test -run '^$' -bench 'SubmitAPI$|SubmitTLS' -benchtime 5000x ./metasched/",
			"go test -run '^$' -bench SubmitAPIAt500 -benchtime 1x ./metasched/",
		}},
	{Name: "scale-small", Default: true, Timeout: 15 * time.Minute, Needs: "about two minutes",
		Commands: []string{"bin/metasched experiment scale --out results/scale-small --hosts 1000 --backlog 5000 --rate 200 --stream-for 10s --drain-for 2m --submit-for 2m"}},
	{Name: "agent-driver", Default: true, Timeout: 5 * time.Minute, Needs: "libvirt's test driver (no daemon), under a minute",
		Commands: []string{"go test -run '^$' -bench 'CreateDestroy' ./hypervisorproxy/virt ./hypervisorproxy"}},
	{Name: "executor", Default: true, Timeout: 5 * time.Minute, Needs: "under a minute",
		Commands: []string{"go test -run '^$' -bench CommandYes ./metasched/executor"}},
	{Name: "taskfarm", Default: true, Timeout: 10 * time.Minute, Needs: "about a minute",
		Commands: []string{"go test -run '^$' -bench 'Kernel|TaskFarmLoopback|TaskFarmThrottled' ./gramvm/taskfarm"}},

	// Only by name or with -only all.
	{Name: "test-suite", Timeout: 40 * time.Minute, Needs: "root, QEMU, libvirtd, etcd, Chromium; about 26 minutes",
		Commands: []string{"make test"}},
	{Name: "adversary", Timeout: 90 * time.Minute, Needs: "about 4 minutes",
		Commands: []string{"go test -count=1 -timeout 90m -run '^TestAdversary$' -v ./cmd/metasched -adversary-cycles 25"}},
	{Name: "failover", Timeout: 60 * time.Minute, Needs: "etcd; about 5 minutes",
		Commands: []string{"go test -count=1 -timeout 60m -run '^TestFailover$' -v ./cmd/metasched -failover-kills 20"}},
	{Name: "fuzz", Timeout: 60 * time.Minute, Needs: "about 35 minutes",
		Commands: []string{"make fuzz FUZZTIME=60s"}},
	{Name: "demo", Timeout: 10 * time.Minute, Needs: "the port 127.0.0.1:8080; about 70 s",
		// A data directory of its own: the checkout's may hold another run.
		Commands: []string{`d=$(mktemp -d) && bin/metasched serve --exit-after-demo --data-dir "$d/data"; rc=$?; rm -rf "$d"; exit $rc`}},
	{Name: "backlog", Timeout: 30 * time.Minute, Needs: "50,000 jobs queued per benchmark; several minutes",
		Commands: []string{
			"go test -run '^$' -bench 'Backlog50k|SwitchHistory' -benchtime 20x ./metasched/",
			"go test -run '^$' -bench SubmitWithPages -benchtime 3000x ./metasched/",
		}},
	{Name: "small-jobs", Timeout: 30 * time.Minute, Needs: "about 6 minutes",
		Commands: []string{
			"scripts/load-small-jobs.sh bin/metasched 50 20 3000",
			"TIME_SCALE=1 scripts/load-small-jobs.sh bin/metasched 50 20 3000",
		}},
	{Name: "slow-clients", Timeout: 20 * time.Minute, Needs: "a few minutes",
		Commands: []string{"go test -count=1 -run '^TestSlowClientsAtTheFileLimit$' -v ./cmd/metasched"}},
	{Name: "scale", Timeout: 2 * time.Hour, Needs: "about 40 minutes",
		Commands: []string{"bin/metasched experiment scale --out results/scale"}},
	{Name: "scale-etcd-agents", Timeout: 2 * time.Hour, Needs: "etcd; about 20 minutes",
		Commands: []string{
			"bin/metasched experiment scale --out results/scale-etcd --hosts 1000 --backlog 20000 --rate 200 --store etcd",
			"bin/metasched experiment scale --out results/scale-agents --hosts 1000 --backlog 20000 --rate 500 --agents 10",
		}},
	{Name: "etcd", Timeout: 30 * time.Minute, Needs: "etcd; a few minutes",
		Commands: []string{
			"go test -run '^$' -bench FiguresSubmitStores -benchtime 1x ./metasched/",
			"go test -count=1 -run '^(TestEtcdLeadership|TestPartitionedLeader)$' -v ./metasched/store ./cmd/metasched",
		}},
	{Name: "agent-qemu", Timeout: 60 * time.Minute, Needs: "root, QEMU, libvirtd, iproute2; about 15 minutes",
		Commands: []string{
			"go test -run '^$' -bench 'LiveMigration|BootToAgent' -benchtime 10x ./hypervisorproxy/virt",
			"go test -run '^$' -bench 'Provision' -benchtime 5x ./hypervisorproxy",
			"go test -run '^$' -bench 'AgentGuestExec' -benchtime 50x ./hypervisorproxy",
			"go test -count=1 -run '^(TestAgentProbeShapedLink|TestCPUQuotaBootedGuest|TestAgentQEMUEncryptedMigration|TestGuestTuning)$' -v ./cmd/metasched ./hypervisorproxy",
		}},
	{Name: "images", Timeout: 2 * time.Hour, Needs: "root, QEMU, libvirtd, mmdebstrap; about an hour",
		Commands: []string{
			"go test -run '^$' -bench 'Build(Cold|Cached)|BuildDisk' -benchtime 3x ./hypervisorproxy/image",
			"make image-debian",
			"bin/metasched image check bin/image-debian --connect qemu:///system",
			"go test -count=1 -timeout 90m -run '^TestCloudImageSoak$' -v ./hypervisorproxy -cloud-soak-boots 5",
		}},
	{Name: "jobs-in-vms", Timeout: 2 * time.Hour, Needs: "root, QEMU, libvirtd, iproute2; about 40 minutes",
		Commands: []string{
			"go test -count=1 -run '^(TestGuestGrid|TestTaskFarmInGuests)$' -v ./cmd/metasched ./hypervisorproxy",
			"go test -run '^$' -bench TaskFarmVMs -benchtime 1x ./cmd/metasched",
			"go test -count=1 -timeout 60m -run '^TestMPIGrid$' -v ./cmd/metasched",
		}},
	{Name: "demo-vms", Timeout: time.Hour, Needs: "root, QEMU, libvirtd, iproute2; 13 to 25 minutes",
		Commands: []string{"bin/metasched experiment demo-vms"}},
	{Name: "realgrid", Timeout: 2 * time.Hour, Needs: "root, QEMU, libvirtd, iproute2; about 40 minutes",
		Commands: []string{"bin/metasched experiment realgrid --out results/realgrid"}},
	{Name: "solver-long", Timeout: time.Hour, Needs: "about 5 minutes and 500 MiB",
		Commands: []string{
			"go test -run '^$' -bench SolveAverage -benchtime 1x ./switching/",
			"bin/metasched policy solve --model examples/fisher-fig4-n6.yaml --criterion discounted",
			"bin/metasched policy solve --model examples/fisher-fig4-n5.yaml --criterion average --method value",
		}},
	{Name: "papers", Timeout: time.Hour, Needs: "about 3 minutes",
		Commands: []string{
			"bin/metasched simulate experiment fisher-fig4 --out results --truncation fixed",
			"bin/metasched simulate experiment fisher-fig3 --out results --truncation fixed",
			"bin/metasched simulate experiment palmer-fig2 --out results --truncation fixed",
			"bin/metasched simulate experiment palmer-fig3 --out results --truncation fixed",
		}},
}

// section is one pair of markers found on the page: the body is
// page[bodyStart:bodyEnd], from the line after the opening marker to the
// start of the closing one.
type section struct {
	name               string
	line               int // the opening marker's line, from 1
	bodyStart, bodyEnd int
}

var (
	openRE  = regexp.MustCompile(`^<!-- results ([a-z0-9][a-z0-9-]*) -->$`)
	closeRE = regexp.MustCompile(`^<!-- /results ([a-z0-9][a-z0-9-]*) -->$`)
	// anyRE catches a line that looks like a marker but is not one of the two forms.
	anyRE = regexp.MustCompile(`^\s*<!--\s*/?\s*results\b`)
)

// parse finds the page's sections. file names the page in errors.
func parse(file string, page []byte) ([]section, error) {
	var (
		out  []section
		open *section
		seen = map[string]int{}
		off  int
	)
	for n := 1; off < len(page); n++ {
		end := bytes.IndexByte(page[off:], '\n')
		next := len(page)
		if end >= 0 {
			next = off + end + 1
		}
		line := strings.TrimRight(string(page[off:next]), "\r\n")
		switch {
		case openRE.MatchString(line):
			name := openRE.FindStringSubmatch(line)[1]
			if open != nil {
				return nil, fmt.Errorf("%s:%d: <!-- results %s --> opens inside section %q (line %d), which is not closed", file, n, name, open.name, open.line)
			}
			if first, ok := seen[name]; ok {
				return nil, fmt.Errorf("%s:%d: section %q is marked twice (first on line %d)", file, n, name, first)
			}
			seen[name] = n
			open = &section{name: name, line: n, bodyStart: next}
		case closeRE.MatchString(line):
			name := closeRE.FindStringSubmatch(line)[1]
			if open == nil {
				return nil, fmt.Errorf("%s:%d: <!-- /results %s --> closes a section that is not open", file, n, name)
			}
			if name != open.name {
				return nil, fmt.Errorf("%s:%d: <!-- /results %s --> closes section %q (opened on line %d)", file, n, name, open.name, open.line)
			}
			open.bodyEnd = off
			out = append(out, *open)
			open = nil
		case anyRE.MatchString(line):
			return nil, fmt.Errorf("%s:%d: malformed marker %q: want <!-- results NAME --> or <!-- /results NAME -->", file, n, line)
		}
		off = next
	}
	if open != nil {
		return nil, fmt.Errorf("%s:%d: section %q is not closed (no <!-- /results %s -->)", file, open.line, open.name, open.name)
	}
	return out, nil
}

// replace returns the page with each named body replaced; everything else
// is kept byte for byte.
func replace(page []byte, secs []section, bodies map[string]string) []byte {
	var b bytes.Buffer
	last := 0
	for _, s := range secs {
		body, ok := bodies[s.name]
		if !ok {
			continue
		}
		b.Write(page[last:s.bodyStart])
		b.WriteString(body)
		if body != "" && !strings.HasSuffix(body, "\n") {
			b.WriteByte('\n')
		}
		last = s.bodyEnd
	}
	b.Write(page[last:])
	return b.Bytes()
}

// selectSections resolves -only against the registry and the page: "" is
// the default set, "all" every section; a name the registry does not know
// is an error naming it, and so is a section of the page the registry does
// not know.
func selectSections(file string, reg []entry, secs []section, only string) ([]entry, error) {
	byName := map[string]entry{}
	for _, e := range reg {
		byName[e.Name] = e
	}
	for _, s := range secs {
		if _, ok := byName[s.name]; !ok {
			return nil, fmt.Errorf("%s:%d: section %q has no commands in scripts/results", file, s.line, s.name)
		}
	}
	onPage := map[string]bool{}
	for _, s := range secs {
		onPage[s.name] = true
	}
	var out []entry
	switch only {
	case "":
		for _, e := range reg {
			if e.Default && onPage[e.Name] {
				out = append(out, e)
			}
		}
	case "all":
		for _, e := range reg {
			if onPage[e.Name] {
				out = append(out, e)
			}
		}
	default:
		for name := range strings.SplitSeq(only, ",") {
			name = strings.TrimSpace(name)
			if name == "" {
				continue
			}
			e, ok := byName[name]
			if !ok {
				return nil, fmt.Errorf("unknown section %q in -only (known: %s)", name, strings.Join(names(reg), ", "))
			}
			if !onPage[name] {
				return nil, fmt.Errorf("section %q is not marked on %s", name, file)
			}
			if !slices.ContainsFunc(out, func(o entry) bool { return o.Name == name }) {
				out = append(out, e)
			}
		}
	}
	return out, nil
}

func names(reg []entry) []string {
	var out []string
	for _, e := range reg {
		out = append(out, e.Name)
	}
	return out
}

// machine says where the figures were measured.
type machine struct {
	Date   time.Time
	CPUs   int
	Model  string
	Commit string
	Load   string // the 1-minute load average when the run started, "" when unknown
}

func thisMachine() machine {
	m := machine{Date: time.Now().UTC(), CPUs: runtime.NumCPU(), Model: "unknown", Commit: "unknown"}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for l := range strings.SplitSeq(string(b), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.Model = strings.TrimSpace(v)
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		if f := strings.Fields(string(b)); len(f) > 0 {
			m.Load = f[0]
		}
	}
	if out, err := exec.Command("git", "rev-parse", "--short=12", "HEAD").Output(); err == nil {
		m.Commit = strings.TrimSpace(string(out))
		if st, err := exec.Command("git", "status", "--porcelain", "--untracked-files=no").Output(); err == nil && len(bytes.TrimSpace(st)) > 0 {
			m.Commit += " (with uncommitted changes)"
		}
	}
	return m
}

// runFunc runs one command and returns what it printed on its standard output.
type runFunc func(ctx context.Context, command string) (string, error)

// shell runs command with sh -c, its standard output both kept and shown,
// its standard error shown.
func shell(ctx context.Context, command string) (string, error) {
	cmd := exec.CommandContext(ctx, "sh", "-c", command)
	var out bytes.Buffer
	cmd.Stdout = io.MultiWriter(&out, os.Stdout)
	cmd.Stderr = os.Stderr
	cmd.WaitDelay = 10 * time.Second
	err := cmd.Run()
	if ctx.Err() != nil {
		err = fmt.Errorf("%w (%v)", ctx.Err(), err)
	}
	return out.String(), err
}

// trim drops go test's lines that repeat what the section's first line
// says (the OS, the architecture, the CPU) and its bare PASS.
func trim(out string) string {
	var b strings.Builder
	for l := range strings.SplitAfterSeq(out, "\n") {
		t := strings.TrimSpace(l)
		if t == "PASS" || strings.HasPrefix(t, "goos: ") || strings.HasPrefix(t, "goarch: ") || strings.HasPrefix(t, "cpu: ") {
			continue
		}
		b.WriteString(l)
	}
	return b.String()
}

// pathName is a path of the machine the commands ran on and the name the
// page shows instead.
type pathName struct{ path, name string }

// machinePaths are the paths of this machine that commands print (a data
// directory, a temporary one) and what the page says instead: the
// checkout as ".", the temporary directory as $TMPDIR, the home as ~.
// Longest first, so that a checkout under the home is ".".
func machinePaths() []pathName {
	var ps []pathName
	if wd, err := os.Getwd(); err == nil && wd != "/" {
		ps = append(ps, pathName{wd, "."})
	}
	if tmp := os.TempDir(); tmp != "/" {
		ps = append(ps, pathName{tmp, "$TMPDIR"})
	}
	if home, err := os.UserHomeDir(); err == nil && home != "/" {
		ps = append(ps, pathName{home, "~"})
	}
	slices.SortFunc(ps, func(a, b pathName) int { return len(b.path) - len(a.path) })
	return ps
}

// scrub writes the machine's paths in out as the page names them, so that
// the page holds no path of the machine that measured it.
func scrub(out string, paths []pathName) string {
	for _, p := range paths {
		// The whole path only: not /tmp in /var/tmp or in /tmp.x.
		re := regexp.MustCompile(`(^|[^\w./-])` + regexp.QuoteMeta(p.path) + `(/|[^\w.-]|$)`)
		out = re.ReplaceAllString(out, "${1}"+strings.ReplaceAll(p.name, "$", "$$")+"${2}")
	}
	return out
}

// measure runs e's commands and returns the section's new body.
func measure(ctx context.Context, e entry, m machine, run runFunc) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, e.Timeout)
	defer cancel()
	var outs []string
	var took []time.Duration
	for _, c := range e.Commands {
		t0 := time.Now()
		out, err := run(ctx, c)
		if err != nil {
			return "", fmt.Errorf("%s: %s: %w", e.Name, c, err)
		}
		outs = append(outs, scrub(trim(out), machinePaths()))
		took = append(took, time.Since(t0).Round(time.Second))
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Regenerated by `make results RESULTS=%s` on %s, on %d CPUs (`nproc`), CPU model %s, at commit %s",
		e.Name, m.Date.Format("2006-01-02 15:04 UTC"), m.CPUs, m.Model, m.Commit)
	if m.Load != "" {
		fmt.Fprintf(&b, ", load average %s at the start", m.Load)
	}
	b.WriteString(".\n")
	for i, c := range e.Commands {
		fmt.Fprintf(&b, "\n`%s` (%s):\n\n```text\n%s", c, took[i], outs[i])
		if !strings.HasSuffix(outs[i], "\n") {
			b.WriteByte('\n')
		}
		b.WriteString("```\n")
	}
	return b.String(), nil
}

func main() {
	log := func(format string, args ...any) { fmt.Fprintf(os.Stderr, "results: "+format+"\n", args...) }
	pageFile := flag.String("page", "docs/results.md", "the page whose sections are regenerated")
	only := flag.String("only", "", "comma-separated sections to regenerate, or all (default: the sections that need no QEMU, libvirtd, etcd or root)")
	list := flag.Bool("list", false, "list the sections, their commands and what they need, and exit")
	flag.Parse()
	if err := run(context.Background(), *pageFile, *only, *list, registry, shell, os.Stdout, log); err != nil {
		log("%v", err)
		os.Exit(1)
	}
}

// run is main's work, with the registry and the command runner given.
func run(ctx context.Context, pageFile, only string, list bool, reg []entry, runCmd runFunc, stdout io.Writer, log func(string, ...any)) error {
	if list {
		for _, e := range reg {
			def := "only by name"
			if e.Default {
				def = "default"
			}
			fmt.Fprintf(stdout, "%s (%s; %s)\n", e.Name, def, e.Needs)
			for _, c := range e.Commands {
				fmt.Fprintf(stdout, "\t%s\n", c)
			}
		}
		return nil
	}
	page, err := os.ReadFile(pageFile)
	if err != nil {
		return err
	}
	secs, err := parse(pageFile, page)
	if err != nil {
		return err
	}
	chosen, err := selectSections(pageFile, reg, secs, only)
	if err != nil {
		return err
	}
	m := thisMachine()
	bodies := map[string]string{}
	var failed []error
	start := time.Now()
	for _, e := range chosen {
		log("%s: %s (timeout %s)", e.Name, e.Needs, e.Timeout)
		t0 := time.Now()
		body, err := measure(ctx, e, m, runCmd)
		if err != nil {
			log("%v: the section is left as it was", err)
			failed = append(failed, err)
			continue
		}
		bodies[e.Name] = body
		log("%s: done in %s", e.Name, time.Since(t0).Round(time.Second))
	}
	if len(bodies) > 0 {
		// Read the page again: it may have been edited while the commands ran.
		now, err := os.ReadFile(pageFile)
		if err != nil {
			return err
		}
		if secs, err = parse(pageFile, now); err != nil {
			return err
		}
		if err := os.WriteFile(pageFile, replace(now, secs, bodies), 0o644); err != nil {
			return err
		}
	}
	log("%d of %d sections regenerated in %s", len(bodies), len(chosen), time.Since(start).Round(time.Second))
	return errors.Join(failed...)
}
