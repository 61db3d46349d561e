package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/spf13/cobra"

	"github.com/lakeshore-dev/lakeshore"
	"github.com/lakeshore-dev/lakeshore/plane"
	"github.com/lakeshore-dev/lakeshore/provider"
)

func newWorkerCmd(a *app) *cobra.Command {
	var (
		spec        = execSpec{frames: true}
		o           lakeshore.WorkerOptions
		noFrames    bool
		order       string
		temperature float64
		offers      string
	)
	c := &cobra.Command{
		Use:   "worker QUEUE [QUEUE…] -- COMMAND [ARGS…]",
		Short: "Run COMMAND once per job claimed from QUEUE: a worker in any language",
		Long: `Claim jobs from QUEUE and run COMMAND once per job, up to --concurrency at once:
  - the payload is JSON on stdin; "{}" in ARGS is replaced by the payload when it
    is a string (never inside a shell's -c script or an interpreter's -c/-e code:
    pass it after the code, sh -c '... "$1" ...' _ {});
  - LAKESHORE_JOB_ID, LAKESHORE_QUEUE, LAKESHORE_NAMESPACE and LAKESHORE_ATTEMPT
    are set in its environment;
  - each line it prints on stdout becomes a VALUE frame (JSON when it parses, else
    a string), readable live with 'lakeshore stream ID';
  - exit 0 acks the job with {exit_code, stdout (first --stdout-cap bytes), stderr
    (last --stderr-tail bytes)}; a non-zero exit nacks it (retried while attempts
    remain) with the exit code and the stderr tail;
  - exit --rate-limited-exit CODE (e.g. 75, EX_TEMPFAIL) is the "slow down" answer:
    the job goes back to its queue after --rate-limited-delay (default 1s) without
    consuming an attempt, and its concurrency key is held back as long;
  - PYTHONUNBUFFERED=1 is set (unless already set) so Python prints stream as
    frames at once; other languages should flush each line (see docs/cli.md);
  - when the job is killed, its lease is lost, or --timeout passes, the command's
    process group gets SIGTERM, then SIGKILL after --grace; when the worker itself
    dies (even by SIGKILL), the group gets SIGKILL from a guard process (and, on
    Linux, the command from the kernel).
--offers says what this worker offers (cpus, memory, gpus, gpu_type, label.KEY):
it takes only jobs whose requirement (submit --requires) these
satisfy, and jobs without one; without --offers it takes only jobs without one
(or offers $LAKESHORE_OFFERS, which a provider sets for a worker it launches for a shape).
At start it says on stderr how many queued jobs of its queues need offers it does not
declare, which it leaves to other workers ('lakeshore queues' says which no live worker
can run).
--warm says which host keys (of compute modes) the worker is warm for: their jobs
go first, within a minute of the order.
--order picks the claim order (fifo, filo, priority, boltzmann with --temperature).
SIGINT/SIGTERM drains (running commands finish, nothing new is claimed); a second
signal stops the running commands, and their jobs are retried.`,
		Example: `  lakeshore worker thumbnails -- convert {} -resize 256x256 {}.thumb.png
  lakeshore worker embed --concurrency 4 -- python embed.py
  lakeshore worker train --offers gpus=1,gpu_type=a100,memory=80GiB -- python train.py`,
		Args: func(c *cobra.Command, args []string) error {
			dash := c.ArgsLenAtDash()
			if dash < 1 || dash == len(args) {
				return usagef("usage: lakeshore worker QUEUE [QUEUE…] -- COMMAND [ARGS…]")
			}
			return nil
		},
		RunE: func(c *cobra.Command, args []string) error {
			a.rideOut = true // waits: rides out an outage
			dash := c.ArgsLenAtDash()
			queues, argv := args[:dash], args[dash:]
			spec.argv = argv
			spec.frames = !noFrames
			if spec.rateLimitedExit < 0 || spec.rateLimitedExit > 255 {
				return usageError(plane.Invalid("--rate-limited-exit", spec.rateLimitedExit, "use an exit code from 1 to 255 (0: none)"))
			}
			if c.Flags().Changed("rate-limited-delay") {
				if spec.rateLimitedExit == 0 {
					return usagef("--rate-limited-delay applies with --rate-limited-exit only")
				}
				if d := spec.rateLimitedDelay; d < 0 || d > plane.DelayMax {
					return usageError(plane.Invalid("--rate-limited-delay", d, "use a duration from 0 to 366 days (0: 1s)"))
				}
			}
			if err := spec.checkCommand(); err != nil {
				return err
			}
			d, err := a.openServing(c.Context())
			if err != nil {
				return err
			}
			defer d.Close()
			kind, err := lakeshore.ParseKind(order)
			if err != nil {
				return usageError(plane.Invalid("--order", order, "use fifo, filo, priority or boltzmann"))
			}
			if c.Flags().Changed("temperature") && kind != lakeshore.KindBoltzmann {
				return usagef("--temperature applies to --order boltzmann only")
			}
			field := "--offers"
			if !c.Flags().Changed("offers") && os.Getenv(provider.EnvOffers) != "" {
				offers, field = os.Getenv(provider.EnvOffers), "$"+provider.EnvOffers
			}
			if offers != "" {
				if o.Offers, err = plane.ParseOffers(field, offers); err != nil {
					return usageError(err)
				}
			}
			qo := &lakeshore.QueueOptions{Kind: kind, Temperature: temperature}
			handlers := make([]lakeshore.Handler, len(queues))
			for i, q := range queues {
				handlers[i] = lakeshore.HandlerBinding{Queue: q, QueueOptions: qo, Func: spec.handle}
			}
			o.Logger = a.logger()
			w, err := lakeshore.NewWorker(d, handlers, &o)
			if err != nil {
				return err
			}
			if !o.Once {
				fmt.Fprintf(a.stderr, "lakeshore worker: %v on %v (concurrency %d); Ctrl-C drains, twice stops running jobs\n",
					argv, queues, max(o.Concurrency, 1))
			}
			a.noteNotOffered(c.Context(), d, queues, o.Offers)
			return a.runWorker(c.Context(), w)
		},
	}
	f := c.Flags()
	f.IntVarP(&o.Concurrency, "concurrency", "c", 1, "commands run at once")
	f.BoolVar(&o.Once, "once", false, "handle exactly one job, then exit")
	f.IntVar(&o.MaxJobs, "max-jobs", 0, "exit after this many jobs (0: no limit)")
	f.BoolVar(&o.ExitWhenIdle, "exit-when-idle", false, "exit when the queues are empty and nothing runs (a job held back by its concurrency key counts, and so does one a handler answered \"slow down\"; jobs submitted with a delay, or waiting out a retry backoff, do not)")
	f.DurationVar(&o.LeaseTTL, "lease", lakeshore.LeaseTTLDefault, "lease of each claim, heartbeated every third")
	f.StringVar(&o.ID, "id", "", "worker id in 'lakeshore workers' (default: a new ULID)")
	f.DurationVar(&spec.timeout, "timeout", 0, "per-job timeout: stop the command after this long (0: none)")
	f.DurationVar(&spec.grace, "grace", graceDefault, "time between SIGTERM and SIGKILL when a command is stopped")
	f.IntVar(&spec.stdoutCap, "stdout-cap", stdoutCapDefault, "bytes of stdout kept in the result")
	f.IntVar(&spec.stderrTail, "stderr-tail", stderrTailDefault, "bytes of stderr (the last ones) kept in the result or error")
	f.BoolVar(&noFrames, "no-frames", false, "do not post stdout lines as VALUE frames")
	f.IntVar(&spec.rateLimitedExit, "rate-limited-exit", 0, `exit code meaning "slow down" (e.g. 75): the job goes back after --rate-limited-delay, its attempt kept, its concurrency key held back as long (0: none)`)
	f.DurationVar(&spec.rateLimitedDelay, "rate-limited-delay", time.Second, "with --rate-limited-exit: how long the job and its concurrency key wait (at most 366 days)")
	f.StringVar(&offers, "offers", "", "what this worker offers, e.g. cpus=8,memory=64GiB,gpus=1,gpu_type=a100,label.zone=east: it takes the jobs whose requirement these satisfy (default: none, so only jobs without a requirement)")
	f.StringSliceVar(&o.WarmHostKeys, "warm", nil, "host keys this worker is warm for (comma-separated, 'lakeshore get' shows a job's): their jobs go first, within a minute of the order")
	f.StringVar(&order, "order", "fifo", "claim order: fifo, filo, priority (highest first) or boltzmann (draw ∝ exp(priority/T))")
	f.Float64Var(&temperature, "temperature", lakeshore.TemperatureDefault, "boltzmann temperature T (> 0), with --order boltzmann")
	return c
}

// noteNotOffered says, once at start, how many queued jobs of the worker's queues need
// offers it does not declare (it never takes them: docs/fabric.md), read from the demand
// counters (plane.UnplaceableWork over this worker alone), never on the claim path. A
// plane or token that cannot read the demand leaves the note out.
func (a *app) noteNotOffered(ctx context.Context, d *lakeshore.Dispatch, queues []string, offers *plane.Offers) {
	demand, err := d.Driver().DemandList(ctx, d.Namespace())
	if err != nil {
		return
	}
	for i := range demand {
		demand[i].CapableWorkers = nil // what this worker places, not what any live one does
	}
	self := []plane.WorkerInfo{{Namespace: d.Namespace(), Queues: queues, Offers: offers}}
	for _, u := range plane.UnplaceableWork(demand, self) {
		if !slices.Contains(queues, u.Queue) {
			continue
		}
		job, need := "jobs", "need"
		if u.Queued == 1 {
			job, need = "job", "needs"
		}
		fmt.Fprintf(a.stderr, "lakeshore worker: %d queued %s of %s %s offers this worker does not declare (e.g. %s): it leaves them to a worker started with --offers that satisfy them\n",
			u.Queued, job, u.Queue, need, requirementText(u.Example))
	}
}
