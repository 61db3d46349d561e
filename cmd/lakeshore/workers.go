package main

import (
	"cmp"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/lakeshore-dev/lakeshore"
)

func newWorkersCmd(a *app) *cobra.Command {
	var (
		within time.Duration
		all    bool
	)
	c := &cobra.Command{
		Use:   "workers",
		Short: "List live workers: id, host, pid, queues, who launched them, jobs running, what they offer, started, last seen",
		Args:  exactArgs(0),
		RunE: func(c *cobra.Command, args []string) error {
			d, err := a.open(c.Context())
			if err != nil {
				return err
			}
			defer d.Close()
			ws, err := d.Workers(c.Context(), &lakeshore.WorkersOptions{AllNamespaces: all, SeenWithin: within})
			if err != nil {
				return err
			}
			if a.json {
				for _, w := range ws {
					if err := a.printJSON(w); err != nil {
						return err
					}
				}
				return nil
			}
			tw := a.table()
			tw.row("ID", "HOST", "PID", "NAMESPACE", "QUEUES", "PROVIDER", "LAUNCH", "RUNNING", "OFFERS", "WARM", "STARTED", "LAST SEEN")
			for _, w := range ws {
				provider, launch := cmp.Or(w.Provider, "-"), cmp.Or(w.LaunchID, "-")
				offers, warm := "-", cmp.Or(strings.Join(w.WarmHostKeys, ","), "-")
				if !w.Offers.IsZero() {
					offers = requirementText((*lakeshore.Requirement)(w.Offers))
				}
				tw.row(w.ID, w.Host, w.PID, w.Namespace, strings.Join(w.Queues, ","), provider, launch, w.Running, offers, warm,
					formatTime(w.StartedAt), time.Since(w.LastSeen).Round(time.Second).String()+" ago")
			}
			return tw.Flush()
		},
	}
	c.Flags().DurationVar(&within, "seen-within", 0, "hide workers silent for longer (default 1m)")
	c.Flags().BoolVar(&all, "all-namespaces", false, "list the workers of every namespace")
	return c
}
