package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver"
	"github.com/riverqueue/river/riverdriver/riversqlite"
	"github.com/riverqueue/river/rivermigrate"
)

// riverSystem is River with its SQLite driver (riversqlite) on the same SQLite library.
type riverSystem struct{}

func (riverSystem) name() string { return "river" }
func (riverSystem) skip() string { return "" }

func (riverSystem) settings(e *env) string {
	return fmt.Sprintf("riversqlite on modernc.org/sqlite, WAL, synchronous=%s, `SetMaxOpenConns(1)` as the "+
		"riversqlite package doc advises; `Client.Insert` per job, `InsertManyFast` for batches; workers: "+
		"`QueueConfig.MaxWorkers` = concurrency, FetchCooldown 2 ms and FetchPollInterval 20 ms (River's own "+
		"riverbench values for throughput; defaults 100 ms and 1 s), RescueStuckJobsAfter %s and JobTimeout %s "+
		"(defaults 1 h and 1 min; the crash workload's common recovery window; the rescuer's 30 s interval is "+
		"not configurable); results via `river.RecordOutput` (latency workload only), completions read from "+
		"`Client.SubscribeConfig`", e.sync, e.leaseTTL, riverJobTimeout(e))
}

func riverJobTimeout(e *env) time.Duration { return e.leaseTTL / 2 }

type riverArgs struct {
	Seq int64 `json:"s"`
	T   int64 `json:"t"`
}

func (riverArgs) Kind() string { return "bench" }

func (riverSystem) open(ctx context.Context, e *env) (store, error) {
	db, err := sql.Open("sqlite", sqliteDSN(filepath.Join(e.dir, "river.db"), e.sync))
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1)
	pending := func(ctx context.Context, query string) (n int64, err error) {
		err = db.QueryRowContext(ctx, query).Scan(&n)
		return n, err
	}
	return openRiver(ctx, e, riversqlite.New(db), pending, db.Close)
}

// openRiver migrates River's schema through drv and makes the store's insert-only client,
// for every River system (riversqlite, riverpgxv5); pending counts a query's one row on the
// driver's database, closeDB closes it (also here, on an error).
func openRiver[TTx any](ctx context.Context, e *env, drv riverdriver.Driver[TTx],
	pending func(ctx context.Context, query string) (int64, error), closeDB func() error) (store, error) {
	m, err := rivermigrate.New(drv, nil)
	if err != nil {
		closeDB()
		return nil, err
	}
	if _, err := m.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		closeDB()
		return nil, fmt.Errorf("river migrate: %w", err)
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	ins, err := river.NewClient(drv, &river.Config{Logger: logger})
	if err != nil {
		closeDB()
		return nil, err
	}
	s := &riverStore[TTx]{drv: drv, count: pending, closeDB: closeDB, env: e, logger: logger, ins: ins,
		waiters: map[int64]chan struct{}{}}
	s.active = ins
	return s, nil
}

// riverStore is a River system's store on any of River's drivers (TTx: the driver's
// transaction): the same inserts, workers and completion waits for riversqlite and
// riverpgxv5; only the database behind drv (count, closeDB) differs.
type riverStore[TTx any] struct {
	drv     riverdriver.Driver[TTx]
	count   func(ctx context.Context, query string) (int64, error) // one count(*) on drv's database
	closeDB func() error
	env     *env
	logger  *slog.Logger
	ins     *river.Client[TTx] // insert-only client

	mu      sync.Mutex
	active  *river.Client[TTx] // the working client while workers run, so inserts wake it
	waiters map[int64]chan struct{}
}

func (s *riverStore[TTx]) client() *river.Client[TTx] {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.active
}

func (s *riverStore[TTx]) enqueue(ctx context.Context, ref jobRef) error {
	_, err := s.client().Insert(ctx, riverArgs{Seq: ref.Seq, T: ref.EnqueuedNS}, nil)
	return err
}

func (s *riverStore[TTx]) enqueueBatch(ctx context.Context, refs []jobRef) error {
	params := make([]river.InsertManyParams, len(refs))
	for i, r := range refs {
		params[i].Args = riverArgs{Seq: r.Seq, T: r.EnqueuedNS}
	}
	_, err := s.client().InsertManyFast(ctx, params)
	return err
}

func (s *riverStore[TTx]) enqueueTracked(ctx context.Context, ref jobRef) (func(context.Context) error, error) {
	done := make(chan struct{})
	s.mu.Lock()
	s.waiters[ref.Seq] = done
	s.mu.Unlock()
	if err := s.enqueue(ctx, ref); err != nil {
		return nil, err
	}
	return func(ctx context.Context) error {
		select {
		case <-done:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}, nil
}

func (s *riverStore[TTx]) work(ctx context.Context, p workParams) (func(context.Context) error, error) {
	workers := river.NewWorkers()
	river.AddWorker(workers, river.WorkFunc(func(ctx context.Context, job *river.Job[riverArgs]) error {
		p.handle(jobRef{Seq: job.Args.Seq, EnqueuedNS: job.Args.T})
		if p.result {
			return river.RecordOutput(ctx, job.Args.Seq)
		}
		return nil
	}))
	c, err := river.NewClient(s.drv, &river.Config{
		FetchCooldown:        2 * time.Millisecond,
		FetchPollInterval:    20 * time.Millisecond,
		JobTimeout:           riverJobTimeout(s.env),
		Logger:               s.logger,
		Queues:               map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: p.concurrency}},
		RescueStuckJobsAfter: s.env.leaseTTL,
		Workers:              workers,
	})
	if err != nil {
		return nil, err
	}
	var events <-chan *river.Event
	cancelSub := func() {}
	if p.track {
		events, cancelSub = c.SubscribeConfig(&river.SubscribeConfig{ChanSize: 100_000,
			Kinds: []river.EventKind{river.EventKindJobCompleted}})
	}
	if err := c.Start(ctx); err != nil {
		cancelSub()
		return nil, err
	}
	s.mu.Lock()
	s.active = c
	s.mu.Unlock()
	subDone := make(chan struct{})
	if events == nil {
		close(subDone)
	} else {
		go func() {
			defer close(subDone)
			for ev := range events { // closed by cancelSub
				s.complete(ev)
			}
		}()
	}
	return func(ctx context.Context) error {
		err := c.Stop(ctx)
		cancelSub()
		<-subDone
		s.mu.Lock()
		s.active = s.ins
		s.mu.Unlock()
		return err
	}, nil
}

// complete wakes the waiter of the job a completion event is about.
func (s *riverStore[TTx]) complete(ev *river.Event) {
	var a riverArgs
	if json.Unmarshal(ev.Job.EncodedArgs, &a) != nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if w, ok := s.waiters[a.Seq]; ok {
		close(w)
		delete(s.waiters, a.Seq)
	}
}

func (s *riverStore[TTx]) pending(ctx context.Context) (int64, error) {
	return s.count(ctx, `SELECT count(*) FROM river_job WHERE state NOT IN ('completed', 'cancelled', 'discarded')`)
}

func (s *riverStore[TTx]) close() error { return s.closeDB() }
