// Quickstart runs a small job queue on the embedded default plane ($LAKESHORE_HOME, default
// ~/.lakeshore): it submits jobs with idempotency keys, works them with a few workers that
// stream progress frames, reads every result back by id, and prints a summary.
//
//	go run ./examples/quickstart
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/lakeshore-dev/lakeshore"
)

func main() {
	if err := run(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, "quickstart:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context) error {
	start := time.Now()
	d, err := lakeshore.Open(ctx, "", nil)
	if err != nil {
		return err
	}
	defer d.Close()
	q, err := d.Queue("quickstart", nil)
	if err != nil {
		return err
	}
	words := strings.Fields("the quick brown fox jumps over the lazy dog while lakeshore keeps every job durable")
	const jobs = 1000
	ids := make([]string, jobs)
	run := time.Now().Format("20060102-150405.000")
	for i := range ids {
		payload := map[string]any{"word": words[i%len(words)], "n": i}
		if ids[i], err = q.Submit(ctx, payload, &lakeshore.SubmitOptions{Key: fmt.Sprintf("%s/%d", run, i)}); err != nil {
			return err
		}
	}
	// Four workers: each job posts one progress frame, then returns the upper-cased word.
	workCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				handled, err := q.Working(workCtx, func(ctx context.Context, job *lakeshore.Job) (any, error) {
					var p struct {
						Word string `msgpack:"word"`
						N    int    `msgpack:"n"`
					}
					if err := job.Decode(&p); err != nil {
						return nil, err
					}
					if _, err := q.Post(ctx, job, fmt.Sprintf("working on %d", p.N)); err != nil {
						return nil, err
					}
					return strings.ToUpper(p.Word), nil
				}, &lakeshore.WorkingOptions{ClaimOptions: lakeshore.ClaimOptions{Wait: 200 * time.Millisecond}})
				if workCtx.Err() != nil {
					return
				}
				if err != nil && !errors.Is(err, context.Canceled) {
					fmt.Fprintln(os.Stderr, "worker:", err)
				}
				_ = handled
			}
		}()
	}
	succeeded := 0
	for i, id := range ids {
		var word string
		if err := q.Result(ctx, id, &word, nil); err != nil {
			stop()
			wg.Wait()
			return fmt.Errorf("result of job %d: %w", i, err)
		}
		if word == strings.ToUpper(words[i%len(words)]) {
			succeeded++
		}
	}
	stop()
	wg.Wait()
	var frames []string
	for f, err := range q.Stream(ctx, ids[0], lakeshore.FromStart, nil) {
		if err != nil {
			return err
		}
		frames = append(frames, fmt.Sprint(f.Value))
	}
	wall := time.Since(start)
	fmt.Printf("jobs: %d  succeeded: %d  failed: %d  wall: %s  jobs/s: %.0f\n",
		jobs, succeeded, jobs-succeeded, wall.Round(time.Millisecond), float64(jobs)/wall.Seconds())
	fmt.Printf("first job %s streamed %q\n", ids[0], frames)
	if succeeded != jobs {
		return fmt.Errorf("%d jobs did not return the expected result", jobs-succeeded)
	}
	return nil
}
