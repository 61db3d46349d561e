package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/lakeshore-dev/lakeshore"
	"github.com/lakeshore-dev/lakeshore/plane"
)

func newSubmitCmd(a *app) *cobra.Command {
	var (
		file, key      string
		asString, wait bool
		priority       float64
		maxAttempts    int
		attemptTimeout time.Duration
		timeout        time.Duration
		delay          time.Duration
		uniqueFor      time.Duration
		debounce       time.Duration
		concurrencyKey string
		at             string
		mode           string
		function       string
		requires       string
	)
	c := &cobra.Command{
		Use:   "submit QUEUE [PAYLOAD]",
		Short: "Submit a job: its payload is JSON from the argument, --file, or stdin",
		Long: `Submit a job to QUEUE and print its id. The payload is JSON, taken from PAYLOAD,
from --file (- for stdin), or from stdin when neither is given; --string takes the
text as a plain string instead. With --key, submitting the same key again returns
the existing id. With --delay or --at, the job is queued now but not claimable before
then (the plane's clock decides). With --mode, the job carries that compute mode's run
declaration from the lakeshore.yaml found from the working directory (docs/fabric.md),
and a mode that ships code uploads it to the server once per digest. With --wait, wait for the job and print its result
(exit 1 when it failed, was cancelled or timed out; 4 when the wait timed out).`,
		Example: `  lakeshore submit embed '{"text": "hello"}'
  lakeshore submit embed --key doc-42 --file doc.json --wait
  echo '"s3://bucket/x"' | lakeshore submit resize
  lakeshore submit reminders '"ping"' --delay 5m
  lakeshore submit reports '{"day": "2026-12-01"}' --at 2026-12-02T06:00:00Z`,
		Args: rangeArgs(1, 2),
		RunE: func(c *cobra.Command, args []string) error {
			a.rideOut = wait // waits: rides out an outage
			if delay < 0 {
				return plane.Invalid("--delay", delay.String(), "use a duration ≥ 0, e.g. 5m")
			}
			var notBefore time.Time
			if at != "" {
				t, err := time.Parse(time.RFC3339, at)
				if err != nil {
					return plane.Invalid("--at", at, "use an RFC 3339 time, e.g. 2026-12-02T06:00:00Z or 2026-12-02T07:00:00+01:00")
				}
				notBefore = t
			}
			var raw []byte
			var err error
			switch {
			case len(args) == 2 && file != "":
				return usagef("give the payload as an argument or with --file, not both")
			case len(args) == 2:
				raw = []byte(args[1])
			case file == "-" || file == "":
				raw, err = io.ReadAll(a.stdin)
			default:
				raw, err = os.ReadFile(file)
			}
			if err != nil {
				return usagef("read payload: %w", err)
			}
			var payload any = string(raw)
			if !asString {
				if payload, err = parseJSON(raw); err != nil {
					return jsonInputError("payload", err)
				}
			}
			d, q, err := a.queue(c.Context(), args[0])
			if err != nil {
				return err
			}
			defer d.Close()
			submitCtx := c.Context()
			if timeout > 0 { // also bounds a submit blocked on a full queue (on_full block)
				var cancel context.CancelFunc
				submitCtx, cancel = context.WithTimeout(submitCtx, timeout)
				defer cancel()
			}
			opts := &lakeshore.SubmitOptions{
				Key: key, Priority: priority, MaxAttempts: maxAttempts, AttemptTimeout: attemptTimeout,
				Delay: delay, NotBefore: notBefore, UniqueFor: uniqueFor, Debounce: debounce, ConcurrencyKey: concurrencyKey,
			}
			if requires != "" {
				o, err := plane.ParseOffers("--requires", requires)
				if err != nil {
					return usageError(err)
				}
				opts.Requirement = (*lakeshore.Requirement)(o)
			}
			opts.Mode = mode // lakeshore.yaml's mode: run declaration, requirement, code (docs/fabric.md)
			opts.Function = function
			res, err := q.SubmitManyResults(submitCtx, []lakeshore.Submission{{Payload: payload, SubmitOptions: *opts}})
			if err != nil {
				return withFlag(err, submitFlags)
			}
			id := res[0].ID
			if res[0].Existing && !a.json {
				// The id printed is the existing job's: say so, on standard error, so that
				// scripts reading the id from standard output are unaffected.
				note := "nothing new was enqueued"
				if debounce > 0 {
					// The answer does not say whether the holder took the payload: a debounced
					// holder still waiting did (the debounce's purpose), any other did not.
					note = fmt.Sprintf("nothing new was enqueued; if it is a debounced job still waiting, it now carries this payload and waits %s from now", debounce)
				}
				fmt.Fprintf(a.stderr, "lakeshore: an existing job holds key %q: its id is printed, %s\n", key, note)
			}
			if !wait {
				if a.json {
					m := map[string]any{"id": id}
					if res[0].Existing {
						m["existing"] = true
					}
					return a.printJSON(m)
				}
				_, err = fmt.Fprintln(a.stdout, id)
				return err
			}
			return a.printResult(c, q, id, timeout)
		},
	}
	f := c.Flags()
	f.StringVarP(&file, "file", "f", "", "read the payload from this file (- for stdin)")
	f.BoolVar(&asString, "string", false, "take the payload text as a plain string, not JSON")
	f.StringVar(&key, "key", "", "idempotency key: the same key returns the existing job")
	f.Float64Var(&priority, "priority", 0, "priority (higher first for priority and boltzmann claims)")
	f.IntVar(&maxAttempts, "max-attempts", 0, "claims before the job fails, 1 to 10000 (default 3)")
	f.DurationVar(&attemptTimeout, "attempt-timeout", 0, "bound one running attempt (default none)")
	f.DurationVar(&debounce, "debounce", 0, "debounce window of --key: the job waits this long, and a resubmit while it waits replaces its payload and restarts the wait (default 0: none)")
	f.StringVar(&concurrencyKey, "concurrency-key", "", "concurrency key (e.g. a tenant): the queue's --concurrency-limit and fair share apply per key (default: none)")
	f.DurationVar(&uniqueFor, "unique-for", 0, "dedup window of --key: within it a resubmit returns the first job, after it a new job takes the key (default 0: held until trimmed)")
	f.DurationVar(&delay, "delay", 0, "not claimable before this long from now, e.g. 5m (plane's clock)")
	f.StringVar(&at, "at", "", "not claimable before this RFC 3339 time, e.g. 2026-12-02T06:00:00Z")
	f.StringVar(&requires, "requires", "", "what the job needs from its worker, e.g. cpus=8,memory=64GiB,gpus=1,gpu_type=a100,label.zone=east: only a worker whose --offers satisfy it takes it (default: the --mode's resources, else none; --requires wins over them)")
	f.StringVar(&mode, "mode", "", "compute mode of the project's lakeshore.yaml: the job carries its run declaration (and its code, uploaded once per digest)")
	f.StringVar(&function, "function", "", "with a --mode that ships code: the Python function a worker imports from that code and calls with the payload's fields as keyword arguments, as module:qualname (e.g. sentiment.model:score; default: the worker's own function for the queue)")
	f.BoolVar(&wait, "wait", false, "wait for the result and print it")
	f.DurationVar(&timeout, "timeout", 0, "how long a submit blocked on a full queue may wait, and with --wait how long to wait for the result (default: no bound on the block, 30s for the result; negative: forever)")
	return c
}

// submitFlags maps the fields of a submit, as the plane's refusal names them (the HTTP and
// Python names), to the flags of `lakeshore submit` that set them.
var submitFlags = map[string]string{
	"key": "--key", "priority": "--priority", "max_attempts": "--max-attempts", "attempt_timeout": "--attempt-timeout",
	"debounce": "--debounce", "unique_for": "--unique-for", "concurrency_key": "--concurrency-key",
}
