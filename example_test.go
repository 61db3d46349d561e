package lakeshore_test

import (
	"context"
	"errors"
	"fmt"
	"log"
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
