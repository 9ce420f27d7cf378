// Command testprogress runs go test with -json and prints what a person
// waiting on a long run wants: a line per package as soon as it finishes
// (go test alone prints packages in the order it was given them, so the
// slowest first package hides all the others), the output of every test
// that fails as soon as it fails, the tests that were skipped with their
// reason (-skips), and, when nothing was printed for a while, which tests
// are still running and for how long.
//
//	go run ./scripts/testprogress [-skips] [-heartbeat 1m] -- go test -json ./...
//
// It exits 1 when a test or a package failed, or when the command failed.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sort"
	"strings"
	"sync"
	"time"
)

// event is one line of go test -json (cmd/test2json's TestEvent).
type event struct {
	Time    time.Time
	Action  string
	Package string
	Test    string
	Elapsed float64
	Output  string
	// ImportPath names the package of a build-output or build-fail event.
	ImportPath string
}

type key struct{ pkg, test string }

// report folds the events into what is printed. It is safe for the
// heartbeat's goroutine.
type report struct {
	mu        sync.Mutex
	out       io.Writer
	skips     bool
	output    map[key][]string    // each running test's output, kept until it passes
	started   map[key]time.Time   // each running test's start
	skipped   map[string][]string // each package's skipped tests with their reason
	failed    []string            // the packages and tests that failed
	packages  int
	lastPrint time.Time
}

func newReport(out io.Writer, skips bool) *report {
	return &report{out: out, skips: skips, output: map[key][]string{}, started: map[key]time.Time{},
		skipped: map[string][]string{}, lastPrint: time.Now()}
}

func (r *report) printf(format string, args ...any) {
	fmt.Fprintf(r.out, format, args...)
	r.lastPrint = time.Now()
}

func (r *report) add(e event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	k := key{e.Package, e.Test}
	switch e.Action {
	case "build-output":
		r.printf("%s", e.Output)
	case "build-fail":
		r.failed = append(r.failed, e.ImportPath+" (build)")
	case "start":
		r.started[k] = time.Now()
	case "run", "cont":
		// A parallel test pauses until its package's other tests are
		// done: it runs from when it continues.
		r.started[k] = time.Now()
	case "pause":
		delete(r.started, k)
	case "output":
		r.output[k] = append(r.output[k], e.Output)
	case "pass", "fail", "skip":
		lines := r.output[k]
		delete(r.output, k)
		delete(r.started, k)
		if e.Test == "" {
			r.finishPackage(e, lines)
			return
		}
		switch e.Action {
		case "fail":
			r.failed = append(r.failed, e.Package+" "+e.Test)
			// A subtest's parent prints its own lines; a parent's
			// failure repeats its subtests', which were printed.
			r.printf("%s", strings.Join(lines, ""))
		case "skip":
			r.skipped[e.Package] = append(r.skipped[e.Package], e.Test+": "+skipReason(lines))
		}
	}
}

// finishPackage prints a package's line.
func (r *report) finishPackage(e event, lines []string) {
	r.packages++
	skipped := r.skipped[e.Package]
	note := ""
	if len(skipped) > 0 {
		note = fmt.Sprintf(" (%d skipped)", len(skipped))
	}
	switch {
	case e.Action == "fail":
		r.failed = append(r.failed, e.Package)
		r.printf("%s", strings.Join(lines, ""))
		r.printf("FAIL %s %.1fs\n", e.Package, e.Elapsed)
	case e.Action == "skip":
		r.printf("?    %s [no test files]\n", e.Package)
	default:
		r.printf("ok   %s %.1fs%s\n", e.Package, e.Elapsed, note)
	}
	if r.skips {
		for _, s := range skipped {
			r.printf("       skipped %s\n", s)
		}
	}
}

// skipReason is the message of a skipped test's t.Skip: its last output
// line before "--- SKIP".
func skipReason(lines []string) string {
	reason := ""
	for _, l := range lines {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "=== ") || strings.HasPrefix(l, "--- SKIP") {
			continue
		}
		// "file_test.go:12: reason"
		if i := strings.Index(l, ".go:"); i >= 0 {
			if j := strings.Index(l[i+4:], ": "); j >= 0 {
				l = l[i+4+j+2:]
			}
		}
		reason = l
	}
	if reason == "" {
		return "no reason given"
	}
	return reason
}

// heartbeat prints the tests running for longest when nothing was printed
// for every.
func (r *report) heartbeat(every time.Duration, start time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if time.Since(r.lastPrint) < every {
		return
	}
	type running struct {
		name string
		d    time.Duration
	}
	var tests []running
	for k, t := range r.started {
		if k.test != "" && !strings.Contains(k.test, "/") {
			tests = append(tests, running{k.pkg + " " + k.test, time.Since(t)})
		}
	}
	sort.Slice(tests, func(i, j int) bool { return tests[i].d > tests[j].d })
	var names []string
	for i, t := range tests {
		if i == 4 {
			names = append(names, fmt.Sprintf("and %d more", len(tests)-4))
			break
		}
		names = append(names, fmt.Sprintf("%s (%s)", t.name, t.d.Round(time.Second)))
	}
	if len(names) == 0 {
		names = []string{"building"}
	}
	r.printf("... %s: %d packages done; running %s\n", time.Since(start).Round(time.Second), r.packages, strings.Join(names, ", "))
}

func main() {
	skips := flag.Bool("skips", false, "list each skipped test with its reason under its package")
	every := flag.Duration("heartbeat", time.Minute, "when nothing was printed for this long, print the tests still running")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: testprogress [-skips] [-heartbeat D] -- go test -json [flags] [packages]")
		flag.PrintDefaults()
	}
	flag.Parse()
	args := flag.Args()
	if len(args) == 0 {
		flag.Usage()
		os.Exit(2)
	}
	start := time.Now()
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		fmt.Fprintln(os.Stderr, "testprogress:", err)
		os.Exit(1)
	}
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "testprogress:", err)
		os.Exit(1)
	}
	r := newReport(os.Stdout, *skips)
	done := make(chan struct{})
	go func() {
		tick := time.NewTicker(*every / 4)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				r.heartbeat(*every, start)
			}
		}
	}()
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		var e event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil || e.Action == "" {
			// Not an event (a line a test wrote to the process's stdout
			// outside the testing package's control): show it.
			r.mu.Lock()
			r.printf("%s\n", sc.Text())
			r.mu.Unlock()
			continue
		}
		r.add(e)
	}
	close(done)
	werr := cmd.Wait()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.failed) > 0 {
		r.printf("FAILED after %s: %s\n", time.Since(start).Round(time.Second), strings.Join(r.failed, ", "))
		os.Exit(1)
	}
	if werr != nil {
		r.printf("FAILED after %s: %s: %v\n", time.Since(start).Round(time.Second), strings.Join(args, " "), werr)
		os.Exit(1)
	}
	r.printf("PASS: %d packages in %s\n", r.packages, time.Since(start).Round(time.Second))
}
