package sqliteplane

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"

	"github.com/lakeshore-dev/lakeshore/internal/planekit"
	"github.com/lakeshore-dev/lakeshore/plane"
)

// listColumns are rowColumns without the payload and result bytes, which a listing leaves
// out.
var listColumns = strings.NewReplacer("payload,", "NULL,", "result,", "NULL,").Replace(rowColumns)

// The listing walks invocations_queue (namespace, queue, state, id): one range per stored
// state it lists, each read from the cursor in id order and only as far as the page needs
// (covering: ids only), merged here; then the page's rows are read by id.
const (
	listNewest = `SELECT id FROM invocations WHERE namespace = ?1 AND queue = ?2 AND state = ?3 AND id < ?4 ORDER BY id DESC LIMIT +?5`
	listOldest = `SELECT id FROM invocations WHERE namespace = ?1 AND queue = ?2 AND state = ?3 AND id > ?4 ORDER BY id LIMIT +?5`
)

// InvocationList implements plane.Driver. A page costs O(Limit · states listed) index
// entries, whatever the queue's size, in one read transaction (it never blocks the writer).
// With a KeyPrefix a page examines at most plane.ListScanFactor × Limit invocations, so it
// may come back short with a Next cursor.
func (d *Driver) InvocationList(ctx context.Context, p *plane.ListParams) (*plane.ListPage, error) {
	limit, budget, err := planekit.ListBudget(p, d.checkOpen)
	if err != nil {
		return nil, err
	}
	query, after := listNewest, cmp.Or(p.After, "~") // "~" sorts after every ULID
	if p.Oldest {
		query, after = listOldest, p.After
	}
	tx, err := d.readDB.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, fmt.Errorf("list: %w", err)
	}
	defer tx.Rollback()
	var ids []string
	for _, state := range planekit.ListStates(p.State, true) {
		rs, err := tx.QueryContext(ctx, query, p.Namespace, p.Queue, state, after, budget+1)
		if err != nil {
			return nil, fmt.Errorf("list: %w", err)
		}
		found, err := planekit.Collect(sqlRows{rs}, "list", planekit.ScanString)
		if err != nil {
			return nil, err
		}
		ids = append(ids, found...)
	}
	slices.Sort(ids)
	if !p.Oldest {
		slices.Reverse(ids)
	}
	get, err := tx.PrepareContext(ctx, `SELECT `+listColumns+` FROM invocations WHERE id = ?`)
	if err != nil {
		return nil, fmt.Errorf("list: %w", err)
	}
	defer get.Close()
	i := 0
	invs, next, err := planekit.ListWalk(budget, limit, p.KeyPrefix, func() (string, string, *plane.Invocation, bool, error) {
		if i == len(ids) {
			return "", "", nil, false, nil
		}
		i++
		r, err := scanRow(get.QueryRowContext(ctx, ids[i-1]))
		if err != nil { // the read transaction sees every id it listed
			return "", "", nil, false, fmt.Errorf("list: %w", err)
		}
		return r.ID, r.Key.String, r.Invocation(), true, nil
	})
	if err != nil {
		return nil, err
	}
	return &plane.ListPage{Invocations: invs, Next: next}, nil
}
