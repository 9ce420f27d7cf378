package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/metasched/metasched/graph"
	hp "github.com/metasched/metasched/hypervisorproxy"
	"github.com/metasched/metasched/metasched"
	"github.com/metasched/metasched/selection"
	"github.com/metasched/metasched/switching"
)

// Every file in examples/ is read by the parser of its kind (by its
// name) and is valid; a file of no known kind fails the test, so that a
// new example cannot go unchecked. The files a job names (its inputs)
// must exist beside it.
func TestExamples(t *testing.T) {
	files, err := filepath.Glob(example + "*")
	if err != nil || len(files) < 20 {
		t.Fatalf("examples: %d files, %v", len(files), err)
	}
	parsers := []struct {
		prefix string
		parse  func(file string, data []byte) error
	}{
		{"grid-", func(f string, b []byte) error { _, err := graph.ParseGrid(f, b); return err }},
		{"job-", func(f string, b []byte) error {
			j, err := selection.ParseJob(f, b)
			if err != nil {
				return err
			}
			for _, in := range j.Inputs {
				if in.From == "" || filepath.IsAbs(in.From) {
					continue
				}
				if _, err := os.Stat(filepath.Join(filepath.Dir(f), in.From)); err != nil {
					return err
				}
			}
			return nil
		}},
		{"site-", func(f string, b []byte) error { _, err := hp.ParseSite(f, b); return err }},
		{"serve-", func(f string, b []byte) error { _, err := metasched.ParseConfig(f, b); return err }},
		{"fisher-", func(f string, b []byte) error { _, err := switching.ParseModel(f, b); return err }},
		{"palmer-", func(f string, b []byte) error { _, err := switching.ParseModel(f, b); return err }},
		{"metasched", checkUnit},
	}
	for _, f := range files {
		name := filepath.Base(f)
		if name == "job-files-seed.bin" || strings.HasSuffix(name, ".token") {
			continue // the input file job-files-guests.yaml sends; a try-out's token
		}
		t.Run(name, func(t *testing.T) {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range parsers {
				if strings.HasPrefix(name, p.prefix) && (strings.HasSuffix(name, ".yaml") || p.prefix == "metasched" && strings.HasSuffix(name, ".service")) {
					if err := p.parse(f, data); err != nil {
						t.Error(err)
					}
					return
				}
			}
			t.Errorf("%s is of no kind this test knows: name it grid-, job-, site-, serve-, fisher- or palmer-*.yaml, or metasched*.service, or teach the test", name)
		})
	}
}

// checkUnit checks a systemd unit of the examples: its sections, and that
// its command is a metasched command this binary has, whose flags it
// takes (run with --help, which parses them).
func checkUnit(file string, data []byte) error {
	text := string(data)
	for _, want := range []string{"[Unit]", "[Service]", "[Install]", "ExecStart=/usr/local/bin/metasched "} {
		if !strings.Contains(text, want) {
			return fmt.Errorf("%s: no %q", file, want)
		}
	}
	for _, line := range strings.Split(text, "\n") {
		cmdline, ok := strings.CutPrefix(line, "ExecStart=/usr/local/bin/metasched ")
		if !ok {
			continue
		}
		args := strings.Fields(strings.ReplaceAll(cmdline, "%i", "spain"))
		var out, errOut bytes.Buffer
		if code := run(context.Background(), append(args, "--help"), &out, &errOut); code != 0 {
			return fmt.Errorf("%s: metasched %s: exit %d: %s", file, cmdline, code, errOut.String())
		}
	}
	return nil
}
