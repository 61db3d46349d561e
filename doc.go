/*
Package lakeshore is the Go SDK of Lakeshore's dispatch plane, a durable job queue for ML
work: producers submit payloads to named queues and get back string ids, workers claim jobs
under fenced leases and settle them, and anyone holding an id can wait for its result or
stream its progress, from any process, later.

The SDK is a thin, typed layer over a [plane.Driver]: every call goes to the plane (the
embedded SQLite database by default), and the SDK keeps no state of its own, so any number
of processes may share one plane. The behaviour behind each verb — lifecycle, retries,
leases, fencing, claim orders, journals — is the project's semantics contract
(docs/semantics.md), enforced for every plane by the conformance suite in
plane/planetest. This page shows how a Go program uses it.

# Opening a plane

[Open] connects to a plane named by a target string and returns a [*Dispatch]:

	d, err := lakeshore.Open(ctx, "", nil) // $LAKESHORE_URL, else ~/.lakeshore/lakeshore.db
	if err != nil {
		return err
	}
	defer d.Close()

The target "" is the process default: $LAKESHORE_URL when set, else the SQLite file
$LAKESHORE_HOME/lakeshore.db ($LAKESHORE_HOME defaults to ~/.lakeshore, created with mode
0700). ":memory:" is a whole plane inside the process, for tests and examples; a file path
or sqlite://path opens that SQLite file, which several processes may share. http(s)://
connects to a `lakeshore serve` server (the HTTP plane, with the same semantics; Open does
not contact it, and reads, waits and submits ride out a server that is down or restarting
for up to 30 s (or until ctx's deadline) before they fail with [ErrUnavailable]: set
Config.HTTP's Unreachable to fail sooner on a server that refuses connections);
postgres:// (or postgresql://) opens the PostgreSQL plane in that database, for many
servers and workers on many machines: its schema is migrated on first use, and
[Config].Postgres or the URL's parameters (schema, poll_only, …; see pgplane.ParseURL)
configure it. [New] wraps a driver opened by hand, e.g. pgplane.New on a pool the
application already has (ExampleNew_postgres). [Config] sets the namespace (default
$LAKESHORE_NAMESPACE, else "default"), the logger, and the options of the SQLite, HTTP and
PostgreSQL planes.

# Queues

A queue needs no creation: [Dispatch.Queue] returns a cheap handle. [QueueOptions] choose the
order in which that handle claims — [KindFIFO] (default), [KindFILO], [KindPriority] or
[KindBoltzmann] with a temperature — and the lease of its claims. The order belongs to the
claiming handle, not to the queue: a submit only attaches a priority.

	q, err := d.Queue("gpu", &lakeshore.QueueOptions{Kind: lakeshore.KindPriority})

# Submitting and waiting for results

[Queue.Submit] encodes a payload with the wire codec (msgpack with ndarray, tensor, image,
tuple and thunk extensions; see package wire) and returns the invocation id, a ULID string
that is the whole handle. [SubmitOptions] are the envelope: an idempotency key (the same key
returns the same id), a priority, max attempts (default 3), a per-attempt timeout, a
deadline and metadata. [Queue.SubmitMany] submits a batch in one transaction.

	id, err := q.Submit(ctx, map[string]any{"prompt": "hello"}, &lakeshore.SubmitOptions{Key: "hello-1"})
	var answer string
	err = q.Result(ctx, id, &answer, nil) // waits up to 30 s by default

[Queue.Result] waits (by notification, not polling) until the invocation is terminal and
decodes the result into a pointer; [Queue.ResultValue] returns it in the codec's generic
form. [Queue.Call] and [Queue.CallValue] submit and wait in one call. [Queue.Get] reads an
invocation's state, attempt number (Attempt), timestamps and error; [Queue.Cancel] and [Queue.Kill] stop a
queued or running one; [Queue.Count] and [Queue.Len] count invocations by state;
[Queue.Trim] deletes old terminal ones.

An idempotency key holds until its invocation is trimmed (terminal invocations are kept 7
days by default), whatever its state: a resubmit after a failure returns the failed id.
SubmitOptions UniqueFor bounds that window and Debounce makes the last of a burst win
(docs/semantics.md, "Dedup windows"). A handler's error nacks its job with retry: it is
claimable again after a backoff (exponential from 1 s, capped at 5 min) while
Attempt < MaxAttempts, and then ends failed; [Permanent] fails it at once.

# Streaming

A worker may post values to its job's journal while it runs; [Queue.Stream] returns them
as a range-over-func iterator of [Frame] values, live:

	for f, err := range q.Stream(ctx, id, lakeshore.FromStart, nil) {
		if err != nil {
			return err // the job's *TerminalError, ErrTimeout after 30 s of silence, …
		}
		fmt.Println(f.Seq, f.Value)
	}

The job's END frame ends the loop cleanly. The since argument is a cursor: [FromStart] (-1)
reads everything, and the Seq of the last frame seen resumes after it with nothing lost or
repeated, from any process.

# Workers

[Queue.Working] is the common worker step: it claims one job, runs a [HandlerFunc],
heartbeats the lease meanwhile, acks the returned result, and nacks with retry on an error
or a panic (recovered into a [*PanicError]). It reports whether there was a job:

	for {
		handled, err := q.Working(ctx, func(ctx context.Context, job *lakeshore.Job) (any, error) {
			var in Request
			if err := job.Decode(&in); err != nil {
				return nil, lakeshore.Permanent(err) // do not retry
			}
			return handle(ctx, in)
		}, &lakeshore.WorkingOptions{ClaimOptions: lakeshore.ClaimOptions{Wait: time.Minute}})
		if !handled && err != nil {
			return err
		}
	}

Custom loops use the verbs beneath it: [Queue.Claim] and [Queue.ClaimMany] return [*Job]
values carrying the lease's fencing token; [Queue.Ack], [Queue.Nack], [Queue.Heartbeat],
[Queue.Post] and [Queue.PostFinal] present it, so a worker whose lease expired and whose
job was claimed again (or killed) gets [ErrLeaseLost] and cannot clobber the new attempt.

# Topics

[Queue.Topic] returns a publish/subscribe channel: the same journal as a job's stream,
without a job. [Topic.Post] appends a value, [Topic.Close] appends END, [Topic.Listen] waits
for the next value after a cursor (5 s by default) and [Topic.Stream] iterates values until
END. An empty name makes a fresh topic named "topic-<ULID>", e.g. for replies.

# Workers and functions

[Worker] is the worker loop for real deployments. [NewWorker] binds it to the queues of its
[Handler] values; [Worker.Start] claims in batches, runs up to a concurrency limit of handlers
at once, heartbeats their leases from one goroutine, cancels a handler whose job was killed or
whose lease was lost, and acks results and nacks errors, panics and runtime.Goexit (with
retry). [Worker.Stop] drains it (nothing new is claimed; running handlers finish and settle)
and [Worker.StopAndCancel] cancels the running handlers; a program maps its signals to them
(the lakeshore command does: the first SIGINT/SIGTERM drains, the second cancels). Its
[WorkerOptions] include Once (exactly one job, for tests), a job limit and exit-when-idle; it
registers itself so [Dispatch.Workers] and `lakeshore workers` list it. [RunWorker] runs one
until it stops on its own or ctx ends. [Queue.Working] runs one job through the same
execution path.

	w, _ := lakeshore.NewWorker(d, []lakeshore.Handler{lakeshore.Handle("gpu", handle)}, nil)
	_ = w.Start(ctx)
	<-shutdown            // e.g. a signal, caught by the program
	_ = w.Stop(ctx)       // drain

# Listing and administration

[Queue.List] pages through a queue's invocations (newest or oldest first, by state and key
prefix, with a cursor); [Dispatch.QueueStats] counts every queue by state; [Dispatch.Workers]
lists live workers. [Dispatch.Admin] returns the [Admin] handle: access tokens
([Admin.CreateToken] needs explicit namespace and queue globs), trims across queues and
maintenance passes. A submit with [SubmitOptions] Delay or NotBefore is queued at once but
claimable only from its due time, by the plane's clock.

# Typed functions

[NewFunc] binds a typed Go function to a queue (the Go form of a @udf decorator): producers
get typed Submit, Call and Result from the same value, and RunWorker runs it. [NewStreamFunc]
binds a body that emits values as it goes, each a VALUE frame readable live with Stream.

	upper, _ := lakeshore.NewFunc(d, "upper", func(ctx context.Context, s string) (string, error) {
		return strings.ToUpper(s), nil
	}, nil)
	go lakeshore.RunWorker(ctx, d, []lakeshore.Handler{upper}, nil) // a *Func is a Handler
	out, id, err := upper.Call(ctx, "hello", nil) // out == "HELLO"; id names the invocation

# File scopes

File bytes never ride the wire: jobs pass storage keys. Package
github.com/lakeshore-dev/lakeshore/scope opens a prefix of a blob store (gocloud.dev/blob; by
default file://$LAKESHORE_HOME/blobs, mem:// for tests) with Read, Write (returning the key),
List and Delete; a key that tries to escape the prefix is refused. It is a package of its own
so that this one does not link the blob drivers (nor gRPC and OpenTelemetry through them).

# Admission

A queue may carry an [Admission] block, stored in the plane so it binds every process:
a maximum depth with a policy when full ([OnFullReject] or [OnFullBlock], which waits for
room within the submit's ctx), a rate limit, and a deadline cutoff. [Queue.SetAdmission],
[Queue.Admission] and [Queue.ClearAdmission] manage it; a refused submit returns an
[*AdmissionError] matching [ErrQueueFull] or [ErrRateLimited].

The same block limits concurrency keys, which act at claim, not at submit. A submit's
SubmitOptions ConcurrencyKey groups it (a tenant, a user, a model); ConcurrencyLimit bounds
how many invocations of one key run at once, KeyWeights shares claims among keys (round-robin
by default), and KeyRateLimit bounds the starts per second of each key. A handler that meets
a rate limit downstream returns [RateLimited](key, retryAfter): its job goes back to the
queue without consuming an attempt and the key is held back for as long.
[Queue.ConcurrencyKeys] shows each key with jobs claimable or running, or held back by such
an answer: its counts, limit and rate wait
(docs/semantics.md, "Concurrency keys and fair share", "Rate limits per key").

	err := q.SetAdmission(ctx, lakeshore.Admission{ConcurrencyLimit: 2, KeyRateLimit: 10})
	id, err := q.Submit(ctx, payload, &lakeshore.SubmitOptions{ConcurrencyKey: "tenant-a"})

# Schedules

[Queue.Schedule] stores a durable schedule: at each tick of a cron expression or an interval
the plane submits the payload to the queue once, whatever the number of processes and
restarts (the key [ScheduleKey](name, tick) makes each tick one invocation, with metadata
"schedule" and "schedule_tick"). Declaring it again at each start with KeepState keeps its
paused flag and, while the rule is unchanged, its next fire. Workers of the queue run the fires as any job; [Dispatch.Schedules] lists a
namespace's schedules, [Dispatch.PauseSchedule] and [Dispatch.RemoveSchedule] manage them
(docs/semantics.md, "Schedules").

	_, err := q.Schedule(ctx, "nightly", map[string]any{"report": "daily"},
		&lakeshore.ScheduleOptions{Cron: "0 3 * * *", TimeZone: "Europe/Paris", KeepState: true})

# Errors

Every error matches a sentinel through errors.Is: [ErrNotFound], [ErrTimeout] (the caller's
wait ended; nothing changed), [ErrFailed], [ErrCancelled] and [ErrTimedOut] (how a job
ended; the [*TerminalError] carries its [ErrorInfo]), [ErrLeaseLost], [ErrJournalClosed],
[ErrQueueFull], [ErrRateLimited], [ErrInvalid] (an [*InvalidError] says which argument and
what is allowed; nothing was written), [ErrClosed], [ErrNotImplemented], [ErrUnavailable] (a server or database could not be
reached), [ErrUnauthorized] and [ErrForbidden] (a server refused the token), [ErrChanged] and
[ErrLimitExceeded]. They are the sentinels of package plane, re-exported, and keep their
identity across the HTTP wire.

# Time and units

Durations are time.Duration; a zero option means its documented default, and a negative
wait means "until ctx ends". Every call that blocks takes a context first; a wait with no
option and no ctx deadline gets the documented default (30 s for results and job streams,
5 s for topics).
*/
package lakeshore
