package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/lakeshore-dev/lakeshore"
	"github.com/lakeshore-dev/lakeshore/plane"
)

func newCountCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "count QUEUE [STATE]",
		Short: "Count a queue's jobs in one state, or in every state",
		Args:  rangeArgs(1, 2),
		RunE: func(c *cobra.Command, args []string) error {
			states := plane.States()
			if len(args) == 2 {
				s, err := lakeshore.ParseState(args[1])
				if err != nil {
					return err
				}
				states = []lakeshore.State{s}
			}
			d, q, err := a.queue(c.Context(), args[0])
			if err != nil {
				return err
			}
			defer d.Close()
			counts := map[string]int64{}
			for _, s := range states {
				n, err := q.Count(c.Context(), s)
				if err != nil {
					return err
				}
				counts[string(s)] = n
			}
			if err := a.noteUnusedQueue(c, d, q, counts); err != nil {
				return err
			}
			if a.json {
				return a.printJSON(counts)
			}
			if len(states) == 1 {
				_, err := fmt.Fprintln(a.stdout, counts[string(states[0])])
				return err
			}
			tw := a.table()
			for _, s := range states {
				tw.row(s, counts[string(s)])
			}
			return tw.Flush()
		},
	}
}

// noteUnusedQueue says on stderr when queue q has no job in any state and the plane lists
// no such queue: most often a misspelt name or another --namespace.
func (a *app) noteUnusedQueue(c *cobra.Command, d *lakeshore.Dispatch, q *lakeshore.Queue, counts map[string]int64) error {
	for _, n := range counts {
		if n != 0 {
			return nil
		}
	}
	if len(counts) < len(plane.States()) {
		var total int64
		for _, s := range plane.States() {
			n, err := q.Count(c.Context(), s)
			if err != nil {
				return err
			}
			total += n
		}
		if total > 0 {
			return nil
		}
	}
	stats, err := d.QueueStats(c.Context(), q.Namespace())
	if err != nil {
		return err
	}
	for _, s := range stats {
		if s.Queue == q.Name() {
			return nil
		}
	}
	_, err = fmt.Fprintf(a.stderr, "lakeshore: queue %s/%s has never been used (no jobs in any state, no admission block); check the name and --namespace\n",
		q.Namespace(), q.Name())
	return err
}
