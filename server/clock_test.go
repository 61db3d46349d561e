package server_test

import (
	"log/slog"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore/plane"
	"github.com/lakeshore-dev/lakeshore/plane/sqliteplane"
	"github.com/lakeshore-dev/lakeshore/server"
)

// TestTokenExpiryOnThePlanesClock: a server stamps and checks a token's expiry on the
// plane's clock (plane.ClockOf: here the SQLite plane's Config.Now, an hour off from this
// machine's; on PostgreSQL the database's), not on its machine's. Tokens stamped by another
// server whose clock agrees with the plane's end when the plane's clock says so: before,
// a server whose machine ran an hour ahead of the plane refused a token ten minutes from
// its end as expired, and one an hour behind accepted a token that had expired ten
// minutes before. The pgplane seam for a skewed machine (Config.machineClock) is not
// reachable from this package; the SQLite plane's clock stands for the database's.
func TestTokenExpiryOnThePlanesClock(t *testing.T) {
	t.Parallel()
	for name, skew := range map[string]time.Duration{"PlaneBehind": -time.Hour, "PlaneAhead": time.Hour} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			planeNow := func() time.Time { return time.Now().Add(skew) }
			back, err := sqliteplane.Open(t.Context(), ":memory:", &sqliteplane.Config{Now: planeNow})
			require.NoError(t, err)
			b := &testBundle{back: back, logs: &syncBuffer{}}
			b.srv = server.New(back, &server.Config{AdminToken: adminSecret,
				Logger: slog.New(slog.NewTextHandler(b.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
			b.ts = httptest.NewServer(b.srv)
			t.Cleanup(func() {
				b.srv.Stop()
				b.ts.Close()
				back.Close()
			})
			stored := func(id string, expires time.Time) string {
				secret := server.SecretPrefix + "clock-" + id
				require.NoError(t, back.TokenCreate(t.Context(), &plane.TokenInfo{ID: id, Hash: server.HashToken(secret),
					Namespace: "*", Queue: "*", Permissions: []plane.Permission{plane.PermissionRead},
					CreatedAt: planeNow().Add(-time.Hour), ExpiresAt: expires}))
				return secret
			}
			live := stored("live", planeNow().Add(10*time.Minute))
			expired := stored("expired", planeNow().Add(-10*time.Minute))
			count := "/v1/namespaces/default/queues/jobs/count?state=queued"
			r := b.do(t, "GET", count, "", nil, live)
			require.Equal(t, 200, r.status, "a token 10 minutes from its end on the plane's clock is live: %s", r.body)
			b.do(t, "GET", count, "", nil, expired).requireError(t, 401, "unauthorized")

			// A token this server mints expires on the plane's clock too.
			minted, tok := b.mint(t, "*", "*", 600, plane.PermissionRead)
			require.WithinDuration(t, planeNow().Add(10*time.Minute), tok.ExpiresAt, time.Minute)
			require.Equal(t, 200, b.do(t, "GET", count, "", nil, minted).status)
		})
	}
}
