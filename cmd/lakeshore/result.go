package main

import (
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/lakeshore-dev/lakeshore"
)

func newResultCmd(a *app) *cobra.Command {
	var timeout time.Duration
	c := &cobra.Command{
		Use:   "result ID",
		Short: "Wait for a job and print its result as JSON",
		Long: `Wait until job ID is terminal and print its result as JSON. Exit 1 when the job
failed, was cancelled or killed, or timed out (its error on stderr, or as JSON with
--json); 3 when there is no such job; 4 when the wait timed out first.`,
		Args: exactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			a.rideOut = true // waits: rides out an outage
			d, q, err := a.queue(c.Context(), anyQueue)
			if err != nil {
				return err
			}
			defer d.Close()
			if timeout == 0 {
				// --timeout 0 answers at once (the SDK's zero Timeout is its 30 s default):
				// before, it waited 30 s.
				timeout = time.Nanosecond
			}
			return a.printResult(c, q, args[0], timeout)
		},
	}
	c.Flags().DurationVar(&timeout, "timeout", 30*time.Second, "how long to wait (0: answer at once, exit 4 when the job has not ended; negative: forever)")
	return c
}

// printResult waits for id and prints its result, or its terminal error with exit 1.
func (a *app) printResult(c *cobra.Command, q *lakeshore.Queue, id string, timeout time.Duration) error {
	v, err := q.ResultValue(c.Context(), id, &lakeshore.ResultOptions{Timeout: timeout})
	var terr *lakeshore.TerminalError
	if errors.As(err, &terr) {
		if a.json {
			if perr := a.printJSON(map[string]any{"id": id, "state": terr.State, "error": terr.Info}); perr != nil {
				return perr
			}
			return silentExit(exitJobFailed)
		}
		return &codeError{code: exitJobFailed, err: err}
	}
	if err != nil {
		return verbError("result", id, err) // name the verb and the id, as get does
	}
	if a.json {
		return a.printJSON(map[string]any{"id": id, "state": lakeshore.StateSucceeded, "result": v})
	}
	_, err = fmt.Fprintln(a.stdout, printable(compactJSON(v)))
	return err
}
