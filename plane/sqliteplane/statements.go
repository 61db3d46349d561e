package sqliteplane

import (
	"context"
	"database/sql"
	"strings"

	"github.com/lakeshore-dev/lakeshore/internal/planekit"
	"github.com/lakeshore-dev/lakeshore/internal/sqlitedb"
)

// statements are the writer's prepared statements, compiled once on its connection.
type statements struct {
	prepared sqlitedb.Prepared

	rowByID                                  *sql.Stmt
	idsHeld                                  *sql.Stmt
	claimFIFO, claimFILO, claimPriority      *sql.Stmt
	claimLevel, levels, promote, earliestDue *sql.Stmt
	delayedDeadlinesPassed                   *sql.Stmt
	setQueued, setTerminal                   *sql.Stmt
	setLease, nextFrame, endJournal          *sql.Stmt
	insertFrame                              *sql.Stmt
	countAdd, countDelete                    *sql.Stmt
	expiredLeases, attemptsOverdue           *sql.Stmt
	deadlinesPassed, finishedBefore          *sql.Stmt
	holdsEnded                               *sql.Stmt
	deleteInvocation, deleteFrames           *sql.Stmt
	staleTopics, deleteTopic                 *sql.Stmt
	admission, admissionTokens, queuedCount  *sql.Stmt
	paused                                   *sql.Stmt
	ackHeld                                  *sql.Stmt
	keyReady, keyBucket, keyNext, keyHold    *sql.Stmt
	keyHeadLevelFIFO, keyHeadLevelFILO       *sql.Stmt
	keyHeadPriority, keyLevel                *sql.Stmt
	keyReadyHeadFIFO, keyReadyHeadFILO       *sql.Stmt
	keyReadyHeadPriority                     *sql.Stmt
	shapes                                   *sql.Stmt
	shapeHeadFIFO, shapeHeadFILO             *sql.Stmt
	shapeHeadPriority                        *sql.Stmt
	warmPairs                                *sql.Stmt
	warmHeadFIFO, warmHeadFILO               *sql.Stmt
	warmHeadPriority                         *sql.Stmt
	// ackRows[k-1] and runRows[k-1] are the batched statements of k rows (batch.go),
	// prepared the first time a batch of k needs them.
	ackRows, runRows [batchRows]*sql.Stmt
	// insertRows[k] inserts insertChunks[k] invocations in one statement.
	insertRows [len(insertChunks)]*sql.Stmt
}

// insertChunks are the row counts of the multi-row inserts a submit uses, largest first:
// a batch of 1,000 is 15 statements of 64 rows, 4 of 8 and 7 single rows instead of 1,000
// statements (each statement opens and closes cursors on the table and its indexes, and
// crosses database/sql once).
var insertChunks = [...]int{64, 8, 1}

// idsHeldWidth is how many caller's ids one look-up of the ids held reads (wtx.heldIDs).
const idsHeldWidth = 8

// insertColumns are the columns a submit writes. The namespace, queue and creation time
// are the batch's (?1, ?2, ?3, bound once per statement); each row binds insertWidth more,
// with anonymous parameters (numbered in order after ?3): id, key, state, priority,
// payload, metadata, max_attempts, attempt_timeout_ms, deadline_ms, available_ms,
// concurrency_key, shape, requirement, host_key, key_held_until (plane.KeyHeldUntil, NULL
// without a dedup window).
//
// Only the few shared parameters are numbered: the driver asks SQLite for the name of
// every parameter it binds, and SQLite finds a numbered one's name by a linear scan of the
// statement's numbered parameters, so a statement of hundreds of numbered parameters binds
// in time quadratic in their number (measured: half the instructions of a submit).
const (
	insertColumns = `namespace, queue, created_ms, id, key, state, priority, payload, metadata,
		max_attempts, attempt_timeout_ms, deadline_ms, available_ms, concurrency_key, shape, requirement, host_key, key_held_until`
	insertWidth = 15
)

// finishedBeforeSQL is the trim's read: up to ?4 finished invocations (of namespace ?2 and
// queue ?3, ” for all) finished before ?1 and holding no key for a dedup window
// (planekit.KeyNotHeld), through invocations_trimmable, which holds no held row
// (migration 020), so the rows a window keeps past the cutoff are never read.
const finishedBeforeSQL = `SELECT seq, id, namespace, queue, state, priority FROM invocations
	WHERE state >= 2 AND ` + planekit.KeyNotHeld + ` AND finished_ms < ?1 AND (?2 = '' OR namespace = ?2)
	AND (?3 = '' OR queue = ?3) LIMIT +?4`

// insertSQL is the INSERT of n invocations.
func insertSQL(n int) string {
	return "INSERT INTO invocations (" + insertColumns + ") VALUES " + valuesList(n, "(?1, ?2, ?3"+strings.Repeat(", ?", insertWidth)+")")
}

// The concurrency-key statements of a keyed claim (claim.go): the ready key whose turn it
// is, with its bucket, its priority range and whether the queue holds any unkeyed claimable
// row (state 0: the EXISTS is one index probe, of invocations_priority or invocations_queue as
// the planner picks — migration 004 dropped invocations_fifo —, evaluated only when there is a ready key, so a queue without keys pays nothing for it); the head of one priority level of a key, in id
// order (fifo, filo); the head in priority order; the highest priority level below ?4
// among a key's claimable jobs. All read invocations_keyed_priority, the one index of
// claimable keyed jobs since migration 014.
const (
	// readyKeyWhere selects the ready key whose turn it is; unkeyedExists, whether queue
	// (?1, ?2) holds an unkeyed claimable row.
	readyKeyWhere = ` FROM concurrency_keys WHERE namespace = ?1 AND queue = ?2 AND queued > 0 AND running < limit_n
		AND next_ms <= ?3 ORDER BY pass, joined DESC, turn_at LIMIT 1`
	unkeyedExists      = `EXISTS (SELECT 1 FROM invocations WHERE namespace = ?1 AND queue = ?2 AND state = 0)`
	keyReadySQL        = `SELECT concurrency_key, tokens, tokens_ms, priority_low, priority_high, ` + unkeyedExists + readyKeyWhere
	keyHeadPrioritySQL = `SELECT ` + rowColumns + ` FROM invocations WHERE namespace = ?1 AND queue = ?2
		AND concurrency_key = ?3 AND state = -2 ORDER BY priority DESC, id LIMIT 1`
	keyLevelSQL = `SELECT priority FROM invocations WHERE namespace = ?1 AND queue = ?2
		AND concurrency_key = ?3 AND state = -2 AND priority < ?4 ORDER BY priority DESC LIMIT 1`
)

// keyReadyHeadSQL reads the ready key (as keyReadySQL, the same columns after the head's)
// and, in the same statement, the head in order of its claimable jobs: of the one priority
// level ?4 … the key's range, when level (fifo, filo: the statement gives no row when the
// key's jobs lie on several levels), or in priority order. No row: no ready key, or one
// whose head this form does not read.
func keyReadyHeadSQL(order string, level bool) string {
	columns := strings.Split(rowColumns, ",")
	for i, c := range columns {
		columns[i] = "i." + strings.TrimSpace(c)
	}
	head := `SELECT seq FROM invocations WHERE namespace = ?1 AND queue = ?2 AND concurrency_key = k.concurrency_key AND state = -2`
	where := ""
	if level {
		head += ` AND priority = k.priority_low`
		where = ` WHERE k.priority_low = k.priority_high`
	}
	return `SELECT ` + strings.Join(columns, ", ") + `, k.tokens, k.tokens_ms, k.priority_low, k.priority_high, ` + unkeyedExists + `
		FROM (SELECT concurrency_key, tokens, tokens_ms, priority_low, priority_high` + readyKeyWhere + `) AS k
		JOIN invocations AS i ON i.seq = (` + head + ` ORDER BY ` + order + ` LIMIT 1)` + where
}

// keyHeadLevelSQL reads the head, in order (id or id DESC), of a key's claimable jobs of
// priority ?4.
func keyHeadLevelSQL(order string) string {
	return `SELECT ` + rowColumns + ` FROM invocations WHERE namespace = ?1 AND queue = ?2
		AND concurrency_key = ?3 AND state = -2 AND priority = ?4 ORDER BY ` + order + ` LIMIT 1`
}

// shapeHeadSQL reads the head, in order, of a shape's claimable rows (placement.go). It
// names its index: SQLite's planner, without statistics, may otherwise walk
// invocations_queue's state range in id order and filter the shape, reading every row of
// the shapes ahead of it (measured: 49 ms a claim at 100,000 jobs over 100 shapes;
// TestQueryPlans).
func shapeHeadSQL(index, order string) string {
	return `SELECT ` + rowColumns + ` FROM invocations INDEXED BY ` + index + ` WHERE namespace = ?1 AND queue = ?2
			AND shape = ?3 AND state = -3 ORDER BY ` + order + ` LIMIT 1`
}

// warmHeadSQL reads the head, in order, of the claimable rows of a (host key, shape) pair
// (placement.go); it names its index for the reason shapeHeadSQL does, and repeats the
// index's WHERE terms so that SQLite may use it.
func warmHeadSQL(index, order string) string {
	return `SELECT ` + rowColumns + ` FROM invocations INDEXED BY ` + index + ` WHERE namespace = ?1 AND queue = ?2
			AND host_key = ?3 AND shape = ?4 AND host_key <> '' AND state IN (0, -3) AND (state = -3 OR available_ms <= ?5)
			ORDER BY ` + order + ` LIMIT 1`
}

// Row bounds are LIMIT +?N, not LIMIT ?N: internal/sqlitedb (doc.go) says why.
const claimWhere = `FROM invocations WHERE namespace = ?1 AND queue = ?2 AND state = 0 AND available_ms <= ?3`

// prepare prepares the writer's statements on conn, and by their text (for kitTx) those of
// kit a submit or a post runs: the look-ups of its caller's ids and keys, its keys'
// windows, a topic's next seq.
func (s *statements) prepare(ctx context.Context, conn *sql.Conn, kit *planekit.Statements) error {
	for _, query := range []string{kit.IDHolder, kit.KeyHolderID, kit.KeyHolder, kit.DebounceHolder, kit.KeyFree, kit.DebounceFold,
		kit.TopicAppend} {
		if _, err := s.prepared.Prepare(ctx, conn, query); err != nil {
			return err
		}
	}
	holdLimit, holdWeight := planekit.KeyLimitsSQL(`$1`, `$2`, `$3`)
	var err error
	for _, p := range []struct {
		stmt **sql.Stmt
		sql  string
	}{
		{&s.admission, `SELECT ` + planekit.AdmissionColumns + ` FROM queues WHERE namespace = ? AND queue = ?`},
		{&s.paused, `SELECT 1 FROM queue_pauses WHERE namespace = ? AND queue = ?`},
		{&s.admissionTokens, `UPDATE queues SET tokens = ?, tokens_ms = ? WHERE namespace = ? AND queue = ?`},
		{&s.queuedCount, `SELECT COALESCE(SUM(n), 0) FROM counts WHERE namespace = ? AND queue = ? AND state IN (0, -1)`},
		// ackHeld succeeds an invocation only while the token holds a live lease within the
		// attempt timeout; no row back means the slow path must say why.
		{&s.ackHeld, `UPDATE invocations SET state = 2, result = ?1, finished_ms = ?2, lease_token = NULL,
			lease_expires_ms = 0, attempt_deadline_ms = 0
			WHERE id = ?3 AND state = 1 AND lease_token = ?4 AND lease_expires_ms > ?2
			AND (attempt_deadline_ms = 0 OR attempt_deadline_ms > ?2)
			RETURNING namespace, queue, priority`},
		{&s.insertRows[0], insertSQL(insertChunks[0])},
		{&s.insertRows[1], insertSQL(insertChunks[1])},
		{&s.insertRows[2], insertSQL(insertChunks[2])},
		{&s.rowByID, `SELECT seq, ` + planekit.HeadColumns + ` FROM invocations WHERE id = ?`},
		{&s.idsHeld, `SELECT id FROM invocations WHERE id IN (` + valuesList(idsHeldWidth, "?") + `)`},
		{&s.claimFIFO, `SELECT ` + rowColumns + ` ` + claimWhere + ` ORDER BY id LIMIT +?4`},
		{&s.claimFILO, `SELECT ` + rowColumns + ` ` + claimWhere + ` ORDER BY id DESC LIMIT +?4`},
		{&s.claimPriority, `SELECT ` + rowColumns + ` ` + claimWhere + ` ORDER BY priority DESC, id LIMIT +?4`},
		{&s.claimLevel, `SELECT ` + rowColumns + ` ` + claimWhere + ` AND priority = ?4 ORDER BY id LIMIT 1`},
		{&s.levels, `SELECT priority, n FROM counts WHERE namespace = ? AND queue = ? AND state = 0 AND n > 0`},
		// promote makes delayed invocations that are due claimable, earliest first.
		{&s.promote, `UPDATE invocations SET state = 0 WHERE seq IN (SELECT seq FROM invocations
			WHERE state = -1 AND available_ms <= ?1 ORDER BY available_ms LIMIT +?2) RETURNING namespace, queue, priority`},
		{&s.earliestDue, `SELECT min(available_ms) FROM invocations WHERE state = -1`},
		{&s.delayedDeadlinesPassed, `SELECT id FROM invocations WHERE state = -1 AND deadline_ms > 0 AND deadline_ms <= ? LIMIT +?`},
		{&s.setQueued, `UPDATE invocations SET state = ?, available_ms = ?, lease_token = NULL,
			lease_expires_ms = 0, attempt_deadline_ms = 0, error = ?, attempt = attempt - ? WHERE seq = ?`},
		{&s.setTerminal, `UPDATE invocations SET state = ?, result = ?, error = ?, finished_ms = ?,
			lease_token = NULL, lease_expires_ms = 0, attempt_deadline_ms = 0 WHERE seq = ?`},
		{&s.setLease, `UPDATE invocations SET lease_expires_ms = ? WHERE seq = ?`},
		{&s.nextFrame, `UPDATE invocations SET next_frame = next_frame + 1 WHERE seq = ?`},
		{&s.endJournal, `UPDATE invocations SET next_frame = next_frame + 1, journal_closed = attempt WHERE seq = ?`},
		{&s.insertFrame, `INSERT INTO frames (journal, seq, kind, value, attempt, time_ms) VALUES (?, ?, ?, ?, ?, ?)`},
		{&s.countAdd, `INSERT INTO counts (namespace, queue, state, priority, n) VALUES (?, ?, ?, ?, ?)
			ON CONFLICT (namespace, queue, state, priority) DO UPDATE SET n = n + excluded.n RETURNING n`},
		{&s.countDelete, `DELETE FROM counts WHERE namespace = ? AND queue = ? AND state = ? AND priority = ? AND n = 0`},
		{&s.expiredLeases, `SELECT id FROM invocations WHERE state = 1 AND lease_expires_ms <= ? LIMIT +?`},
		{&s.attemptsOverdue, `SELECT id FROM invocations WHERE state = 1 AND attempt_deadline_ms > 0 AND attempt_deadline_ms <= ? LIMIT +?`},
		{&s.deadlinesPassed, `SELECT id FROM (SELECT id FROM invocations WHERE state = 0 AND deadline_ms > 0 AND deadline_ms <= ?1
			UNION ALL SELECT id FROM invocations WHERE state = -2 AND deadline_ms > 0 AND deadline_ms <= ?1
			UNION ALL SELECT id FROM invocations WHERE state = -3 AND deadline_ms > 0 AND deadline_ms <= ?1) LIMIT +?2`},
		// shapes are the shapes a queue's invocations were submitted with (placement.go).
		{&s.shapes, `SELECT shape, requirement FROM placement_shapes WHERE namespace = ?1 AND queue = ?2`},
		{&s.shapeHeadFIFO, shapeHeadSQL("invocations_shaped", "id")},
		{&s.shapeHeadFILO, shapeHeadSQL("invocations_shaped", "id DESC")},
		{&s.shapeHeadPriority, shapeHeadSQL("invocations_shaped_priority", "priority DESC, id")},
		// warmPairs are the shapes a host key's invocations of a queue were submitted with.
		{&s.warmPairs, `SELECT shape FROM placement_warm WHERE namespace = ?1 AND queue = ?2 AND host_key = ?3`},
		{&s.warmHeadFIFO, warmHeadSQL("invocations_warm", "id")},
		{&s.warmHeadFILO, warmHeadSQL("invocations_warm", "id DESC")},
		{&s.warmHeadPriority, warmHeadSQL("invocations_warm_priority", "priority DESC, id")},
		// keyReady is the ready key whose turn it is (concurrency.go).
		{&s.keyReady, keyReadySQL},
		{&s.keyReadyHeadFIFO, keyReadyHeadSQL("id", true)},
		{&s.keyReadyHeadFILO, keyReadyHeadSQL("id DESC", true)},
		{&s.keyReadyHeadPriority, keyReadyHeadSQL("priority DESC, id", false)},
		{&s.keyNext, `SELECT min(next_ms) FROM concurrency_keys WHERE namespace = ?1 AND queue = ?2
			AND queued > 0 AND running < limit_n AND next_ms > ?3`},
		// keyHold holds a key back until ?4: a key without a counter row (nothing queued or
		// running) gets one, with the limit and weight the triggers give, so that the hold
		// applies to its next job (migration 017).
		{&s.keyHold, sqliteDialect.Replace(`INSERT INTO concurrency_keys (namespace, queue, concurrency_key, limit_n, weight, next_ms)
			VALUES ($1, $2, $3, ` + holdLimit + `, ` + holdWeight + `, $4)
			ON CONFLICT (namespace, queue, concurrency_key) DO UPDATE SET next_ms = max(next_ms, excluded.next_ms)`)},
		{&s.keyHeadLevelFIFO, keyHeadLevelSQL("id")},
		{&s.keyHeadLevelFILO, keyHeadLevelSQL("id DESC")},
		{&s.keyHeadPriority, keyHeadPrioritySQL},
		{&s.keyLevel, keyLevelSQL},
		{&s.keyBucket, `UPDATE concurrency_keys SET tokens = ?4, tokens_ms = ?5
			WHERE namespace = ?1 AND queue = ?2 AND concurrency_key = ?3`},
		{&s.finishedBefore, finishedBeforeSQL},
		{&s.holdsEnded, planekit.HoldsEnded(sqliteDialect.Replace, false)},
		{&s.deleteInvocation, `DELETE FROM invocations WHERE seq = ?`},
		{&s.deleteFrames, `DELETE FROM frames WHERE journal = ?`},
		{&s.staleTopics, `SELECT journal FROM topics WHERE updated_ms < ? LIMIT 1000`},
		{&s.deleteTopic, `DELETE FROM topics WHERE journal = ?`},
	} {
		if *p.stmt, err = s.prepared.Prepare(ctx, conn, p.sql); err != nil {
			return err
		}
	}
	return nil
}
