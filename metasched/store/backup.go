package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"
)

// Backups. A backup is the store's file as one read transaction sees it: a
// consistent copy taken while the daemon runs and writes (bbolt's
// Tx.WriteTo), that Open reads as it reads the store itself. Restore puts
// one in place of a stopped daemon's store, after checking it.

// Backup writes a consistent copy of the store to w, and first tells size
// how many bytes it will write.
func (s *Store) Backup(ctx context.Context, size func(n int64), w io.Writer) error {
	if s.file == nil {
		return fmt.Errorf("backup: %w: the store on %s is no file (back up its engine's data instead)", ErrInvalid, s.name)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.file.View(func(tx *bolt.Tx) error {
		if size != nil {
			size(tx.Size())
		}
		if _, err := tx.WriteTo(w); err != nil {
			return fmt.Errorf("backup: %w", err)
		}
		return nil
	})
}

// Summary says what a store holds: its layout, its jobs by state, its
// hosts, switches and tokens.
type Summary struct {
	Layout   int              `json:"layout"`
	Bytes    int64            `json:"bytes"`
	Jobs     map[JobState]int `json:"jobs"`
	Hosts    int              `json:"hosts"`
	Switches uint64           `json:"switches"`
	Tokens   int              `json:"tokens"`
}

// Total is the number of jobs.
func (m Summary) Total() int {
	n := 0
	for _, c := range m.Jobs {
		n += c
	}
	return n
}

// Summary reads what the store holds.
func (s *Store) Summary(ctx context.Context) (Summary, error) {
	var out Summary
	var err error
	if out.Layout, err = s.Layout(); err != nil {
		return out, err
	}
	out.Jobs = s.Counts()
	hosts, err := s.Hosts(ctx)
	if err != nil {
		return out, err
	}
	out.Hosts = len(hosts)
	if out.Switches, err = s.SwitchSeq(ctx); err != nil {
		return out, err
	}
	toks, err := s.Tokens(ctx)
	if err != nil {
		return out, err
	}
	out.Tokens = len(toks)
	if s.file != nil {
		err = s.file.View(func(tx *bolt.Tx) error {
			out.Bytes = tx.Size()
			return nil
		})
	}
	return out, err
}

// Inspect opens a store file (or a backup), checks it as Open does,
// brings an older layout up to date, and says what it holds.
func Inspect(ctx context.Context, path string) (Summary, error) {
	st, err := Open(path, Options{})
	if err != nil {
		return Summary{}, err
	}
	sum, err := st.Summary(ctx)
	if cerr := st.Close(); err == nil {
		err = cerr
	}
	return sum, err
}

// ErrInUse is returned by Restore when a process (a running daemon) has the
// store open.
var ErrInUse = errors.New("the store is in use")

// Restore puts the backup at from in place of the store at path: it copies
// the backup beside the store, checks the copy (as Open does: a damaged
// file or a newer layout is refused) and renames it over the store. The
// store it replaces, if any, is kept as path.replaced-TIME, and its name
// returned. A store that a process has open is not replaced (ErrInUse).
func Restore(ctx context.Context, from, path string, now time.Time) (sum Summary, replaced string, err error) {
	if _, err := os.Stat(from); err != nil {
		return Summary{}, "", fmt.Errorf("restore: the backup: %w", err)
	}
	if _, err := os.Stat(path); err == nil {
		if InUse(path) {
			return Summary{}, "", fmt.Errorf("restore %s: %w: a daemon has it open; stop the daemon first", path, ErrInUse)
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return Summary{}, "", fmt.Errorf("restore %s: %w", path, err)
	}
	tmp := path + ".restoring"
	if err := copyInto(from, tmp); err != nil {
		os.Remove(tmp)
		return Summary{}, "", fmt.Errorf("restore: %w", err)
	}
	if sum, err = Inspect(ctx, tmp); err != nil {
		os.Remove(tmp)
		return Summary{}, "", fmt.Errorf("restore: the backup %s: %w", from, err)
	}
	if _, err := os.Stat(path); err == nil {
		replaced = path + ".replaced-" + now.UTC().Format("20060102T150405Z")
		if err := os.Rename(path, replaced); err != nil {
			os.Remove(tmp)
			return Summary{}, "", fmt.Errorf("restore: keep the store it replaces: %w", err)
		}
	}
	if err := os.Rename(tmp, path); err != nil {
		return Summary{}, replaced, fmt.Errorf("restore: %w", err)
	}
	return sum, replaced, syncDir(filepath.Dir(path))
}

// InUse reports whether another process (a running daemon) holds the
// lock of the store at path. A file bbolt cannot read is not in use: it
// is what a restore replaces.
func InUse(path string) (held bool) {
	defer func() {
		if recover() != nil {
			held = false
		}
	}()
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second, ReadOnly: true})
	if err != nil {
		return errors.Is(err, bolterrors.ErrTimeout)
	}
	db.Close()
	return false
}

// copyInto copies from to a new file to (mode 0600), synced.
func copyInto(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	if err := out.Sync(); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// syncDir makes the renames in dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	return nil
}
