//go:build !unix

package main

import (
	"errors"

	"github.com/spf13/cobra"
)

// newDaemonCmd is `lakeshore daemon`, which needs unix sockets and flock(2).
func newDaemonCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "daemon",
		Short: "Serve a plane on a unix socket (unix systems only)",
		RunE: func(*cobra.Command, []string) error {
			return errors.New("lakeshore daemon needs a unix system; use lakeshore serve and LAKESHORE_URL")
		},
	}
}
