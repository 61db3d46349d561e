package sqliteplane

import (
	"fmt"
	"strings"
	"time"

	"github.com/lakeshore-dev/lakeshore/internal/planekit"
	"github.com/lakeshore-dev/lakeshore/plane"
)

// Batched statements: a batch of acks is one UPDATE … FROM (VALUES …) RETURNING, and the
// jobs a claim starts are one UPDATE … FROM (VALUES …), instead of one statement per
// invocation (each statement costs a crossing of database/sql, a bind of every argument and
// a run of the statement's program, more than its row's B-tree work). A statement of k rows
// is prepared on the writer's connection the first time a batch of k needs it, for k up to
// batchRows; larger batches are cut into statements of batchRows.

// batchRows bounds the rows of one batched statement.
const batchRows = 64

// ackRowsSQL is the ack of k invocations: each row (id, token, result) succeeds its
// invocation only while the token holds a live lease within the attempt timeout, as ackHeld
// does for one. It returns the ids it succeeded; an id it does not return takes the slow
// path, which says why. ?1 is the transaction's clock in Unix milliseconds.
func ackRowsSQL(k int) string {
	// ?2, ?3, … in order: see insertColumns on numbered ones.
	return `UPDATE invocations SET state = 2, result = v.column3, finished_ms = ?1, lease_token = NULL,
		lease_expires_ms = 0, attempt_deadline_ms = 0 FROM (VALUES ` + valuesList(k, "(?, ?, ?)") + `) AS v
		WHERE invocations.id = v.column1 AND invocations.state = 1
		AND invocations.lease_token = v.column2 AND invocations.lease_expires_ms > ?1
		AND (invocations.attempt_deadline_ms = 0 OR invocations.attempt_deadline_ms > ?1)
		RETURNING id, namespace, queue, priority`
}

// runRowsSQL starts a new attempt of k invocations claimed in one transaction: each row
// (seq, token) gets its lease token. ?1 is the lease expiry, ?2 the clock (the start time;
// the attempt deadline is measured from it), ?3 the worker; ?4, ?5, … the rows in order.
// One row (a claim of one job, the common case) is a plain UPDATE: SQLite runs an
// UPDATE … FROM through a temporary table (12.6 against 10.0 µs a start, docs/benchmarks.md).
func runRowsSQL(k int) string {
	set := `UPDATE invocations SET state = 1, attempt = attempt + 1, lease_expires_ms = ?1,
		attempt_deadline_ms = CASE WHEN attempt_timeout_ms > 0 THEN ?2 + attempt_timeout_ms ELSE 0 END,
		started_ms = ?2, worker = ?3, lease_token = `
	if k == 1 {
		return set + `?5 WHERE seq = ?4`
	}
	return set + `v.column2 FROM (VALUES ` + valuesList(k, "(?, ?)") + `) AS v WHERE invocations.seq = v.column1`
}

// valuesList is k copies of row, comma-separated.
func valuesList(k int, row string) string { return strings.Repeat(row+", ", k-1) + row }

// ackMany succeeds, in batched statements, the invocations params[i] for i in which (acks
// of distinct ids), and marks done[i] for each it succeeded.
func (t *wtx) ackMany(params []plane.SettleParams, which []int, done []bool) error {
	byID := make(map[string]int, len(which))
	args := make([]any, 0, 1+3*min(len(which), batchRows))
	for len(which) > 0 {
		k := min(len(which), batchRows)
		stmt, err := t.w.st.prepared.Sized(t.ctx, t.w.conn, t.w.st.ackRows[:], k, ackRowsSQL)
		if err != nil {
			return err
		}
		args = append(args[:0], t.ms)
		clear(byID)
		for _, i := range which[:k] {
			p := &params[i]
			args = append(args, p.ID, p.Token, planekit.Result(p))
			byID[p.ID] = i
		}
		rs, err := stmt.QueryContext(t.ctx, args...)
		if err != nil {
			return fmt.Errorf("ack: %w", err)
		}
		for rs.Next() {
			var id, ns, q string
			var priority float64
			if err := rs.Scan(&id, &ns, &q, &priority); err != nil {
				rs.Close()
				return fmt.Errorf("ack: %w", err)
			}
			done[byID[id]] = true
			t.finished(id, ns, q, priority, planekit.StateRunning, planekit.StateSucceeded)
		}
		rs.Close()
		if err := rs.Err(); err != nil {
			return fmt.Errorf("ack: %w", err)
		}
		which = which[k:]
	}
	return nil
}

// settleMany settles params in order into out (the callers' errors: ErrLeaseLost,
// ErrNotFound); it returns a SQL failure. Acks of ids that appear once in params go in
// batched statements first (planekit.BatchableAcks: their order does not matter); the rest,
// and any ack the batch did not take (a stale token, an expired lease), go one by one, as do
// scoped settles: their scope is checked on the row read for them (settle).
func (t *wtx) settleMany(params []plane.SettleParams, out []error) error {
	done := make([]bool, len(params))
	if which := planekit.BatchableAcks(params); which != nil {
		if err := t.ackMany(params, which, done); err != nil {
			return err
		}
	}
	for i := range params {
		out[i] = nil
		if done[i] {
			continue
		}
		var err error
		if out[i], err = t.settle(&params[i]); err != nil {
			return err
		}
	}
	return nil
}

// run is a job a claim started whose row is written by runPending.
type run struct {
	seq   int64
	token string
}

// runPending writes the rows of the jobs the claim started since the last call, in batched
// statements: lease expiring at expiresMS, held by worker.
func (t *wtx) runPending(lease time.Duration, worker string) error {
	args := make([]any, 0, 3+2*min(len(t.runs), batchRows))
	for len(t.runs) > 0 {
		k := min(len(t.runs), batchRows)
		stmt, err := t.w.st.prepared.Sized(t.ctx, t.w.conn, t.w.st.runRows[:], k, runRowsSQL)
		if err != nil {
			return err
		}
		args = append(args[:0], t.ms+lease.Milliseconds(), t.ms, worker)
		for _, r := range t.runs[:k] {
			args = append(args, r.seq, r.token)
		}
		if _, err := stmt.ExecContext(t.ctx, args...); err != nil {
			return fmt.Errorf("claim: %w", err)
		}
		t.runs = t.runs[k:]
	}
	t.runs = nil
	return nil
}
