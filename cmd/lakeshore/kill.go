package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/lakeshore-dev/lakeshore"
)

// killWaitDefault bounds `kill --wait`: a default worker notices a kill within 10 s (a
// third of its 30 s lease) and stops its command within its 10 s grace.
const killWaitDefault = time.Minute

func newKillCmd(a *app) *cobra.Command {
	var (
		wait    bool
		timeout time.Duration
	)
	c := &cobra.Command{
		Use:   "kill ID",
		Short: "Kill a running job: it ends as killed and its worker stops within a heartbeat (exit 1 when it is not running)",
		Long: `Kill a running job: it ends as killed at once and its lease is revoked, so nothing the
old attempt does can settle it. Its worker notices at its next heartbeat (within a third
of the lease: 10 s by default) and stops the handler; 'lakeshore worker' sends the
command's process group SIGTERM, then SIGKILL after --grace (10 s by default). So the
command may run up to heartbeat interval + grace after kill returns.

With --wait, kill waits (up to --timeout) until the worker confirms that the handler
returned — for 'lakeshore worker', that the command's process group is gone — and exits
4 when no confirmation came in time (e.g. the worker itself died: on Linux its commands
die with it).`,
		Args: exactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			// Not a ride-out verb, even with --wait: its first request, the kill, is one-shot
			// (a server that refuses connections is said within about two seconds, as for
			// cancel); the wait after it rides an outage out with the plane's own retries.
			if !wait {
				return a.endJob(c.Context(), args[0], "kill", "killed", (*lakeshore.Queue).Kill)
			}
			if err := a.endJob(c.Context(), args[0], "kill", "killed", (*lakeshore.Queue).Kill); err != nil {
				return err
			}
			d, q, err := a.queue(c.Context(), anyQueue)
			if err != nil {
				return err
			}
			defer d.Close()
			if !a.json {
				fmt.Fprintf(a.stderr, "lakeshore kill: waiting for the worker to confirm that %s stopped…\n", args[0])
			}
			start := time.Now()
			attempt, err := q.WaitReleased(c.Context(), args[0], &lakeshore.ListenOptions{Timeout: timeout})
			if err != nil {
				return verbError("kill", args[0], err)
			}
			if a.json {
				return a.printJSON(map[string]any{"id": args[0], "released": true, "attempt": attempt,
					"waited_s": time.Since(start).Seconds()})
			}
			_, err = fmt.Fprintf(a.stdout, "%s stopped: its worker confirmed attempt %d is gone (after %s)\n",
				args[0], attempt, time.Since(start).Round(time.Millisecond))
			return err
		},
	}
	c.Flags().BoolVar(&wait, "wait", false, "wait until the worker confirms the job's handler (its process tree) is gone")
	c.Flags().DurationVar(&timeout, "timeout", killWaitDefault, "with --wait, how long to wait for the confirmation")
	return c
}
