package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/lakeshore-dev/lakeshore"
	"github.com/lakeshore-dev/lakeshore/plane/sqliteplane"
)

// lakeshoreSystem is Lakeshore's SDK on the embedded SQLite plane.
type lakeshoreSystem struct{}

func (lakeshoreSystem) name() string { return "lakeshore" }
func (lakeshoreSystem) skip() string { return "" }

func (lakeshoreSystem) settings(e *env) string {
	return fmt.Sprintf("SDK (`lakeshore.Open` on a file, `Queue.Submit`/`SubmitMany`, workers are one `lakeshore.Worker` "+
		"at concurrency N, the SDK's worker runtime, which at N = 1 acks a job and claims the next in one commit); SQLite plane with synchronous=%s (its default is FULL), WAL; "+
		"queue lease %s instead of the default 30 s (the common recovery window of the crash workload)", e.sync, e.leaseTTL)
}

func (lakeshoreSystem) open(ctx context.Context, e *env) (store, error) {
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	d, err := lakeshore.Open(ctx, filepath.Join(e.dir, "lakeshore.db"), &lakeshore.Config{
		Logger: logger,
		SQLite: &sqliteplane.Config{Synchronous: e.sync, Logger: logger},
	})
	if err != nil {
		return nil, err
	}
	return newLakeshoreStore(d, e)
}

func newLakeshoreStore(d *lakeshore.Dispatch, e *env) (*lakeshoreStore, error) {
	q, err := d.Queue("bench", &lakeshore.QueueOptions{LeaseTTL: e.leaseTTL})
	if err != nil {
		d.Close()
		return nil, err
	}
	return &lakeshoreStore{d: d, q: q, leaseTTL: e.leaseTTL,
		logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))}, nil
}

type lakeshoreStore struct {
	d        *lakeshore.Dispatch
	q        *lakeshore.Queue
	leaseTTL time.Duration
	logger   *slog.Logger
}

func (s *lakeshoreStore) enqueue(ctx context.Context, ref jobRef) error {
	_, err := s.q.Submit(ctx, ref.bytes(), nil)
	return err
}

func (s *lakeshoreStore) enqueueBatch(ctx context.Context, refs []jobRef) error {
	batch := make([]lakeshore.Submission, len(refs))
	for i, r := range refs {
		batch[i].Payload = r.bytes()
	}
	_, err := s.q.SubmitMany(ctx, batch)
	return err
}

func (s *lakeshoreStore) enqueueTracked(ctx context.Context, ref jobRef) (func(context.Context) error, error) {
	id, err := s.q.Submit(ctx, ref.bytes(), nil)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context) error {
		var seq int64
		if err := s.q.Result(ctx, id, &seq, &lakeshore.ResultOptions{Timeout: time.Minute}); err != nil {
			return err
		}
		if seq != ref.Seq {
			return fmt.Errorf("result %d, want %d", seq, ref.Seq)
		}
		return nil
	}, nil
}

func (s *lakeshoreStore) work(ctx context.Context, p workParams) (func(context.Context) error, error) {
	ctx, cancel := context.WithCancel(ctx)
	handler := func(ctx context.Context, job *lakeshore.Job) (any, error) {
		var b []byte
		if err := job.Decode(&b); err != nil {
			return nil, lakeshore.Permanent(err)
		}
		ref, err := parseRef(b)
		if err != nil {
			return nil, lakeshore.Permanent(err)
		}
		p.handle(ref)
		if p.result {
			return ref.Seq, nil
		}
		return nil, nil
	}
	// The SDK's worker runtime, as `lakeshore worker` and RunWorker run it: at concurrency
	// 1 it acks each job and claims the next in one commit; wider, it claims in batches.
	w, err := lakeshore.NewWorker(s.d, []lakeshore.Handler{lakeshore.Handle(s.q.Name(), handler)},
		&lakeshore.WorkerOptions{Concurrency: p.concurrency, LeaseTTL: s.leaseTTL, Logger: s.logger})
	if err != nil {
		cancel()
		return nil, err
	}
	if err := w.Start(ctx); err != nil {
		cancel()
		return nil, err
	}
	return func(stopCtx context.Context) error {
		defer cancel()
		if err := w.Stop(stopCtx); err != nil && !errors.Is(err, context.Canceled) {
			return err
		}
		return nil
	}, nil
}

func (s *lakeshoreStore) pending(ctx context.Context) (int64, error) {
	var n int64
	for _, st := range []lakeshore.State{lakeshore.StateQueued, lakeshore.StateRunning} {
		c, err := s.q.Count(ctx, st)
		if err != nil {
			return 0, err
		}
		n += c
	}
	return n, nil
}

func (s *lakeshoreStore) close() error { return s.d.Close() }
