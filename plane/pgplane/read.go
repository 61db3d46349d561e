package pgplane

import (
	"context"
	"database/sql"
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
	for _, st := range planekit.ListStates(p.State, false) {
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
	ids, next, err := planekit.ListWalk(budget, limit, p.KeyPrefix, func() (string, string, string, bool, error) {
		if !rs.Next() {
			return "", "", "", false, rs.Err()
		}
		var id string
		var key sql.NullString
		err := rs.Scan(&id, &key)
		return id, key.String, id, err == nil, err
	})
	rs.Close()
	if err == nil {
		err = rs.Err()
	}
	if err != nil {
		return nil, d.failure(ctx, fmt.Errorf("list: %w", err))
	}
	page := &plane.ListPage{Invocations: []*plane.Invocation{}, Next: next}
	if len(ids) == 0 {
		return page, nil
	}
	rows, err := d.pool.Query(ctx, d.sql.rowsByID, ids)
	if err != nil {
		return nil, d.failure(ctx, fmt.Errorf("list: %w", err))
	}
	found, err := planekit.Collect(rows, "list", scanRow)
	if err != nil {
		return nil, d.failure(ctx, err)
	}
	page.Invocations = planekit.InOrder(page.Invocations, ids, found) // one trimmed since the scan: left out
	return page, nil
}
