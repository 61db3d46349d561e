package filestore

import (
	"context"
	"errors"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore/persist"
)

// In one group, an op that writes, moves the puts' cached counters and then fails undoes
// only itself; a refused put (schema conflict) is refused alone; the other puts commit
// with contiguous indexes and the counters meta.db holds are right.
func TestWriterGroupFailureUndoesOnlyItsOp(t *testing.T) {
	ctx := context.Background()
	q := openTemp(t, &persist.Config{FlushInterval: -1, FlushRows: -1})
	_, err := persist.New(q).Put(ctx, persist.Record{"i": 0})
	require.NoError(t, err)
	boom := errors.New("boom")
	want := int64(1)
	for round := 0; ; round++ {
		require.Less(t, round, 20, "the failing op never ran after a put of its group")
		const puts = 20
		var started, wg sync.WaitGroup
		gate, holding := make(chan struct{}), make(chan struct{})
		wg.Go(func() {
			// Hold the writer until the others wait for it, so they form one group.
			require.NoError(t, q.w.do(ctx, func(*wtx) error { close(holding); <-gate; return nil }))
		})
		<-holding
		idx := make([]int64, puts)
		errs := make([]error, puts)
		started.Add(puts + 2)
		for i := range puts {
			wg.Go(func() {
				started.Done()
				idx[i], errs[i] = persist.New(q).Put(ctx, persist.Record{"i": i})
			})
		}
		var refused, failed error
		wg.Go(func() {
			started.Done()
			_, refused = persist.New(q).Put(ctx, persist.Record{"i": "not an integer"})
		})
		// The failing op is handed to the writer after the puts (the writer takes them in
		// the order they came), so that it runs after puts of its group.
		waitHanding := func(n int) {
			t.Helper()
			require.Eventually(t, func() bool { return q.w.w.Handing() >= n }, 30*time.Second, time.Millisecond,
				"%d callers wait for the held writer", n)
		}
		waitHanding(puts + 1)
		grouped := false
		wg.Go(func() {
			started.Done()
			failed = q.w.do(ctx, func(t *wtx) error {
				grouped = t.ops > 1
				if err := t.loadPuts(); err != nil {
					return err
				}
				t.ps.next += 1000
				t.ps.tailAdd += 1000
				t.ps.pendN += 1000
				if _, err := t.exec(`UPDATE meta SET value = value + 1000 WHERE key = 'next_index'`); err != nil {
					return err
				}
				return boom
			})
		})
		started.Wait()
		waitHanding(puts + 2)
		close(gate)
		wg.Wait()
		require.ErrorIs(t, failed, boom)
		var se *persist.SchemaError
		require.ErrorAs(t, refused, &se)
		for i, err := range errs {
			require.NoError(t, err, "put %d", i)
		}
		sort.Slice(idx, func(a, b int) bool { return idx[a] < idx[b] })
		for i, x := range idx {
			require.Equal(t, want+int64(i), x, "indexes are contiguous")
		}
		want += puts
		next, err := q.NextIndex(ctx)
		require.NoError(t, err)
		require.Equal(t, want, next)
		n, err := q.Len(ctx)
		require.NoError(t, err)
		require.Equal(t, want, n)
		var tailRows int64
		require.NoError(t, q.rdb.QueryRowContext(ctx, `SELECT value FROM meta WHERE key = 'tail_rows'`).Scan(&tailRows))
		require.Equal(t, want, tailRows)
		if grouped {
			break
		}
	}
	recs, err := persist.New(q).Get(ctx, 0, int(want), nil)
	require.NoError(t, err)
	require.Len(t, recs, int(want), "every committed put reads back")
}
