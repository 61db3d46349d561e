package main

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
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
	pending := func(ctx context.Context, query string) (n int64, err error) {
		err = pool.QueryRow(ctx, query).Scan(&n)
		return n, err
	}
	return openRiver(ctx, e, riverpgxv5.New(pool), pending, func() error { pool.Close(); return nil })
}
