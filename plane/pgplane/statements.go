package pgplane

import (
	"strings"

	"github.com/lakeshore-dev/lakeshore/internal/planekit"
)

// statements are the plane's SQL with the schema filled in, built once, so pgx's statement
// cache (keyed by text) prepares each once per connection.
type statements struct {
	countsAdd, countQueued, levels                           string
	lockAdmission, admission, admissionTokens                string
	insert, insertFresh                                      string
	insertInKeyOrder                                         string
	admissionExists, deleteIDs                               string
	lockKeys, promoteHolding                                 string
	promote, claimFIFO, claimFILO, claimPriority, claimLevel string
	claimFIFOFrom, promoteDue, claimableLeft                 string
	nextAvailable, setRunning, setRunningKeyed               string
	head, headMany, setQueued, setTerminalMany, setLease     string
	setTerminalManyKeyed                                     string
	nextFrame, endJournal, insertFrame                       string
	rowsByID                                                 string
	expiredLeases, attemptsOverdue, deadlinesPassed          string
	trim, trimTopics, countsVacuum                           string
	holdsEnded                                               string
	leaderTake, leaderRelease                                string
	keyBucket, keyHold                                       string
	keyTurnFIFO, keyTurnFILO, keyTurnPriority                string
	shapes, shapeHeadFIFO, shapeHeadFILO, shapeHeadPriority  string
	warmPairs, warmHeadFIFO, warmHeadFILO, warmHeadPriority  string
	// placementTrim: per table, the table and planekit.PlacementTrimSQL's statements.
	placementTrim  []planekit.PlacementTrim
	deadlineCutoff string
	// generic are the statements a transaction runs in the by-id plan mode (tx.planModes,
	// byIDPlans: plan_cache_mode = force_generic_plan, enable_seqscan = off): those that reach their rows (invocations, their
	// keys' counter rows, the counts) only by primary key through arrays (unnest, = ANY),
	// whose best plan is the same whatever the arrays hold. PostgreSQL's default (auto) plans them anew on every execution, for its
	// custom plan of a 4-element array looks cheaper than the generic plan's guess of 10
	// or 100 elements: about 0.1 ms of planning each, 0.29 ms of a settle-and-claim of 4
	// whose three statements execute in 0.32 ms (docs/benchmarks-pg.md, branch pg8w22).
	// Every other statement keeps the default: the plans of the claims, promotes and
	// maintenance scans depend on their parameters' values.
	generic map[string]bool
}

// setRunningFrom is the start of claimed rows up to its WHERE: a new attempt at $1 of each
// row of $2 under its lease (token $3, expiry $4, worker $5), from u.
const setRunningFrom = `UPDATE {s}.invocations AS i SET state = 1, attempt = i.attempt + 1, lease_token = u.token,
	lease_expires_ms = u.expires, attempt_deadline_ms = CASE WHEN i.attempt_timeout_ms > 0 THEN $1 + i.attempt_timeout_ms ELSE 0 END,
	started_ms = $1, worker = u.worker
	FROM unnest($2::text[], $3::text[], $4::bigint[], $5::text[]) AS u(id, token, expires, worker)`

// setRunning is the start of claimed rows (statements.setRunning).
const setRunning = setRunningFrom + ` WHERE i.id = u.id`

// setTerminalFrom is the end of invocations up to its WHERE, finished at $1: each row of
// $2 in its terminal state, result and error ($3–$5), from u.
const setTerminalFrom = `UPDATE {s}.invocations AS i SET state = u.state, result = u.result, error = u.error,
		finished_ms = $1, lease_token = NULL, lease_expires_ms = 0, attempt_deadline_ms = 0, waiting = false
	FROM unnest($2::text[], $3::smallint[], $4::bytea[], $5::bytea[]) AS u(id, state, result, error)`

// setTerminalMany is the end of invocations (statements.setTerminalMany).
const setTerminalMany = setTerminalFrom + ` WHERE i.id = u.id`

// countsOwn is the first CTE of a statement that counts its own keyed starts or ends in
// their keys' rows (setRunningKeyed, setTerminalManyKeyed): it sets the transaction-local
// setting (lakeshore.keyed_start or lakeshore.keyed_end) to 'counted', which tells the
// counting trigger to leave those transitions alone (migrations 0013 and 0015). The
// statement's UPDATE of the invocations joins its one row and requires its value, so the
// setting is made before the UPDATE writes its first row, when the trigger's WHEN is
// evaluated, and lasts until the transaction ends. A process of the build before sets it
// with a statement of its own (SELECT set_config(…)) first; either way the trigger sees it.
func countsOwn(setting string) string {
	return `own AS MATERIALIZED (SELECT set_config('` + setting + `', 'counted', true) AS counted)`
}

// ownCounted is the end of such a statement's UPDATE: its FROM joins countsOwn's row, and
// its WHERE requires the setting made.
const ownCounted = `, own WHERE i.id = u.id AND own.counted = 'counted'`

// notPaused is true while queue ($1, $2) is not paused (planekit.Verbs.QueuePause): the
// condition of every statement that finds claimable work (claimWhere, keyTurns,
// shapeHeads, warmHeads, claimableLeft).
const notPaused = `NOT EXISTS (SELECT 1 FROM {s}.queue_pauses WHERE namespace = $1 AND queue = $2)`

// claimWhere selects a queue's claimable rows; none while the queue is paused (notPaused).
const claimWhere = ` FROM {s}.invocations WHERE namespace = $1 AND queue = $2 AND state = 0 AND NOT waiting
	AND ` + notPaused

// keyTurns locks (FOR UPDATE SKIP LOCKED), in turn order, up to $5 of queue ($1, $2)'s
// concurrency keys ready at $4 (claimable rows below the limit, not held back), leaving
// out the keys of $3, and the head (in order) of each one's claimable rows: one row per
// key, its name, token bucket and head, the head's columns NULL when another transaction
// holds it. None while the queue is paused.
func keyTurns(order string) string {
	return `SELECT k.concurrency_key, k.tokens, k.tokens_ms, h.* FROM (SELECT concurrency_key, tokens, tokens_ms, pass, joined
		FROM {s}.concurrency_keys WHERE namespace = $1 AND queue = $2 AND ready AND next_ms <= $4
		AND concurrency_key <> ALL($3::text[])
		AND ` + notPaused + `
		ORDER BY pass, joined DESC LIMIT $5 FOR UPDATE SKIP LOCKED) AS k
		LEFT JOIN LATERAL (SELECT ` + rowColumns + ` FROM {s}.invocations WHERE namespace = $1 AND queue = $2
		AND concurrency_key = k.concurrency_key AND state = -2 ORDER BY ` + order + ` LIMIT 1 FOR UPDATE SKIP LOCKED) AS h ON true
		ORDER BY k.pass, k.joined DESC`
}

// warmHeads locks the head (in order) of each (host key, shape) pair of $3, $4 in queue
// ($1, $2), none while the queue is paused (placement.go).
func warmHeads(order string) string {
	return `SELECT h.* FROM unnest($3::text[], $4::text[]) AS k(host_key, shape) CROSS JOIN LATERAL (SELECT ` + rowColumns +
		` FROM {s}.invocations WHERE namespace = $1 AND queue = $2 AND host_key = k.host_key AND shape = k.shape
		AND host_key <> '' AND (state = -3 OR (state = 0 AND NOT waiting))
		ORDER BY ` + order + ` LIMIT 1 FOR UPDATE SKIP LOCKED) AS h
		WHERE ` + notPaused
}

// shapeHeads locks the head (in order) of each shape of $3 in queue ($1, $2), none while
// the queue is paused (placement.go).
func shapeHeads(order string) string {
	return `SELECT h.* FROM unnest($3::text[]) AS k(shape) CROSS JOIN LATERAL (SELECT ` + rowColumns +
		` FROM {s}.invocations WHERE namespace = $1 AND queue = $2 AND shape = k.shape AND state = -3
		ORDER BY ` + order + ` LIMIT 1 FOR UPDATE SKIP LOCKED) AS h
		WHERE ` + notPaused
}

// lockKeys locks the counter rows (concurrency_keys) of the concurrency keys of relation
// (columns namespace, queue, concurrency_key; rows without a key left out) in key order —
// namespace, queue, key, the order of the table's primary key — when it names two keys or
// more, so that writes of invocation rows of several keys, whose counting trigger
// (migrations 0007, 0011, 0012) updates each key's row in the order the statement writes
// them, never wait on another transaction's keys in another order: every transaction that
// changes the counters of several keys takes them in key order (the submit's insert goes
// in that order itself; a terminal write of keyed ends alone in its batch locks its keys in
// key order itself, setTerminalManyKeyed; a claim takes its keys with SKIP LOCKED and never
// waits), so none deadlocks on them. A missing row is made as the trigger makes it (counts
// 0, pass 0, the limit and weight of the queue's stored limits: planekit.KeyLimitsSQL), which the
// trigger's update then counts, as its own upsert would; an existing row is locked, not
// written (ON CONFLICT's WHERE false still locks it).
func lockKeys(relation string) string {
	limit, weight := planekit.KeyLimitsSQL(`l.namespace`, `l.queue`, `l.concurrency_key`)
	return `INSERT INTO {s}.concurrency_keys AS k (namespace, queue, concurrency_key, limit_n, weight)
		SELECT l.namespace, l.queue, l.concurrency_key, ` + limit + `, ` + weight + `
		FROM (SELECT namespace, queue, concurrency_key, count(*) OVER () AS keys FROM ` + relation + `
			WHERE concurrency_key IS NOT NULL GROUP BY 1, 2, 3) AS l
		WHERE l.keys >= 2 ORDER BY 1, 2, 3
		ON CONFLICT (namespace, queue, concurrency_key) DO UPDATE SET queued = k.queued WHERE false RETURNING 1`
}

// leftDue is the last column of promote and promoteHolding: whether a due waiting row of
// the queue ($1, $2, due by $3) is left waiting, not moved by the statement (moved): one
// another transaction holds, one a transaction that committed since the statement's
// snapshot changed (a try more for nothing), one beyond its batch of 1,000 (the next try
// moves it). Read in the statement's snapshot, where the moved rows still look waiting.
// It reads the first such row in available_ms order (LIMIT 1), which the waiting index
// (namespace, queue, available_ms) gives, so it stops at the first row not due: an
// EXISTS, whose ORDER BY and LIMIT PostgreSQL drops, was planned (the generic plan of the
// prepared statement, $3 unknown) for a first match among a third of the queue's rows and
// read the whole table to find none, +0.7 ms a claim behind 10,000 delayed jobs
// (TestPromoteReadsNoRowNotDue, docs/benchmarks-pg.md).
const leftDue = `(SELECT true FROM {s}.invocations WHERE namespace = $1 AND queue = $2 AND state = 0 AND waiting
				AND available_ms <= $3 AND id NOT IN (SELECT id FROM moved) ORDER BY available_ms LIMIT 1) IS NOT NULL`

func newStatements(schema string) statements {
	s := func(q string) string { return strings.ReplaceAll(q, "{s}", schema) }
	holdLimit, holdWeight := planekit.KeyLimitsSQL(`$1`, `$2`, `$3`)
	st := statements{
		countsAdd: s(`INSERT INTO {s}.counts (namespace, queue, state, priority, shard, n)
			SELECT u.namespace, u.queue, u.state, u.priority, $5, u.n
			FROM unnest($1::text[], $2::text[], $3::smallint[], $4::float8[], $6::bigint[]) AS u(namespace, queue, state, priority, n)
			ORDER BY 1, 2, 3, 4
			ON CONFLICT (namespace, queue, state, priority, shard) DO UPDATE SET n = {s}.counts.n + excluded.n`),
		countQueued: s(`SELECT COALESCE(sum(n), 0) FROM {s}.counts WHERE namespace = $1 AND queue = $2 AND state = 0`),
		levels: s(`SELECT priority, sum(n) FROM {s}.counts WHERE namespace = $1 AND queue = $2 AND state = 0
			GROUP BY priority HAVING sum(n) > 0`),
		lockAdmission: s(`SELECT ` + planekit.AdmissionColumns + `
			FROM {s}.queues WHERE namespace = $1 AND queue = $2 FOR UPDATE`),
		admission: s(`SELECT ` + planekit.AdmissionColumns + `
			FROM {s}.queues WHERE namespace = $1 AND queue = $2`),
		admissionTokens: s(`UPDATE {s}.queues SET tokens = $3, tokens_ms = $4 WHERE namespace = $1 AND queue = $2`),
		// insert writes its rows in insertOrder; insertInKeyOrder in idempotency key order
		// (submit.go). insertFresh inserts rows that can conflict with none: no key, and ids
		// this process made. Without ON CONFLICT PostgreSQL inserts each row once instead of
		// speculatively (a heap insert plus a confirmation): one WAL record fewer per row.
		insert:           s(insertRows(insertOrder) + ` ON CONFLICT DO NOTHING RETURNING id`),
		insertFresh:      s(insertRows(insertOrder) + ` RETURNING id`),
		insertInKeyOrder: s(insertInKeyOrder()),
		admissionExists: s(`SELECT q.namespace, q.queue FROM {s}.queues q
			JOIN unnest($1::text[], $2::text[]) AS u(namespace, queue) ON q.namespace = u.namespace AND q.queue = u.queue`),
		deleteIDs: s(`DELETE FROM {s}.invocations WHERE id = ANY($1)`),
		// promote makes the due waiting rows of a queue claimable, oldest due first, and
		// returns the smallest id it moved (NULL: none) and whether it left a due row
		// waiting (leftDue). It never waits for an invocation row: it locks the due rows no
		// other transaction holds (FOR UPDATE SKIP LOCKED, as promoteDue does) and leaves
		// the rest to their holder (maintenance or another claim promoting them, a cancel)
		// and to the claim's next try: a claim that found nothing while a due row was left
		// reports it as due now, so its claimer claims again at once (claimFor, claimPlaced,
		// tx.promoted), and one that may not wait retries (planekit.WhileHeld). It waited, in id
		// order, for such rows until 2026-12: one of its waits closed the rare deadlock of
		// TestShapedBatchesNoDeadlock, a placed claim's heads statement (FOR UPDATE SKIP
		// LOCKED) waiting, through an update chain PostgreSQL follows whatever the wait
		// policy (heap_lock_updated_tuple), for a row this promote had locked and left out,
		// while this promote waited for a row of the placed claim. The counter rows of the
		// keys it makes claimable are locked in key order next (lockKeys): the only wait
		// left, in the order every writer of several keys takes them. Its UPDATE reads the
		// locked CTE first (as promoteDue's does), so the due rows and then the keys are all
		// locked before the UPDATE's trigger writes a counter row: without that the CTEs ran
		// interleaved with the UPDATE, which wrote the counter rows in id order as it read
		// the due rows. The UPDATE takes its rows as id = ANY (ARRAY(SELECT id FROM due)), a
		// primary-key probe a row (the planner estimates a few for an array it cannot see),
		// not id IN (SELECT id FROM due), which it planned for due's batch of 1,000 as a hash
		// join over a sequential scan of the whole table, however few rows were due (5 due
		// behind 10,000 delayed: 335 pages for the statement, 98 with the array:
		// TestPromoteReadsNoRowNotDue). The array is read when the index scan starts, under
		// the Result whose One-Time Filter reads locked first. leftDue reads the statement's
		// snapshot, in which the rows it moves still look waiting: a due row neither locked
		// here nor moved is one another transaction holds (or one a transaction that
		// committed since changed: a try more).
		promote: s(`WITH due AS (SELECT id, namespace, queue, concurrency_key FROM {s}.invocations
				WHERE namespace = $1 AND queue = $2 AND state = 0 AND waiting AND available_ms <= $3
				ORDER BY available_ms LIMIT 1000 FOR UPDATE SKIP LOCKED),
			locked AS (` + lockKeys(`due`) + `),
			moved AS (UPDATE {s}.invocations SET waiting = false WHERE id = ANY (ARRAY(SELECT id FROM due)) AND state = 0 AND waiting
				AND (SELECT count(*) FROM locked) >= 0 RETURNING id)
			SELECT (SELECT min(id) FROM moved), ` + leftDue + ``),
		// promoteHolding is promote for a transaction that holds rows already (a
		// settle-and-claim's settled rows and their counter rows, an earlier claim of its
		// group, an earlier promote of it): it waits for neither an invocation row nor a
		// counter row, either of which could close a cycle with a transaction that holds it
		// and waits for a row this one holds (locked in another order), so it promotes the
		// due rows no one holds whose key (if any) has a counter row no one holds, and
		// leaves the rest to the next claim or maintenance: a key without a counter row too,
		// since the trigger making it would wait for a transaction making the same key's row
		// at once (a submit holding other keys' rows), which closed a cycle. It reports the
		// rows it left as promote does (leftDue), and takes its rows by primary key as
		// promote does (the array is read, and held locked, before the first row is updated).
		promoteHolding: s(`WITH due AS (SELECT id, concurrency_key FROM {s}.invocations
				WHERE namespace = $1 AND queue = $2 AND state = 0 AND waiting AND available_ms <= $3
				ORDER BY available_ms LIMIT 1000 FOR UPDATE SKIP LOCKED),
			held AS (SELECT concurrency_key FROM {s}.concurrency_keys WHERE namespace = $1 AND queue = $2
				AND concurrency_key IN (SELECT concurrency_key FROM due) ORDER BY concurrency_key FOR UPDATE SKIP LOCKED),
			moved AS (UPDATE {s}.invocations SET waiting = false WHERE id = ANY (ARRAY(SELECT id FROM due
				WHERE concurrency_key IS NULL OR concurrency_key IN (SELECT concurrency_key FROM held)))
				AND state = 0 AND waiting RETURNING id)
			SELECT (SELECT min(id) FROM moved), ` + leftDue + ``),
		// promoteDue makes due waiting rows of every queue claimable (maintenance) and returns
		// the smallest id moved per queue; the counter rows of their keys locked as promote
		// locks them, its rows taken by primary key as promote takes them.
		promoteDue: s(`WITH due AS (SELECT id, namespace, queue, concurrency_key FROM {s}.invocations
				WHERE state = 0 AND waiting AND available_ms <= $1 ORDER BY available_ms LIMIT 1000 FOR UPDATE SKIP LOCKED),
			locked AS (` + lockKeys(`due`) + `),
			moved AS (UPDATE {s}.invocations SET waiting = false WHERE id = ANY (ARRAY(SELECT id FROM due))
				AND (SELECT count(*) FROM locked) >= 0 RETURNING namespace, queue, id)
			SELECT namespace, queue, min(id) FROM moved GROUP BY namespace, queue`),
		// lockKeys locks the counter rows of the concurrency keys $1, $2, $3 (namespaces,
		// queues, keys) in key order, before a transaction's writes change them (tx.takeWrites).
		lockKeys: s(`WITH keyed AS (SELECT * FROM unnest($1::text[], $2::text[], $3::text[]) AS u(namespace, queue, concurrency_key)) ` +
			lockKeys(`keyed`)),
		claimFIFOFrom: s(`SELECT ` + rowColumns + claimWhere + ` AND id >= $4 ORDER BY id LIMIT $3 FOR UPDATE SKIP LOCKED`),
		// claimableLeft says whether queue ($1, $2) has a claimable row left, whoever holds
		// it, of the default shape, of one of the shapes $3 (those a claim's offers
		// satisfy), or of a concurrency key ready at $4: asked in a claim's transaction
		// after its candidates and key turns (FOR UPDATE SKIP LOCKED) left it short, a row
		// or key it finds is one another transaction holds (the claim's own starts are
		// counted in its view, and a key it held back has its next_ms ahead). Asked only
		// after a promotion of the queue (planekit.Promotions). Its default shape's half is
		// the claims' own condition (claimWhere), its keys' half the key turns' (keyTurns).
		claimableLeft: s(`SELECT EXISTS (SELECT 1` + claimWhere + `)
			OR EXISTS (SELECT 1 FROM {s}.invocations WHERE namespace = $1 AND queue = $2 AND state = -3 AND shape = ANY($3::text[])
				AND ` + notPaused + `)
			OR EXISTS (SELECT 1 FROM {s}.concurrency_keys WHERE namespace = $1 AND queue = $2 AND ready AND next_ms <= $4
				AND ` + notPaused + `)`),
		claimFIFO:     s(`SELECT ` + rowColumns + claimWhere + ` ORDER BY id LIMIT $3 FOR UPDATE SKIP LOCKED`),
		claimFILO:     s(`SELECT ` + rowColumns + claimWhere + ` ORDER BY id DESC LIMIT $3 FOR UPDATE SKIP LOCKED`),
		claimPriority: s(`SELECT ` + rowColumns + claimWhere + ` ORDER BY priority DESC, id LIMIT $3 FOR UPDATE SKIP LOCKED`),
		claimLevel:    s(`SELECT ` + rowColumns + claimWhere + ` AND priority = $3 ORDER BY priority DESC, id LIMIT 1 FOR UPDATE SKIP LOCKED`),
		// nextAvailable is when the queue's next waiting row becomes due, or a concurrency
		// key held back (rate limited) becomes claimable, whichever is first (NULL: none).
		nextAvailable: s(`SELECT least(
			(SELECT min(available_ms) FROM {s}.invocations WHERE namespace = $1 AND queue = $2 AND state = 0 AND waiting),
			(SELECT min(next_ms) FROM {s}.concurrency_keys WHERE namespace = $1 AND queue = $2
				AND ready AND next_ms > $3))`),
		// setRunning starts the rows a claim round took, for every request of its group
		// in one statement: each row's id, token, lease expiry and worker ($2–$5).
		setRunning: s(setRunning),
		// setRunningKeyed is setRunning for a start that takes claimable keyed rows
		// (state -2): in the same statement it counts them in their keys' rows — for each
		// key ($6, $7, $8) its n ($9) starts: queued − n, running + n, the turn advanced by
		// n/weight, joined cleared. The claim locked those rows (and the keys' rows, to take
		// their turns), so their state is the one it read. Migration 0013: the trigger
		// counts every other change of a keyed row, and the starts of a transaction that
		// did not set lakeshore.keyed_start (a process of the build before); this statement
		// sets it itself (countsOwn), before it starts its first row.
		setRunningKeyed: s(`WITH ` + countsOwn(`lakeshore.keyed_start`) + `,
			counted AS (UPDATE {s}.concurrency_keys AS k SET queued = k.queued - c.n, running = k.running + c.n,
				pass = k.pass + c.n / k.weight, joined = false
				FROM unnest($6::text[], $7::text[], $8::text[], $9::bigint[]) AS c(namespace, queue, concurrency_key, n)
				WHERE k.namespace = c.namespace AND k.queue = c.queue AND k.concurrency_key = c.concurrency_key) ` +
			setRunningFrom + ownCounted),

		head:     s(`SELECT ` + planekit.HeadColumns + ` FROM {s}.invocations WHERE id = $1 FOR UPDATE`),
		headMany: s(`SELECT ` + planekit.HeadColumns + ` FROM {s}.invocations WHERE id = ANY($1) ORDER BY id FOR UPDATE`),
		setQueued: s(`UPDATE {s}.invocations SET state = 0, available_ms = $2, waiting = $3, lease_token = NULL,
			lease_expires_ms = 0, attempt_deadline_ms = 0, error = $4, attempt = attempt - $5 WHERE id = $1`),
		// setTerminalMany ends every invocation of a transaction with one statement.
		setTerminalMany: s(setTerminalMany),
		// setTerminalManyKeyed is setTerminalMany for ends that take keyed rows from
		// claimable (state -2) or running: in the same statement it counts them in their
		// keys' rows — for each key ($6, $7, $8) its claimable ($9) and running ($10) rows
		// ended: queued − n, running − n — and deletes the rows of those keys left counting
		// nothing and holding no rate state (migration 0014's rule, which the trigger
		// applies to the changes it counts; maintenance drops the rest once their rate state
		// has settled: planekit.DropSettledKeys). The ended rows are locked (the settle, the
		// claim or maintenance read them FOR UPDATE), so the state read is theirs until the
		// end. The keys' rows are locked first, in key order (locked, FOR UPDATE: what it
		// returns is each row's latest version, whatever the statement's snapshot saw), and
		// whether a row is deleted or updated is decided from that version, so a row changed
		// by a transaction that committed after the snapshot is neither left uncounted nor
		// deleted while it counts something. Migration 0015: the trigger counts every other
		// change of a keyed row, and the ends of a transaction that did not set
		// lakeshore.keyed_end (a process of the build before); this statement sets it
		// itself (countsOwn), before it ends its first row.
		setTerminalManyKeyed: s(`WITH ` + countsOwn(`lakeshore.keyed_end`) + `,
			locked AS (SELECT k.namespace, k.queue, k.concurrency_key, c.queued, c.running,
					k.queued = c.queued AND k.running = c.running AND k.tokens < 0 AND k.next_ms = 0 AS emptied
				FROM {s}.concurrency_keys AS k
				JOIN unnest($6::text[], $7::text[], $8::text[], $9::bigint[], $10::bigint[]) AS c(namespace, queue, concurrency_key, queued, running)
				ON k.namespace = c.namespace AND k.queue = c.queue AND k.concurrency_key = c.concurrency_key
				ORDER BY k.namespace, k.queue, k.concurrency_key FOR UPDATE OF k),
			emptied AS (DELETE FROM {s}.concurrency_keys AS k USING locked AS l
				WHERE k.namespace = l.namespace AND k.queue = l.queue AND k.concurrency_key = l.concurrency_key AND l.emptied),
			counted AS (UPDATE {s}.concurrency_keys AS k SET queued = k.queued - l.queued, running = k.running - l.running
				FROM locked AS l
				WHERE k.namespace = l.namespace AND k.queue = l.queue AND k.concurrency_key = l.concurrency_key AND NOT l.emptied) ` +
			setTerminalFrom + ownCounted),
		setLease:    s(`UPDATE {s}.invocations SET lease_expires_ms = $2 WHERE id = $1`),
		nextFrame:   s(`UPDATE {s}.invocations SET next_frame = next_frame + 1 WHERE id = $1`),
		endJournal:  s(`UPDATE {s}.invocations SET next_frame = next_frame + 1, journal_closed = attempt WHERE id = $1`),
		insertFrame: s(`INSERT INTO {s}.frames (journal, seq, kind, value, attempt, time_ms) VALUES ($1, $2, $3, $4, $5, $6)`),
		rowsByID:    s(`SELECT ` + rowColumns + ` FROM {s}.invocations WHERE id = ANY($1)`),
		expiredLeases: s(`SELECT ` + planekit.HeadColumns + ` FROM {s}.invocations WHERE state = 1 AND lease_expires_ms <= $1
			ORDER BY lease_expires_ms LIMIT 1000 FOR UPDATE SKIP LOCKED`),
		attemptsOverdue: s(`SELECT ` + planekit.HeadColumns + ` FROM {s}.invocations WHERE state = 1 AND attempt_deadline_ms > 0
			AND attempt_deadline_ms <= $1 ORDER BY attempt_deadline_ms LIMIT 1000 FOR UPDATE SKIP LOCKED`),
		// deadlinesPassed walks the deadline indexes of unkeyed and keyed queued rows.
		deadlinesPassed: s(`SELECT ` + planekit.HeadColumns + ` FROM {s}.invocations WHERE id IN (
				(SELECT id FROM {s}.invocations WHERE state = 0 AND deadline_ms > 0 AND deadline_ms <= $1 ORDER BY deadline_ms LIMIT 1000)
				UNION ALL
				(SELECT id FROM {s}.invocations WHERE state = -2 AND deadline_ms > 0 AND deadline_ms <= $1 ORDER BY deadline_ms LIMIT 1000)
				UNION ALL
				(SELECT id FROM {s}.invocations WHERE state = -3 AND deadline_ms > 0 AND deadline_ms <= $1 ORDER BY deadline_ms LIMIT 1000))
			AND state IN (0, -2, -3) AND deadline_ms > 0 AND deadline_ms <= $1 FOR UPDATE SKIP LOCKED`),
		// keyTurn* lock the ready keys whose turn it is and their heads in each claim order
		// (keyTurns; claims of queues without a ready key go on as before); keyBucket stores
		// the token buckets of those under a rate limit (the claim's start advances their
		// turns: setRunningKeyed).
		keyTurnFIFO:     s(keyTurns(`id`)),
		keyTurnFILO:     s(keyTurns(`id DESC`)),
		keyTurnPriority: s(keyTurns(`priority DESC, id`)),
		keyBucket: s(`UPDATE {s}.concurrency_keys AS c SET tokens = u.tokens, tokens_ms = u.ms
			FROM unnest($3::text[], $4::float8[], $5::bigint[]) AS u(key, tokens, ms)
			WHERE c.namespace = $1 AND c.queue = $2 AND c.concurrency_key = u.key`),
		// keyHold holds a key back until $4: a key without a counter row (nothing queued or
		// running) gets one, as the trigger makes it, so that the hold applies to its next
		// job (migration 0014).
		keyHold: s(`INSERT INTO {s}.concurrency_keys AS k (namespace, queue, concurrency_key, limit_n, weight, next_ms)
			VALUES ($1, $2, $3, ` + holdLimit + `, ` + holdWeight + `, $4)
			ON CONFLICT (namespace, queue, concurrency_key) DO UPDATE SET next_ms = greatest(k.next_ms, EXCLUDED.next_ms)`),
		deadlineCutoff:    s(`SELECT deadline_cutoff_ms FROM {s}.queues WHERE namespace = $1 AND queue = $2`),
		shapes:            s(`SELECT shape, requirement FROM {s}.placement_shapes WHERE namespace = $1 AND queue = $2`),
		shapeHeadFIFO:     s(shapeHeads(`id`)),
		shapeHeadFILO:     s(shapeHeads(`id DESC`)),
		shapeHeadPriority: s(shapeHeads(`priority DESC, id`)),
		warmPairs:         s(`SELECT host_key, shape FROM {s}.placement_warm WHERE namespace = $1 AND queue = $2 AND host_key = ANY($3)`),
		warmHeadFIFO:      s(warmHeads(`id`)),
		warmHeadFILO:      s(warmHeads(`id DESC`)),
		warmHeadPriority:  s(warmHeads(`priority DESC, id`)),
		placementTrim:     planekit.PlacementTrimSQL(s("{s}.placement_shapes"), s("{s}.placement_warm"), s("{s}.invocations"), "", "$1"),
		// trim deletes up to $4 terminal invocations finished before $1 (with their frames), but
		// not one still holding its key for a dedup window (planekit.KeyNotHeld: read through
		// invocations_trimmable, after holdsEnded cleared the holds that have ended),
		// and returns what it deleted per counter. Its DELETEs take their rows as
		// = ANY (ARRAY(SELECT … FROM victims)), a primary-key probe a row, as promote's
		// UPDATE does: a join with victims (USING, IN) was planned, in the generic plan, for
		// a batch of $4 rows as a hash join over a sequential scan of the whole table, of
		// invocations and then of frames, however few rows it deleted (5 behind 10,000 kept
		// and 40,020 frames: 1,158 pages, 91 with the arrays: TestTrimReadsNoRowKept).
		holdsEnded: planekit.HoldsEnded(s, true),
		trim: s(`WITH victims AS (
				SELECT id FROM {s}.invocations WHERE state >= 2 AND ` + planekit.KeyNotHeld + ` AND finished_ms < $1
				AND ($2 = '' OR namespace = $2) AND ($3 = '' OR queue = $3)
				ORDER BY finished_ms LIMIT $4 FOR UPDATE SKIP LOCKED),
			deleted AS (DELETE FROM {s}.invocations WHERE id = ANY (ARRAY(SELECT id FROM victims))
				RETURNING id, namespace, queue, state, priority),
			frames AS (DELETE FROM {s}.frames WHERE journal = ANY (ARRAY(SELECT id FROM deleted)))
			SELECT namespace, queue, state, priority, count(*) FROM deleted GROUP BY 1, 2, 3, 4`),
		// trimTopics deletes up to 1,000 topics not updated since $1, with their frames, by
		// primary key as trim does (5 behind 10,000 kept and 40,020 frames: 507 pages with
		// IN, 57 with the arrays).
		trimTopics: s(`WITH stale AS (DELETE FROM {s}.topics WHERE journal = ANY (ARRAY(SELECT journal FROM {s}.topics
				WHERE updated_ms < $1 ORDER BY updated_ms LIMIT 1000 FOR UPDATE SKIP LOCKED)) RETURNING journal)
			DELETE FROM {s}.frames WHERE journal = ANY (ARRAY(SELECT journal FROM stale))`),
		// countsVacuum never waits on a counter row a transaction holds (no deadlock with it).
		countsVacuum: s(`DELETE FROM {s}.counts WHERE ctid IN (SELECT ctid FROM {s}.counts WHERE n = 0 FOR UPDATE SKIP LOCKED)`),
		leaderTake: s(`INSERT INTO {s}.leases AS l (name, holder, expires_at) VALUES ('maintenance', $1, now() + make_interval(secs => $2))
			ON CONFLICT (name) DO UPDATE SET holder = $1, expires_at = now() + make_interval(secs => $2)
			WHERE l.holder = $1 OR l.expires_at < now() RETURNING holder`),
		leaderRelease: s(`DELETE FROM {s}.leases WHERE name = 'maintenance' AND holder = $1`),
	}
	st.generic = map[string]bool{}
	for _, sql := range []string{st.headMany, st.setRunning, st.setRunningKeyed, st.setTerminalMany,
		st.setTerminalManyKeyed, st.countsAdd} {
		st.generic[sql] = true
	}
	return st
}
