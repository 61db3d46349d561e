package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
)

// riverPGSystem is River on PostgreSQL (riverpgxv5), its home driver, on the harness's
// PostgreSQL server.
type riverPGSystem struct{}

func (riverPGSystem) name() string  { return "river-pg" }
func (riverPGSystem) skip() string  { return "" }
func (riverPGSystem) usesPostgres() {}

func (riverPGSystem) settings(e *env) string {
	return fmt.Sprintf("riverpgxv5 on a pgxpool of 8 connections (as lakeshore-pg), the same PostgreSQL "+
		"(fsync=on, synchronous_commit=on); `Client.Insert` per job, `InsertManyFast` for batches; workers: "+
		"`QueueConfig.MaxWorkers` = concurrency, FetchCooldown 2 ms and FetchPollInterval 20 ms (riverbench's "+
		"values), LISTEN/NOTIFY on; RescueStuckJobsAfter %s, JobTimeout %s; completions read from "+
		"`Client.SubscribeConfig`", e.leaseTTL, riverJobTimeout(e))
}

func (riverPGSystem) open(ctx context.Context, e *env) (store, error) {
	url, err := runDatabase(ctx, e)
	if err != nil {
		return nil, err
	}
	pc, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, err
	}
	pc.MaxConns = 8
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, err
	}
	drv := riverpgxv5.New(pool)
	m, err := rivermigrate.New(drv, nil)
	if err != nil {
		pool.Close()
		return nil, err
	}
	if _, err := m.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		pool.Close()
		return nil, fmt.Errorf("river migrate: %w", err)
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	ins, err := river.NewClient(drv, &river.Config{Logger: logger})
	if err != nil {
		pool.Close()
		return nil, err
	}
	s := &riverPGStore{pool: pool, drv: drv, env: e, logger: logger, ins: ins, waiters: map[int64]chan struct{}{}}
	s.active = ins
	return s, nil
}

type riverPGStore struct {
	pool   *pgxpool.Pool
	drv    *riverpgxv5.Driver
	env    *env
	logger *slog.Logger
	ins    *river.Client[pgx.Tx] // insert-only client

	mu      sync.Mutex
	active  *river.Client[pgx.Tx] // the working client while workers run
	waiters map[int64]chan struct{}
}

func (s *riverPGStore) client() *river.Client[pgx.Tx] {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.active
}

func (s *riverPGStore) enqueue(ctx context.Context, ref jobRef) error {
	_, err := s.client().Insert(ctx, riverArgs{Seq: ref.Seq, T: ref.EnqueuedNS}, nil)
	return err
}

func (s *riverPGStore) enqueueBatch(ctx context.Context, refs []jobRef) error {
	params := make([]river.InsertManyParams, len(refs))
	for i, r := range refs {
		params[i].Args = riverArgs{Seq: r.Seq, T: r.EnqueuedNS}
	}
	_, err := s.client().InsertManyFast(ctx, params)
	return err
}

func (s *riverPGStore) enqueueTracked(ctx context.Context, ref jobRef) (func(context.Context) error, error) {
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

func (s *riverPGStore) work(ctx context.Context, p workParams) (func(context.Context) error, error) {
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
			for ev := range events {
				var a riverArgs
				if json.Unmarshal(ev.Job.EncodedArgs, &a) != nil {
					continue
				}
				s.mu.Lock()
				if w, ok := s.waiters[a.Seq]; ok {
					close(w)
					delete(s.waiters, a.Seq)
				}
				s.mu.Unlock()
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

func (s *riverPGStore) pending(ctx context.Context) (int64, error) {
	var n int64
	err := s.pool.QueryRow(ctx,
		`SELECT count(*) FROM river_job WHERE state NOT IN ('completed', 'cancelled', 'discarded')`).Scan(&n)
	return n, err
}

func (s *riverPGStore) close() error { s.pool.Close(); return nil }
