package main

import (
	"github.com/spf13/cobra"

	"github.com/lakeshore-dev/lakeshore/server/servecmd"
)

// newServeCmd is `lakeshore serve`: the HTTP server over a plane (server/servecmd has its
// options, the loopback rule and the graceful shutdown).
func newServeCmd(a *app) *cobra.Command {
	cmd := servecmd.Serve()
	cmd.SetErr(a.stderr)
	return cmd
}
