package main

import (
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/metasched/metasched/switching/experiment"
)

// tableWidth is the widest line the commands' tables print (a terminal of
// 120 columns shows them unwrapped).
const tableWidth = experiment.TableWidth

// writeColumns prints a table, its columns two spaces apart and left
// aligned, every line at most tableWidth wide: the last column (a list)
// is broken after its separators (", " or "+") onto continuation lines
// under itself when it does not fit.
func writeColumns(w io.Writer, header []string, rows [][]string) {
	all := append([][]string{header}, rows...)
	widths := make([]int, len(header))
	for _, r := range all {
		for i, c := range r[:len(r)-1] {
			widths[i] = max(widths[i], utf8.RuneCountInString(c))
		}
	}
	indent := 0
	for _, wd := range widths[:len(widths)-1] {
		indent += wd + 2
	}
	room := max(tableWidth-indent, 20)
	for _, r := range all {
		var b strings.Builder
		for i, c := range r[:len(r)-1] {
			fmt.Fprintf(&b, "%-*s  ", widths[i], c)
		}
		for i, part := range breakList(r[len(r)-1], room) {
			if i > 0 {
				b.WriteString("\n" + strings.Repeat(" ", indent))
			}
			b.WriteString(part)
		}
		fmt.Fprintln(w, strings.TrimRight(b.String(), " "))
	}
}

// breakList breaks a list into lines of at most width runes, after a ", "
// or a "+", and a piece still too long after its spaces (a word longer
// than width stays whole).
func breakList(s string, width int) []string {
	if utf8.RuneCountInString(s) <= width {
		return []string{s}
	}
	var items []string
	for s != "" {
		i := strings.IndexAny(s, ",+")
		end := len(s)
		if i >= 0 {
			end = i + 1
			if s[i] == ',' && strings.HasPrefix(s[end:], " ") {
				end++
			}
		}
		item := s[:end]
		s = s[end:]
		if utf8.RuneCountInString(strings.TrimRight(item, " ")) <= width {
			items = append(items, item)
			continue
		}
		words := strings.SplitAfter(item, " ")
		items = append(items, words...)
	}
	var lines []string
	line := ""
	for _, it := range items {
		if line != "" && utf8.RuneCountInString(strings.TrimRight(line+it, " ")) > width {
			lines = append(lines, strings.TrimRight(line, " "))
			line = ""
		}
		line += it
	}
	return append(lines, strings.TrimRight(line, " "))
}

// writeWrapped writes s wrapped at spaces to tableWidth (the experiment
// tables' width): its first line after first, the others after indent.
func writeWrapped(w io.Writer, s, first, indent string) { experiment.WriteWrapped(w, s, first, indent) }
