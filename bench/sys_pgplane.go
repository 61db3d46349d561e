package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	"github.com/lakeshore-dev/lakeshore"
	"github.com/lakeshore-dev/lakeshore/plane/pgplane"
)

// postgresSystem is a system that runs on the harness's PostgreSQL server.
type postgresSystem interface {
	usesPostgres()
}

// lakeshorePGSystem is Lakeshore's SDK on the PostgreSQL plane (pgplane) embedded in the
// process, opened with lakeshore.Open("postgres://…").
type lakeshorePGSystem struct{}

func (lakeshorePGSystem) name() string  { return "lakeshore-pg" }
func (lakeshorePGSystem) skip() string  { return "" }
func (lakeshorePGSystem) usesPostgres() {}

func (lakeshorePGSystem) settings(e *env) string {
	return fmt.Sprintf("SDK as `lakeshore` (same handlers and worker loop) on `lakeshore.Open(\"postgres://…\")`: the "+
		"PostgreSQL plane embedded in the process, pgxpool of 8 connections (its default), group commit of "+
		"concurrent submits, claims and settles; the harness's PostgreSQL 15 with fsync=on, synchronous_commit=on; "+
		"queue lease %s", e.leaseTTL)
}

func (lakeshorePGSystem) open(ctx context.Context, e *env) (store, error) {
	url, err := runDatabase(ctx, e)
	if err != nil {
		return nil, err
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	d, err := lakeshore.Open(ctx, url, &lakeshore.Config{Logger: logger, Postgres: &pgplane.Config{Logger: logger}})
	if err != nil {
		return nil, err
	}
	return newLakeshoreStore(d, e)
}
