package main

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/lakeshore-dev/lakeshore"
)

func newJobsCmd(a *app) *cobra.Command {
	var (
		o     lakeshore.ListOptions
		state string
	)
	c := &cobra.Command{
		Use:   "jobs QUEUE",
		Short: "List a queue's jobs, newest first: id, state, attempt, key, times",
		Long: `List the jobs of QUEUE, newest first (--oldest: oldest first), filtered by --state and
--key-prefix, one page of at most --limit jobs. When more remain, the last line (on
stderr) gives the --after cursor of the next page; with --json the last line on stdout is
{"next": CURSOR} instead. Payloads and results are left out: 'lakeshore get ID' shows them.`,
		Example: `  lakeshore jobs embed --state failed
  lakeshore jobs embed --state failed --json | jq -r .id | xargs -n1 lakeshore get
  lakeshore jobs embed --key-prefix batch-7/ --limit 1000 --oldest`,
		Args: exactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			if state != "" {
				st, err := lakeshore.ParseState(state)
				if err != nil {
					return err
				}
				o.State = st
			}
			d, q, err := a.queue(c.Context(), args[0])
			if err != nil {
				return err
			}
			defer d.Close()
			page, err := q.List(c.Context(), &o)
			if err != nil {
				return err
			}
			if a.json {
				for _, inv := range page.Invocations {
					m := map[string]any{"id": inv.ID, "state": inv.State, "attempt": inv.Attempt,
						"max_attempts": inv.MaxAttempts, "priority": inv.Priority, "created_at": inv.CreatedAt}
					if inv.Key != "" {
						m["key"] = inv.Key
					}
					if inv.ConcurrencyKey != "" {
						m["concurrency_key"] = inv.ConcurrencyKey
					}
					if !inv.FinishedAt.IsZero() {
						m["finished_at"] = inv.FinishedAt
					}
					if due := delayedUntil(inv); !due.IsZero() {
						m["available_at"] = due
					}
					if inv.Error != nil {
						m["error"] = inv.Error
					}
					if err := a.printJSON(m); err != nil {
						return err
					}
				}
				if page.Next != "" {
					return a.printJSON(map[string]any{"next": page.Next})
				}
				return nil
			}
			tw := a.table()
			// The concurrency key's column appears when a job of the page has one.
			keyed := slices.ContainsFunc(page.Invocations, func(inv *lakeshore.Invocation) bool { return inv.ConcurrencyKey != "" })
			head := []any{"ID", "STATE", "ATTEMPT", "KEY"}
			if keyed {
				head = append(head, "CONCURRENCY KEY")
			}
			tw.row(append(head, "CREATED", "FINISHED", "ERROR")...)
			orDash := func(s string) string {
				if s == "" {
					return "-"
				}
				return s
			}
			for _, inv := range page.Invocations {
				errText := "-"
				if inv.Error != nil {
					errText = errorSummary(inv.Error.Type, inv.Error.Message)
				}
				cells := []any{inv.ID, inv.State, fmt.Sprintf("%d/%d", inv.Attempt, inv.MaxAttempts), orDash(inv.Key)}
				if keyed {
					cells = append(cells, orDash(inv.ConcurrencyKey))
				}
				tw.row(append(cells, formatTime(inv.CreatedAt), formatTime(inv.FinishedAt), errText)...)
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			if page.Next != "" {
				fmt.Fprintf(a.stderr, "more: %s\n", nextPageCommand(c, q.Name(), page.Next))
			}
			return nil
		},
	}
	f := c.Flags()
	f.StringVar(&state, "state", "", "only jobs in this state: queued, running, succeeded, failed, cancelled, killed, timeout")
	f.StringVar(&o.KeyPrefix, "key-prefix", "", "only jobs whose idempotency key starts with this")
	f.IntVar(&o.Limit, "limit", 100, "jobs per page (1–1000)")
	f.BoolVar(&o.Oldest, "oldest", false, "oldest first (default: newest first)")
	f.StringVar(&o.After, "after", "", "cursor of the next page, as printed by the previous one")
	return c
}

// nextPageCommand is the command line that lists the page after cursor next: the jobs
// command with every flag the user gave (filters, order, limit, --namespace, --target)
// and --after next.
func nextPageCommand(c *cobra.Command, queue, next string) string {
	parts := []string{"lakeshore", "jobs", shellWord(queue)}
	c.Flags().Visit(func(f *pflag.Flag) {
		if f.Name == "after" {
			return
		}
		if f.Value.Type() == "bool" {
			parts = append(parts, "--"+f.Name)
			return
		}
		parts = append(parts, "--"+f.Name, shellWord(f.Value.String()))
	})
	return strings.Join(append(parts, "--after", next), " ")
}

var plainWord = regexp.MustCompile(`^[A-Za-z0-9._/:@%+=,-]+$`)

// shellWord quotes s for a POSIX shell when it needs quoting.
func shellWord(s string) string {
	if plainWord.MatchString(s) {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// errorSummary is a job's error in one row of `lakeshore jobs`: its type and the first line
// of its message (a traceback follows it; `lakeshore get` shows the whole), at most 60
// characters, cut at a rune boundary.
func errorSummary(typ, message string) string {
	first, _, _ := strings.Cut(strings.TrimSpace(message), "\n")
	first = strings.TrimSpace(first)
	text := first
	if typ != "" && typ != first && !strings.HasPrefix(first, typ+":") {
		text = typ + ": " + first
	}
	if r := []rune(text); len(r) > 60 {
		text = string(r[:57]) + "..."
	}
	return text
}
