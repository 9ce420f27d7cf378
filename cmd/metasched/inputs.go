package main

import (
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"go.yaml.in/yaml/v3"

	"github.com/metasched/metasched/selection"
)

// inlineInputs reads the local files that the inputs of a job file name
// with from (relative to the job file's directory, or absolute), and
// returns the job file with each such input's from replaced by data, the
// file's bytes in base64: the one form of a binary input on the wire. A
// job file without from comes back unchanged (the daemon checks it); one
// with from is checked here first, and every problem names the file and
// the field.
func inlineInputs(file string, body []byte) ([]byte, error) {
	var doc yaml.Node
	if yaml.Unmarshal(body, &doc) != nil || doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 {
		return body, nil // the daemon names the problem
	}
	inputs := mapValue(doc.Content[0], "inputs")
	if inputs == nil || inputs.Kind != yaml.SequenceNode {
		return body, nil
	}
	has := false
	for _, in := range inputs.Content {
		has = has || mapValue(in, "from") != nil
	}
	if !has {
		return body, nil
	}
	j, err := selection.ParseJob(file, body)
	if err != nil {
		return nil, usageError{Err: err}
	}
	total := 0
	for _, in := range j.Inputs {
		total += len(in.Bytes())
	}
	dir := filepath.Dir(file)
	var errs []error
	for i, in := range j.Inputs {
		if in.From == "" {
			continue
		}
		p := in.From
		if !filepath.IsAbs(p) {
			p = filepath.Join(dir, p)
		}
		data, err := readInputFile(p, selection.MaxInputBytes-total)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: inputs[%d].from: %w", file, i, err))
			continue
		}
		total += len(data)
		n := inputs.Content[i]
		for k := 0; k+1 < len(n.Content); k += 2 {
			if n.Content[k].Value == "from" {
				n.Content[k] = &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: "data", Style: n.Content[k].Style}
				n.Content[k+1] = &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: base64.StdEncoding.EncodeToString(data), Style: n.Content[k+1].Style}
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, usageError{Err: err}
	}
	out, err := yaml.Marshal(&doc)
	if err != nil {
		return nil, fmt.Errorf("%s: write the job with its inputs: %w", file, err)
	}
	return out, nil
}

// readInputFile reads the regular file p, of at most room bytes.
func readInputFile(p string, room int) ([]byte, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file (%s)", p, st.Mode().Type())
	}
	data, err := io.ReadAll(io.LimitReader(f, int64(room)+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", p, err)
	}
	if len(data) > room {
		return nil, fmt.Errorf("%s: too big: the inputs must be at most %d bytes in all, and %d are left for this file", p, selection.MaxInputBytes, max(room, 0))
	}
	return data, nil
}

// mapValue is the value of key in the mapping node n, or nil.
func mapValue(n *yaml.Node, key string) *yaml.Node {
	if n == nil || n.Kind != yaml.MappingNode {
		return nil
	}
	for k := 0; k+1 < len(n.Content); k += 2 {
		if n.Content[k].Value == key {
			return n.Content[k+1]
		}
	}
	return nil
}
