package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/lakeshore-dev/lakeshore"
)

func newStreamCmd(a *app) *cobra.Command {
	var (
		since   int64
		timeout time.Duration
	)
	c := &cobra.Command{
		Use: "stream ID",
		// Other tools' names for following a job's output: `lakeshore watch` suggests stream.
		SuggestFor: []string{"watch", "follow", "tail", "logs"},
		Short:      "Print a job's VALUE frames, following live until it ends",
		Long: `Print the VALUE frames of job ID with seq > --since (all by default), live while
it runs, one per line: "SEQ<TAB>VALUE" (VALUE as JSON), or {"seq","attempt","value"}
with --json. To resume after an interruption pass the last SEQ seen as --since.
Exit 0 when the job succeeded, 1 when it failed, was cancelled or timed out, 4
after --timeout (30 s by default) without a new frame; --timeout -1 follows until the
job ends however long it is silent.`,
		Args: exactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			a.rideOut = true // waits: rides out an outage
			d, q, err := a.queue(c.Context(), anyQueue)
			if err != nil {
				return err
			}
			defer d.Close()
			for f, err := range q.Stream(c.Context(), args[0], since, &lakeshore.StreamOptions{Timeout: timeout}) {
				if err != nil {
					return err
				}
				if a.json {
					err = a.printJSON(map[string]any{"seq": f.Seq, "attempt": f.Attempt, "value": f.Value})
				} else {
					_, err = fmt.Fprintf(a.stdout, "%d\t%s\n", f.Seq, printable(compactJSON(f.Value)))
				}
				if err != nil {
					return err
				}
			}
			return nil
		},
	}
	c.Flags().Int64Var(&since, "since", lakeshore.FromStart, "print frames after this seq (-1: from the start)")
	c.Flags().DurationVar(&timeout, "timeout", lakeshore.StreamTimeoutDefault, "give up after this long without a frame (-1: follow until the job ends)")
	return c
}
