package lakeshore_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/lakeshore-dev/lakeshore"
)

// Open a whole plane inside the process with ":memory:"; "" opens the process default
// ($LAKESHORE_URL, else ~/.lakeshore/lakeshore.db).
func ExampleOpen() {
	ctx := context.Background()
	d, err := lakeshore.Open(ctx, ":memory:", &lakeshore.Config{Namespace: "examples"})
	if err != nil {
		log.Fatal(err)
	}
	defer d.Close()

	q, err := d.Queue("gpu", nil)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(q.Namespace(), q.Name(), q.Kind())

	_, err = lakeshore.Open(ctx, "ftp://example.com", nil)
	fmt.Println(errors.Is(err, lakeshore.ErrInvalid))
	// Output:
	// examples gpu fifo
	// true
}

// Submit a payload, work it, and read its result by id, as another process could.
func ExampleQueue_Submit() {
	ctx := context.Background()
	d, err := lakeshore.Open(ctx, ":memory:", nil)
	if err != nil {
		log.Fatal(err)
	}
	defer d.Close()
	q, err := d.Queue("square", nil)
	if err != nil {
		log.Fatal(err)
	}

	id, err := q.Submit(ctx, map[string]any{"x": 7}, &lakeshore.SubmitOptions{Key: "square/7"})
	if err != nil {
		log.Fatal(err)
	}
	again, err := q.Submit(ctx, map[string]any{"x": 7}, &lakeshore.SubmitOptions{Key: "square/7"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("same id for the same key:", id == again)

	// A worker (usually another process) squares x.
	_, err = q.Working(ctx, func(ctx context.Context, job *lakeshore.Job) (any, error) {
		var in struct {
			X int `msgpack:"x"`
		}
		if err := job.Decode(&in); err != nil {
			return nil, err
		}
		return in.X * in.X, nil
	}, nil)
	if err != nil {
		log.Fatal(err)
	}

	var out int
	if err := q.Result(ctx, id, &out, &lakeshore.ResultOptions{Timeout: 5 * time.Second}); err != nil {
		log.Fatal(err)
	}
	fmt.Println("result:", out)
	// Output:
	// same id for the same key: true
	// result: 49
}

// Call is a one-line RPC: submit, then wait for the result.
func ExampleQueue_Call() {
	ctx := context.Background()
	d, err := lakeshore.Open(ctx, ":memory:", nil)
	if err != nil {
		log.Fatal(err)
	}
	defer d.Close()
	q, err := d.Queue("greet", nil)
	if err != nil {
		log.Fatal(err)
	}

	var wg sync.WaitGroup
	wg.Go(func() { // a worker waiting for one job
		_, err := q.Working(ctx, func(ctx context.Context, job *lakeshore.Job) (any, error) {
			var name string
			if err := job.Decode(&name); err != nil {
				return nil, err
			}
			return "hello, " + name, nil
		}, &lakeshore.WorkingOptions{ClaimOptions: lakeshore.ClaimOptions{Wait: 10 * time.Second}})
		if err != nil {
			log.Print(err)
		}
	})
	defer wg.Wait()

	var answer string
	if _, err := q.Call(ctx, "lakeshore", &answer, &lakeshore.CallOptions{Timeout: 10 * time.Second}); err != nil {
		log.Fatal(err)
	}
	fmt.Println(answer)
	// Output:
	// hello, lakeshore
}

// Stream a job's progress while it runs; END ends the loop, and a failed job's error is the
// last element.
func ExampleQueue_Stream() {
	ctx := context.Background()
	d, err := lakeshore.Open(ctx, ":memory:", nil)
	if err != nil {
		log.Fatal(err)
	}
	defer d.Close()
	q, err := d.Queue("train", nil)
	if err != nil {
		log.Fatal(err)
	}
	id, err := q.Submit(ctx, map[string]any{"epochs": 3}, nil)
	if err != nil {
		log.Fatal(err)
	}

	var wg sync.WaitGroup
	wg.Go(func() { // the worker posts one frame per epoch, then its result
		job, err := q.Claim(ctx, &lakeshore.ClaimOptions{Wait: 10 * time.Second})
		if err != nil || job == nil {
			log.Fatal("claim: ", err)
		}
		for epoch := 1; epoch <= 3; epoch++ {
			if _, err := q.Post(ctx, job, map[string]any{"epoch": epoch, "loss": 1.0 / float64(epoch)}); err != nil {
				log.Fatal(err)
			}
		}
		if _, err := q.PostFinal(ctx, job, "done"); err != nil {
			log.Fatal(err)
		}
	})
	defer wg.Wait()

	for f, err := range q.Stream(ctx, id, lakeshore.FromStart, nil) {
		if err != nil {
			log.Fatal(err)
		}
		var p struct {
			Epoch int     `msgpack:"epoch"`
			Loss  float64 `msgpack:"loss"`
		}
		if err := f.Decode(&p); err != nil {
			log.Fatal(err)
		}
		fmt.Printf("seq %d: epoch %d loss %.2f\n", f.Seq, p.Epoch, p.Loss)
	}
	// Output:
	// seq 0: epoch 1 loss 1.00
	// seq 1: epoch 2 loss 0.50
	// seq 2: epoch 3 loss 0.33
}

// Working claims one job, runs the handler and settles the job: an error or a panic nacks
// it (with retry while attempts remain), a result acks it.
func ExampleQueue_Working() {
	ctx := context.Background()
	d, err := lakeshore.Open(ctx, ":memory:", nil)
	if err != nil {
		log.Fatal(err)
	}
	defer d.Close()
	q, err := d.Queue("upper", nil)
	if err != nil {
		log.Fatal(err)
	}
	good, _ := q.Submit(ctx, "shout", nil)
	bad, _ := q.Submit(ctx, "", &lakeshore.SubmitOptions{MaxAttempts: 1})

	upper := func(ctx context.Context, job *lakeshore.Job) (any, error) {
		var s string
		if err := job.Decode(&s); err != nil {
			return nil, err
		}
		if s == "" {
			panic("empty input")
		}
		return strings.ToUpper(s), nil
	}
	for {
		handled, err := q.Working(ctx, upper, nil)
		if !handled {
			break // the queue is empty
		}
		if err != nil {
			fmt.Println("job failed:", strings.Contains(err.Error(), "panic: empty input"))
		}
	}

	v, err := q.ResultValue(ctx, good, nil)
	fmt.Println(v, err)
	_, err = q.ResultValue(ctx, bad, nil)
	var terr *lakeshore.TerminalError
	if errors.As(err, &terr) {
		fmt.Println(errors.Is(err, lakeshore.ErrFailed), terr.Info.Type)
	}
	// Output:
	// job failed: true
	// SHOUT <nil>
	// true panic
}

// Claim, Ack and Nack are the verbs beneath Working, for custom worker loops. Every settle
// presents the claim's fencing token.
func ExampleQueue_Claim() {
	ctx := context.Background()
	d, err := lakeshore.Open(ctx, ":memory:", nil)
	if err != nil {
		log.Fatal(err)
	}
	defer d.Close()
	q, err := d.Queue("jobs", &lakeshore.QueueOptions{Kind: lakeshore.KindPriority})
	if err != nil {
		log.Fatal(err)
	}
	for i, p := range []float64{1, 5, 3} {
		if _, err := q.Submit(ctx, i, &lakeshore.SubmitOptions{Priority: p}); err != nil {
			log.Fatal(err)
		}
	}

	for {
		job, err := q.Claim(ctx, nil)
		if err != nil {
			log.Fatal(err)
		}
		if job == nil {
			break // nothing claimable
		}
		var i int
		if err := job.Decode(&i); err != nil {
			_ = q.Nack(ctx, job, err, false)
			continue
		}
		fmt.Printf("job %d, priority %g, attempt %d\n", i, job.Priority, job.Attempt)
		if err := q.Ack(ctx, job, i*10); err != nil {
			log.Fatal(err)
		}
	}
	n, _ := q.Count(ctx, lakeshore.StateSucceeded)
	fmt.Println("succeeded:", n)
	// Output:
	// job 1, priority 5, attempt 1
	// job 2, priority 3, attempt 1
	// job 0, priority 1, attempt 1
	// succeeded: 3
}

// A topic is a publish/subscribe channel on the queue's journal machinery. Close appends
// END, which ends every reader's Stream.
func ExampleTopic() {
	ctx := context.Background()
	d, err := lakeshore.Open(ctx, ":memory:", nil)
	if err != nil {
		log.Fatal(err)
	}
	defer d.Close()
	q, err := d.Queue("sweep", nil)
	if err != nil {
		log.Fatal(err)
	}
	t, err := q.Topic("progress")
	if err != nil {
		log.Fatal(err)
	}
	for step := range 3 {
		if _, err := t.Post(ctx, map[string]any{"step": step}); err != nil {
			log.Fatal(err)
		}
	}
	if err := t.Close(ctx); err != nil {
		log.Fatal(err)
	}

	f, ok, err := t.Listen(ctx, 0, nil) // the first value after seq 0
	fmt.Println(f.Seq, f.Value, ok, err)
	for f, err := range t.Stream(ctx, lakeshore.FromStart, nil) {
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(f.Seq, f.Value)
	}

	reply, _ := q.Topic("") // a fresh, auto-named topic
	fmt.Println(strings.HasPrefix(reply.Name(), "topic-"), len(reply.Name()))
	// Output:
	// 1 map[step:1] true <nil>
	// 0 map[step:0]
	// 1 map[step:1]
	// 2 map[step:2]
	// true 32
}

// Run a Worker: Start it, and Stop it (drain) on shutdown. A program maps its signals to
// Stop and StopAndCancel; the Worker installs no signal handler of its own.
func ExampleWorker() {
	ctx := context.Background()
	d, err := lakeshore.Open(ctx, ":memory:", nil)
	if err != nil {
		log.Fatal(err)
	}
	defer d.Close()
	q, err := d.Queue("upper", nil)
	if err != nil {
		log.Fatal(err)
	}

	w, err := lakeshore.NewWorker(d, []lakeshore.Handler{
		lakeshore.Handle("upper", func(ctx context.Context, job *lakeshore.Job) (any, error) {
			var s string
			if err := job.Decode(&s); err != nil {
				return nil, lakeshore.Permanent(err)
			}
			return strings.ToUpper(s), nil
		}),
	}, &lakeshore.WorkerOptions{Concurrency: 4})
	if err != nil {
		log.Fatal(err)
	}
	if err := w.Start(ctx); err != nil {
		log.Fatal(err)
	}

	id, _ := q.Submit(ctx, "hello", nil)
	var out string
	if err := q.Result(ctx, id, &out, nil); err != nil {
		log.Fatal(err)
	}
	fmt.Println(out)

	// On SIGTERM, say: claim nothing more, let running jobs finish, deregister.
	fmt.Println(w.Stop(ctx))
	// Output:
	// HELLO
	// <nil>
}

// A stream's cursor is the Seq of the last frame seen: a reader that stops (or crashes)
// resumes after it with only the invocation id and that number, in any process, and gets
// every later frame once.
func ExampleQueue_Stream_resume() {
	ctx := context.Background()
	d, err := lakeshore.Open(ctx, ":memory:", nil)
	if err != nil {
		log.Fatal(err)
	}
	defer d.Close()
	q, err := d.Queue("generate", nil)
	if err != nil {
		log.Fatal(err)
	}
	id, err := q.Submit(ctx, "a prompt", nil)
	if err != nil {
		log.Fatal(err)
	}
	job, err := q.Claim(ctx, nil)
	if err != nil || job == nil {
		log.Fatal("claim: ", err)
	}
	for _, token := range []string{"the", "quick", "brown", "fox"} {
		if _, err := q.Post(ctx, job, token); err != nil {
			log.Fatal(err)
		}
	}
	if err := q.Ack(ctx, job, "the quick brown fox"); err != nil {
		log.Fatal(err)
	}

	last := lakeshore.FromStart
	for f, err := range q.Stream(ctx, id, last, nil) { // the first reader stops after two frames
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println("first reader:", f.Seq, f.Value)
		last = f.Seq
		if last == 1 {
			break
		}
	}
	for f, err := range q.Stream(ctx, id, last, nil) { // later, elsewhere: id and last are enough
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println("resumed:", f.Seq, f.Value)
	}
	// Output:
	// first reader: 0 the
	// first reader: 1 quick
	// resumed: 2 brown
	// resumed: 3 fox
}

// Cancel takes back a job that has not started; its result then reports ErrCancelled.
// A running or finished job is not cancelled (Kill ends a running one).
func ExampleQueue_Cancel() {
	ctx := context.Background()
	d, err := lakeshore.Open(ctx, ":memory:", nil)
	if err != nil {
		log.Fatal(err)
	}
	defer d.Close()
	q, err := d.Queue("render", nil)
	if err != nil {
		log.Fatal(err)
	}
	id, err := q.Submit(ctx, "frame-1", &lakeshore.SubmitOptions{Delay: time.Hour})
	if err != nil {
		log.Fatal(err)
	}
	cancelled, err := q.Cancel(ctx, id)
	fmt.Println(cancelled, err)
	cancelled, err = q.Cancel(ctx, id) // already terminal: nothing changes
	fmt.Println(cancelled, err)

	err = q.Result(ctx, id, nil, nil)
	fmt.Println(errors.Is(err, lakeshore.ErrCancelled))
	inv, err := q.Get(ctx, id)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(inv.State, inv.Attempt)
	// Output:
	// true <nil>
	// false <nil>
	// true
	// cancelled 0
}

// NewFunc binds a typed function to a queue; RunWorker runs it (a *Func is a Handler) and
// producers Call or Submit it with typed values. An error the body marks Permanent fails the
// job at once; any other error retries it after a backoff while attempts remain.
func ExampleNewFunc() {
	ctx := context.Background()
	d, err := lakeshore.Open(ctx, ":memory:", nil)
	if err != nil {
		log.Fatal(err)
	}
	defer d.Close()

	type Request struct {
		Text  string `msgpack:"text"`
		Times int    `msgpack:"times"`
	}
	repeat, err := lakeshore.NewFunc(d, "repeat", func(ctx context.Context, in Request) (string, error) {
		if in.Times < 0 {
			return "", lakeshore.Permanent(fmt.Errorf("times is %d, want at least 0", in.Times))
		}
		return strings.Repeat(in.Text, in.Times), nil
	}, nil)
	if err != nil {
		log.Fatal(err)
	}

	workerCtx, stopWorker := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { _ = lakeshore.RunWorker(workerCtx, d, []lakeshore.Handler{repeat}, nil) })
	defer wg.Wait()
	defer stopWorker()

	out, _, err := repeat.Call(ctx, Request{Text: "ab", Times: 3}, nil)
	fmt.Println(out, err)

	id, err := repeat.Submit(ctx, Request{Text: "ab", Times: -1}, &lakeshore.SubmitOptions{Key: "bad-request"})
	if err != nil {
		log.Fatal(err)
	}
	_, err = repeat.Result(ctx, id, nil)
	var terr *lakeshore.TerminalError
	if errors.As(err, &terr) {
		fmt.Println(errors.Is(err, lakeshore.ErrFailed), terr.Info.Message)
	}
	again, _ := repeat.Submit(ctx, Request{Text: "ab", Times: 1}, &lakeshore.SubmitOptions{Key: "bad-request"})
	fmt.Println("same key, same invocation:", again == id)
	// Output:
	// ababab <nil>
	// true times is -1, want at least 0
	// same key, same invocation: true
}

// Concurrency keys group a queue's jobs (here by tenant). The queue's admission block
// limits how many of one key run at once, and claims rotate across keys, so one tenant's
// backlog does not starve another.
func ExampleQueue_SetAdmission_concurrencyKeys() {
	ctx := context.Background()
	d, err := lakeshore.Open(ctx, ":memory:", nil)
	if err != nil {
		log.Fatal(err)
	}
	defer d.Close()
	q, err := d.Queue("inference", nil)
	if err != nil {
		log.Fatal(err)
	}
	if err := q.SetAdmission(ctx, lakeshore.Admission{ConcurrencyLimit: 1}); err != nil {
		log.Fatal(err)
	}
	for _, tenant := range []string{"tenant-a", "tenant-a", "tenant-a", "tenant-b"} {
		if _, err := q.Submit(ctx, tenant, &lakeshore.SubmitOptions{ConcurrencyKey: tenant}); err != nil {
			log.Fatal(err)
		}
	}

	jobs, err := q.ClaimMany(ctx, 4, nil) // one job per key: each key is at its limit of 1
	if err != nil {
		log.Fatal(err)
	}
	var claimed []string
	for _, job := range jobs {
		claimed = append(claimed, job.ConcurrencyKey)
	}
	slices.Sort(claimed)
	fmt.Println("claimed:", claimed)

	keys, err := q.ConcurrencyKeys(ctx)
	if err != nil {
		log.Fatal(err)
	}
	slices.SortFunc(keys, func(a, b lakeshore.KeyStats) int { return strings.Compare(a.Key, b.Key) })
	for _, k := range keys {
		fmt.Printf("%s: %d running, %d queued, limit %d\n", k.Key, k.Running, k.Queued, k.Limit)
	}
	// Output:
	// claimed: [tenant-a tenant-b]
	// tenant-a: 1 running, 2 queued, limit 1
	// tenant-b: 1 running, 0 queued, limit 1
}

// A handler that meets a rate limit downstream answers RateLimited: its job goes back to the
// queue, claimable after the wait, without consuming an attempt, and the concurrency key is
// held back as long.
func ExampleRateLimited() {
	ctx := context.Background()
	d, err := lakeshore.Open(ctx, ":memory:", nil)
	if err != nil {
		log.Fatal(err)
	}
	defer d.Close()
	q, err := d.Queue("partner-api", nil)
	if err != nil {
		log.Fatal(err)
	}
	ids, err := q.SubmitMany(ctx, []lakeshore.Submission{
		{Payload: "request 1", SubmitOptions: lakeshore.SubmitOptions{ConcurrencyKey: "partner", MaxAttempts: 1}},
		{Payload: "request 2", SubmitOptions: lakeshore.SubmitOptions{ConcurrencyKey: "partner"}},
	})
	if err != nil {
		log.Fatal(err)
	}

	handled, err := q.Working(ctx, func(ctx context.Context, job *lakeshore.Job) (any, error) {
		return nil, lakeshore.RateLimited(job.ConcurrencyKey, time.Minute) // e.g. the partner answered 429
	}, nil)
	var limited *lakeshore.RateLimitedError
	fmt.Println(handled, errors.As(err, &limited), limited.Key, limited.RetryAfter)

	inv, err := q.Get(ctx, ids[0])
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(inv.State, inv.Attempt, inv.MaxAttempts) // still queued: the attempt was given back

	// The key's other job is claimable, but no claim takes it while the key is held back.
	keys, err := q.ConcurrencyKeys(ctx)
	if err != nil {
		log.Fatal(err)
	}
	for _, k := range keys {
		fmt.Println(k.Key, k.Queued, "queued, held back:", k.RateWait > 50*time.Second)
	}
	job, err := q.Claim(ctx, nil)
	fmt.Println(job, err)
	// Output:
	// true true partner 1m0s
	// queued 0 1
	// partner 1 queued, held back: true
	// <nil> <nil>
}

// A schedule submits its payload to the queue at each tick of a cron expression or an
// interval, once whatever the number of processes; workers run the fires as any job.
func ExampleQueue_Schedule() {
	ctx := context.Background()
	d, err := lakeshore.Open(ctx, ":memory:", nil)
	if err != nil {
		log.Fatal(err)
	}
	defer d.Close()
	q, err := d.Queue("reports", nil)
	if err != nil {
		log.Fatal(err)
	}
	s, err := q.Schedule(ctx, "heartbeat", map[string]any{"report": "liveness"},
		&lakeshore.ScheduleOptions{Every: time.Second, KeepState: true})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(s.Name, s.Queue, s.Every, !s.NextFire.IsZero())

	// One fire, run by a worker that stops after one job (or after a minute without one).
	workerCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	err = lakeshore.RunWorker(workerCtx, d, []lakeshore.Handler{lakeshore.Handle("reports",
		func(ctx context.Context, job *lakeshore.Job) (any, error) {
			tick, err := time.Parse(time.RFC3339, job.Metadata["schedule_tick"])
			if err != nil {
				return nil, lakeshore.Permanent(err)
			}
			fmt.Println("fire of", job.Metadata["schedule"], job.Key == lakeshore.ScheduleKey("heartbeat", tick))
			return nil, nil
		})}, &lakeshore.WorkerOptions{Once: true})
	fmt.Println(err)

	_, err = q.Schedule(ctx, "nightly", nil, &lakeshore.ScheduleOptions{Cron: "every night"})
	fmt.Println(errors.Is(err, lakeshore.ErrInvalid))
	// Output:
	// heartbeat reports 1s true
	// fire of heartbeat true
	// <nil>
	// true
}
