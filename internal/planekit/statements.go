package planekit

// Common fills the Statements whose SQL is the same on both SQL planes, written here once
// in PostgreSQL's form — every table as {s}.table, parameters $1 … — and turned into a
// plane's dialect by dialect (pgplane fills in its schema; sqliteplane drops the schema
// and numbers its parameters ?1 …). A driver sets the others (those that lock rows, cast
// or collate in its own way) itself.
func (st *Statements) Common(dialect func(string) string) {
	d := dialect
	scheduleInsert := `INSERT INTO {s}.schedules (` + ScheduleColumns + `) VALUES ($1, $2, $3, $4, $5, 0, '', $6, $6)
		ON CONFLICT (namespace, name) `
	st.TopicClosed = d(`SELECT closed FROM {s}.topics WHERE journal = $1`)
	st.Frames = d(`SELECT seq, kind, value, attempt, time_ms FROM {s}.frames WHERE journal = $1 AND seq > $2 ORDER BY seq LIMIT $3`)
	st.Count = d(`SELECT COALESCE(sum(n), 0) FROM {s}.counts WHERE namespace = $1 AND queue = $2 AND state IN ($3, $4)`)
	st.StatsAdmissions = d(`SELECT namespace, queue, ` + AdmissionColumns + ` FROM {s}.queues WHERE $1 = '' OR namespace = $1`)

	st.AdmissionSet = d(`INSERT INTO {s}.queues (namespace, queue, max_depth, on_full, rate_limit,
		burst, deadline_cutoff_ms, tokens, tokens_ms, concurrency) VALUES ($1, $2, $3, $4, $5, $6, $7, $9, $8, $10)
		ON CONFLICT (namespace, queue) DO UPDATE SET max_depth = $3, on_full = $4, rate_limit = $5, burst = $6,
		deadline_cutoff_ms = $7, tokens = $9, tokens_ms = $8, concurrency = $10`)
	st.AdmissionGet = d(`SELECT ` + AdmissionColumns + ` FROM {s}.queues WHERE namespace = $1 AND queue = $2`)
	st.AdmissionDelete = d(`DELETE FROM {s}.queues WHERE namespace = $1 AND queue = $2`)

	st.ProviderSet = d(`INSERT INTO {s}.queue_providers (namespace, queue, provider, updated_ms) VALUES ($1, $2, $3, $4)
		ON CONFLICT (namespace, queue) DO UPDATE SET provider = $3, updated_ms = $4`)
	st.ProviderGet = d(`SELECT provider FROM {s}.queue_providers WHERE namespace = $1 AND queue = $2`)
	st.ProviderDelete = d(`DELETE FROM {s}.queue_providers WHERE namespace = $1 AND queue = $2`)
	// Concurrent upserts of one row serialize on its lock (on PostgreSQL; SQLite's one
	// writer runs them one at a time), and the condition is checked against the latest
	// version, so two holders never both succeed.
	st.LeaseAcquire = d(`INSERT INTO {s}.named_leases AS l (namespace, name, holder, expires_ms)
		VALUES ($1, $2, $3, $4) ON CONFLICT (namespace, name) DO UPDATE SET holder = $3, expires_ms = $4
		WHERE l.holder = $3 OR l.expires_ms <= $5`)
	st.LeaseRelease = d(`DELETE FROM {s}.named_leases WHERE namespace = $1 AND name = $2 AND holder = $3`)

	st.ScheduleUpsert = d(scheduleInsert + `DO UPDATE SET spec = $3, paused = $4, next_ms = $5, updated_ms = $6 RETURNING ` + ScheduleColumns)
	st.ScheduleInsert = d(scheduleInsert + `DO NOTHING RETURNING ` + ScheduleColumns)
	st.ScheduleCount = d(`SELECT count(*) FROM {s}.schedules WHERE namespace = $1`)
	st.ScheduleDelete = d(`DELETE FROM {s}.schedules WHERE namespace = $1 AND name = $2`)
	st.ScheduleFired = d(`UPDATE {s}.schedules SET next_ms = $1, last_ms = $2, last_id = $3, spec = COALESCE($6, spec)
		WHERE namespace = $4 AND name = $5`)
	st.SchedulePause = d(`UPDATE {s}.schedules SET paused = $1, next_ms = $2, updated_ms = $3 WHERE namespace = $4 AND name = $5`)

	st.PauseSet = d(`INSERT INTO {s}.queue_pauses (namespace, queue, paused_ms) VALUES ($1, $2, $3)
		ON CONFLICT (namespace, queue) DO NOTHING`)
	st.PauseDelete = d(`DELETE FROM {s}.queue_pauses WHERE namespace = $1 AND queue = $2`)
	st.PauseList = d(`SELECT namespace, queue FROM {s}.queue_pauses WHERE $1 = '' OR namespace = $1`)

	st.WorkerList = d(`SELECT id, namespace, host, pid, queues, started_ms, seen_ms,
		provider, launch_id, running, idle_ms, offers, warm_host_keys FROM {s}.workers
		WHERE seen_ms >= $1 AND ($2 = '' OR namespace = $2) ORDER BY started_ms, id`)
	st.WorkerRemove = d(`DELETE FROM {s}.workers WHERE namespace = $1 AND id = $2`)
	st.WorkerTrim = d(`DELETE FROM {s}.workers WHERE seen_ms < $1`)
	st.WorkerRefresh = d(`UPDATE {s}.workers SET host = $3, pid = $4, queues = $5, seen_ms = $6, provider = $7,
		launch_id = $8, running = $9, idle_ms = $10, offers = $11, warm_host_keys = $12 WHERE namespace = $1 AND id = $2`)
	st.WorkerCount = d(`SELECT count(*) FROM {s}.workers WHERE namespace = $1`)

	st.TokenCreate = d(`INSERT INTO {s}.tokens (id, hash, namespace, queue, permissions, created_ms, expires_ms)
		VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT DO NOTHING`)
	st.TokenGet = d(`SELECT ` + TokenColumns + ` FROM {s}.tokens WHERE hash = $1`)
	st.TokenList = d(`SELECT ` + TokenColumns + ` FROM {s}.tokens ORDER BY created_ms, id`)
	st.TokenRevoke = d(`UPDATE {s}.tokens SET revoked_ms = $1 WHERE id = $2`)
	st.TokenTrim = d(`DELETE FROM {s}.tokens WHERE (revoked_ms > 0 AND revoked_ms < $1) OR (expires_ms > 0 AND expires_ms < $1)`)

	st.KeyFree = d(`UPDATE {s}.invocations SET key = NULL, key_held_until = NULL WHERE id = $1`) // the hold goes with the key (plane.KeyHeldUntil)
	st.KeyLimitsDelete = d(`DELETE FROM {s}.concurrency_limits WHERE namespace = $1 AND queue = $2`)
	st.KeyLimitInsert = d(`INSERT INTO {s}.concurrency_limits (namespace, queue, concurrency_key, limit_n, weight)
		VALUES ($1, $2, $3, $4, $5)`)
	if st.KeyLimitsApply == "" { // PostgreSQL's locks the rows in key order (pgplane's kitStatements)
		limit, weight := KeyLimitsSQL(`$1`, `$2`, `k.concurrency_key`)
		st.KeyLimitsApply = d(`UPDATE {s}.concurrency_keys AS k SET limit_n = ` + limit + `, weight = ` + weight + `
		WHERE k.namespace = $1 AND k.queue = $2`)
	}
	st.TopicAppend = d(`INSERT INTO {s}.topics AS t (journal, next_seq, closed, updated_ms) VALUES ($1, 1, $2, $3)
		ON CONFLICT (journal) DO UPDATE SET next_seq = t.next_seq + 1, closed = $2, updated_ms = $3
		WHERE NOT t.closed RETURNING next_seq - 1`)
	st.TopicDrop = d(`DELETE FROM {s}.topics WHERE journal = $1`)
	st.IDHolder = d(`SELECT namespace, queue FROM {s}.invocations WHERE id = $1`)
	st.KeyHolderID = d(`SELECT id FROM {s}.invocations WHERE namespace = $1 AND queue = $2 AND key = $3`)
	st.DebounceFold = d(`UPDATE {s}.invocations SET payload = $2, metadata = $3, available_ms = $4 WHERE id = $1`)
	st.KeysEmptied = d(`SELECT namespace, queue, concurrency_key, tokens, tokens_ms, next_ms FROM {s}.concurrency_keys
		WHERE (namespace, queue, concurrency_key) > ($1, $2, $3) AND (tokens >= 0 OR next_ms > 0) AND queued = 0 AND running = 0
		ORDER BY namespace, queue, concurrency_key LIMIT $4`)
	st.KeysHeld = d(`SELECT concurrency_key, tokens, tokens_ms, next_ms FROM {s}.concurrency_keys
		WHERE namespace = $1 AND queue = $2 AND next_ms > $3 AND tokens >= 0 ORDER BY concurrency_key`)
	st.KeyHoldEnd = d(`UPDATE {s}.concurrency_keys SET next_ms = 0
		WHERE namespace = $1 AND queue = $2 AND concurrency_key = $3 AND next_ms = $4`)
	st.KeyDrop = d(`DELETE FROM {s}.concurrency_keys WHERE namespace = $1 AND queue = $2 AND concurrency_key = $3
		AND queued = 0 AND running = 0 AND tokens = $4 AND tokens_ms = $5 AND next_ms = $6`)
}
