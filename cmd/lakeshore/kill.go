package main

import (
	"github.com/spf13/cobra"

	"github.com/lakeshore-dev/lakeshore"
)

func newKillCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "kill ID",
		Short: "Kill a running job: it ends as killed and its worker stops within a heartbeat (exit 1 when it is not running)",
		Args:  exactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			return a.endJob(c.Context(), args[0], "kill", "killed", (*lakeshore.Queue).Kill)
		},
	}
}
