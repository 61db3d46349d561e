package pgplane

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/lakeshore-dev/lakeshore/internal/planekit"
	"github.com/lakeshore-dev/lakeshore/plane"
)

// kitDB is the driver as planekit.DB, for the verbs both SQL planes share (planekit.Verbs):
// reads on the pool, writes in a plane transaction (do).
type kitDB struct{ d *Driver }

func (k kitDB) Query(ctx context.Context, query string, args ...any) (planekit.ClosingRows, error) {
	return k.d.pool.Query(ctx, query, args...)
}

func (k kitDB) QueryRow(ctx context.Context, query string, args ...any) planekit.Scanner {
	return k.d.pool.QueryRow(ctx, query, args...)
}

func (k kitDB) Write(ctx context.Context, fn func(planekit.Tx) error) error {
	return k.d.do(ctx, func(t *tx) error { return fn(kitTx{t}) })
}

func (k kitDB) Failure(ctx context.Context, err error) error { return k.d.failure(ctx, err) }

func (k kitDB) Snapshot(ctx context.Context, fn func(planekit.Reader) error) error {
	return pgx.BeginTxFunc(ctx, k.d.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly},
		func(tx pgx.Tx) error { return fn(snapshot{ctx, tx}) })
}

// snapshot is a read-only transaction as planekit.Reader.
type snapshot struct {
	ctx context.Context
	tx  pgx.Tx
}

func (s snapshot) QueryRow(query string, args ...any) planekit.Scanner {
	return s.tx.QueryRow(s.ctx, query, args...)
}

func (s snapshot) Query(query string, args ...any) (planekit.ClosingRows, error) {
	return s.tx.Query(s.ctx, query, args...)
}

// kitTx is a plane transaction as planekit.Tx.
type kitTx struct{ t *tx }

func (k kitTx) Now() time.Time { return k.t.now }

func (k kitTx) Exec(query string, args ...any) (int64, error) {
	tag, err := k.t.execNow(query, args...)
	return tag.RowsAffected(), err
}

func (k kitTx) QueryRow(query string, args ...any) planekit.Scanner {
	return k.t.queryRow(query, args...)
}

func (k kitTx) Query(query string, args ...any) (planekit.ClosingRows, error) {
	return k.t.query(query, args...)
}

func (k kitTx) Claimable(namespace, queue string) { k.t.wakeQueue(namespace, queue) }
func (k kitTx) Wake(key string)                   { k.t.wake(key) }
func (kitTx) PauseChanged(string, string)         {}

// Admission locks the admission row as a submit locks it: the depth decision is ordered
// with the queue's submits.
func (k kitTx) Admission(namespace, queue string) (*planekit.Admission, error) {
	return k.t.admission(namespace, queue, true)
}

func (k kitTx) Queued(namespace, queue string) (int64, error) {
	var queued int64
	if err := k.t.queryRow(k.t.d.sql.countQueued, namespace, queue).Scan(&queued); err != nil {
		return 0, fmt.Errorf("count queued: %w", err)
	}
	return queued + k.t.counts.Queued(namespace, queue), nil
}

func (k kitTx) SubmitUnadmitted(p *plane.SubmitManyParams, out []plane.SubmitResult) error {
	return k.t.submitMany(p, out, nil, false)
}

// AdmissionChanged: nothing cached (a submit reads the block it locks).
func (kitTx) AdmissionChanged(string, string) {}

func (k kitTx) Head(id string) (*head, error) { return k.t.head(id) }

func (k kitTx) Apply(h *head, tr plane.Transition) error { return k.t.apply(h, tr, nil) }

// kitStatements are the SQL of planekit.Verbs in PostgreSQL's dialect, in schema: those
// both planes share (planekit.Statements.Common) and those that lock, cast or collate here.
func kitStatements(schema string) *planekit.Statements {
	s := func(q string) string { return strings.ReplaceAll(q, "{s}", schema) }
	// A list is stored as text[], as it is.
	textArray := planekit.ListCodec{Encode: func(v []string) any { return v }, Target: func(v *[]string) any { return v }}
	schedules := s(`SELECT ` + planekit.ScheduleColumns + ` FROM {s}.schedules `)
	limit, weight := planekit.KeyLimitsSQL(`$1`, `$2`, `k.concurrency_key`)
	st := &planekit.Statements{
		Row: s(`SELECT ` + rowColumns + ` FROM {s}.invocations WHERE id = $1`),
		StatsCounts: s(`SELECT namespace, queue, state, sum(n)::bigint FROM {s}.counts
			WHERE $1 = '' OR namespace = $1 GROUP BY namespace, queue, state ORDER BY namespace, queue`),
		StatsKeys: strings.NewReplacer("{s}", schema+".", "{ns}", "$1", "{now}", "$2").Replace(planekit.KeyStatsSQL),
		DemandShapes: s(`SELECT s.namespace, s.queue, s.shape, s.requirement, COALESCE(sum(c.queued), 0)::bigint, COALESCE(sum(c.running), 0)::bigint,
			(SELECT i.available_ms FROM {s}.invocations i
				WHERE i.namespace = s.namespace AND i.queue = s.queue AND i.shape = s.shape AND i.state = -3 ORDER BY i.id LIMIT 1)
			FROM {s}.placement_shapes s LEFT JOIN {s}.placement_counts c
			ON c.namespace = s.namespace AND c.queue = s.queue AND c.shape = s.shape
			WHERE $1 = '' OR s.namespace = $1 GROUP BY s.namespace, s.queue, s.shape, s.requirement`),
		DemandHead: s(`SELECT available_ms FROM {s}.invocations
			WHERE namespace = $1 AND queue = $2 AND state = 0 AND NOT waiting ORDER BY id LIMIT 1`),
		ProviderList: s(`SELECT namespace, queue, provider FROM {s}.queue_providers
			WHERE $1 = '' OR namespace = $1 ORDER BY namespace COLLATE "C", queue COLLATE "C"`),
		ScheduleGet: schedules + `WHERE namespace = $1 AND name = $2 FOR UPDATE`,
		// planekit.ScheduleListBounds turns the filter and cursor into one range of the
		// byte-ordered index (migration 0018).
		ScheduleList: schedules + `WHERE (namespace COLLATE "C", name COLLATE "C") >= ($1, $2)
			AND (namespace COLLATE "C", name COLLATE "C") <= ($3, $4) ORDER BY namespace COLLATE "C", name COLLATE "C" LIMIT $5`,
		// Creations under one cap's key (schedules or workers of a namespace, topics of a
		// queue) serialize on this lock, so each counts the ones committed before it (READ
		// COMMITTED: the count after the lock sees them).
		CapLock: s(`SELECT pg_advisory_xact_lock(hashtext($1 || '/{s}'))::text`),
		// planekit.TopicRange is one range of the byte-ordered index (migration 0019).
		TopicCount: s(`SELECT count(*) FROM {s}.topics WHERE journal COLLATE "C" >= $1 AND journal COLLATE "C" < $2`),
		// Due rows are locked FOR UPDATE SKIP LOCKED, so two passes never take one schedule.
		ScheduleDue: schedules + `WHERE next_ms > 0 AND next_ms <= $1 ORDER BY next_ms LIMIT $2 FOR UPDATE SKIP LOCKED`,
		WorkerRegister: s(`INSERT INTO {s}.workers (namespace, id, host, pid, queues, started_ms, seen_ms,
			provider, launch_id, running, idle_ms, offers, warm_host_keys)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13) ON CONFLICT (namespace, id) DO UPDATE SET seen_ms = $7,
			queues = $5, provider = $8, launch_id = $9, running = $10, idle_ms = $11, offers = $12, warm_host_keys = $13`),
		WorkerQueues: textArray,
		TokenRevoked: s(`SELECT revoked_ms FROM {s}.tokens WHERE id = $1 FOR UPDATE`),
		Permissions:  textArray,
		// The holder of a key is locked from the read on, so concurrent submits of the key
		// serialize on it.
		KeyHolder:      s(`SELECT id, created_ms, metadata FROM {s}.invocations WHERE namespace = $1 AND queue = $2 AND key = $3 FOR UPDATE`),
		DebounceHolder: s(`SELECT id, metadata, state = 0 AND waiting, attempt, available_ms FROM {s}.invocations WHERE namespace = $1 AND queue = $2 AND key = $3 FOR UPDATE`),
		// The queue's counter rows, locked in key order first (lockKeys: a settle may hold some).
		KeyLimitsApply: s(`UPDATE {s}.concurrency_keys AS k SET limit_n = ` + limit + `, weight = ` + weight + `
			WHERE (k.namespace, k.queue, k.concurrency_key) IN (SELECT namespace, queue, concurrency_key FROM {s}.concurrency_keys
			WHERE namespace = $1 AND queue = $2 ORDER BY concurrency_key FOR UPDATE)`),
	}
	st.Common(s)
	return st
}
