package main

import (
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/lakeshore-dev/lakeshore"
)

func newQueueCmd(a *app) *cobra.Command {
	c := &cobra.Command{
		Use:   "queue",
		Args:  cobra.ArbitraryArgs,
		RunE:  unknownSubcommand,
		Short: "Show, set or clear a queue's admission block (depth and rate limits) and its provider; pause or resume it",
	}
	c.AddCommand(newQueueSetCmd(a), newQueueGetCmd(a), newQueueClearCmd(a), newQueuePauseCmd(a, true), newQueuePauseCmd(a, false))
	return c
}

func newQueueSetCmd(a *app) *cobra.Command {
	var (
		set    lakeshore.Admission
		onFull string
		pf     providerFlags
	)
	c := &cobra.Command{
		Use:   "set NAME",
		Short: "Change the admission block or provider of queue NAME: the flags given replace those fields only",
		Long: `Set fields of the admission block of queue NAME. The flags given are merged into the
block the queue already has: setting --deadline-cutoff keeps an earlier --max-depth.
A flag set to 0 removes that limit; 'lakeshore queue clear NAME' removes the whole block.

--provider attaches a provider that launches and stops the queue's workers to follow the
launch policy the other provider flags set (docs/providers.md); the same merge applies:
--max-workers alone changes only that field of the queue's provider. --provider none
detaches it.`,
		Example: `  lakeshore queue set embed --max-depth 1000 --on-full block
  lakeshore queue set scrape --rate-limit 5 --burst 10 --deadline-cutoff 30s
  lakeshore queue set thumbs --provider local --max-workers 4 --worker-command 'lakeshore worker thumbs -- ./thumb.sh'
  lakeshore queue set train --provider slurm --max-workers 8 --gpus 1 --memory 16GiB --time-limit 4h --partition gpu \
      --worker-command 'python train_worker.py'`,
		Args: exactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			f := c.Flags()
			admission := anyChanged(c, "max-depth", "on-full", "rate-limit", "burst", "deadline-cutoff")
			if f.NFlag() == 0 || !admission && !pf.changed(c) {
				return usagef("queue set: give at least one of --max-depth, --on-full, --rate-limit, --burst, --deadline-cutoff, or --provider and its policy flags")
			}
			d, q, err := a.queue(c.Context(), args[0])
			if err != nil {
				return err
			}
			defer d.Close()
			if pf.changed(c) {
				if err := pf.apply(a, c, q); err != nil {
					return err
				}
			}
			if !admission {
				return a.printAdmission(c, q)
			}
			var ad lakeshore.Admission
			if old, err := q.Admission(c.Context()); err != nil {
				return err
			} else if old != nil {
				ad = *old
			}
			if f.Changed("max-depth") {
				ad.MaxDepth = set.MaxDepth
			}
			if f.Changed("on-full") {
				ad.OnFull = lakeshore.OnFull(onFull)
			}
			if f.Changed("rate-limit") {
				ad.RateLimit = set.RateLimit
			}
			if f.Changed("burst") {
				ad.Burst = set.Burst
			}
			if f.Changed("deadline-cutoff") {
				ad.DeadlineCutoff = set.DeadlineCutoff
			}
			if err := q.SetAdmission(c.Context(), ad); err != nil {
				return err
			}
			return a.printAdmission(c, q)
		},
	}
	f := c.Flags()
	f.Int64Var(&set.MaxDepth, "max-depth", 0, "limit on queued jobs (0: none)")
	f.StringVar(&onFull, "on-full", "", "at max depth: reject (default) or block")
	f.Float64Var(&set.RateLimit, "rate-limit", 0, "submits per second, a token bucket (0: none)")
	f.Int64Var(&set.Burst, "burst", 0, "token bucket size (default: the rate rounded up)")
	f.DurationVar(&set.DeadlineCutoff, "deadline-cutoff", 0, "reject submits whose deadline is nearer than this (0: none)")
	pf.register(c)
	return c
}

// anyChanged reports whether any of the named flags was given.
func anyChanged(c *cobra.Command, names ...string) bool {
	for _, n := range names {
		if c.Flags().Changed(n) {
			return true
		}
	}
	return false
}

// newQueuePauseCmd is `queue pause NAME` (pause) or `queue resume NAME`.
func newQueuePauseCmd(a *app, pause bool) *cobra.Command {
	use, short, done, already := "resume NAME", "Resume queue NAME: its queued invocations are claimable again", "resumed", "was not paused"
	if pause {
		use, short, done, already = "pause NAME", "Pause queue NAME: submits are accepted, no worker claims its invocations until resume", "paused", "was already paused"
	}
	return &cobra.Command{
		Use:   use,
		Short: short,
		Args:  exactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			d, q, err := a.queue(c.Context(), args[0])
			if err != nil {
				return err
			}
			defer d.Close()
			var changed bool
			if pause {
				changed, err = q.Pause(c.Context())
			} else {
				changed, err = q.Resume(c.Context())
			}
			if err != nil {
				return err
			}
			if a.json {
				return a.printJSON(map[string]any{"queue": q.Name(), "paused": pause, "changed": changed})
			}
			if changed {
				fmt.Fprintf(a.stdout, "%s: %s\n", q.Name(), done)
			} else {
				fmt.Fprintf(a.stdout, "%s: %s\n", q.Name(), already)
			}
			return nil
		},
	}
}

func newQueueGetCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "get NAME",
		Short: "Show the admission block and the provider of queue NAME",
		Args:  exactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			d, q, err := a.queue(c.Context(), args[0])
			if err != nil {
				return err
			}
			defer d.Close()
			return a.printAdmission(c, q)
		},
	}
}

func newQueueClearCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "clear NAME",
		Short: "Remove the admission block of queue NAME (reset: no limits)",
		Args:  exactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			d, q, err := a.queue(c.Context(), args[0])
			if err != nil {
				return err
			}
			defer d.Close()
			had, err := q.ClearAdmission(c.Context())
			if err != nil {
				return err
			}
			if a.json {
				return a.printJSON(map[string]any{"queue": q.Name(), "cleared": had})
			}
			if had {
				fmt.Fprintf(a.stdout, "%s: admission block cleared\n", q.Name())
			} else {
				fmt.Fprintf(a.stdout, "%s: had no admission block\n", q.Name())
			}
			return nil
		},
	}
}

func (a *app) printAdmission(c *cobra.Command, q *lakeshore.Queue) error {
	ad, err := q.Admission(c.Context())
	if err != nil {
		return err
	}
	ref, err := q.Provider(c.Context())
	if err != nil && !errors.Is(err, lakeshore.ErrNotImplemented) {
		return err
	}
	if a.json {
		m := map[string]any{"namespace": q.Namespace(), "queue": q.Name(), "admission": nil, "provider": providerJSON(ref)}
		if ad != nil {
			m["admission"] = map[string]any{"max_depth": ad.MaxDepth, "on_full": ad.OnFull,
				"rate_limit": ad.RateLimit, "burst": ad.Burst, "deadline_cutoff": ad.DeadlineCutoff.String(),
				"deadline_cutoff_s": ad.DeadlineCutoff.Seconds()}
		}
		return a.printJSON(m)
	}
	if ad == nil {
		if _, err := fmt.Fprintf(a.stdout, "%s: no admission block\n", q.Name()); err != nil {
			return err
		}
		return a.printProvider(ref)
	}
	tw := a.table()
	tw.row("queue", fmt.Sprintf("%s/%s", q.Namespace(), q.Name()))
	tw.row("max depth", ad.MaxDepth)
	tw.row("on full", ad.OnFull)
	tw.row("rate limit", fmt.Sprintf("%g/s", ad.RateLimit))
	tw.row("burst", ad.Burst)
	tw.row("deadline cutoff", time.Duration(ad.DeadlineCutoff))
	if err := tw.Flush(); err != nil {
		return err
	}
	return a.printProvider(ref)
}
