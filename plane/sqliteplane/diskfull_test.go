package sqliteplane

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/lakeshore-dev/lakeshore/plane"
	"github.com/stretchr/testify/require"
)

// A write SQLite refuses for want of room (SQLITE_FULL; here the file's max_page_count,
// which SQLite answers exactly as a full disk) is limit_exceeded naming the file and what
// to do, not an internal error: `lakeshore serve` on a full disk answered every submit
// 500 "internal error" (its log alone said "database or disk is full (13)"). Nothing of the
// refused submit is stored, reads work, and writes succeed again once there is room.
func TestDiskFullIsLimitExceeded(t *testing.T) {
	ctx := context.Background()
	d := openTemp(t, nil)
	submit := func(payload []byte) error {
		_, err := d.InvocationSubmitMany(ctx, &plane.SubmitManyParams{Namespace: "default", Queue: "q",
			Invocations: []plane.SubmitParams{{Payload: payload}}})
		return err
	}
	require.NoError(t, submit([]byte{1}))
	require.NoError(t, d.do(ctx, func(t *wtx) error {
		var pages int64
		if err := t.w.conn.QueryRowContext(t.ctx, "PRAGMA page_count").Scan(&pages); err != nil {
			return err
		}
		_, err := t.w.conn.ExecContext(t.ctx, fmt.Sprintf("PRAGMA max_page_count = %d", pages))
		return err
	}))
	err := submit(bytes.Repeat([]byte{7}, 1<<20))
	require.Error(t, err)
	require.True(t, errors.Is(err, plane.ErrLimitExceeded), "%v", err)
	require.Contains(t, err.Error(), "is full")
	require.Contains(t, err.Error(), d.path)
	require.Contains(t, err.Error(), "Free space")
	n, err := d.InvocationCount(ctx, &plane.CountParams{Namespace: "default", Queue: "q", State: plane.StateQueued})
	require.NoError(t, err)
	require.EqualValues(t, 1, n, "the refused submit stored nothing")

	require.NoError(t, d.do(ctx, func(t *wtx) error {
		_, err := t.w.conn.ExecContext(t.ctx, "PRAGMA max_page_count = 1073741823")
		return err
	}))
	require.NoError(t, submit(bytes.Repeat([]byte{7}, 1<<20)))
}
