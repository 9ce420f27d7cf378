// Package yamlxtest checks, for the tests and fuzz targets of the strict
// decoders built on package yamlx, that a decoder's error is well formed.
package yamlxtest

import (
	"errors"
	"fmt"
	"strings"

	"github.com/metasched/metasched/internal/yamlx"
)

// CheckError returns what is wrong with err as the error of a strict
// decoder of the file named file, or nil. A well-formed error lists one
// problem per line, each a *yamlx.Error of that file with a message, that
// says where the problem is: a field path with the line of its node, a
// line of the file (a syntax error), or the document as a whole (an empty
// document, a problem about anchors and aliases, which the YAML library
// reports without a line, and the count of the problems beyond
// yamlx.MaxProblems).
func CheckError(file string, err error) error {
	if err == nil {
		return errors.New("no error")
	}
	var leaves []*yamlx.Error
	var walk func(e error) error
	walk = func(e error) error {
		var ye *yamlx.Error
		if errors.As(e, &ye) && ye == e {
			leaves = append(leaves, ye)
			return nil
		}
		j, ok := e.(interface{ Unwrap() []error })
		if !ok {
			return fmt.Errorf("problem %q (%T) is not a *yamlx.Error", e, e)
		}
		for _, c := range j.Unwrap() {
			if err := walk(c); err != nil {
				return err
			}
		}
		return nil
	}
	if err := walk(err); err != nil {
		return err
	}
	lines := strings.Split(err.Error(), "\n")
	if len(lines) != len(leaves) {
		return fmt.Errorf("%d problems on %d lines:\n%s", len(leaves), len(lines), err)
	}
	for i, e := range leaves {
		switch {
		case e.File != file:
			return fmt.Errorf("problem %q names file %q, not %q", e, e.File, file)
		case e.Msg == "":
			return fmt.Errorf("problem %q has no message", e)
		case lines[i] != e.Error():
			return fmt.Errorf("line %d of the error is %q, not the problem %q", i+1, lines[i], e)
		case e.Path != "" && e.Line < 1:
			return fmt.Errorf("problem %q at field %q has no line", e, e.Path)
		case e.Path == "" && e.Line < 1 && !wholeDocument(e.Msg):
			return fmt.Errorf("problem %q names neither a field nor a line", e)
		}
	}
	return nil
}

// wholeDocument reports whether msg is a problem of the document as a
// whole.
func wholeDocument(msg string) bool {
	return msg == "empty document" || strings.Contains(msg, "anchor") || strings.Contains(msg, "alias") ||
		strings.HasPrefix(msg, "and ") && strings.HasSuffix(msg, " more problems")
}
