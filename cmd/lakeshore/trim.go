package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/lakeshore-dev/lakeshore"
	"github.com/lakeshore-dev/lakeshore/plane"
)

func newTrimCmd(a *app) *cobra.Command {
	var (
		olderThan time.Duration
		all       bool
	)
	c := &cobra.Command{
		Use:   "trim (QUEUE | --all)",
		Short: "Delete finished jobs (and their journals) older than --older-than, freeing their keys",
		Long: `Delete terminal jobs that finished more than --older-than ago (default 0: every
terminal job), with their journals, in QUEUE, or with --all in every queue of the
namespace. One of them is required: trim never empties a whole namespace by default.
Their idempotency keys become free. A job still holding its key for a --unique-for
window is kept until the window ends (not deleted, not counted). Prints how many were
deleted.`,
		Example: `  lakeshore trim embed --older-than 24h
  lakeshore trim --all --older-than 168h`,
		Args: rangeArgs(0, 1),
		RunE: func(c *cobra.Command, args []string) error {
			if olderThan < 0 {
				return plane.Invalid("--older-than", olderThan.String(), "use a duration ≥ 0 (default 0: every finished job)")
			}
			switch {
			case len(args) == 0 && !all:
				return usagef("trim: name a QUEUE, or pass --all to trim every queue of the namespace")
			case len(args) == 1 && all:
				return usagef("trim: give a QUEUE or --all, not both")
			}
			d, err := a.open(c.Context())
			if err != nil {
				return err
			}
			defer d.Close()
			var n int64
			if all {
				n, err = d.Admin().Trim(c.Context(), &lakeshore.TrimOptions{Namespace: d.Namespace(), OlderThan: olderThan})
			} else {
				q, qerr := d.Queue(args[0], nil)
				if qerr != nil {
					return qerr
				}
				n, err = q.Trim(c.Context(), olderThan)
			}
			if err != nil {
				return err
			}
			if a.json {
				return a.printJSON(map[string]any{"trimmed": n})
			}
			_, err = fmt.Fprintf(a.stdout, "trimmed %d\n", n)
			return err
		},
	}
	c.Flags().DurationVar(&olderThan, "older-than", 0, "trim jobs that finished longer ago than this (0: all)")
	c.Flags().BoolVar(&all, "all", false, "trim every queue of the namespace")
	return c
}
