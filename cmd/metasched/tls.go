package main

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/metasched/metasched/internal/tlsx"
)

func newTLSCmd(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "tls",
		Short: "Make the grid's certificates: a CA, then one certificate per daemon, agent and client",
		Long: `tls makes the certificates the daemon, the site agents and the operators'
clients prove themselves with (like Nomad's and Consul's tls ca create and
tls cert create):

  metasched tls ca --out pki                        # pki/ca.pem, pki/ca-key.pem
  metasched tls cert --ca pki --out pki --daemon --host sched.example.org --host 10.0.0.1
  metasched tls cert --ca pki --out pki --agent spain --host 10.0.0.2
  metasched tls cert --ca pki --out pki --client alice --role operator

Each certificate names its holder's role in the grid (the daemon, the agent
of a site, a client and its role), which the other side checks besides the
CA's signature and the address dialled; --host gives the DNS names and IP
addresses a daemon or agent is reached at (localhost and 127.0.0.1 are
always included). Keys are ECDSA P-256, written readable by their owner
only. Keep ca-key.pem away from the grid's machines.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(newTLSCACmd(e), newTLSCertCmd(e))
	return cmd
}

func newTLSCACmd(e *env) *cobra.Command {
	var out, name string
	var days int
	var force bool
	cmd := &cobra.Command{
		Use:   "ca --out DIR",
		Short: "Make the grid's CA: DIR/ca.pem (give it to every party) and DIR/ca-key.pem (keep it safe)",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if out == "" {
				return usagef("--out: required (the directory of ca.pem and ca-key.pem)")
			}
			if days < 1 {
				return usagef("--days: must be >= 1, not %d", days)
			}
			p, err := tlsx.NewCA(name, time.Now(), time.Duration(days)*24*time.Hour)
			if err != nil {
				return err
			}
			if err := writePEM(out, "ca", p, force); err != nil {
				return err
			}
			fmt.Fprintf(e.stdout, "wrote %s and %s (valid %d days)\n", filepath.Join(out, "ca.pem"), filepath.Join(out, "ca-key.pem"), days)
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&out, "out", "", "directory to write ca.pem and ca-key.pem into (made if missing)")
	fl.StringVar(&name, "name", "", "a name for the CA, in its certificate's common name")
	fl.IntVar(&days, "days", int(tlsx.DefaultCAValidity/(24*time.Hour)), "days the CA is valid")
	fl.BoolVar(&force, "force", false, "replace existing files")
	return cmd
}

func newTLSCertCmd(e *env) *cobra.Command {
	var caDir, out, agent, client, role, migration string
	var daemon, force bool
	var hosts []string
	var days int
	cmd := &cobra.Command{
		Use:   "cert --ca DIR --out DIR (--daemon | --agent SITE | --client NAME [--role user|operator] | --migration-host HOST) [--host NAME_OR_IP]...",
		Short: "Make a certificate signed by the grid's CA: DIR/NAME.pem and DIR/NAME-key.pem",
		Long: `cert makes a certificate signed by the CA of --ca (its ca.pem and
ca-key.pem) and writes it and its key into --out:

  --daemon         daemon.pem, daemon-key.pem: the daemon's API (server) and its
                   calls to the agents (client)
  --agent SITE     agent-SITE.pem, agent-SITE-key.pem: the site's agent API
                   (server), and its probes to the other agents (client)
  --client NAME    client-NAME.pem, client-NAME-key.pem: a client of the role
                   --role (user or operator; the agents take an operator's)
  --migration-host HOST
                   ca-cert.pem, server-cert.pem, server-key.pem, client-cert.pem
                   and client-key.pem: libvirt's migration certificate
                   directory of a hypervisor host (qemu.conf's
                   migrate_tls_x509_cert_dir), for the agents' encrypted live
                   migrations (the site file's migration_tls); --host gives
                   the address other hosts migrate to it at (its
                   migration_address); make the keys readable by QEMU's user

--host (repeatable) adds a DNS name or IP address the daemon or agent is
reached at; localhost and 127.0.0.1 are always included. A replaced
certificate is taken by a running daemon or agent at its next connection
(--force).`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var id tlsx.Identity
			var name string
			n := 0
			if daemon {
				id, name, n = tlsx.Daemon(), "daemon", n+1
			}
			if agent != "" {
				id, name, n = tlsx.Agent(agent), "agent-"+agent, n+1
			}
			if client != "" {
				id, name, n = tlsx.Client(client, role), "client-"+client, n+1
			}
			if migration != "" {
				id, n = tlsx.Host(migration), n+1
			}
			switch {
			case n != 1:
				return usagef("give one of --daemon, --agent SITE, --client NAME and --migration-host HOST")
			case caDir == "":
				return usagef("--ca: required (the directory of ca.pem and ca-key.pem)")
			case out == "":
				return usagef("--out: required (the directory to write the certificate into)")
			case days < 1:
				return usagef("--days: must be >= 1, not %d", days)
			case client == "" && cmd.Flags().Changed("role"):
				return usagef("--role: applies to --client only")
			case client != "" && len(hosts) > 0:
				return usagef("--host: a client certificate names no hosts")
			}
			if err := id.Check(); err != nil {
				flag := map[tlsx.Kind]string{tlsx.KindAgent: "--agent", tlsx.KindClient: "--client", tlsx.KindHost: "--migration-host"}[id.Kind]
				if id.Kind == tlsx.KindClient && tlsx.Client(client, tlsx.RoleUser).Check() == nil {
					flag = "--role"
				}
				return usagef("%s: %v", flag, err)
			}
			ca, err := tlsx.LoadCA(filepath.Join(caDir, "ca.pem"), filepath.Join(caDir, "ca-key.pem"))
			if err != nil {
				return usageError{Err: fmt.Errorf("--ca: %w", err)}
			}
			if id.Kind != tlsx.KindClient {
				hosts = append([]string{"localhost", "127.0.0.1"}, hosts...)
			}
			req := tlsx.Request{Identity: id, Hosts: hosts, Now: time.Now(), ValidFor: time.Duration(days) * 24 * time.Hour}
			if id.Kind == tlsx.KindHost {
				files, err := ca.MigrationFiles(req)
				if err != nil {
					return usagef("%v", err)
				}
				if err := writeFiles(out, files, force); err != nil {
					return err
				}
				fmt.Fprintf(e.stdout, "wrote libvirt's migration certificates of %s into %s (qemu.conf: migrate_tls_x509_cert_dir = %q)\n", id, out, out)
				return nil
			}
			p, err := ca.Issue(req)
			if err != nil {
				return usagef("%v", err)
			}
			if err := writePEM(out, name, p, force); err != nil {
				return err
			}
			fmt.Fprintf(e.stdout, "wrote %s and %s: %s\n", filepath.Join(out, name+".pem"), filepath.Join(out, name+"-key.pem"), id)
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&caDir, "ca", "", "directory of the CA's ca.pem and ca-key.pem")
	fl.StringVar(&out, "out", "", "directory to write the certificate and its key into (made if missing)")
	fl.BoolVar(&daemon, "daemon", false, "the daemon's certificate")
	fl.StringVar(&agent, "agent", "", "the certificate of the agent of site SITE")
	fl.StringVar(&client, "client", "", "a client's certificate, of name NAME")
	fl.StringVar(&role, "role", tlsx.RoleUser, "the client's role: user or operator")
	fl.StringVar(&migration, "migration-host", "", "libvirt's migration certificates of the hypervisor host HOST")
	fl.StringArrayVar(&hosts, "host", nil, "a DNS name or IP address the daemon or agent is reached at (repeatable)")
	fl.IntVar(&days, "days", int(tlsx.DefaultCertValidity/(24*time.Hour)), "days the certificate is valid (at most the CA's)")
	fl.BoolVar(&force, "force", false, "replace existing files")
	return cmd
}

// writePEM writes DIR/NAME.pem and DIR/NAME-key.pem (the key readable by
// its owner only), each through a temporary file renamed into place, so
// that a daemon or agent reading them at a handshake never sees half a
// file. Existing files are kept unless force.
func writePEM(dir, name string, p tlsx.PEM, force bool) error {
	return writeFiles(dir, map[string][]byte{name + "-key.pem": p.Key, name + ".pem": p.Cert}, force)
}

// writeFiles writes files (by name) into dir as writePEM does: keys
// (names ending in key.pem) readable by their owner only, keys first.
func writeFiles(dir string, byName map[string][]byte, force bool) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	type file struct {
		path string
		data []byte
		mode os.FileMode
	}
	var files []file
	for _, name := range slices.Sorted(maps.Keys(byName)) {
		f := file{filepath.Join(dir, name), byName[name], 0o644}
		if strings.HasSuffix(name, "key.pem") {
			f.mode = 0o600
			files = append([]file{f}, files...)
			continue
		}
		files = append(files, f)
	}
	if !force {
		for _, f := range files {
			if _, err := os.Stat(f.path); err == nil {
				return usagef("%s exists: give --force to replace it", f.path)
			} else if !errors.Is(err, fs.ErrNotExist) {
				return err
			}
		}
	}
	for _, f := range files {
		tmp, err := os.CreateTemp(dir, "."+filepath.Base(f.path)+".*")
		if err != nil {
			return err
		}
		_, werr := tmp.Write(f.data)
		if cerr := tmp.Close(); werr == nil {
			werr = cerr
		}
		if werr == nil {
			werr = os.Chmod(tmp.Name(), f.mode)
		}
		if werr == nil {
			werr = os.Rename(tmp.Name(), f.path)
		}
		if werr != nil {
			os.Remove(tmp.Name())
			return werr
		}
	}
	return nil
}
