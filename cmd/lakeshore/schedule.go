package main

import (
	"cmp"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/lakeshore-dev/lakeshore"
	"github.com/lakeshore-dev/lakeshore/plane"
)

func newScheduleCmd(a *app) *cobra.Command {
	c := &cobra.Command{
		Use:   "schedule",
		Short: "Durable schedules: submit a payload to a queue at each tick of a cron expression or interval",
		Long: `A schedule submits its payload to its queue at each tick of its rule (a five-field
cron expression in a time zone, or an interval), once per tick whatever the number of
processes, restarts or leader changes: the plane's maintenance fires it, keyed by
schedule/NAME/TICK. Missed ticks after downtime follow --catch-up (once, skip or all).
See docs/semantics.md, "Schedules".`,
		Args: exactArgs(0),
		RunE: unknownSubcommand,
	}
	c.AddCommand(newScheduleAddCmd(a), newScheduleListCmd(a), newScheduleRemoveCmd(a),
		newSchedulePauseCmd(a, true), newSchedulePauseCmd(a, false))
	return c
}

func newScheduleAddCmd(a *app) *cobra.Command {
	var (
		queue, payload, file, timeZone, catchUp string
		concurrencyKey                          string
		every, attemptTimeout                   time.Duration
		priority                                float64
		maxAttempts                             int
		paused, asString, keepState             bool
	)
	c := &cobra.Command{
		Use:   "add NAME [CRON] --queue QUEUE [--every 10m] [--payload JSON | --file F]",
		Short: "Create or replace a schedule",
		Long: `Create schedule NAME, or replace the one of that name. Give a cron expression
(minute hour day-of-month month day-of-week, or @hourly, @daily, @weekly, @monthly,
@yearly) read in --time-zone (default UTC), or --every for an interval (ticks at its
multiples since the Unix epoch). The first fire is the first tick after now. Prints the
schedule's next fire.

Replacing a schedule resets it: a paused one is resumed (unless --paused), its skip record
starts again and its next fire is the first tick after now. With --keep-state the command
is a declaration, as Python's @lakeshore.schedule makes at each import (for a deploy script
that runs it at every release): an existing schedule keeps its paused flag (--paused then
applies only when it creates the schedule), its skip record and, with the same rule (cron,
--every, --time-zone), its next fire, so ticks missed meanwhile still follow --catch-up.`,
		Example: `  lakeshore schedule add nightly "0 3 * * *" --queue eval --payload '{"suite": "full"}'
  lakeshore schedule add paris-morning "30 7 * * 1-5" --time-zone Europe/Paris --queue reports
  lakeshore schedule add heartbeat --every 10m --queue probes --catch-up skip
  lakeshore schedule add nightly "0 3 * * *" --queue eval --keep-state   # in a deploy script`,
		Args: rangeArgs(1, 2),
		RunE: func(c *cobra.Command, args []string) error {
			if queue == "" {
				return usagef("schedule add: give the queue the fires go to with --queue")
			}
			var cron string
			if len(args) == 2 {
				cron = args[1]
			}
			if cron == "" && !c.Flags().Changed("every") {
				return usagef(`schedule add: give a cron expression ("0 3 * * *") or --every`)
			}
			if c.Flags().Changed("every") && every == 0 {
				// The plane reads an Every of 0 as none given; this one was given.
				return plane.Invalid("every", every.String(), plane.ScheduleEveryRule)
			}
			if c.Flags().Changed("payload") && file != "" {
				return usagef("schedule add: give the payload with --payload or --file, not both")
			}
			if file != "" { // a payload too large for an argument
				var raw []byte
				var err error
				if file == "-" {
					raw, err = io.ReadAll(a.stdin)
				} else {
					raw, err = os.ReadFile(file)
				}
				if err != nil {
					return usagef("read payload: %w", err)
				}
				payload = string(raw)
			}
			var value any
			if c.Flags().Changed("payload") || file != "" {
				value = payload
				if !asString {
					var err error
					if value, err = parseJSON([]byte(payload)); err != nil {
						return jsonInputError("payload", err)
					}
				}
			}
			d, q, err := a.queue(c.Context(), queue)
			if err != nil {
				return err
			}
			defer d.Close()
			sc, err := q.Schedule(c.Context(), args[0], value, &lakeshore.ScheduleOptions{Cron: cron, Every: every,
				TimeZone: timeZone, CatchUp: lakeshore.CatchUp(catchUp), Paused: paused, Priority: priority,
				MaxAttempts: maxAttempts, AttemptTimeout: attemptTimeout, KeepState: keepState, ConcurrencyKey: concurrencyKey})
			if err != nil {
				return withFlag(err, scheduleFlags)
			}
			if a.json {
				return a.printJSON(scheduleJSON(sc))
			}
			if sc.Paused {
				_, err = fmt.Fprintf(a.stdout, "schedule %s (%s) to %s: paused\n", sc.Name, sc.String(), sc.Queue)
				return err
			}
			_, err = fmt.Fprintf(a.stdout, "schedule %s (%s) to %s: next fire %s\n", sc.Name, sc.String(), sc.Queue,
				fireText(sc.NextFire, sc.TimeZone))
			return err
		},
	}
	f := c.Flags()
	f.StringVar(&queue, "queue", "", "the queue every fire is submitted to (required)")
	f.StringVar(&payload, "payload", "", "the payload of every fire, JSON (default null)")
	f.StringVarP(&file, "file", "f", "", "read the payload from this file (- for stdin) instead of --payload")
	f.BoolVar(&asString, "string", false, "take the payload as a plain string, not JSON")
	f.DurationVar(&every, "every", 0, "an interval instead of a cron expression, e.g. 10m (at least 1s)")
	f.StringVar(&timeZone, "time-zone", "", "the IANA time zone the cron expression is read in, e.g. Europe/Paris (default UTC)")
	f.StringVar(&catchUp, "catch-up", "", "missed ticks after downtime: once (the latest, the default), skip (none older than 1m) or all (each)")
	f.BoolVar(&paused, "paused", false, "store the schedule paused (with --keep-state: only when it creates it)")
	f.BoolVar(&keepState, "keep-state", false,
		"declare: an existing schedule keeps its paused flag, skip record and, with the same rule, next fire")
	f.Float64Var(&priority, "priority", 0, "priority of every fire")
	f.IntVar(&maxAttempts, "max-attempts", 0, "claims before a fire fails, 1 to 10000 (default 3)")
	f.DurationVar(&attemptTimeout, "attempt-timeout", 0, "bound one running attempt of a fire (default none)")
	f.StringVar(&concurrencyKey, "concurrency-key", "",
		"concurrency key of every fire (e.g. a tenant): the queue's per-key limits, weights and rates apply to the fires (default: none)")
	return c
}

// scheduleJSON is the --json form of a schedule (the HTTP API's field names).
func scheduleJSON(sc *lakeshore.Schedule) map[string]any {
	out := map[string]any{"namespace": sc.Namespace, "name": sc.Name, "queue": sc.Queue, "paused": sc.Paused,
		"catch_up": string(sc.CatchUp)}
	if sc.CatchUp == "" {
		out["catch_up"] = string(lakeshore.CatchUpOnce)
	}
	if payload, err := decodeValue(sc.Payload); err == nil {
		out["payload"] = payload
	}
	if sc.Cron != "" {
		out["cron"] = sc.Cron
	} else {
		out["every"] = sc.Every.Seconds()
	}
	if sc.TimeZone != "" {
		out["time_zone"] = sc.TimeZone
	}
	for name, t := range map[string]time.Time{"next_fire": sc.NextFire, "last_fire": sc.LastFire} {
		if !t.IsZero() {
			out[name] = t.Format(time.RFC3339Nano)
		}
	}
	if sc.LastID != "" {
		out["last_id"] = sc.LastID
	}
	// The options of every fire, when set (the HTTP API's names), so what --priority,
	// --max-attempts and --attempt-timeout stored can be read back.
	if sc.Priority != 0 {
		out["priority"] = sc.Priority
	}
	if sc.MaxAttempts != 0 {
		out["max_attempts"] = sc.MaxAttempts
	}
	if sc.AttemptTimeout != 0 {
		out["attempt_timeout"] = sc.AttemptTimeout.Seconds()
	}
	if len(sc.Metadata) > 0 {
		out["metadata"] = sc.Metadata
	}
	if sc.ConcurrencyKey != "" {
		out["concurrency_key"] = sc.ConcurrencyKey
	}
	if sc.Skipped > 0 {
		out["skipped"] = sc.Skipped
		out["last_skip"] = sc.LastSkip.Format(time.RFC3339Nano)
		out["last_skip_reason"] = sc.LastSkipReason
	}
	return out
}

func newScheduleListCmd(a *app) *cobra.Command {
	var all bool
	c := &cobra.Command{
		Use:   "list [--all-namespaces]",
		Short: "List the schedules with their last and next fire",
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
			list, err := d.Schedules(c.Context(), ns)
			if err != nil {
				return err
			}
			if a.json {
				out := make([]map[string]any, len(list))
				for i := range list {
					out[i] = scheduleJSON(&list[i])
				}
				return a.printJSON(out)
			}
			tw := a.table()
			// The concurrency key's column appears when a listed schedule has one (as `jobs`).
			keyed := slices.ContainsFunc(list, func(sc lakeshore.Schedule) bool { return sc.ConcurrencyKey != "" })
			head := []any{"NAME", "RULE", "QUEUE"}
			if keyed {
				head = append(head, "CONCURRENCY KEY")
			}
			tw.row(append(head, "CATCH-UP", "LAST FIRE", "NEXT FIRE", "SKIPPED")...)
			for i := range list {
				sc := &list[i]
				name := sc.Name
				if all {
					name = sc.Namespace + "/" + sc.Name
				}
				next := "paused"
				if !sc.Paused {
					next = stamp(sc.NextFire)
				}
				cells := []any{name, sc.String(), sc.Queue}
				if keyed {
					cells = append(cells, cmp.Or(sc.ConcurrencyKey, "-"))
				}
				tw.row(append(cells, strings.TrimSpace(string(cmpCatchUp(sc.CatchUp))), stamp(sc.LastFire), next, sc.Skipped)...)
			}
			return tw.Flush()
		},
	}
	c.Flags().BoolVar(&all, "all-namespaces", false, "list the schedules of every namespace")
	return c
}

func cmpCatchUp(c lakeshore.CatchUp) lakeshore.CatchUp {
	if c == "" {
		return lakeshore.CatchUpOnce
	}
	return c
}

// stamp prints a fire time in RFC 3339 UTC, or - for none.
// fireText is a fire's time in UTC, followed, for a schedule read in another time zone,
// by the same instant in that zone — "2026-12-06T02:00:00Z (2026-12-06T03:00:00+01:00
// Europe/Paris)" — so that "0 3 * * *" in Europe/Paris does not read as a wrong hour.
func fireText(t time.Time, zone string) string {
	text := stamp(t)
	if t.IsZero() || zone == "" || zone == "UTC" {
		return text
	}
	if loc, err := time.LoadLocation(zone); err == nil {
		text += fmt.Sprintf(" (%s %s)", t.In(loc).Format(time.RFC3339), zone)
	}
	return text
}

func stamp(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

func newScheduleRemoveCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "remove NAME",
		Short: "Delete a schedule (the jobs it submitted stay)",
		Args:  exactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			d, err := a.open(c.Context())
			if err != nil {
				return err
			}
			defer d.Close()
			ok, err := d.RemoveSchedule(c.Context(), args[0])
			if err != nil {
				return err
			}
			if a.json {
				return a.printJSON(map[string]any{"removed": ok})
			}
			if !ok {
				_, err = fmt.Fprintf(a.stdout, "no schedule %s\n", args[0])
				return err
			}
			_, err = fmt.Fprintf(a.stdout, "removed %s\n", args[0])
			return err
		},
	}
}

func newSchedulePauseCmd(a *app, paused bool) *cobra.Command {
	verb, short := "resume", "Resume a paused schedule from its next tick (the ticks missed while paused are skipped)"
	if paused {
		verb, short = "pause", "Pause a schedule: it fires nothing until resumed"
	}
	return &cobra.Command{
		Use:   verb + " NAME",
		Short: short,
		Args:  exactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			d, err := a.open(c.Context())
			if err != nil {
				return err
			}
			defer d.Close()
			sc, changed, err := d.PauseSchedule(c.Context(), args[0], paused)
			if err != nil {
				return err
			}
			if a.json {
				out := scheduleJSON(sc)
				out["changed"] = changed
				return a.printJSON(out)
			}
			switch {
			case sc.Paused && changed:
				_, err = fmt.Fprintf(a.stdout, "paused %s\n", sc.Name)
			case sc.Paused:
				_, err = fmt.Fprintf(a.stdout, "%s was already paused\n", sc.Name)
			case changed:
				_, err = fmt.Fprintf(a.stdout, "resumed %s: next fire %s\n", sc.Name, fireText(sc.NextFire, sc.TimeZone))
			default:
				_, err = fmt.Fprintf(a.stdout, "%s was not paused: next fire %s\n", sc.Name, fireText(sc.NextFire, sc.TimeZone))
			}
			return err
		},
	}
}

// scheduleFlags maps the fields of a schedule, as the plane's refusal names them (the HTTP
// and Python names), to the flags of `lakeshore schedule add` that set them.
var scheduleFlags = map[string]string{
	"every": "--every", "time_zone": "--time-zone", "catch_up": "--catch-up", "priority": "--priority",
	"max_attempts": "--max-attempts", "attempt_timeout": "--attempt-timeout", "concurrency_key": "--concurrency-key",
}
