package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/metasched/metasched/metasched"
	"github.com/metasched/metasched/metasched/store"
)

// storeFile is the store's file in a data directory.
const storeFile = "metasched.db"

func newStoreCmd(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "store",
		Short: "Back up, restore or move into etcd the daemon's store",
		Long: `store backs up and restores the daemon's store: DATA_DIR/metasched.db, the
one file that holds every job and its history, the hosts' pools and marks,
the switches' records, the API tokens' hashes and the sites' calibrated
figures (the data directory's other files are the operator token, the jobs'
run directories and the calibration's working files).

  metasched store backup --out metasched-2026-11-25.db   # from the running daemon
  metasched store restore --data-dir /var/lib/metasched metasched-2026-11-25.db

A backup is taken from the running daemon (an operator's call, while it goes
on working) or, with --data-dir, from a stopped daemon's directory. A
restore needs the daemon stopped; it checks the backup before it replaces
anything and keeps the store it replaces beside it. migrate moves a stopped
daemon's store into an etcd cluster, where several daemons share it (the
serve configuration's store: {etcd: ...}).`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(newStoreBackupCmd(e), newStoreRestoreCmd(e), newStoreMigrateCmd(e))
	return cmd
}

func newStoreMigrateCmd(e *env) *cobra.Command {
	var (
		from, to, prefix          string
		certFile, keyFile, caFile string
	)
	cmd := &cobra.Command{
		Use:   "migrate --from bbolt:DIR --to etcd:ENDPOINTS",
		Short: "Move a stopped daemon's store into etcd",
		Long: `migrate copies the store of a stopped daemon (DIR/metasched.db) into an etcd
cluster, under --prefix (default /metasched/), which must hold nothing, and
checks that the copy holds what the file does (jobs per state, hosts,
switches, tokens). Then give the serve configuration
store: {etcd: {endpoints: [...], prefix: ...}} and start the daemons on it.
A migration that fails removes what it wrote; the file is left as it was.

ENDPOINTS are the members' client URLs, separated by commas; https ones
need --etcd-cert-file, --etcd-key-file and --etcd-ca-file (etcd's CA).`,
		Example: `  metasched store migrate --from bbolt:/var/lib/metasched \
      --to etcd:https://10.0.0.5:2379,https://10.0.0.6:2379,https://10.0.0.7:2379 \
      --etcd-cert-file etcd-client.pem --etcd-key-file etcd-client-key.pem --etcd-ca-file etcd-ca.pem`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			dir, ok := strings.CutPrefix(from, "bbolt:")
			if !ok || dir == "" {
				return usagef("--from: must be bbolt:DIR (the stopped daemon's data directory), not %q", from)
			}
			eps, ok := strings.CutPrefix(to, "etcd:")
			if !ok || eps == "" {
				return usagef("--to: must be etcd:ENDPOINTS (the members' client URLs, separated by commas), not %q", to)
			}
			doc := map[string]any{"endpoints": strings.Split(eps, ","), "prefix": prefix}
			if certFile != "" || keyFile != "" || caFile != "" {
				doc["tls"] = map[string]string{"cert_file": certFile, "key_file": keyFile, "ca_file": caFile}
			}
			data, err := json.Marshal(doc)
			if err != nil {
				return err
			}
			sc, err := metasched.ParseStoreEtcd("--to", data)
			if err != nil {
				return usageError{Err: err}
			}
			cl, err := metasched.EtcdClient(sc)
			if err != nil {
				return err
			}
			defer cl.Close()
			path := filepath.Join(dir, storeFile)
			sum, err := store.Migrate(cmd.Context(), path, cl, sc.Prefix)
			if err != nil {
				return err
			}
			fmt.Fprintf(e.stdout, "migrated %s to etcd %s under %s: %s\n", path, strings.Join(sc.Endpoints, ","), sc.Prefix, describeStore(sum))
			fmt.Fprintf(e.stdout, "serve configuration: store: {etcd: {endpoints: [%s], prefix: %s}}\n", strings.Join(sc.Endpoints, ", "), sc.Prefix)
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&from, "from", "", "bbolt:DIR, the stopped daemon's data directory")
	fl.StringVar(&to, "to", "", "etcd:ENDPOINTS, the etcd members' client URLs separated by commas")
	fl.StringVar(&prefix, "prefix", metasched.DefaultEtcdPrefix, "the key prefix of the store in etcd")
	fl.StringVar(&certFile, "etcd-cert-file", "", "the client certificate presented to etcd (https endpoints)")
	fl.StringVar(&keyFile, "etcd-key-file", "", "its key")
	fl.StringVar(&caFile, "etcd-ca-file", "", "etcd's CA certificate")
	return cmd
}

func newStoreBackupCmd(e *env) *cobra.Command {
	var (
		d            daemonFlags
		out, dataDir string
	)
	cmd := &cobra.Command{
		Use:   "backup --out FILE [--data-dir DIR]",
		Short: "Write a consistent copy of the daemon's store to a file",
		Long: `backup writes a consistent copy of the store to FILE (made 0600: it holds
the operator token): from the running daemon (GET /v1/backup, an
operator's), which goes on working meanwhile, or with --data-dir from the
store of a daemon that is not running. The copy is checked (opened as the
daemon opens its store) before it takes FILE's name, and what it holds is
printed. FILE must not exist.`,
		Example: `  metasched store backup --out backups/metasched-$(date +%F).db
  metasched store backup --data-dir /var/lib/metasched --out metasched.db.bak`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if out == "" {
				return usagef("--out: required: the file to write the backup to")
			}
			if _, err := os.Stat(out); err == nil {
				return usagef("--out: %s exists: give a new file", out)
			}
			return storeBackup(cmd.Context(), e, &d, out, dataDir)
		},
	}
	d.register(cmd)
	cmd.Flags().StringVar(&out, "out", "", "the file to write (must not exist)")
	cmd.Flags().StringVar(&dataDir, "data-dir", "", "back up the store of this data directory (its daemon stopped) instead of asking the daemon")
	return cmd
}

func storeBackup(ctx context.Context, e *env, d *daemonFlags, out, dataDir string) error {
	tmp := out + ".partial"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("--out: %w", err)
	}
	defer os.Remove(tmp)
	from := ""
	if dataDir != "" {
		from = filepath.Join(dataDir, storeFile)
		err = backupDir(ctx, from, f)
	} else {
		c, cerr := d.client()
		if cerr != nil {
			f.Close()
			return cerr
		}
		from = "the daemon at " + c.Base()
		if err = c.Backup(ctx, f); err != nil {
			err = daemonError(c, err, "")
		}
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("backup of %s: %w", from, err)
	}
	sum, err := store.Inspect(ctx, tmp)
	if err != nil {
		return fmt.Errorf("backup of %s: the copy does not open: %w", from, err)
	}
	if err := os.Link(tmp, out); err != nil { // never over a file that appeared meanwhile
		return fmt.Errorf("--out: %w", err)
	}
	fmt.Fprintf(e.stdout, "backed up %s to %s: %s\n", from, out, describeStore(sum))
	return nil
}

// backupDir copies the store at path, which no daemon may have open.
func backupDir(ctx context.Context, path string, w io.Writer) error {
	if _, err := os.Stat(path); err != nil {
		return fmt.Errorf("--data-dir: %w", err)
	}
	st, err := store.Open(path, store.Options{})
	if err != nil {
		if errors.Is(err, store.ErrDamaged) {
			return err
		}
		return fmt.Errorf("%w (a running daemon holds its store: back it up without --data-dir)", err)
	}
	defer st.Close()
	return st.Backup(ctx, nil, w)
}

// describeStore says what a store holds, in one line.
func describeStore(s store.Summary) string {
	states := slices.Sorted(func(yield func(store.JobState) bool) {
		for st := range s.Jobs {
			if s.Jobs[st] > 0 && !yield(st) {
				return
			}
		}
	})
	var parts []string
	for _, st := range states {
		parts = append(parts, fmt.Sprintf("%d %s", s.Jobs[st], st))
	}
	jobs := counted(s.Total(), "job")
	if len(parts) > 0 {
		jobs += " (" + strings.Join(parts, ", ") + ")"
	}
	return fmt.Sprintf("%s, %s, %s, %s; layout %d, %s", jobs, counted(s.Hosts, "host"),
		counted(int(s.Switches), "switch"), counted(s.Tokens, "token"), s.Layout, humanBytes(s.Bytes))
}

// humanBytes is n in KiB or MiB.
func humanBytes(n int64) string {
	if n < 1<<20 {
		return fmt.Sprintf("%.0f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
}

func newStoreRestoreCmd(e *env) *cobra.Command {
	var dataDir string
	cmd := &cobra.Command{
		Use:   "restore --data-dir DIR FILE",
		Short: "Put a backup in place of a stopped daemon's store",
		Long: `restore puts the backup FILE in place of DIR's store (DIR/metasched.db),
for a daemon that is stopped: it refuses while a daemon has the store
open. It first checks the backup as the daemon opens its store (a damaged
file, another program's database or a store of a newer metasched is
refused, and nothing is replaced), then moves the store it replaces to
DIR/metasched.db.replaced-TIME and the backup into place. The daemon
started on DIR then resumes from the backup: its queued jobs are planned,
the jobs that were running are re-attached or requeued as after a crash,
its switches in flight are finished or rolled back. The operator token
(DIR/token) is the backup's when the daemon starts.`,
		Example: `  metasched store restore --data-dir /var/lib/metasched backups/metasched-2026-11-25.db`,
		Args:    exactArgs(1, "the backup file"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if dataDir == "" {
				return usagef("--data-dir: required: the data directory of the stopped daemon (the serve configuration's data_dir)")
			}
			if fi, err := os.Stat(dataDir); err != nil || !fi.IsDir() {
				if err == nil {
					err = errors.New("not a directory")
				}
				return usagef("--data-dir: %s: %v", dataDir, err)
			}
			path := filepath.Join(dataDir, storeFile)
			sum, replaced, err := store.Restore(cmd.Context(), args[0], path, time.Now())
			if err != nil {
				return err
			}
			fmt.Fprintf(e.stdout, "restored %s from %s: %s\n", path, args[0], describeStore(sum))
			if replaced != "" {
				fmt.Fprintf(e.stdout, "the store it replaced is kept as %s\n", replaced)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&dataDir, "data-dir", metasched.DefaultDataDir, "the stopped daemon's data directory")
	return cmd
}
