package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/lakeshore-dev/lakeshore"
)

func newCancelCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "cancel ID",
		Short: "Cancel a queued job (exit 1 when it is not queued: nothing changes)",
		Args:  exactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			return a.endJob(c.Context(), args[0], "cancel", "cancelled", (*lakeshore.Queue).Cancel)
		},
	}
}

// endJob runs cancel or kill (verb; done is its past participle) on id and reports whether
// it changed anything: exit 0 when it did, 1 when the job was in a state the verb does not
// touch.
func (a *app) endJob(ctx context.Context, id, verb, done string, fn func(*lakeshore.Queue, context.Context, string) (bool, error)) error {
	d, q, err := a.queue(ctx, anyQueue)
	if err != nil {
		return err
	}
	defer d.Close()
	changed, err := fn(q, ctx, id)
	if err != nil {
		return verbError(verb, id, err)
	}
	inv, err := q.Get(ctx, id)
	if err != nil {
		return err
	}
	if a.json {
		if err := a.printJSON(map[string]any{"id": id, done: changed, "state": inv.State}); err != nil {
			return err
		}
	} else if changed {
		fmt.Fprintf(a.stdout, "%s %s\n", id, done)
	} else {
		fmt.Fprintf(a.stdout, "%s not %s: it is %s\n", id, done, inv.State)
	}
	if !changed {
		return silentExit(exitJobFailed)
	}
	return nil
}

// verbError names the verb and the id of a failed verb on one invocation, the id once
// (the SDK's not_found already names it: "cancel: invocation 01…: not found: …").
func verbError(verb, id string, err error) error {
	if strings.Contains(err.Error(), id) {
		return fmt.Errorf("%s: %w", verb, err)
	}
	return fmt.Errorf("%s %s: %w", verb, id, err)
}
