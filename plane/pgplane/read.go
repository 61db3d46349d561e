package pgplane

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/lakeshore-dev/lakeshore/plane"
)

// InvocationGet implements plane.Driver.
func (d *Driver) InvocationGet(ctx context.Context, id string) (*plane.Invocation, error) {
	if err := plane.ValidateID(id); err != nil {
		return nil, err
	}
	r, err := d.getRow(ctx, id)
	if err != nil {
		return nil, err
	}
	return r.invocation(), nil
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
		return nil, connectionError(fmt.Errorf("get %s: %w", id, err))
	}
	return r, nil
}

// InvocationWait implements plane.Driver.
func (d *Driver) InvocationWait(ctx context.Context, p *plane.WaitParams) (*plane.Invocation, error) {
	if err := plane.ValidateID(p.ID); err != nil {
		return nil, err
	}
	if p.Timeout < 0 {
		return nil, plane.Invalid("timeout", p.Timeout, "use a duration ≥ 0")
	}
	waitUntil := time.Now().Add(p.Timeout)
	for {
		changed, release := d.hub.watch(invocationKey(p.ID))
		r, err := d.getRow(ctx, p.ID)
		if err != nil {
			release()
			return nil, err
		}
		if r.terminal() {
			release()
			return r.invocation(), nil
		}
		err = d.sleep(ctx, changed, time.Until(waitUntil))
		release()
		if errors.Is(err, plane.ErrTimeout) && time.Until(waitUntil) > 0 {
			continue
		}
		if err != nil {
			return nil, err
		}
	}
}

// InvocationCount implements plane.Driver: a sum over the queue's counter rows of one state
// (levels × shards rows, however many invocations).
func (d *Driver) InvocationCount(ctx context.Context, p *plane.CountParams) (int64, error) {
	if err := plane.ValidateName("namespace", p.Namespace); err != nil {
		return 0, err
	}
	if err := plane.ValidateName("queue name", p.Queue); err != nil {
		return 0, err
	}
	state := stateNumber(p.State)
	if state < 0 {
		_, err := plane.ParseState(string(p.State))
		return 0, err
	}
	if err := d.checkOpen(); err != nil {
		return 0, err
	}
	var n int64
	if err := d.pool.QueryRow(ctx, d.sql.count, p.Namespace, p.Queue, int16(state)).Scan(&n); err != nil {
		return 0, connectionError(fmt.Errorf("count: %w", err))
	}
	return n, nil
}

// QueueStatsList implements plane.Driver.
func (d *Driver) QueueStatsList(ctx context.Context, namespace string) ([]plane.QueueStats, error) {
	if namespace != "" {
		if err := plane.ValidateName("namespace", namespace); err != nil {
			return nil, err
		}
	}
	if err := d.checkOpen(); err != nil {
		return nil, err
	}
	rs, err := d.pool.Query(ctx, `SELECT namespace, queue, state, sum(n)::bigint FROM `+d.schema+`.counts
		WHERE $1 = '' OR namespace = $1 GROUP BY namespace, queue, state ORDER BY namespace, queue`, namespace)
	if err != nil {
		return nil, connectionError(fmt.Errorf("queue stats: %w", err))
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
			out[len(out)-1].Counts[stateNames[state]] = n
		}
	}
	rs.Close()
	if err := rs.Err(); err != nil {
		return nil, connectionError(fmt.Errorf("queue stats: %w", err))
	}
	// Add each queue's admission block, and the queues with a block but no invocations yet.
	rs, err = d.pool.Query(ctx, `SELECT namespace, queue, max_depth, on_full, rate_limit, burst, deadline_cutoff_ms
		FROM `+d.schema+`.queues WHERE $1 = '' OR namespace = $1`, namespace)
	if err != nil {
		return nil, connectionError(fmt.Errorf("queue stats: %w", err))
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
		if err := rs.Scan(&ns, &q, &a.MaxDepth, &onFull, &a.RateLimit, &a.Burst, &cutoffMS); err != nil {
			return nil, fmt.Errorf("queue stats: %w", err)
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
		return nil, connectionError(fmt.Errorf("queue stats: %w", err))
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Namespace != out[j].Namespace {
			return out[i].Namespace < out[j].Namespace
		}
		return out[i].Queue < out[j].Queue
	})
	return out, nil
}

// InvocationList implements plane.Driver. A page walks the (queue, id) index, or the
// (queue, state, id) index with a state filter, from the cursor: O(Limit) rows read when no
// key prefix filters them out. The cursor is the last id of the page.
func (d *Driver) InvocationList(ctx context.Context, p *plane.ListParams) (*plane.ListPage, error) {
	if err := plane.ValidateName("namespace", p.Namespace); err != nil {
		return nil, err
	}
	if err := plane.ValidateName("queue name", p.Queue); err != nil {
		return nil, err
	}
	state := -1
	if p.State != "" {
		if state = stateNumber(p.State); state < 0 {
			_, err := plane.ParseState(string(p.State))
			return nil, err
		}
	}
	if p.After != "" {
		if err := plane.ValidateID(p.After); err != nil {
			return nil, plane.Invalid("cursor", p.After, "pass the Next of the previous page")
		}
	}
	if p.Limit < 0 || p.Limit > plane.ListLimitMax {
		return nil, plane.Invalid("limit", p.Limit, "use 1–"+strconv.Itoa(plane.ListLimitMax)+" (0: the default "+strconv.Itoa(plane.ListLimitDefault)+")")
	}
	limit := p.Limit
	if limit == 0 {
		limit = plane.ListLimitDefault
	}
	if err := d.checkOpen(); err != nil {
		return nil, err
	}
	var where strings.Builder
	args := []any{p.Namespace, p.Queue}
	where.WriteString(`namespace = $1 AND queue = $2`)
	if state >= 0 {
		args = append(args, int16(state))
		where.WriteString(` AND state = $` + strconv.Itoa(len(args)))
	}
	if p.KeyPrefix != "" {
		args = append(args, likePrefix(p.KeyPrefix))
		where.WriteString(` AND key LIKE $` + strconv.Itoa(len(args)) + ` ESCAPE '\'`)
	}
	order, cmp := "DESC", "<"
	if p.Oldest {
		order, cmp = "ASC", ">"
	}
	if p.After != "" {
		args = append(args, p.After)
		where.WriteString(` AND id ` + cmp + ` $` + strconv.Itoa(len(args)))
	}
	args = append(args, limit+1)
	stateOrder := ""
	if state >= 0 {
		stateOrder = "state " + order + ", "
	}
	sql := `SELECT ` + rowColumns + ` FROM ` + d.schema + `.invocations WHERE ` + where.String() +
		` ORDER BY namespace ` + order + `, queue ` + order + `, ` + stateOrder + `id ` + order + ` LIMIT $` + strconv.Itoa(len(args))
	rs, err := d.pool.Query(ctx, sql, args...)
	if err != nil {
		return nil, connectionError(fmt.Errorf("list: %w", err))
	}
	defer rs.Close()
	page := &plane.ListPage{}
	for rs.Next() {
		r, err := scanRow(rs)
		if err != nil {
			return nil, fmt.Errorf("list: %w", err)
		}
		page.Invocations = append(page.Invocations, r.invocation())
	}
	if err := rs.Err(); err != nil {
		return nil, connectionError(fmt.Errorf("list: %w", err))
	}
	if len(page.Invocations) > limit {
		page.Invocations = page.Invocations[:limit]
		page.Next = page.Invocations[limit-1].ID
	}
	return page, nil
}

// likePrefix is a LIKE pattern matching strings that start with prefix.
func likePrefix(prefix string) string {
	r := strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`)
	return r.Replace(prefix) + "%"
}
