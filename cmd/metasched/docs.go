package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"
)

// cliReferenceDir is where the CLI reference lives in the repository,
// relative to the module's root: one Markdown page per command, generated
// from the command tree (docs_test.go fails when it is stale; make docs
// writes it anew).
const cliReferenceDir = "docs/reference/cli"

// newDocsCmd generates the CLI's reference pages from the command tree:
// Markdown for the repository's docs (make docs) and man pages (make
// install). Hidden: it is for the build, not for users.
func newDocsCmd(e *env) *cobra.Command {
	docs := &cobra.Command{
		Use:    "docs",
		Short:  "Generate the CLI's reference pages from the command tree",
		Hidden: true,
		Args:   noArgs,
	}
	var mdOut, manOut string
	md := &cobra.Command{
		Use:   "markdown",
		Short: "Write one Markdown page per command into --out",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := writeCLIMarkdown(newRoot(&env{stdout: e.stdout, stderr: e.stderr}), mdOut); err != nil {
				return err
			}
			fmt.Fprintln(e.stdout, "wrote the CLI reference into", mdOut)
			return nil
		},
	}
	md.Flags().StringVar(&mdOut, "out", cliReferenceDir, "directory of the Markdown pages (made if missing; its .md files are replaced)")
	man := &cobra.Command{
		Use:   "man",
		Short: "Write one man page (section 1) per command into --out",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if manOut == "" {
				return usagef("docs man: --out is required")
			}
			if err := writeManPages(newRoot(&env{stdout: e.stdout, stderr: e.stderr}), manOut); err != nil {
				return err
			}
			fmt.Fprintln(e.stdout, "wrote the man pages into", manOut)
			return nil
		},
	}
	man.Flags().StringVar(&manOut, "out", "", "directory of the man pages (made if missing)")
	docs.AddCommand(md, man)
	return docs
}

// documented calls f on every command of the tree that a reference shows:
// not hidden, not cobra's help command.
func documented(c *cobra.Command, f func(*cobra.Command)) {
	f(c)
	for _, sub := range c.Commands() {
		if sub.IsAvailableCommand() || sub.Name() == "completion" {
			documented(sub, f)
		}
	}
}

// writeCLIMarkdown replaces dir's Markdown pages with the tree's: a page
// per command named like cobra names them (metasched_policy_solve.md), with
// no generation date, so that the pages change only when the commands do.
func writeCLIMarkdown(root *cobra.Command, dir string) error {
	documented(root, func(c *cobra.Command) { c.DisableAutoGenTag = true })
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	old, err := filepath.Glob(filepath.Join(dir, "*.md"))
	if err != nil {
		return err
	}
	for _, f := range old {
		if err := os.Remove(f); err != nil {
			return err
		}
	}
	prepend := func(string) string {
		return "<!-- Generated from the command tree by `make docs`: do not edit. -->\n\n"
	}
	return doc.GenMarkdownTreeCustom(root, dir, prepend, func(name string) string { return name })
}

// writeManPages writes a man page per command: metasched-serve.1 for
// "metasched serve". Their date is the build's (SOURCE_DATE_EPOCH when
// set, for reproducible packages).
func writeManPages(root *cobra.Command, dir string) error {
	documented(root, func(c *cobra.Command) { c.DisableAutoGenTag = true })
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	date := time.Now()
	if s := os.Getenv("SOURCE_DATE_EPOCH"); s != "" {
		var sec int64
		if _, err := fmt.Sscan(s, &sec); err != nil {
			return fmt.Errorf("SOURCE_DATE_EPOCH %q: not a number of seconds", s)
		}
		date = time.Unix(sec, 0).UTC()
	}
	return doc.GenManTree(root, &doc.GenManHeader{
		Title:   strings.ToUpper(root.Name()),
		Section: "1",
		Date:    &date,
		Source:  "metasched " + version(),
		Manual:  "metasched manual",
	}, dir)
}
