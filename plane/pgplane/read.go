package pgplane

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/lakeshore-dev/lakeshore/internal/planekit"
	"github.com/lakeshore-dev/lakeshore/plane"
)

// InvocationList implements plane.Driver. A page walks the (queue, id) index, or the
// (queue, state, id) index with a state filter, from the cursor, reading ids and keys of at
// most Limit entries (plane.ListScanFactor × Limit with a KeyPrefix, so such a page may come
// back short with a Next cursor), then the rows of the page: O(Limit) whatever the queue's
// size. The cursor is the last id examined.
func (d *Driver) InvocationList(ctx context.Context, p *plane.ListParams) (*plane.ListPage, error) {
	limit, budget, err := planekit.ListBudget(p, d.checkOpen)
	if err != nil {
		return nil, err
	}
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
