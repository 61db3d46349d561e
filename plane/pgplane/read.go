package pgplane

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

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
	r, err := scanRow(d.pool.QueryRow(ctx, d.sql.row, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, plane.ErrNotFound
	}
	if err != nil {
		return nil, d.failure(ctx, fmt.Errorf("get %s: %w", id, err))
	}
	return r, nil
}

// InvocationWait implements plane.Driver.
func (d *Driver) InvocationWait(ctx context.Context, p *plane.WaitParams) (*plane.Invocation, error) {
	return planekit.WaitTerminal(ctx, d.hub, p.ID, p.Timeout, d.getRow, d.sleep)
}

// InvocationCount implements plane.Driver: a sum over the queue's counter rows of one state
// (levels × shards rows, however many invocations).
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
	if err := d.pool.QueryRow(ctx, d.sql.count, p.Namespace, p.Queue, int16(state)).Scan(&n); err != nil {
		return 0, d.failure(ctx, fmt.Errorf("count: %w", err))
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
	rs, err := d.pool.Query(ctx, `SELECT namespace, queue, state, sum(n)::bigint FROM `+d.schema+`.counts
		WHERE $1 = '' OR namespace = $1 GROUP BY namespace, queue, state ORDER BY namespace, queue`, namespace)
	if err != nil {
		return nil, d.failure(ctx, fmt.Errorf("queue stats: %w", err))
	}
	var out []plane.QueueStats
	for rs.Next() {
		var ns, q string
		var state int16
		var n int64
		if err := rs.Scan(&ns, &q, &state, &n); err != nil {
			rs.Close()
			return nil, fmt.Errorf("queue stats: %w", err)
		}
		if len(out) == 0 || out[len(out)-1].Namespace != ns || out[len(out)-1].Queue != q {
			out = append(out, plane.QueueStats{Namespace: ns, Queue: q, Counts: make(map[plane.State]int64)})
		}
		if n != 0 {
			out[len(out)-1].Counts[planekit.StateName(int(state))] = n
		}
	}
	rs.Close()
	if err := rs.Err(); err != nil {
		return nil, d.failure(ctx, fmt.Errorf("queue stats: %w", err))
	}
	// Add each queue's admission block, and the queues with a block but no invocations yet.
	rs, err = d.pool.Query(ctx, `SELECT namespace, queue, max_depth, on_full, rate_limit, burst, deadline_cutoff_ms, concurrency
		FROM `+d.schema+`.queues WHERE $1 = '' OR namespace = $1`, namespace)
	if err != nil {
		return nil, d.failure(ctx, fmt.Errorf("queue stats: %w", err))
	}
	defer rs.Close()
	index := make(map[[2]string]int, len(out))
	for i, s := range out {
		index[[2]string{s.Namespace, s.Queue}] = i
	}
	for rs.Next() {
		var ns, q, onFull string
		var a plane.Admission
		var cutoffMS int64
		var concurrency []byte
		if err := rs.Scan(&ns, &q, &a.MaxDepth, &onFull, &a.RateLimit, &a.Burst, &cutoffMS, &concurrency); err != nil {
			return nil, fmt.Errorf("queue stats: %w", err)
		}
		if err := planekit.DecodeConcurrency(concurrency, &a); err != nil {
			return nil, err
		}
		a.OnFull, a.DeadlineCutoff = plane.OnFull(onFull), time.Duration(cutoffMS)*time.Millisecond
		i, ok := index[[2]string{ns, q}]
		if !ok {
			out = append(out, plane.QueueStats{Namespace: ns, Queue: q, Counts: map[plane.State]int64{}})
			i = len(out) - 1
		}
		out[i].Admission = &a
	}
	if err := rs.Err(); err != nil {
		return nil, d.failure(ctx, fmt.Errorf("queue stats: %w", err))
	}
	rs.Close()
	keys, err := d.pool.Query(ctx, strings.NewReplacer("{s}", d.schema+".", "{ns}", "$1").Replace(planekit.KeyStatsSQL), namespace)
	if err != nil {
		return nil, d.failure(ctx, fmt.Errorf("queue stats: %w", err))
	}
	out, err = planekit.AddKeyStats(out, keys, d.cfg.Now())
	keys.Close()
	if err != nil {
		return nil, err
	}
	paused, err := d.pausedQueues(ctx, namespace)
	if err != nil {
		return nil, err
	}
	return plane.MarkPaused(out, paused), nil
}

// InvocationList implements plane.Driver. A page walks the (queue, id) index, or the
// (queue, state, id) index with a state filter, from the cursor, reading ids and keys of at
// most Limit entries (plane.ListScanFactor × Limit with a KeyPrefix, so such a page may come
// back short with a Next cursor), then the rows of the page: O(Limit) whatever the queue's
// size. The cursor is the last id examined.
func (d *Driver) InvocationList(ctx context.Context, p *plane.ListParams) (*plane.ListPage, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if err := d.checkOpen(); err != nil {
		return nil, err
	}
	limit, budget := planekit.ListBudget(p)
	// One index scan per state listed and waiting flag, on (queue, state, waiting, id)
	// (the index fifo claims walk too), merged by id: the same O(budget) entries per state
	// whatever the queue's size, with no index of its own to keep up on every insert.
	states := []int{}
	if p.State != "" {
		states = append(states, planekit.StateNumber(p.State))
		if p.State == plane.StateQueued {
			states = append(states, planekit.StateKeyed, planekit.StateShaped)
		}
	} else {
		states = append(states, planekit.StateShaped, planekit.StateKeyed)
		for i := planekit.StateQueued; i <= planekit.StateTimeout; i++ {
			states = append(states, i)
		}
	}
	order, cmpOp := "DESC", "<"
	if p.Oldest {
		order, cmpOp = "ASC", ">"
	}
	args := []any{p.Namespace, p.Queue, budget + 1}
	after := ""
	if p.After != "" {
		args = append(args, p.After)
		after = ` AND id ` + cmpOp + ` $4`
	}
	var parts []string
	for _, st := range states {
		for _, waiting := range []string{"false", "true"} {
			parts = append(parts, `(SELECT id, key FROM `+d.schema+`.invocations WHERE namespace = $1 AND queue = $2 AND state = `+
				strconv.Itoa(st)+` AND waiting = `+waiting+after+` ORDER BY namespace `+order+`, queue `+order+`, state `+order+
				`, waiting `+order+`, id `+order+` LIMIT $3)`)
		}
	}
	scan := `SELECT id, key FROM (` + strings.Join(parts, " UNION ALL ") + `) AS scanned ORDER BY id ` + order + ` LIMIT $3`
	rs, err := d.pool.Query(ctx, scan, args...)
	if err != nil {
		return nil, d.failure(ctx, fmt.Errorf("list: %w", err))
	}
	page := &plane.ListPage{Invocations: []*plane.Invocation{}}
	var ids []string
	examined, lastExamined, more := 0, "", false
	for rs.Next() {
		var id string
		var key *string
		if err := rs.Scan(&id, &key); err != nil {
			rs.Close()
			return nil, fmt.Errorf("list: %w", err)
		}
		if examined == budget || len(ids) == limit {
			more = true // a row beyond the page, or beyond the scan's budget
			break
		}
		examined++
		lastExamined = id
		if p.KeyPrefix == "" || key != nil && strings.HasPrefix(*key, p.KeyPrefix) {
			ids = append(ids, id)
		}
	}
	rs.Close()
	if err := rs.Err(); err != nil {
		return nil, d.failure(ctx, fmt.Errorf("list: %w", err))
	}
	if more {
		page.Next = lastExamined // the last id of a full page, or the last one examined
	}
	if len(ids) == 0 {
		return page, nil
	}
	rows, err := d.pool.Query(ctx, d.sql.rowsByID, ids)
	if err != nil {
		return nil, d.failure(ctx, fmt.Errorf("list: %w", err))
	}
	defer rows.Close()
	byID := make(map[string]*plane.Invocation, len(ids))
	for rows.Next() {
		r, err := scanRow(rows)
		if err != nil {
			return nil, fmt.Errorf("list: %w", err)
		}
		byID[r.ID] = r.Invocation()
	}
	if err := rows.Err(); err != nil {
		return nil, d.failure(ctx, fmt.Errorf("list: %w", err))
	}
	for _, id := range ids {
		if inv := byID[id]; inv != nil { // trimmed since the scan: left out
			page.Invocations = append(page.Invocations, inv)
		}
	}
	return page, nil
}
