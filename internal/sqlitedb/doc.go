// Package sqlitedb is the SQLite stack shared by the embedded stores of this module (the
// dispatch plane in plane/sqliteplane and the data queue's file store): opening a database
// with its pragmas (WAL, synchronous FULL by default, a busy timeout, the writer's journals in memory), a one-connection write
// handle beside a read-only pool, a migrations runner on PRAGMA user_version, a group-commit
// Writer that drains many operations into one transaction (its waiters are woken by
// internal/planekit's Hub), and a CommitWatch that notices commits made
// by other processes (PRAGMA data_version).
//
// It knows nothing of what is stored: callers bring their schema, their statements and the
// per-transaction state their operations share (the Writer's type parameter).
package sqlitedb

// A statement's row bound is written LIMIT +? (a unary plus before the parameter), never
// LIMIT ?: in the SQLite linked here (3.54.1) a LIMIT that is a bare parameter is read at
// prepare time for the planner, and the statement is marked to be prepared again every time
// that parameter is bound, so a cached statement was parsed and planned anew on every
// execution (7% of the server's CPU in a submit → result run, docs/benchmarks-python.md).
// With the plus, the bound is read when the statement runs and the cached plan is kept.
// TestBoundLimitPlanKept checks both behaviours of the SQLite linked here.
