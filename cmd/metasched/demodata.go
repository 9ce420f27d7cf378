package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/metasched/metasched/metasched/store"
)

// demoMarker is the file that marks a data directory as the built-in
// demo's: `metasched serve` with no --config writes it. Only a directory
// that holds it is ever set aside by the next demo; a daemon's data
// directory of a configuration never holds it, and the demo leaves a
// directory without it where it is.
const demoMarker = "demo"

// demoMarkerText is what the marker says to whoever finds it.
const demoMarkerText = "This directory holds the data of the built-in demo (metasched serve with no --config).\n" +
	"The next demo sets it aside (renames it to NAME.previous-TIME) and starts fresh;\n" +
	"metasched serve --keep-data continues from it instead.\n"

// markDemoData marks dir as the demo's.
func markDemoData(dir string) error {
	return os.WriteFile(filepath.Join(dir, demoMarker), []byte(demoMarkerText), 0o644)
}

// isDemoData reports whether dir holds the demo's marker.
func isDemoData(dir string) bool {
	fi, err := os.Stat(filepath.Join(dir, demoMarker))
	return err == nil && fi.Mode().IsRegular()
}

// setAsideDemoData renames dir, when it is the demo's (isDemoData), to
// dir.previous-TIME (now in UTC; -2, -3… when that name is taken) and
// returns the new name; it returns "" and changes nothing when dir does
// not exist or is not the demo's. It refuses while a daemon has the
// directory's database open.
func setAsideDemoData(dir string, now time.Time) (string, error) {
	if !isDemoData(dir) {
		return "", nil
	}
	if err := checkUnused(filepath.Join(dir, "metasched.db")); err != nil {
		return "", err
	}
	base := dir + ".previous-" + now.UTC().Format("20060102T150405Z")
	to := base
	for n := 2; ; n++ {
		if _, err := os.Lstat(to); errors.Is(err, fs.ErrNotExist) {
			break
		}
		to = fmt.Sprintf("%s-%d", base, n)
	}
	if err := os.Rename(dir, to); err != nil {
		return "", fmt.Errorf("setting the previous demo's data aside: %w", err)
	}
	return to, nil
}

// checkUnused fails when a daemon holds the database db open (the store
// takes a lock on the file while it is open); a missing file is unused.
func checkUnused(db string) error {
	if _, err := os.Stat(db); errors.Is(err, fs.ErrNotExist) {
		return nil
	} else if err != nil {
		return err
	}
	if store.InUse(db) {
		return fmt.Errorf("%s is in use by another daemon: stop it, or give --data-dir", filepath.Dir(db))
	}
	return nil
}
