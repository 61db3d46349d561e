package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"time"
)

// A system is one queue under test: Lakeshore (embedded or over HTTP), a peer, or the raw
// SQLite ceiling. open makes a fresh store in env.dir, or reopens the one there (the crash
// workload's second worker process).
type system interface {
	name() string
	// skip returns why the system cannot run on this machine ("" when it can).
	skip() string
	open(ctx context.Context, env *env) (store, error)
	// settings describes, for the report, how the system is configured and which settings
	// differ from its defaults, and why.
	settings(env *env) string
}

// env is what a store is opened with.
type env struct {
	dir       string // directory of this run's files (fresh per run)
	sync      string // SQLite synchronous mode: FULL or NORMAL
	redisAddr string // the harness's redis-server, for asynq
	// leaseTTL is the recovery window every system is given after a worker dies: Lakeshore's
	// lease, River's RescueStuckJobsAfter, goqite's message timeout.
	leaseTTL time.Duration
	// httpURL is the Lakeshore server the lakeshore-http system talks to; empty: it starts
	// its own in this process.
	httpURL string
	// pgAddr is the host:port of the harness's PostgreSQL server, for the PostgreSQL
	// systems; each run gets its own database (runDatabase).
	pgAddr string
}

// hoster is a system whose server the crash workload keeps in the harness process while
// it kills and restarts the worker processes: host starts it and records its address in e.
type hoster interface {
	host(ctx context.Context, e *env) (stop func() error, err error)
}

// store is one open queue of a system.
type store interface {
	// enqueue submits one job, one call, and returns once the system says it is stored.
	enqueue(ctx context.Context, ref jobRef) error
	// enqueueBatch submits refs in one call of the system's batch insert, or returns
	// errNoBatch when the system has none.
	enqueueBatch(ctx context.Context, refs []jobRef) error
	// work starts workers; stop ends them gracefully (every finished handler's completion
	// is stored before it returns).
	work(ctx context.Context, p workParams) (stop func(context.Context) error, err error)
	// pending counts jobs that are not terminal yet (queued, running, retrying).
	pending(ctx context.Context) (int64, error)
	close() error
}

// tracker is a store whose producer can wait for a job's result: the latency workload's
// "enqueue → result readable". wait returns once the job's result can be read by the
// producer.
type tracker interface {
	enqueueTracked(ctx context.Context, ref jobRef) (wait func(context.Context) error, err error)
}

// workParams configure a store's workers.
type workParams struct {
	concurrency int
	// handle is the job's body, called when the handler starts. It must be cheap.
	handle func(ref jobRef)
	// result makes handlers store a small result (the job's seq) for the producer to read.
	result bool
	// track makes the store deliver completions to enqueueTracked's waiters.
	track bool
}

// errNoBatch is returned by enqueueBatch of a system without a batch insert.
var errNoBatch = errors.New("no batch insert")

// jobRef is the payload of every benchmark job: its sequence number and when the producer
// called enqueue (Unix nanoseconds), 16 bytes on the wire.
type jobRef struct {
	Seq        int64
	EnqueuedNS int64
}

func newRef(seq int64) jobRef { return jobRef{Seq: seq, EnqueuedNS: time.Now().UnixNano()} }

func (r jobRef) bytes() []byte {
	b := make([]byte, 16)
	binary.BigEndian.PutUint64(b, uint64(r.Seq))
	binary.BigEndian.PutUint64(b[8:], uint64(r.EnqueuedNS))
	return b
}

func parseRef(b []byte) (jobRef, error) {
	if len(b) != 16 {
		return jobRef{}, fmt.Errorf("payload of %d bytes, want 16", len(b))
	}
	return jobRef{Seq: int64(binary.BigEndian.Uint64(b)), EnqueuedNS: int64(binary.BigEndian.Uint64(b[8:]))}, nil
}

// systems lists every system in report order; Lakeshore embedded comes first because the
// ratio column divides by it.
func systems() []system {
	return []system{
		lakeshoreSystem{},
		lakeshoreHTTPSystem{},
		lakeshoreHTTPProcSystem{},
		riverSystem{},
		lakeshorePGSystem{},
		lakeshorePGServeSystem{replicas: 1},
		lakeshorePGServeSystem{replicas: 3},
		riverPGSystem{},
		goqiteSystem{},
		asynqSystem{},
		rawSQLiteSystem{},
	}
}

// sqliteDSN is the modernc.org/sqlite data source name every peer SQLite system uses: WAL, the
// given synchronous mode, a 10 s busy timeout, the same settings Lakeshore's plane sets.
// Switching a new file to WAL from the connection string is safe here (SQLite does not
// call the busy handler for that switch, so two connections opening a new file at once
// can fail: internal/sqlitedb's Open switches once, with retries): each peer system opens
// its file from one process, on one connection (SetMaxOpenConns(1)).
func sqliteDSN(path, sync string) string {
	return "file:" + path + "?_pragma=busy_timeout(10000)&_pragma=journal_mode(wal)&_pragma=synchronous(" + sync + ")"
}
