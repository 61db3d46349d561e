package sqliteplane

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/lakeshore-dev/lakeshore/internal/planekit"
	"github.com/lakeshore-dev/lakeshore/plane"
)

// InvocationGet implements plane.Driver.
func (d *Driver) InvocationGet(ctx context.Context, id string) (*plane.Invocation, error) {
	return planekit.Get(ctx, id, d.getRow)
}

func (d *Driver) getRow(ctx context.Context, id string) (*row, error) {
	if err := d.checkOpen(); err != nil {
		return nil, err
	}
	r, err := scanRow(d.reads.row.QueryRowContext(ctx, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, plane.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("get %s: %w", id, err)
	}
	return r, nil
}

// InvocationWait implements plane.Driver.
func (d *Driver) InvocationWait(ctx context.Context, p *plane.WaitParams) (*plane.Invocation, error) {
	return planekit.WaitTerminal(ctx, d.hub, p.ID, p.Timeout, d.getRow, d.sleep)
}

// InvocationCount implements plane.Driver.
func (d *Driver) InvocationCount(ctx context.Context, p *plane.CountParams) (int64, error) {
	if err := planekit.ValidateQueue(p.Namespace, p.Queue); err != nil {
		return 0, err
	}
	state := planekit.StateNumber(p.State)
	if state < 0 {
		_, err := plane.ParseState(string(p.State))
		return 0, err
	}
	if err := d.checkOpen(); err != nil {
		return 0, err
	}
	var n int64
	also := state // queued counts delayed invocations too
	if state == planekit.StateQueued {
		also = planekit.StateDelayed
	}
	err := d.reads.count.QueryRowContext(ctx, p.Namespace, p.Queue, state, also).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("count: %w", err)
	}
	return n, nil
}

// QueueStatsList implements plane.Driver.
func (d *Driver) QueueStatsList(ctx context.Context, namespace string) ([]plane.QueueStats, error) {
	if namespace != "" {
		if err := plane.ValidateNamespace(namespace); err != nil {
			return nil, err
		}
	}
	if err := d.checkOpen(); err != nil {
		return nil, err
	}
	rs, err := d.readDB.QueryContext(ctx, `SELECT namespace, queue, state, SUM(n) FROM counts
		WHERE ?1 = '' OR namespace = ?1 GROUP BY namespace, queue, state ORDER BY namespace, queue`, namespace)
	if err != nil {
		return nil, fmt.Errorf("queue stats: %w", err)
	}
	defer rs.Close()
	var out []plane.QueueStats
	for rs.Next() {
		var ns, q string
		var state int
		var n int64
		if err := rs.Scan(&ns, &q, &state, &n); err != nil {
			return nil, fmt.Errorf("queue stats: %w", err)
		}
		if len(out) == 0 || out[len(out)-1].Namespace != ns || out[len(out)-1].Queue != q {
			out = append(out, plane.QueueStats{Namespace: ns, Queue: q, Counts: make(map[plane.State]int64)})
		}
		if n != 0 {
			out[len(out)-1].Counts[planekit.StateName(state)] += n
		}
	}
	if err := rs.Err(); err != nil {
		return nil, fmt.Errorf("queue stats: %w", err)
	}
	return d.withAdmission(ctx, namespace, out)
}

// withAdmission adds each queue's admission block to stats, and the queues that have a
// block but no invocations yet, keeping the (namespace, queue) order.
func (d *Driver) withAdmission(ctx context.Context, namespace string, stats []plane.QueueStats) ([]plane.QueueStats, error) {
	rs, err := d.readDB.QueryContext(ctx, `SELECT namespace, queue, `+planekit.AdmissionColumns+` FROM queues
		WHERE ?1 = '' OR namespace = ?1`, namespace)
	if err != nil {
		return nil, fmt.Errorf("queue stats: %w", err)
	}
	defer rs.Close()
	index := make(map[[2]string]int, len(stats))
	for i, s := range stats {
		index[[2]string{s.Namespace, s.Queue}] = i
	}
	for rs.Next() {
		var ns, q string
		var a admission
		var onFull string
		var cutoffMS int64
		var concurrency []byte
		if err := rs.Scan(&ns, &q, &a.MaxDepth, &onFull, &a.RateLimit, &a.Burst, &cutoffMS, &a.Tokens, &a.TokensMS, &concurrency); err != nil {
			return nil, fmt.Errorf("queue stats: %w", err)
		}
		if err := planekit.DecodeConcurrency(concurrency, &a.Admission); err != nil {
			return nil, err
		}
		a.OnFull, a.DeadlineCutoff = plane.OnFull(onFull), time.Duration(cutoffMS)*time.Millisecond
		i, ok := index[[2]string{ns, q}]
		if !ok {
			stats = append(stats, plane.QueueStats{Namespace: ns, Queue: q, Counts: map[plane.State]int64{}})
			i = len(stats) - 1
		}
		stats[i].Admission = &a.Admission
	}
	if err := rs.Err(); err != nil {
		return nil, fmt.Errorf("queue stats: %w", err)
	}
	rs.Close()
	keys, err := d.readDB.QueryContext(ctx, strings.NewReplacer("{s}", "", "{ns}", "?1").Replace(planekit.KeyStatsSQL), namespace)
	if err != nil {
		return nil, fmt.Errorf("queue stats: %w", err)
	}
	stats, err = planekit.AddKeyStats(stats, keys, d.cfg.Now())
	keys.Close()
	if err != nil {
		return nil, err
	}
	paused, err := d.pausedQueues(ctx, namespace)
	if err != nil {
		return nil, err
	}
	return plane.MarkPaused(stats, paused), nil
}

// readStatements are prepared once on the read pool (database/sql re-prepares them per
// connection as needed), so the read path never parses SQL.
type readStatements struct {
	row, count, topicClosed, frames *sql.Stmt
}

func (r *readStatements) prepare(ctx context.Context, db *sql.DB) error {
	for _, p := range []struct {
		stmt **sql.Stmt
		sql  string
	}{
		{&r.row, `SELECT ` + rowColumns + ` FROM invocations WHERE id = ?`},
		{&r.count, `SELECT COALESCE(SUM(n), 0) FROM counts WHERE namespace = ?1 AND queue = ?2 AND state IN (?3, ?4)`},
		{&r.topicClosed, `SELECT closed FROM topics WHERE journal = ?`},
		{&r.frames, `SELECT seq, kind, value, attempt, time_ms FROM frames WHERE journal = ? AND seq > ? ORDER BY seq LIMIT ?`},
	} {
		stmt, err := db.PrepareContext(ctx, p.sql)
		if err != nil {
			return fmt.Errorf("prepare %q: %w", p.sql, err)
		}
		*p.stmt = stmt
	}
	return nil
}
