package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore/api"
	"github.com/lakeshore-dev/lakeshore/internal/pgtest"
	"github.com/lakeshore-dev/lakeshore/persist"
	"github.com/lakeshore-dev/lakeshore/persist/httpstore"
	"github.com/lakeshore-dev/lakeshore/plane"
)

// mintToken creates an access token for namespace (every queue) on the server at base
// with the admin token, and returns its secret.
func mintToken(t *testing.T, base, admin, namespace string, perms ...plane.Permission) string {
	t.Helper()
	var ps []string
	for _, p := range perms {
		ps = append(ps, string(p))
	}
	body, err := json.Marshal(&api.TokenCreateRequest{Namespace: namespace, Queue: "*", Permissions: ps})
	require.NoError(t, err)
	req, err := http.NewRequest(http.MethodPost, base+"/v1/tokens", bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+admin)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var out api.TokenCreateResponse
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
	require.Equal(t, http.StatusOK, resp.StatusCode, "%+v", out)
	require.NotEmpty(t, out.Secret)
	return out.Secret
}

// TestServeDataDistributed: two `lakeshore serve` processes given one distributed data
// store (--data postgres://…?blob=file://…) serve one data queue. A producer puts on the
// first server while two readers of one task (a trainer's two ranks), one on each
// server, take batches with the sequential sampler, and a reader of another task takes
// them on the second: each task gets every produced index exactly once, across servers.
// A token of another namespace cannot read the queue, and its own queue of the same
// name shares nothing with it.
func TestServeDataDistributed(t *testing.T) {
	if testing.Short() {
		t.Skip("starts PostgreSQL and two servers")
	}
	const total, batch = 2000, 100
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	db := pgtest.Database(t)
	u, err := url.Parse(db)
	require.NoError(t, err)
	q := u.Query()
	q.Set("blob", "file://"+t.TempDir())
	u.RawQuery = q.Encode()
	admin := "an-admin-token-of-32-bytes-length"
	adminFile := filepath.Join(t.TempDir(), "admin")
	require.NoError(t, os.WriteFile(adminFile, []byte(admin+"\n"), 0o600))
	args := []string{"--admin-token-file", adminFile, "--data", u.String()}
	servers := []*servedProcess{startServe(t, db, args...), startServe(t, db, args...)}

	tokA := mintToken(t, servers[0].url, admin, "tenant-a", plane.PermissionDataPut, plane.PermissionDataRead)
	tokB := mintToken(t, servers[1].url, admin, "tenant-b", plane.PermissionDataPut, plane.PermissionDataRead)
	open := func(s *servedProcess, ns, token string) *persist.Queue {
		pq, err := persist.Open(ctx, "rollouts", &persist.Config{URL: s.url, Namespace: ns, Token: token}, httpstore.Driver())
		require.NoError(t, err)
		t.Cleanup(func() { _ = pq.Close(context.Background()) })
		return pq
	}
	producer := open(servers[0], "tenant-a", tokA)
	ranks := []*persist.Queue{open(servers[0], "tenant-a", tokA), open(servers[1], "tenant-a", tokA)}
	eval := open(servers[1], "tenant-a", tokA)

	var produced []int64
	prodErr := make(chan error, 1)
	go func() {
		for i := 0; i < total; i += batch {
			recs := make([]persist.Record, batch)
			for j := range recs {
				recs[j] = persist.Record{"i": i + j, "reward": float64(i+j) / 10}
			}
			idx, err := producer.PutBatch(ctx, recs)
			if err != nil {
				prodErr <- err
				return
			}
			produced = append(produced, idx...)
		}
		prodErr <- nil
	}()

	// consume takes batches of task from q until want indexes arrived in all (shared by
	// the readers of one task), checking each batch's rows against their indexes.
	var mu sync.Mutex
	got := map[string][]int64{}
	consume := func(q *persist.Queue, task string, want int) error {
		for {
			mu.Lock()
			n := len(got[task])
			mu.Unlock()
			if n >= want {
				return nil
			}
			b, m, err := q.Reader().GetBatch(ctx, &persist.MetaRequest{Fields: []string{"i"}, BatchSize: 50, Task: task,
				Sampler: persist.SamplerSpec{Name: "sequential"}, Wait: true, Timeout: time.Second})
			if errors.Is(err, persist.ErrTimeout) {
				continue // no full batch yet (the producer is behind, or the other rank took it)
			}
			if err != nil {
				return err
			}
			rows, err := b.Rows()
			b.Release()
			if err != nil {
				return err
			}
			for k, row := range rows {
				if row.Index != m.Indexes[k] || row.Fields["i"] != row.Index {
					return &plane.InvalidError{Field: "row", Value: row, Rule: "the row of its index"}
				}
			}
			mu.Lock()
			got[task] = append(got[task], m.Indexes...)
			mu.Unlock()
		}
	}
	var wg sync.WaitGroup
	errs := make(chan error, 3)
	for _, r := range ranks {
		wg.Go(func() { errs <- consume(r, "train", total) })
	}
	wg.Go(func() { errs <- consume(eval, "eval", total) })
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.NoError(t, <-prodErr)
	require.Len(t, produced, total)
	for task, idx := range got {
		slices.Sort(idx)
		require.Equal(t, produced, idx, "task %s: every produced index once, across the two servers", task)
		n, err := eval.Consumed(ctx, task, "")
		require.NoError(t, err)
		require.Equal(t, int64(total), n, "task %s: consumption seen from the other server", task)
	}

	// Namespaces stay apart: tenant B's token reads nothing of tenant A's queue, on
	// either server, and B's queue of the same name is its own.
	for _, s := range servers {
		_, err := persist.Open(ctx, "rollouts", &persist.Config{URL: s.url, Namespace: "tenant-a", Token: tokB}, httpstore.Driver())
		require.ErrorIs(t, err, plane.ErrForbidden, "tenant B opening tenant A's queue on %s", s.url)
	}
	own := open(servers[1], "tenant-b", tokB)
	n, err := own.Len(ctx)
	require.NoError(t, err)
	require.Zero(t, n, "tenant B's queue rollouts shares no row with tenant A's")
	_, err = own.PutBatch(ctx, []persist.Record{{"i": -1}})
	require.NoError(t, err)
	n, err = producer.Len(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(total), n)
}
