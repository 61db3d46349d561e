package sqliteplane

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore/internal/planekit"
	"github.com/lakeshore-dev/lakeshore/plane/planetest"
)

// TestPlacementTrimmed checks the rows maintenance trims (planetest.PlacementRowsTrimmed).
func TestPlacementTrimmed(t *testing.T) {
	ctx := context.Background()
	clock := &fakeClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	d, err := Open(ctx, ":memory:", &Config{Now: clock.Now, MaintenanceInterval: time.Hour})
	require.NoError(t, err)
	defer d.Close()
	rows := func() (shapes, warm int) {
		require.NoError(t, d.do(ctx, func(t *wtx) error {
			if err := t.w.conn.QueryRowContext(t.ctx, `SELECT count(*) FROM placement_shapes`).Scan(&shapes); err != nil {
				return err
			}
			return t.w.conn.QueryRowContext(t.ctx, `SELECT count(*) FROM placement_warm`).Scan(&warm)
		}))
		return shapes, warm
	}
	planetest.PlacementRowsTrimmed(t, d, clock.Advance, rows, planekit.PlacementIdleTrim)
}
