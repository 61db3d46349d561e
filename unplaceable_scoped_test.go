package lakeshore_test

import (
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore"
	"github.com/lakeshore-dev/lakeshore/plane"
	"github.com/lakeshore-dev/lakeshore/plane/httpplane"
	"github.com/lakeshore-dev/lakeshore/plane/sqliteplane"
	"github.com/lakeshore-dev/lakeshore/server"
)

// TestUnplaceableWithAQueueScopedToken: a token scoped to one queue does not see a live
// worker that also serves a queue it does not cover (GET /v1/workers hides it), yet that
// worker can place the queue's jobs. Dispatch.Unplaceable over HTTP must not call those
// jobs unplaceable (`lakeshore queues` said "no live worker declares" while one did):
// it takes the server's capable_workers, counted over the whole registry, and reads
// nothing of the hidden worker but that count.
func TestUnplaceableWithAQueueScopedToken(t *testing.T) {
	t.Parallel()
	back, err := sqliteplane.Open(t.Context(), ":memory:", nil)
	require.NoError(t, err)
	t.Cleanup(func() { back.Close() })
	local := lakeshore.New(back, &lakeshore.Config{Namespace: "team-a", Logger: testLogger(t)})
	secret, _, err := local.Admin().CreateToken(t.Context(), &lakeshore.TokenOptions{Namespace: "team-a", Queue: "q1",
		Permissions: []lakeshore.Permission{lakeshore.PermissionRead}})
	require.NoError(t, err)
	gpu := &lakeshore.Requirement{GPUs: 1}
	q, err := local.Queue("q1", nil)
	require.NoError(t, err)
	_, err = q.Submit(t.Context(), 1, &lakeshore.SubmitOptions{Requirement: gpu})
	require.NoError(t, err)
	require.NoError(t, back.WorkerRegister(t.Context(), &plane.WorkerInfo{ID: "w8", Namespace: "team-a", Host: "h", PID: 1,
		Queues: []string{"q1", "secret-q"}, StartedAt: time.Now(), Offers: &plane.Offers{GPUs: 1}}))

	un, err := local.Unplaceable(t.Context(), "team-a")
	require.NoError(t, err)
	require.Empty(t, un, "in process: worker w8 places the job")

	srv := server.New(back, &server.Config{AdminToken: "lks_admin-secret", Logger: testLogger(t)})
	ts := httptest.NewServer(srv)
	t.Cleanup(func() {
		ts.Close()
		srv.Stop()
	})
	for _, token := range []string{"lks_admin-secret", secret} {
		over, err := lakeshore.Open(t.Context(), ts.URL, &lakeshore.Config{Namespace: "team-a", HTTP: &httpplane.Config{Token: token}, Logger: testLogger(t)})
		require.NoError(t, err)
		t.Cleanup(func() { over.Close() })
		un, err := over.Unplaceable(t.Context(), "team-a")
		require.NoError(t, err)
		require.Empty(t, un, "over HTTP (token %d chars): worker w8 places the job, seen or not", len(token))
	}
	// With no capable worker at all the job is said, over HTTP too.
	require.NoError(t, back.WorkerRemove(t.Context(), "team-a", "w8"))
	over, err := lakeshore.Open(t.Context(), ts.URL, &lakeshore.Config{Namespace: "team-a", HTTP: &httpplane.Config{Token: secret}, Logger: testLogger(t)})
	require.NoError(t, err)
	t.Cleanup(func() { over.Close() })
	un, err = over.Unplaceable(t.Context(), "team-a")
	require.NoError(t, err)
	require.Len(t, un, 1)
	require.Equal(t, int64(1), un[0].Queued)
}
