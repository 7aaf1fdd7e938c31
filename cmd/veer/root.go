package main

import (
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/veerhq/veer/internal/version"
)

// subcommands lists constructors of the subcommands; each lives in its own
// file and registers itself here in an init function.
var subcommands []func() *cobra.Command

func newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:   "veer",
		Short: "veer keeps traffic flowing when networks, clouds and services fail",
		Long: `veer is a toolkit for keeping internet traffic flowing when networks, clouds
and services fail: a client SDK (domain failover, last-mile chain), server
middleware (load shedding, flow control), and a simulator that reproduces the
published evaluations of these techniques.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newVersionCmd())
	for _, c := range subcommands {
		root.AddCommand(c())
	}
	return root
}

func newVersionCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print version, commit and Go version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			i := version.Get()
			if asJSON {
				return json.NewEncoder(cmd.OutOrStdout()).Encode(i)
			}
			_, err := fmt.Fprintln(cmd.OutOrStdout(), i)
			return err
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print as JSON")
	return cmd
}
