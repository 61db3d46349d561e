package main

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/lakeshore-dev/lakeshore"
	"github.com/lakeshore-dev/lakeshore/plane"
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
		set        lakeshore.Admission
		onFull     string
		pf         providerFlags
		keyLimits  []string
		keyWeights []string
		keyRates   []string
		keyBursts  []string
	)
	c := &cobra.Command{
		Use:   "set NAME",
		Short: "Change the admission block or provider of queue NAME: the flags given replace those fields only",
		Long: `Set fields of the admission block of queue NAME. The flags given are merged into the
block the queue already has: setting --deadline-cutoff keeps an earlier --max-depth.
A flag set to 0 removes that limit; 'lakeshore queue clear NAME' removes the whole block.

--concurrency-limit N lets at most N jobs of one concurrency key (lakeshore submit
--concurrency-key) run at once; --key-limit KEY=N overrides it for one key and
--key-weight KEY=W weighs that key's fair share of claims (default 1). Both repeat, and
KEY=- removes the override (docs/semantics.md, "Concurrency keys and fair share").
--key-rate-limit R lets each key start R jobs per second (a token bucket per key of size
--key-burst); --key-rate KEY=R overrides the rate for one key (0: no rate limit for it)
and --key-bucket KEY=B its bucket size (repeat; KEY=- removes the override).

--provider attaches a provider that launches and stops the queue's workers to follow the
launch policy the other provider flags set (docs/providers.md); the same merge applies:
--max-workers alone changes only that field of the queue's provider. --provider none
detaches it.`,
		Example: `  lakeshore queue set embed --max-depth 1000 --on-full block
  lakeshore queue set scrape --rate-limit 5 --burst 10 --deadline-cutoff 30s
  lakeshore queue set infer --concurrency-limit 4 --key-limit tenant-7=16 --key-weight tenant-7=2
  lakeshore queue set crawl --key-rate-limit 1 --key-rate partner=20 --key-bucket partner=40
  lakeshore queue set thumbs --provider local --max-workers 4 --worker-command 'lakeshore worker thumbs -- ./thumb.sh'
  lakeshore queue set train --provider slurm --max-workers 8 --gpus 1 --memory 16GiB --time-limit 4h --partition gpu \
      --worker-command 'python train_worker.py'`,
		Args: exactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			f := c.Flags()
			admission := anyChanged(c, "max-depth", "on-full", "rate-limit", "burst", "deadline-cutoff",
				"concurrency-limit", "key-limit", "key-weight", "key-rate-limit", "key-burst", "key-rate", "key-bucket")
			if f.NFlag() == 0 || !admission && !pf.changed(c) {
				return usagef("queue set: give at least one of --max-depth, --on-full, --rate-limit, --burst, --deadline-cutoff, --concurrency-limit, --key-limit, --key-weight, --key-rate-limit, --key-burst, --key-rate, --key-bucket, or --provider and its policy flags")
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
			// The flags are merged into the stored block by a conditional write, read again
			// and merged again when another writer changed it meanwhile: concurrent sets of
			// different flags all hold.
			if _, err := q.UpdateAdmission(c.Context(), func(ad *lakeshore.Admission) error {
				return mergeAdmissionFlags(f, ad, &set, onFull, keyLimits, keyWeights, keyRates, keyBursts)
			}); err != nil {
				return withFlag(err, admissionFlags)
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
	f.Int64Var(&set.ConcurrencyLimit, "concurrency-limit", 0, "most running jobs per concurrency key (0: none)")
	f.Float64Var(&set.KeyRateLimit, "key-rate-limit", 0, "starts per second of each concurrency key, a token bucket per key (0: none)")
	f.Int64Var(&set.KeyBurst, "key-burst", 0, "each key's token bucket size (default: the key rate rounded up)")
	f.StringArrayVar(&keyLimits, "key-limit", nil, "KEY=N: the concurrency limit of one key (repeat; KEY=- removes it)")
	f.StringArrayVar(&keyWeights, "key-weight", nil, "KEY=W: the fair-share weight of one key, > 0 (repeat; KEY=- removes it)")
	f.StringArrayVar(&keyRates, "key-rate", nil, "KEY=R: the starts per second of one key, 0 for none (repeat; KEY=- removes it)")
	f.StringArrayVar(&keyBursts, "key-bucket", nil, "KEY=B: the token bucket size of one key, ≥ 1 (repeat; KEY=- removes it)")
	pf.register(c)
	nonNegative(c, "max-depth", "burst", "concurrency-limit", "key-burst")
	return c
}

// admissionFlags maps the fields of an admission block, as a refusal names them (the
// HTTP and Python names: "key_bursts[big]", "concurrency_limits key"), to the flags of
// `queue set` that set them, several of which are named otherwise (--key-bucket,
// --key-limit).
var admissionFlags = map[string]string{
	"max_depth": "--max-depth", "on_full": "--on-full", "rate_limit": "--rate-limit", "burst": "--burst",
	"deadline_cutoff": "--deadline-cutoff", "concurrency_limit": "--concurrency-limit",
	"concurrency_limits": "--key-limit", "key_weights": "--key-weight", "key_rate_limit": "--key-rate-limit",
	"key_burst": "--key-burst", "key_rate_limits": "--key-rate", "key_bursts": "--key-bucket",
}

// withFlag prefixes a refusal with the flag of flags (field → flag) that set the field it
// names ("--key-bucket: invalid key_bursts[big] 0: use a bucket size ≥ 1 …", "--time-zone:
// invalid time_zone …"), so the message names what the user typed; any other error is
// returned as it is. The InvalidError stays in the chain (exit 2).
func withFlag(err error, flags map[string]string) error {
	var ie *lakeshore.InvalidError
	if !errors.As(err, &ie) {
		return err
	}
	field, _, _ := strings.Cut(ie.Field, "[")
	field, _, _ = strings.Cut(field, " ")
	if flag, ok := flags[field]; ok {
		return fmt.Errorf("%s: %w", flag, err)
	}
	return err
}

// mergeKeyOverrides merges flag values KEY=VALUE (KEY=- deletes KEY) into *m, parsing
// VALUE with parse, which takes what (e.g. "a whole number ≥ 0"); KEY is what precedes the
// last "=". Errors: *InvalidError naming the flag and saying what it takes (a bad value:
// exit 2, without the usage hint, as every flag value its type cannot parse).
func mergeKeyOverrides[V any](flag, what string, values []string, m *map[string]V, parse func(string) (V, error)) error {
	rule := fmt.Sprintf("use KEY=VALUE, VALUE %s (KEY=- removes the override)", what)
	for _, kv := range values {
		// The value (a number or "-") has no "=": the last one splits, so a key may hold one.
		i := strings.LastIndex(kv, "=")
		k, v, ok := kv[:max(i, 0)], kv[i+1:], i >= 0
		if !ok || k == "" {
			return plane.Invalid("--"+flag, kv, rule)
		}
		if *m == nil {
			*m = map[string]V{}
		}
		if v == "-" {
			delete(*m, k)
			continue
		}
		n, err := parse(v)
		if err != nil {
			return plane.Invalid("--"+flag, kv, rule)
		}
		(*m)[k] = n
	}
	return nil
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
	keys, err := q.ConcurrencyKeys(c.Context())
	if err != nil {
		return err
	}
	if a.json {
		keyList := []map[string]any{}
		for _, k := range keys {
			keyList = append(keyList, map[string]any{"key": k.Key, "queued": k.Queued, "running": k.Running, "limit": k.Limit, "weight": k.Weight,
				"rate_limit": k.RateLimit, "burst": k.Burst, "rate_wait_s": k.RateWait.Seconds()})
		}
		m := map[string]any{"namespace": q.Namespace(), "queue": q.Name(), "admission": nil, "provider": providerJSON(ref),
			"keys": keyList}
		if ad != nil {
			m["admission"] = map[string]any{"max_depth": ad.MaxDepth, "on_full": ad.OnFull,
				"rate_limit": ad.RateLimit, "burst": ad.Burst, "deadline_cutoff": ad.DeadlineCutoff.String(),
				"deadline_cutoff_s": ad.DeadlineCutoff.Seconds(), "concurrency_limit": ad.ConcurrencyLimit,
				"concurrency_limits": ad.ConcurrencyLimits, "key_weights": ad.KeyWeights,
				"key_rate_limit": ad.KeyRateLimit, "key_burst": ad.KeyBurst,
				"key_rate_limits": ad.KeyRateLimits, "key_bursts": ad.KeyBursts}
		}
		return a.printJSON(m)
	}
	// keyLines are the keys' live counts: a key is listed while it has jobs, with or
	// without an admission block (a worker's "slow down" answer holds a key too).
	keyLines := func(tw *table) {
		for _, k := range keys {
			limit := "no limit"
			if k.Limit > 0 {
				limit = fmt.Sprintf("limit %d", k.Limit)
			}
			line := fmt.Sprintf("%d running (%s), %d queued", k.Running, limit, k.Queued)
			if k.RateWait > 0 {
				line += fmt.Sprintf(", next start in %s (rate)", k.RateWait.Round(time.Millisecond))
			}
			tw.row(fmt.Sprintf("key %q", k.Key), line)
		}
	}
	if ad == nil {
		if _, err := fmt.Fprintf(a.stdout, "%s: no admission block\n", q.Name()); err != nil {
			return err
		}
		if len(keys) > 0 {
			tw := a.table()
			keyLines(tw)
			if err := tw.Flush(); err != nil {
				return err
			}
		}
		return a.printProvider(ref)
	}
	tw := a.table()
	tw.row("queue", fmt.Sprintf("%s/%s", q.Namespace(), q.Name()))
	// A limit of 0 is no limit: it reads "none", as `queues` leaves it out, rather than a
	// "max depth 0" or "rate limit 0/s" that reads as a queue that takes nothing.
	tw.row("max depth", noneIfZero(ad.MaxDepth, fmt.Sprint(ad.MaxDepth)))
	tw.row("on full", ad.OnFull)
	tw.row("rate limit", noneIfZero(ad.RateLimit, fmt.Sprintf("%g/s", ad.RateLimit)))
	tw.row("burst", noneIfZero(ad.Burst, fmt.Sprint(ad.Burst)))
	tw.row("deadline cutoff", noneIfZero(ad.DeadlineCutoff, time.Duration(ad.DeadlineCutoff).String()))
	// The concurrency-key lines appear when the queue uses keys.
	if ad.ConcurrencyLimit > 0 || len(ad.ConcurrencyLimits) > 0 || len(ad.KeyWeights) > 0 || len(keys) > 0 {
		tw.row("concurrency limit", noneIfZero(ad.ConcurrencyLimit, fmt.Sprintf("%d per key", ad.ConcurrencyLimit)))
	}
	if ad.KeyRateLimit > 0 {
		tw.row("key rate limit", fmt.Sprintf("%g/s burst %d per key", ad.KeyRateLimit, ad.KeyBurst))
	}
	for _, k := range slices.Sorted(maps.Keys(ad.ConcurrencyLimits)) {
		n := ad.ConcurrencyLimits[k]
		tw.row(fmt.Sprintf("  key %q limit", k), noneIfZero(n, fmt.Sprint(n))) // 0: the key has no limit
	}
	for _, k := range slices.Sorted(maps.Keys(ad.KeyWeights)) {
		tw.row(fmt.Sprintf("  key %q weight", k), fmt.Sprintf("%g", ad.KeyWeights[k]))
	}
	rateKeys := slices.Sorted(maps.Keys(ad.KeyRateLimits))
	for k := range ad.KeyBursts {
		if _, ok := ad.KeyRateLimits[k]; !ok {
			rateKeys = append(rateKeys, k)
		}
	}
	slices.Sort(rateKeys)
	for _, k := range rateKeys {
		if rate, burst := ad.KeyRate(k); rate > 0 {
			tw.row(fmt.Sprintf("  key %q rate limit", k), fmt.Sprintf("%g/s burst %d", rate, burst))
		} else {
			tw.row(fmt.Sprintf("  key %q rate limit", k), "none")
		}
	}
	keyLines(tw)
	if err := tw.Flush(); err != nil {
		return err
	}
	return a.printProvider(ref)
}

// noneIfZero is text, or "none" when v is zero: a limit of 0 is no limit.
func noneIfZero[T comparable](v T, text string) string {
	var zero T
	if v == zero {
		return "none"
	}
	return text
}

// mergeAdmissionFlags merges `queue set`'s admission flags that were given (f.Changed) into
// ad: a scalar flag replaces the field, a KEY=VALUE flag merges into its map. Errors: a usage
// error naming a malformed flag value.
func mergeAdmissionFlags(f *pflag.FlagSet, ad *lakeshore.Admission, set *lakeshore.Admission, onFull string,
	keyLimits, keyWeights, keyRates, keyBursts []string) error {
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
	if f.Changed("concurrency-limit") {
		ad.ConcurrencyLimit = set.ConcurrencyLimit
	}
	if f.Changed("key-rate-limit") {
		ad.KeyRateLimit = set.KeyRateLimit
	}
	if f.Changed("key-burst") {
		ad.KeyBurst = set.KeyBurst
	}
	if err := mergeKeyOverrides("key-limit", "a whole number ≥ 0 (0: no limit for that key)", keyLimits, &ad.ConcurrencyLimits, func(v string) (int64, error) {
		return strconv.ParseInt(v, 10, 64)
	}); err != nil {
		return err
	}
	if err := mergeKeyOverrides("key-weight", "a weight from 0.000001 to 1000000 (default 1)", keyWeights, &ad.KeyWeights, func(v string) (float64, error) {
		return strconv.ParseFloat(v, 64)
	}); err != nil {
		return err
	}
	if err := mergeKeyOverrides("key-rate", "starts per second ≥ 0 (0: no rate limit for that key)", keyRates, &ad.KeyRateLimits, func(v string) (float64, error) {
		return strconv.ParseFloat(v, 64)
	}); err != nil {
		return err
	}
	return mergeKeyOverrides("key-bucket", "a bucket size, a whole number ≥ 1", keyBursts, &ad.KeyBursts, func(v string) (int64, error) {
		return strconv.ParseInt(v, 10, 64)
	})
}
