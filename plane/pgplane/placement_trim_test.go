package pgplane

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore/internal/pgtest"
	"github.com/lakeshore-dev/lakeshore/internal/planekit"
	"github.com/lakeshore-dev/lakeshore/plane/planetest"
)

// TestPlacementTrimmed checks, as sqliteplane's, the rows maintenance trims
// (planetest.PlacementRowsTrimmed).
func TestPlacementTrimmed(t *testing.T) {
	ctx := context.Background()
	var clock atomic.Int64
	clock.Store(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	d := open(t, pgtest.Database(t), &Config{Now: func() time.Time { return time.Unix(0, clock.Load()) }, MaintenanceInterval: time.Hour})
	rows := func() (shapes, warm int) {
		require.NoError(t, d.pool.QueryRow(ctx, `SELECT count(*) FROM `+d.sql.placementTrim[0].Table).Scan(&shapes))
		require.NoError(t, d.pool.QueryRow(ctx, `SELECT count(*) FROM `+d.sql.placementTrim[1].Table).Scan(&warm))
		return shapes, warm
	}
	planetest.PlacementRowsTrimmed(t, d, func(by time.Duration) { clock.Add(int64(by)) }, rows, planekit.PlacementIdleTrim)
}
