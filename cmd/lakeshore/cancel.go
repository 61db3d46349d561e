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
		fmt.Fprintln(a.stdout, unchangedText(id, done, inv.State))
	}
	if !changed {
		return silentExit(exitJobFailed)
	}
	return nil
}

// unchangedText says why cancel or kill (done: "cancelled", "killed") changed nothing: the
// job already was so ("ID was already cancelled", as `queue pause` says "was already
// paused"), it already ended otherwise ("…: it already ended: succeeded"), or it is in the
// state the other verb is for ("ID not killed: it is queued (cancel ends a queued job)").
func unchangedText(id, done string, state lakeshore.State) string {
	switch {
	case string(state) == done:
		return fmt.Sprintf("%s was already %s", id, done)
	case state.Terminal():
		return fmt.Sprintf("%s not %s: it already ended: %s", id, done, state)
	case done == "killed" && state == lakeshore.StateQueued:
		return fmt.Sprintf("%s not killed: it is queued (cancel ends a queued job)", id)
	case done == "cancelled" && state == lakeshore.StateRunning:
		return fmt.Sprintf("%s not cancelled: it is running (kill ends a running job)", id)
	}
	return fmt.Sprintf("%s not %s: it is %s", id, done, state)
}

// verbError names the verb and the id of a failed verb on one invocation, the id once
// (the SDK's not_found already names it: "cancel: invocation 01…: not found: …"), and the
// verb once (the SDK's wait timeout already names both: "result 01…: waited 0s: …").
func verbError(verb, id string, err error) error {
	if strings.HasPrefix(err.Error(), verb+" "+id+":") {
		return err
	}
	if strings.Contains(err.Error(), id) {
		return fmt.Errorf("%s: %w", verb, err)
	}
	return fmt.Errorf("%s %s: %w", verb, id, err)
}
