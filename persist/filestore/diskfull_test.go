package filestore

import (
	"context"
	"database/sql"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore/internal/sqlitedb"
	"github.com/lakeshore-dev/lakeshore/persist"
	"github.com/lakeshore-dev/lakeshore/plane"
)

// A put SQLite refuses for want of room (SQLITE_FULL; here meta.db's max_page_count, which
// SQLite answers as a full disk) is plane.DiskFull (limit_exceeded) naming meta.db: a put on
// a full disk answered 500 "internal error". Nothing is stored; reads work; puts succeed
// again once there is room.
func TestPutOnFullDiskIsLimitExceeded(t *testing.T) {
	ctx := context.Background()
	q := openTemp(t, nil)
	_, err := persist.New(q).Put(ctx, persist.Record{"x": "a"})
	require.NoError(t, err)
	setMax := func(max string) {
		require.NoError(t, q.w.do(ctx, func(t *wtx) error {
			if max == "" {
				var pages int64
				if err := t.conn.QueryRowContext(t.ctx, "PRAGMA page_count").Scan(&pages); err != nil {
					return err
				}
				max = fmt.Sprint(pages)
			}
			_, err := t.conn.ExecContext(t.ctx, "PRAGMA max_page_count = "+max)
			return err
		}))
	}
	setMax("")
	big := persist.Record{"x": strings.Repeat("y", 1<<20)}
	_, err = persist.New(q).Put(ctx, big)
	require.ErrorIs(t, err, plane.ErrLimitExceeded)
	require.ErrorContains(t, err, "meta.db is full")
	require.ErrorContains(t, err, q.dir)
	st, err := q.Stats(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 1, st.NextIndex, "the refused put stored nothing")
	setMax("1073741823")
	_, err = persist.New(q).Put(ctx, big)
	require.NoError(t, err)
}

// A meta.db a newer build migrated while this queue is open refuses this build's next put
// (plane.ErrUnavailable, naming meta.db and both versions) and stores nothing; before, the
// put went on with this build's statements.
func TestPutAfterNewerBuildMigratedIsRefused(t *testing.T) {
	ctx := context.Background()
	q, err := openFile(ctx, "q", &persist.Config{Dir: t.TempDir()})
	require.NoError(t, err)
	defer func() {
		// Close flushes through the writer, which refuses too.
		if err := q.Close(ctx); err != nil {
			require.ErrorIs(t, err, sqlitedb.ErrSchemaNewer)
		}
	}()
	_, err = persist.New(q).Put(ctx, persist.Record{"x": "a"})
	require.NoError(t, err)
	db, err := sql.Open("sqlite", filepath.Join(q.dir, "meta.db"))
	require.NoError(t, err)
	defer db.Close()
	sub, err := fs.Sub(migrations, "migrations")
	require.NoError(t, err)
	_, err = db.Exec(fmt.Sprintf("PRAGMA user_version = %d", sqlitedb.Versions(sub)+1))
	require.NoError(t, err)
	_, err = persist.New(q).Put(ctx, persist.Record{"x": "b"})
	require.ErrorIs(t, err, plane.ErrUnavailable)
	require.ErrorIs(t, err, sqlitedb.ErrSchemaNewer)
	require.ErrorContains(t, err, "meta.db")
	var next string
	require.NoError(t, db.QueryRow(`SELECT value FROM meta WHERE key = 'next_index'`).Scan(&next))
	require.Equal(t, "1", next, "the refused put stored nothing")
}
