package filestore

import (
	"context"
	"fmt"
	"strings"

	"github.com/lakeshore-dev/lakeshore/internal/record"
	"github.com/lakeshore-dev/lakeshore/persist"
)

// Produced reports the production status of each (sample, field): result[i][j] says
// whether the sample at indexes[i] of partition has a value for fields[j] — from its
// own record or from a later PutFields or KV put. Samples that do not exist in the
// partition, or were cleared, report false for every field. Errors: *InvalidError,
// ErrClosed, SQLite errors.
func (q *fileQueue) Produced(ctx context.Context, partition string, indexes []int64, fields []string) ([][]bool, error) {
	if err := persist.CheckName("partition", partition); err != nil {
		return nil, err
	}
	if err := q.calls.Enter(); err != nil {
		return nil, err
	}
	defer q.calls.Leave()
	out := make([][]bool, len(indexes))
	for i := range out {
		out[i] = make([]bool, len(fields))
	}
	if len(indexes) == 0 || len(fields) == 0 {
		return out, nil
	}
	err := q.view(ctx, func(tx queryer) error {
		rows, err := tx.QueryContext(ctx, `SELECT s.lo, s.hi, f.fields FROM segments s JOIN fieldsets f ON f.id = s.fieldset
			WHERE s.partition = ? ORDER BY s.lo`, partition)
		if err != nil {
			return fmt.Errorf("read segments: %w", err)
		}
		type seg struct {
			sp     record.Span
			fields map[string]bool
		}
		var segs []seg
		var all []record.Span
		for rows.Next() {
			var sg seg
			var fs string
			if err := rows.Scan(&sg.sp.Lo, &sg.sp.Hi, &fs); err != nil {
				rows.Close()
				return fmt.Errorf("read segments: %w", err)
			}
			sg.fields = map[string]bool{}
			for _, f := range strings.Split(fs, "\x1f") {
				sg.fields[f] = true
			}
			segs = append(segs, sg)
			all = append(all, sg.sp)
		}
		rows.Close()
		tomb, err := loadSpans(ctx, tx, `SELECT lo, hi FROM tombstones ORDER BY lo`)
		if err != nil {
			return err
		}
		live := record.SpansOf(all).Minus(tomb)
		for j, f := range fields {
			var has []record.Span
			for _, sg := range segs {
				if sg.fields[f] {
					has = append(has, sg.sp)
				}
			}
			prod, err := loadSpans(ctx, tx, `SELECT lo, hi FROM produced WHERE field = ? ORDER BY lo`, f)
			if err != nil {
				return err
			}
			ready := record.SpansOf(has).Union(prod).Intersect(live)
			for i, x := range indexes {
				out[i][j] = ready.Contains(x)
			}
		}
		return nil
	})
	return out, err
}
