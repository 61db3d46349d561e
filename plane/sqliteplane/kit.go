package sqliteplane

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/lakeshore-dev/lakeshore/internal/planekit"
	"github.com/lakeshore-dev/lakeshore/internal/sqlitedb"
	"github.com/lakeshore-dev/lakeshore/plane"
)

// kitDB is the driver as planekit.DB, for the verbs both SQL planes share (planekit.Verbs):
// reads on the read pool, writes through the writer.
type kitDB struct{ d *Driver }

func (k kitDB) Query(ctx context.Context, query string, args ...any) (planekit.ClosingRows, error) {
	rs, err := k.d.readDB.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	return sqlRows{rs}, nil
}

// QueryRow runs a statement prepared at start (prepareReads) when query is one.
func (k kitDB) QueryRow(ctx context.Context, query string, args ...any) planekit.Scanner {
	return k.d.reads.On(k.d.readDB).QueryRowContext(ctx, query, args...)
}

func (k kitDB) Write(ctx context.Context, fn func(planekit.Tx) error) error {
	return k.d.do(ctx, func(t *wtx) error { return fn(kitTx{t}) })
}

func (kitDB) Failure(_ context.Context, err error) error { return err }

func (k kitDB) Snapshot(ctx context.Context, fn func(planekit.Reader) error) error {
	tx, err := k.d.readDB.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("read: %w", err)
	}
	defer tx.Rollback()
	return fn(readTx{ctx, k.d.reads.On(tx)})
}

// readTx is a read transaction as planekit.Reader, on the statements prepared at start
// when a query is one of them.
type readTx struct {
	ctx context.Context
	tx  sqlitedb.On
}

func (r readTx) QueryRow(query string, args ...any) planekit.Scanner {
	return r.tx.QueryRowContext(r.ctx, query, args...)
}

func (r readTx) Query(query string, args ...any) (planekit.ClosingRows, error) {
	rs, err := r.tx.QueryContext(r.ctx, query, args...)
	if err != nil {
		return nil, err
	}
	return sqlRows{rs}, nil
}

type sqlRows struct{ *sql.Rows }

func (r sqlRows) Close() { r.Rows.Close() }

// kitTx is a writer transaction as planekit.Tx. A statement the writer prepared
// (statements.prepare: its own, and those of kit a submit runs) runs prepared.
type kitTx struct{ t *wtx }

func (k kitTx) Now() time.Time { return k.t.now }

func (k kitTx) Exec(query string, args ...any) (int64, error) {
	res, err := k.t.w.st.prepared.On(k.t.w.conn).ExecContext(k.t.ctx, query, args...)
	if err != nil {
		return 0, err
	}
	n, err := res.RowsAffected()
	k.t.written += n
	return n, err
}

func (k kitTx) QueryRow(query string, args ...any) planekit.Scanner {
	return k.t.w.st.prepared.On(k.t.w.conn).QueryRowContext(k.t.ctx, query, args...)
}

func (k kitTx) Query(query string, args ...any) (planekit.ClosingRows, error) {
	rs, err := k.t.w.conn.QueryContext(k.t.ctx, query, args...)
	if err != nil {
		return nil, err
	}
	return sqlRows{rs}, nil
}

func (k kitTx) Claimable(namespace, queue string) {
	k.t.markClaimable(namespace, queue)
	k.t.wake(planekit.QueueKey(namespace, queue))
}

func (k kitTx) Wake(key string) { k.t.wake(key) }

func (k kitTx) PauseChanged(namespace, queue string) {
	delete(k.t.w.paused, [2]string{namespace, queue})
}

func (k kitTx) Admission(namespace, queue string) (*planekit.Admission, error) {
	return k.t.admission(namespace, queue)
}

func (k kitTx) Queued(namespace, queue string) (int64, error) { return k.t.queued(namespace, queue) }

// SubmitUnadmitted submits a schedule's fires, whose depth limit planekit.Fire.Admit
// applied before: the keys and ids resolve as in any submit. A refusal is returned as the
// error, as PostgreSQL's submitMany does, so a fire is never recorded without its job.
func (k kitTx) SubmitUnadmitted(p *plane.SubmitManyParams, out []plane.SubmitResult) error {
	refused, err := k.t.submitMany(p, out, nil, false)
	return cmp.Or(err, refused)
}

func (k kitTx) AdmissionChanged(namespace, queue string) {
	delete(k.t.w.admissions, [2]string{namespace, queue})
}

func (k kitTx) Head(id string) (*head, error) { return k.t.head(id) }

func (k kitTx) Apply(h *head, tr plane.Transition) error { return k.t.apply(h, tr, nil) }

// kitStatements are the SQL of planekit.Verbs in SQLite's dialect: those both planes share
// (planekit.Statements.Common, through sqliteDialect) and those written here.
func kitStatements() *planekit.Statements {
	const schedules = `SELECT ` + planekit.ScheduleColumns + ` FROM schedules `
	st := &planekit.Statements{
		Row:    rowByID,
		RowSeq: true,
		StatsCounts: `SELECT namespace, queue, state, SUM(n) FROM counts
			WHERE ?1 = '' OR namespace = ?1 GROUP BY namespace, queue, state ORDER BY namespace, queue`,
		StatsKeys: strings.NewReplacer("{s}", "", "{ns}", "?1", "{now}", "?2").Replace(planekit.KeyStatsSQL),
		DemandShapes: `SELECT s.namespace, s.queue, s.shape, s.requirement, COALESCE(c.queued, 0), COALESCE(c.running, 0),
			(SELECT i.available_ms FROM invocations i INDEXED BY invocations_shaped
				WHERE i.namespace = s.namespace AND i.queue = s.queue AND i.shape = s.shape AND i.state = -3 ORDER BY i.id LIMIT 1)
			FROM placement_shapes s LEFT JOIN placement_counts c
			ON c.namespace = s.namespace AND c.queue = s.queue AND c.shape = s.shape
			WHERE ?1 = '' OR s.namespace = ?1`,
		DemandHead: `SELECT available_ms FROM invocations INDEXED BY invocations_queue
			WHERE namespace = ?1 AND queue = ?2 AND state = 0 ORDER BY id LIMIT 1`,
		ProviderList: `SELECT namespace, queue, provider FROM queue_providers
			WHERE ?1 = '' OR namespace = ?1 ORDER BY namespace, queue`,
		ScheduleGet: schedules + `WHERE namespace = ?1 AND name = ?2`,
		// planekit.ScheduleListBounds turns the filter and cursor into one range of the
		// primary key.
		ScheduleList: schedules + `WHERE (namespace, name) >= (?1, ?2) AND (namespace, name) <= (?3, ?4)
			ORDER BY namespace, name LIMIT +?5`,
		// The single writer serializes the creations a cap counts: nothing to lock.
		CapLock: `SELECT ?1`,
		// planekit.TopicRange is one range of the primary key (BINARY: byte order).
		TopicCount:  `SELECT count(*) FROM topics WHERE journal >= ?1 AND journal < ?2`,
		ScheduleDue: schedules + `WHERE next_ms > 0 AND next_ms <= ? ORDER BY next_ms LIMIT +?`,
		WorkerRegister: `INSERT INTO workers (namespace, id, host, pid, queues, started_ms, seen_ms,
			provider, launch_id, running, idle_ms, offers, warm_host_keys)
			VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13) ON CONFLICT (namespace, id) DO UPDATE SET seen_ms = ?7,
			queues = ?5, host = ?3, pid = ?4, provider = ?8, launch_id = ?9, running = ?10, idle_ms = ?11,
			offers = ?12, warm_host_keys = ?13`,
		WorkerQueues: planekit.ListCodec{
			Encode: func(v []string) any { b, _ := json.Marshal(v); return string(b) },
			Target: func(v *[]string) any {
				return textList{v, func(s string, v *[]string) { _ = json.Unmarshal([]byte(s), v) }}
			},
		},
		TokenRevoked: `SELECT revoked_ms FROM tokens WHERE id = ?`,
		Permissions: planekit.ListCodec{
			Encode: func(v []string) any { return strings.Join(v, ",") },
			Target: func(v *[]string) any { return textList{v, func(s string, v *[]string) { *v = strings.Split(s, ",") }} },
		},
		KeyHolder:      `SELECT id, created_ms, metadata FROM invocations WHERE namespace = ? AND queue = ? AND key = ?`,
		DebounceHolder: `SELECT id, metadata, state = -1, attempt, available_ms FROM invocations WHERE namespace = ? AND queue = ? AND key = ?`,
	}
	st.Common(sqliteDialect.Replace)
	return st
}

// sqliteDialect turns the SQL both planes share (planekit.Statements.Common, written in
// PostgreSQL's form) into SQLite's: tables without a schema, parameters ?1 …, and row bounds
// LIMIT +?N (internal/sqlitedb's doc.go says why).
var sqliteDialect = strings.NewReplacer("{s}.", "", "LIMIT $", "LIMIT +?", "$", "?")

// textList scans a list stored as text (decoded by decode) into dst.
type textList struct {
	dst    *[]string
	decode func(string, *[]string)
}

// Scan implements sql.Scanner.
func (l textList) Scan(src any) error {
	switch v := src.(type) {
	case string:
		l.decode(v, l.dst)
	case []byte:
		l.decode(string(v), l.dst)
	}
	return nil
}
