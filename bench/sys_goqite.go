package main

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"time"

	"maragu.dev/goqite"
	"maragu.dev/goqite/jobs"
)

// goqiteSystem is goqite's job runner (maragu.dev/goqite/jobs) on a SQLite file.
type goqiteSystem struct{}

func (goqiteSystem) name() string { return "goqite" }
func (goqiteSystem) skip() string { return "" }

func (goqiteSystem) settings(e *env) string {
	return fmt.Sprintf("modernc.org/sqlite, WAL, synchronous=%s (goqite sets none; SQLite's default is FULL), "+
		"`SetMaxOpenConns(1)` as its README does, the schema of its `schema_sqlite.sql`; `jobs.Create` per job, "+
		"`jobs.CreateTx` for each job of a batch inside one transaction (goqite has no batch call; a transaction "+
		"is how its API groups sends); `jobs.Runner` with Limit = concurrency, PollInterval 10 ms (its README's "+
		"example; default 100 ms), message timeout %s (its default 5 s); no result store, so no "+
		"\"result readable\" latency", e.sync, e.leaseTTL)
}

// goqiteSchema is goqite v0.4.0's schema_sqlite.sql, which its README asks users to apply.
const goqiteSchema = `
create table if not exists goqite (
  id text primary key default ('m_' || lower(hex(randomblob(16)))),
  created text not null default (strftime('%Y-%m-%dT%H:%M:%fZ')),
  updated text not null default (strftime('%Y-%m-%dT%H:%M:%fZ')),
  queue text not null,
  body blob not null,
  timeout text not null default (strftime('%Y-%m-%dT%H:%M:%fZ')),
  received integer not null default 0,
  priority integer not null default 0
) strict;
create trigger if not exists goqite_updated_timestamp after update on goqite begin
  update goqite set updated = strftime('%Y-%m-%dT%H:%M:%fZ') where id = old.id;
end;
create index if not exists goqite_queue_priority_created_idx on goqite (queue, priority desc, created);
`

const goqiteMaxReceive = 3 // goqite's default

func (goqiteSystem) open(ctx context.Context, e *env) (store, error) {
	db, err := sql.Open("sqlite", sqliteDSN(filepath.Join(e.dir, "goqite.db"), e.sync))
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	if _, err := db.ExecContext(ctx, goqiteSchema); err != nil {
		db.Close()
		return nil, fmt.Errorf("goqite schema: %w", err)
	}
	q := goqite.New(goqite.NewOpts{DB: db, Name: "bench", Timeout: e.leaseTTL, MaxReceive: goqiteMaxReceive})
	return &goqiteStore{db: db, q: q}, nil
}

type goqiteStore struct {
	db *sql.DB
	q  *goqite.Queue
}

func (s *goqiteStore) enqueue(ctx context.Context, ref jobRef) error {
	_, err := jobs.Create(ctx, s.q, "bench", goqite.Message{Body: ref.bytes()})
	return err
}

func (s *goqiteStore) enqueueBatch(ctx context.Context, refs []jobRef) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	for _, r := range refs {
		if _, err := jobs.CreateTx(ctx, tx, s.q, "bench", goqite.Message{Body: r.bytes()}); err != nil {
			return err
		}
	}
	return tx.Commit()
}

func (s *goqiteStore) work(ctx context.Context, p workParams) (func(context.Context) error, error) {
	r := jobs.NewRunner(jobs.NewRunnerOpts{
		Limit:        p.concurrency,
		PollInterval: 10 * time.Millisecond,
		Queue:        s.q,
	})
	r.Register("bench", func(ctx context.Context, m []byte) error {
		ref, err := parseRef(m)
		if err != nil {
			return err
		}
		p.handle(ref)
		return nil
	})
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.Start(ctx)
	}()
	return func(context.Context) error {
		cancel()
		<-done
		return nil
	}, nil
}

func (s *goqiteStore) pending(ctx context.Context) (int64, error) {
	var n int64
	err := s.db.QueryRowContext(ctx, `select count(*) from goqite where queue = 'bench' and received < ?`, goqiteMaxReceive).Scan(&n)
	return n, err
}

func (s *goqiteStore) close() error { return s.db.Close() }
