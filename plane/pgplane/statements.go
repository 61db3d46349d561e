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
	insert, insertFresh, existingByID, existingByKey         string
	admissionExists, deleteIDs                               string
	promote, claimFIFO, claimFILO, claimPriority, claimLevel string
	claimFIFOFrom, promoteDue                                string
	nextAvailable, setRunning                                string
	head, headMany, setQueued, setTerminalMany, setLease     string
	nextFrame, endJournal, insertFrame, topicAppend          string
	rowsByID                                                 string
	expiredLeases, attemptsOverdue, deadlinesPassed          string
	trim, trimTopics, countsVacuum                           string
	leaderTake, leaderRelease                                string
	keyReady, keyTurn, keyBucket, keyHold                    string
	keyHeadFIFO, keyHeadFILO, keyHeadPriority                string
	shapes, shapeHeadFIFO, shapeHeadFILO, shapeHeadPriority  string
	warmPairs, warmHeadFIFO, warmHeadFILO, warmHeadPriority  string
	// placementTrim: per table, the table and planekit.PlacementTrimSQL's statements.
	placementTrim  []placementTrim
	deadlineCutoff string
}

// claimWhere selects a queue's claimable rows; none while the queue is paused (planekit.Verbs.QueuePause).
const claimWhere = ` FROM {s}.invocations WHERE namespace = $1 AND queue = $2 AND state = 0 AND NOT waiting
	AND NOT EXISTS (SELECT 1 FROM {s}.queue_pauses WHERE namespace = $1 AND queue = $2)`

// keyHeads locks the head (in order) of each concurrency key of $3 in queue ($1, $2).
func keyHeads(order string) string {
	return `SELECT h.* FROM unnest($3::text[]) AS k(key) CROSS JOIN LATERAL (SELECT ` + rowColumns +
		` FROM {s}.invocations WHERE namespace = $1 AND queue = $2 AND concurrency_key = k.key AND state = -2
		ORDER BY ` + order + ` LIMIT 1 FOR UPDATE SKIP LOCKED) AS h`
}

// warmHeads locks the head (in order) of each (host key, shape) pair of $3, $4 in queue
// ($1, $2), none while the queue is paused (placement.go).
func warmHeads(order string) string {
	return `SELECT h.* FROM unnest($3::text[], $4::text[]) AS k(host_key, shape) CROSS JOIN LATERAL (SELECT ` + rowColumns +
		` FROM {s}.invocations WHERE namespace = $1 AND queue = $2 AND host_key = k.host_key AND shape = k.shape
		AND host_key <> '' AND (state = -3 OR (state = 0 AND NOT waiting))
		ORDER BY ` + order + ` LIMIT 1 FOR UPDATE SKIP LOCKED) AS h
		WHERE NOT EXISTS (SELECT 1 FROM {s}.queue_pauses WHERE namespace = $1 AND queue = $2)`
}

// shapeHeads locks the head (in order) of each shape of $3 in queue ($1, $2), none while
// the queue is paused (placement.go).
func shapeHeads(order string) string {
	return `SELECT h.* FROM unnest($3::text[]) AS k(shape) CROSS JOIN LATERAL (SELECT ` + rowColumns +
		` FROM {s}.invocations WHERE namespace = $1 AND queue = $2 AND shape = k.shape AND state = -3
		ORDER BY ` + order + ` LIMIT 1 FOR UPDATE SKIP LOCKED) AS h
		WHERE NOT EXISTS (SELECT 1 FROM {s}.queue_pauses WHERE namespace = $1 AND queue = $2)`
}

func newStatements(schema string) statements {
	s := func(q string) string { return strings.ReplaceAll(q, "{s}", schema) }
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
		// insert goes in key order, so two batches sharing keys wait on each other in one
		// order and never deadlock.
		insert: s(`INSERT INTO {s}.invocations (id, namespace, queue, key, state, priority, waiting, payload,
				metadata, max_attempts, attempt_timeout_ms, deadline_ms, available_ms, created_ms, concurrency_key, shape, requirement, host_key)
			SELECT u.id, u.namespace, u.queue, u.key, 0, u.priority, u.available_ms > $1, u.payload, u.metadata,
				u.max_attempts, u.attempt_timeout_ms, u.deadline_ms, u.available_ms, $1, u.concurrency_key, u.shape, u.requirement, u.host_key
			FROM unnest($2::text[], $3::text[], $4::text[], $5::text[], $6::float8[], $7::bytea[], $8::bytea[],
				$9::integer[], $10::bigint[], $11::bigint[], $12::bigint[], $13::text[], $14::text[], $15::text[], $16::text[]) AS u(id, namespace, queue, key, priority,
				payload, metadata, max_attempts, attempt_timeout_ms, deadline_ms, available_ms, concurrency_key, shape, requirement, host_key)
			ORDER BY u.namespace, u.queue, u.key NULLS LAST, u.id
			ON CONFLICT DO NOTHING RETURNING id`),
		admissionExists: s(`SELECT q.namespace, q.queue FROM {s}.queues q
			JOIN unnest($1::text[], $2::text[]) AS u(namespace, queue) ON q.namespace = u.namespace AND q.queue = u.queue`),
		deleteIDs:     s(`DELETE FROM {s}.invocations WHERE id = ANY($1)`),
		existingByID:  s(`SELECT namespace, queue FROM {s}.invocations WHERE id = $1`),
		existingByKey: s(`SELECT id FROM {s}.invocations WHERE namespace = $1 AND queue = $2 AND key = $3`),
		// promote makes the due waiting rows of a queue claimable, oldest due first.
		// It returns the smallest id it moved (NULL: none). It waits for rows another
		// transaction holds (maintenance promoting them, a cancel) instead of skipping them:
		// a skipped row would still look waiting to the claim's snapshot, and a claim that
		// may not wait would come back empty while a due job exists. Claims of one queue
		// lock in the index's order, so they do not deadlock with each other.
		promote: s(`WITH moved AS (UPDATE {s}.invocations SET waiting = false WHERE id IN (SELECT id FROM {s}.invocations
			WHERE namespace = $1 AND queue = $2 AND state = 0 AND waiting AND available_ms <= $3
			ORDER BY available_ms LIMIT 1000 FOR UPDATE) AND state = 0 AND waiting RETURNING id) SELECT min(id) FROM moved`),
		// promoteDue makes due waiting rows of every queue claimable (maintenance) and returns
		// the smallest id moved per queue.
		promoteDue: s(`WITH moved AS (UPDATE {s}.invocations SET waiting = false WHERE id IN (SELECT id FROM {s}.invocations
			WHERE state = 0 AND waiting AND available_ms <= $1 ORDER BY available_ms LIMIT 1000 FOR UPDATE SKIP LOCKED)
			RETURNING namespace, queue, id) SELECT namespace, queue, min(id) FROM moved GROUP BY namespace, queue`),
		claimFIFOFrom: s(`SELECT ` + rowColumns + claimWhere + ` AND id >= $4 ORDER BY id LIMIT $3 FOR UPDATE SKIP LOCKED`),
		claimFIFO:     s(`SELECT ` + rowColumns + claimWhere + ` ORDER BY id LIMIT $3 FOR UPDATE SKIP LOCKED`),
		claimFILO:     s(`SELECT ` + rowColumns + claimWhere + ` ORDER BY id DESC LIMIT $3 FOR UPDATE SKIP LOCKED`),
		claimPriority: s(`SELECT ` + rowColumns + claimWhere + ` ORDER BY priority DESC, id LIMIT $3 FOR UPDATE SKIP LOCKED`),
		claimLevel:    s(`SELECT ` + rowColumns + claimWhere + ` AND priority = $3 ORDER BY priority DESC, id LIMIT 1 FOR UPDATE SKIP LOCKED`),
		// nextAvailable is when the queue's next waiting row becomes due, or a concurrency
		// key held back (rate limited) becomes claimable, whichever is first (NULL: none).
		nextAvailable: s(`SELECT least(
			(SELECT min(available_ms) FROM {s}.invocations WHERE namespace = $1 AND queue = $2 AND state = 0 AND waiting),
			(SELECT min(next_ms) FROM {s}.concurrency_keys WHERE namespace = $1 AND queue = $2
				AND queued > 0 AND running < limit_n AND next_ms > $3))`),
		setRunning: s(`UPDATE {s}.invocations AS i SET state = 1, attempt = i.attempt + 1, lease_token = u.token,
				lease_expires_ms = $2, attempt_deadline_ms = CASE WHEN i.attempt_timeout_ms > 0 THEN $1 + i.attempt_timeout_ms ELSE 0 END,
				started_ms = $1, worker = $3
			FROM unnest($4::text[], $5::text[]) AS u(id, token) WHERE i.id = u.id`),
		head:     s(`SELECT ` + planekit.HeadColumns + ` FROM {s}.invocations WHERE id = $1 FOR UPDATE`),
		headMany: s(`SELECT ` + planekit.HeadColumns + ` FROM {s}.invocations WHERE id = ANY($1) ORDER BY id FOR UPDATE`),
		setQueued: s(`UPDATE {s}.invocations SET state = 0, available_ms = $2, waiting = $3, lease_token = NULL,
			lease_expires_ms = 0, attempt_deadline_ms = 0, error = $4, attempt = attempt - $5 WHERE id = $1`),
		// setTerminalMany ends every invocation of a transaction with one statement.
		setTerminalMany: s(`UPDATE {s}.invocations AS i SET state = u.state, result = u.result, error = u.error,
				finished_ms = $1, lease_token = NULL, lease_expires_ms = 0, attempt_deadline_ms = 0, waiting = false
			FROM unnest($2::text[], $3::smallint[], $4::bytea[], $5::bytea[]) AS u(id, state, result, error)
			WHERE i.id = u.id`),
		setLease:    s(`UPDATE {s}.invocations SET lease_expires_ms = $2 WHERE id = $1`),
		nextFrame:   s(`UPDATE {s}.invocations SET next_frame = next_frame + 1 WHERE id = $1`),
		endJournal:  s(`UPDATE {s}.invocations SET next_frame = next_frame + 1, journal_closed = attempt WHERE id = $1`),
		insertFrame: s(`INSERT INTO {s}.frames (journal, seq, kind, value, attempt, time_ms) VALUES ($1, $2, $3, $4, $5, $6)`),
		// topicAppend takes the next seq of an open topic (creating it), or nothing when closed.
		topicAppend: s(`INSERT INTO {s}.topics AS t (journal, next_seq, closed, updated_ms) VALUES ($1, 1, $2, $3)
			ON CONFLICT (journal) DO UPDATE SET next_seq = t.next_seq + 1, closed = $2, updated_ms = $3
			WHERE NOT t.closed RETURNING next_seq - 1`),
		rowsByID: s(`SELECT ` + rowColumns + ` FROM {s}.invocations WHERE id = ANY($1)`),
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
		// keyReady probes for a ready concurrency key (claims of queues without one go on as
		// before); keyTurn locks the ready keys whose turn it is, skipping keys another claim
		// holds; keyHead* lock the head of each of those keys' claimable rows in each claim
		// order; keyBucket stores the token buckets of those under a rate limit (the claim's
		// trigger advances their turns: migration 0011).
		keyReady: s(`SELECT EXISTS (SELECT 1 FROM {s}.concurrency_keys WHERE namespace = $1 AND queue = $2
			AND queued > 0 AND running < limit_n AND next_ms <= $3)`),
		keyTurn: s(`SELECT concurrency_key, tokens, tokens_ms FROM {s}.concurrency_keys WHERE namespace = $1 AND queue = $2
			AND queued > 0 AND running < limit_n AND next_ms <= $4 AND concurrency_key <> ALL($3::text[])
			ORDER BY pass LIMIT $5 FOR UPDATE SKIP LOCKED`),
		keyBucket: s(`UPDATE {s}.concurrency_keys AS c SET tokens = u.tokens, tokens_ms = u.ms
			FROM unnest($3::text[], $4::float8[], $5::bigint[]) AS u(key, tokens, ms)
			WHERE c.namespace = $1 AND c.queue = $2 AND c.concurrency_key = u.key`),
		keyHold: s(`UPDATE {s}.concurrency_keys SET next_ms = greatest(next_ms, $4)
			WHERE namespace = $1 AND queue = $2 AND concurrency_key = $3`),
		keyHeadFIFO:       s(keyHeads(`id`)),
		keyHeadFILO:       s(keyHeads(`id DESC`)),
		keyHeadPriority:   s(keyHeads(`priority DESC, id`)),
		deadlineCutoff:    s(`SELECT deadline_cutoff_ms FROM {s}.queues WHERE namespace = $1 AND queue = $2`),
		shapes:            s(`SELECT shape, requirement FROM {s}.placement_shapes WHERE namespace = $1 AND queue = $2`),
		shapeHeadFIFO:     s(shapeHeads(`id`)),
		shapeHeadFILO:     s(shapeHeads(`id DESC`)),
		shapeHeadPriority: s(shapeHeads(`priority DESC, id`)),
		warmPairs:         s(`SELECT host_key, shape FROM {s}.placement_warm WHERE namespace = $1 AND queue = $2 AND host_key = ANY($3)`),
		warmHeadFIFO:      s(warmHeads(`id`)),
		warmHeadFILO:      s(warmHeads(`id DESC`)),
		warmHeadPriority:  s(warmHeads(`priority DESC, id`)),
		placementTrim:     newPlacementTrim(s),
		// trim deletes up to $4 terminal invocations finished before $1 (with their frames)
		// and returns what it deleted per counter.
		trim: s(`WITH victims AS (
				SELECT id FROM {s}.invocations WHERE state >= 2 AND finished_ms < $1
				AND ($2 = '' OR namespace = $2) AND ($3 = '' OR queue = $3)
				ORDER BY finished_ms LIMIT $4 FOR UPDATE SKIP LOCKED),
			deleted AS (DELETE FROM {s}.invocations AS i USING victims v WHERE i.id = v.id
				RETURNING i.id, i.namespace, i.queue, i.state, i.priority),
			frames AS (DELETE FROM {s}.frames WHERE journal IN (SELECT id FROM deleted))
			SELECT namespace, queue, state, priority, count(*) FROM deleted GROUP BY 1, 2, 3, 4`),
		trimTopics: s(`WITH stale AS (DELETE FROM {s}.topics WHERE journal IN (SELECT journal FROM {s}.topics
				WHERE updated_ms < $1 ORDER BY updated_ms LIMIT 1000 FOR UPDATE SKIP LOCKED) RETURNING journal)
			DELETE FROM {s}.frames WHERE journal IN (SELECT journal FROM stale)`),
		// countsVacuum never waits on a counter row a transaction holds (no deadlock with it).
		countsVacuum: s(`DELETE FROM {s}.counts WHERE ctid IN (SELECT ctid FROM {s}.counts WHERE n = 0 FOR UPDATE SKIP LOCKED)`),
		leaderTake: s(`INSERT INTO {s}.leases AS l (name, holder, expires_at) VALUES ('maintenance', $1, now() + make_interval(secs => $2))
			ON CONFLICT (name) DO UPDATE SET holder = $1, expires_at = now() + make_interval(secs => $2)
			WHERE l.holder = $1 OR l.expires_at < now() RETURNING holder`),
		leaderRelease: s(`DELETE FROM {s}.leases WHERE name = 'maintenance' AND holder = $1`),
	}
	// The fresh variant inserts rows that can conflict with none: no key, and ids this
	// process made. Without ON CONFLICT PostgreSQL inserts each row once instead of
	// speculatively (a heap insert plus a confirmation): one WAL record fewer per row.
	st.insertFresh = strings.Replace(st.insert, "ON CONFLICT DO NOTHING ", "", 1)
	return st
}
