package main

import (
	"fmt"
	"os"
)

// readFlagFile reads the file a flag names. Its errors are usage errors
// that name the flag (when flag is not empty): the flag missing, or the
// file not readable.
func readFlagFile(flag, path string) ([]byte, error) {
	if path == "" {
		return nil, usagef("%s: required", flag)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		if flag != "" {
			err = fmt.Errorf("%s: %w", flag, err)
		}
		return nil, usageError{Err: err}
	}
	return data, nil
}

// parseFlagFile reads the file a flag names and parses it with parse,
// which names the file and the field in its errors.
func parseFlagFile[T any](flag, path string, parse func(name string, data []byte) (T, error)) (T, error) {
	data, err := readFlagFile(flag, path)
	if err != nil {
		var zero T
		return zero, err
	}
	v, err := parse(path, data)
	if err != nil {
		var zero T
		return zero, usageError{Err: err}
	}
	return v, nil
}
