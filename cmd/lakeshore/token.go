package main

import (
	"github.com/spf13/cobra"

	"github.com/lakeshore-dev/lakeshore/server/servecmd"
)

// newTokenCmd is `lakeshore token create|list|revoke` (server/servecmd).
func newTokenCmd(a *app) *cobra.Command {
	cmd := servecmd.Token()
	cmd.SetOut(a.stdout)
	cmd.SetErr(a.stderr)
	return cmd
}
