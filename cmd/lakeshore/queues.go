package main

import (
	"fmt"
	"maps"
	"strings"

	"github.com/spf13/cobra"

	"github.com/lakeshore-dev/lakeshore/plane"
)

func newQueuesCmd(a *app) *cobra.Command {
	var all bool
	c := &cobra.Command{
		Use:   "queues",
		Short: "List every queue with its depth by state, its admission block and whether it is paused",
		Args:  exactArgs(0),
		RunE: func(c *cobra.Command, args []string) error {
			d, err := a.open(c.Context())
			if err != nil {
				return err
			}
			defer d.Close()
			ns := d.Namespace()
			if all {
				ns = ""
			}
			stats, err := d.QueueStats(c.Context(), ns)
			if err != nil {
				return err
			}
			// Queued jobs no live worker can place (a requirement none offers): said where a
			// user looks when a job does not start. A plane or token that cannot read the
			// demand or the registry leaves the note out; the table is the answer.
			waiting := map[[2]string]plane.Unplaceable{}
			if un, err := d.Unplaceable(c.Context(), ns); err == nil {
				for _, u := range un {
					waiting[[2]string{u.Namespace, u.Queue}] = u
				}
			}
			if a.json {
				for _, s := range stats {
					counts := map[string]int64{}
					for _, st := range plane.States() {
						counts[string(st)] = s.Counts[st]
					}
					if err := a.printJSON(map[string]any{"namespace": s.Namespace, "queue": s.Queue,
						"counts": counts, "admission": s.Admission, "paused": s.Paused,
						"unplaceable": waiting[[2]string{s.Namespace, s.Queue}].Queued}); err != nil {
						return err
					}
				}
				return nil
			}
			tw := a.table()
			header := []any{"NAMESPACE", "QUEUE"}
			for _, st := range plane.States() {
				header = append(header, strings.ToUpper(string(st)))
			}
			tw.row(append(header, "ADMISSION", "PAUSED")...)
			for _, s := range stats {
				cells := []any{s.Namespace, s.Queue}
				for _, st := range plane.States() {
					cells = append(cells, s.Counts[st])
				}
				paused := "-"
				if s.Paused {
					paused = "paused"
				}
				tw.row(append(cells, admissionText(s.Admission), paused)...)
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			for _, s := range stats {
				if u, ok := waiting[[2]string{s.Namespace, s.Queue}]; ok {
					fmt.Fprintf(a.stderr, "note: queue %s/%s: %s\n", s.Namespace, s.Queue, unplaceableText(u))
				}
			}
			return nil
		},
	}
	c.Flags().BoolVar(&all, "all-namespaces", false, "list the queues of every namespace")
	return c
}

func admissionText(ad *plane.Admission) string {
	if ad == nil {
		return "-"
	}
	var parts []string
	if ad.MaxDepth > 0 {
		parts = append(parts, fmt.Sprintf("max-depth=%d on-full=%s", ad.MaxDepth, ad.OnFull))
	}
	if ad.RateLimit > 0 {
		parts = append(parts, fmt.Sprintf("rate=%g/s burst=%d", ad.RateLimit, ad.Burst))
	}
	if ad.DeadlineCutoff > 0 {
		parts = append(parts, fmt.Sprintf("deadline-cutoff=%s", ad.DeadlineCutoff))
	}
	// The per-key rules, in `queue set`'s flag names; of the per-key overrides, how many
	// keys have one (`queue get` lists them).
	if ad.ConcurrencyLimit > 0 {
		parts = append(parts, fmt.Sprintf("concurrency-limit=%d", ad.ConcurrencyLimit))
	}
	if ad.KeyRateLimit > 0 {
		parts = append(parts, fmt.Sprintf("key-rate-limit=%g/s key-burst=%d", ad.KeyRateLimit, ad.KeyBurst))
	}
	rated := maps.Clone(ad.KeyRateLimits)
	for k := range ad.KeyBursts {
		if rated == nil {
			rated = map[string]float64{}
		}
		rated[k] = 0
	}
	for _, o := range []struct {
		flag string
		n    int
	}{{"key-limit", len(ad.ConcurrencyLimits)}, {"key-rate", len(rated)}, {"key-weight", len(ad.KeyWeights)}} {
		if o.n > 0 {
			parts = append(parts, fmt.Sprintf("%s=%d keys", o.flag, o.n))
		}
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, " ")
}

// unplaceableText says u as `queues` prints it: "3 queued jobs need offers no live worker
// declares (e.g. gpus=1)", and what to do.
func unplaceableText(u plane.Unplaceable) string {
	jobs := "jobs need"
	if u.Queued == 1 {
		jobs = "job needs"
	}
	return fmt.Sprintf("%d queued %s offers no live worker declares (e.g. %s): start a worker with --offers that satisfy them, or attach a provider (docs/fabric.md)",
		u.Queued, jobs, requirementText(u.Example))
}
