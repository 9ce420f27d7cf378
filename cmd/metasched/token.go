package main

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/metasched/metasched/metasched/api"
	"github.com/metasched/metasched/metasched/client"
)

func newTokenCmd(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "token",
		Short: "Make, list and revoke the daemon's API tokens (an operator's)",
		Long: `token manages the daemon's API tokens, with an operator's token (the one
of DATA_DIR/token, or one the operator made):

  metasched token create --name alice --role user   # prints the token, once
  metasched token list
  metasched token revoke alice

A user submits, plans, lists and cancels its own jobs and reads their logs
and outputs, and sees the pools, policy, links and calibration; an
operator also sees every job, the hosts, VMs, switches and tuning, starts
switches, clears hosts, calibrates and manages the tokens. The daemon
keeps only a hash of each token: a lost one is revoked and made again.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(newTokenCreateCmd(e), newTokenListCmd(e), newTokenRevokeCmd(e))
	return cmd
}

func newTokenCreateCmd(e *env) *cobra.Command {
	var (
		d                  daemonFlags
		name, role, output string
	)
	cmd := &cobra.Command{
		Use:   "create --name NAME --role user|operator",
		Short: "Make a token and print it (it is shown this once)",
		Long: `create makes a token for NAME (a person or a program: a-z, 0-9, '.', '_'
and '-') of the role user or operator, and prints it on stdout, alone on its
line, so that it can go straight into a file:

  (umask 077; metasched token create --name alice --role user > alice.token)

Jobs submitted with it are recorded as NAME's.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if name == "" {
				return usagef("--name: required")
			}
			if role != api.RoleUser && role != api.RoleOperator {
				return usagef("--role: must be user or operator, not %q", role)
			}
			return callDaemon(cmd.Context(), e, &d, output, "",
				func(ctx context.Context, c *client.Client) (api.TokenCreated, error) {
					return c.CreateToken(ctx, name, role)
				},
				func(w io.Writer, tc api.TokenCreated) { fmt.Fprintln(w, tc.Secret) })
		},
	}
	d.register(cmd)
	outputFlag(cmd, &output)
	cmd.Flags().StringVar(&name, "name", "", "the token's name: who it is for")
	cmd.Flags().StringVar(&role, "role", api.RoleUser, "user or operator")
	return cmd
}

func newTokenListCmd(e *env) *cobra.Command {
	var (
		d      daemonFlags
		output string
	)
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the tokens: names, roles, when made (never the tokens)",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return callDaemon(cmd.Context(), e, &d, output, "",
				func(ctx context.Context, c *client.Client) ([]api.Token, error) { return c.Tokens(ctx) },
				func(w io.Writer, ts []api.Token) {
					tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
					fmt.Fprintln(tw, "NAME\tROLE\tCREATED")
					for _, t := range ts {
						created := stamp(t.Created)
						if t.Created.IsZero() {
							created = "the daemon's (DATA_DIR/token)"
						}
						fmt.Fprintf(tw, "%s\t%s\t%s\n", t.Name, t.Role, created)
					}
					tw.Flush()
				})
		},
	}
	d.register(cmd)
	outputFlag(cmd, &output)
	return cmd
}

func newTokenRevokeCmd(e *env) *cobra.Command {
	var d daemonFlags
	cmd := &cobra.Command{
		Use:   "revoke NAME",
		Short: "Revoke a token: it and the sessions opened with it authenticate nothing from now on",
		Args:  exactArgs(1, "one token name"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := d.client()
			if err != nil {
				return err
			}
			if err := c.RevokeToken(cmd.Context(), args[0]); err != nil {
				return daemonError(c, err, "")
			}
			fmt.Fprintf(e.stdout, "token %s revoked\n", args[0])
			return nil
		},
	}
	d.register(cmd)
	return cmd
}
