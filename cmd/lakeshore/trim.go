package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/lakeshore-dev/lakeshore/plane"
)

func newTrimCmd(a *app) *cobra.Command {
	var olderThan time.Duration
	c := &cobra.Command{
		Use:   "trim [QUEUE]",
		Short: "Delete finished jobs (and their journals) older than --older-than, freeing their keys",
		Long: `Delete terminal jobs that finished more than --older-than ago (default 0: every
terminal job), with their journals, in QUEUE or in every queue of the namespace.
Their idempotency keys become free. Prints how many were deleted.`,
		Args: rangeArgs(0, 1),
		RunE: func(c *cobra.Command, args []string) error {
			if olderThan < 0 {
				return usagef("--older-than must be ≥ 0")
			}
			d, err := a.open(c.Context())
			if err != nil {
				return err
			}
			defer d.Close()
			p := &plane.TrimParams{Namespace: d.Namespace(), FinishedBefore: time.Now().Add(-olderThan)}
			if olderThan == 0 {
				p.FinishedBefore = time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)
			}
			if len(args) == 1 {
				if err := plane.ValidateName("queue name", args[0]); err != nil {
					return err
				}
				p.Queue = args[0]
			}
			n, err := d.Driver().InvocationTrim(c.Context(), p)
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
	return c
}
