package rl_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore"
	"github.com/lakeshore-dev/lakeshore/persist"
	"github.com/lakeshore-dev/lakeshore/persist/filestore"
	"github.com/lakeshore-dev/lakeshore/plane"
	"github.com/lakeshore-dev/lakeshore/rl"
	"github.com/lakeshore-dev/lakeshore/scope"
)

type fixture struct {
	d       *lakeshore.Dispatch
	jobs    *lakeshore.Queue
	data    *persist.Queue
	weights *rl.Weights
}

func setup(t *testing.T) fixture {
	t.Helper()
	ctx := context.Background()
	d, err := lakeshore.Open(ctx, ":memory:", nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = d.Close() })
	jobs, err := d.Queue("rollouts", nil)
	require.NoError(t, err)
	data, err := persist.Open(ctx, "traj", &persist.Config{Dir: t.TempDir()}, filestore.Driver())
	require.NoError(t, err)
	t.Cleanup(func() { _ = data.Close(context.Background()) })
	s, err := scope.Open(ctx, "file://"+t.TempDir(), "run")
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return fixture{d: d, jobs: jobs, data: data, weights: &rl.Weights{Data: data, Scope: s}}
}

// work runs one job of f.jobs with h, failing the test when none comes.
func (f fixture) work(t *testing.T, h lakeshore.HandlerFunc) {
	t.Helper()
	handled, err := f.jobs.Working(context.Background(), h, &lakeshore.WorkingOptions{ClaimOptions: lakeshore.ClaimOptions{Wait: 10 * time.Second}})
	require.NoError(t, err)
	require.True(t, handled)
}

func TestWeightsPublishLoadCurrent(t *testing.T) {
	ctx := context.Background()
	f := setup(t)
	p, err := f.weights.Current(ctx)
	require.NoError(t, err)
	require.Equal(t, rl.Policy{Version: 0}, p, "nothing published: version 0, no weights")
	require.NoError(t, f.weights.Publish(ctx, 0, map[string]any{"bias": 0.5}))
	require.NoError(t, f.weights.Publish(ctx, 2, map[string]any{"bias": 2.5}))
	require.NoError(t, f.weights.Publish(ctx, 2, map[string]any{"bias": 9.0}), "a repeat of the current version")
	v, err := f.data.Version(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(2), v)
	w, err := f.weights.Load(ctx, 2)
	require.NoError(t, err)
	require.Equal(t, map[string]any{"bias": 2.5}, w, "a published version is never rewritten")
	require.False(t, f.weights.Exists(ctx, 1))
	_, err = f.weights.Load(ctx, 1)
	require.True(t, errors.Is(err, plane.ErrNotFound), "%v", err)
	var invalid *persist.InvalidError
	require.ErrorAs(t, f.weights.Publish(ctx, 1, nil), &invalid, "versions never go back")
	require.ErrorAs(t, f.weights.Publish(ctx, -1, nil), &invalid)
}

func TestRolloutTagsVersionsAndReloadsWeights(t *testing.T) {
	ctx := context.Background()
	f := setup(t)
	runs := 0
	h := rl.Rollout(f.weights, func(ctx context.Context, p rl.Policy, job *lakeshore.Job) ([]persist.Record, error) {
		var in struct {
			Tag string `json:"tag"`
			N   int    `json:"n"`
		}
		if err := job.Decode(&in); err != nil {
			return nil, err
		}
		runs++
		bias := p.Weights.(map[string]any)["bias"].(float64)
		recs := make([]persist.Record, in.N)
		for i := range recs {
			recs[i] = persist.Record{"tag": in.Tag, "bias": bias}
		}
		return recs, nil
	}, nil)
	require.NoError(t, f.weights.Publish(ctx, 0, map[string]any{"bias": 1.0}))
	for i, tag := range []string{"a", "b", "c"} {
		if i == 1 {
			require.NoError(t, f.weights.Publish(ctx, 1, map[string]any{"bias": 2.0}))
		}
		_, err := f.jobs.Submit(ctx, map[string]any{"tag": tag, "n": 2}, nil)
		require.NoError(t, err)
		f.work(t, h)
	}
	rows, err := f.data.Get(ctx, 0, 100, nil)
	require.NoError(t, err)
	var got [][3]any
	for _, r := range rows {
		got = append(got, [3]any{r.Fields["tag"], r.Fields["bias"], r.Fields[persist.WeightVersionField]})
	}
	require.Equal(t, [][3]any{
		{"a", 1.0, int64(0)}, {"a", 1.0, int64(0)},
		{"b", 2.0, int64(1)}, {"b", 2.0, int64(1)},
		{"c", 2.0, int64(1)}, {"c", 2.0, int64(1)},
	}, got, "each job's records carry its version and that version's weights")
	require.Equal(t, 3, runs)
}

// TestRolloutRetryWritesNoRecordTwice runs a job's handler twice, as a retry after a
// worker killed once its put had committed does (the same job id): the put carries the
// id rollout.{job id}.0, so the second attempt is answered with the first's indexes and
// every record is in the queue once, also when the retry's fn returns another count.
// Before 2026-12-07 every attempt was a plain put and the records were written twice.
func TestRolloutRetryWritesNoRecordTwice(t *testing.T) {
	ctx := context.Background()
	f := setup(t)
	attempt := 0
	h := rl.Rollout(f.weights, func(ctx context.Context, p rl.Policy, job *lakeshore.Job) ([]persist.Record, error) {
		attempt++
		n := 3
		if attempt == 3 {
			n = 2 // a retry whose records vary: the first attempt's stand
		}
		recs := make([]persist.Record, n)
		for i := range recs {
			recs[i] = persist.Record{"attempt": int64(attempt), "i": int64(i)}
		}
		return recs, nil
	}, nil)
	require.NoError(t, f.weights.Publish(ctx, 0, nil))
	_, err := f.jobs.Submit(ctx, map[string]any{}, nil)
	require.NoError(t, err)
	f.work(t, func(ctx context.Context, job *lakeshore.Job) (any, error) {
		for range 3 {
			if _, err := h(ctx, job); err != nil {
				return nil, err
			}
		}
		return nil, nil
	})
	rows, err := f.data.Get(ctx, 0, 100, nil)
	require.NoError(t, err)
	var got [][2]any
	for _, r := range rows {
		got = append(got, [2]any{r.Fields["attempt"], r.Fields["i"]})
	}
	require.Equal(t, [][2]any{{int64(1), int64(0)}, {int64(1), int64(1)}, {int64(1), int64(2)}}, got,
		"the first attempt's records, once")
}

func TestRolloutHeldByBackpressureWaitsForTheTrainer(t *testing.T) {
	ctx := context.Background()
	f := setup(t)
	h := rl.Rollout(f.weights, func(ctx context.Context, p rl.Policy, job *lakeshore.Job) ([]persist.Record, error) {
		return []persist.Record{{"x": int64(1)}, {"x": int64(2)}, {"x": int64(3)}}, nil
	}, &rl.RolloutOptions{Admission: &persist.Admission{Task: "train", MaxUnconsumed: 4, MaxAhead: -1, Block: true, Timeout: 100 * time.Millisecond}})
	_, err := f.jobs.Submit(ctx, nil, nil)
	require.NoError(t, err)
	f.work(t, h) // an empty buffer: admitted
	id, err := f.jobs.Submit(ctx, nil, nil)
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() {
		handled, err := f.jobs.Working(ctx, h, &lakeshore.WorkingOptions{ClaimOptions: lakeshore.ClaimOptions{Wait: 10 * time.Second}})
		if err == nil && !handled {
			err = errors.New("no job claimed")
		}
		done <- err
	}()
	require.Eventually(t, func() bool {
		inv, err := f.jobs.Get(ctx, id)
		return err == nil && inv.State == lakeshore.StateRunning
	}, 30*time.Second, 10*time.Millisecond)
	// Held past several of the put's block timeouts: still running, nothing written.
	time.Sleep(500 * time.Millisecond)
	inv, err := f.jobs.Get(ctx, id)
	require.NoError(t, err)
	require.Equal(t, lakeshore.StateRunning, inv.State)
	st, err := f.data.Stats(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(3), st.Len)
	meta, err := f.data.Reader().GetMeta(ctx, &persist.MetaRequest{Fields: []string{"x"}, BatchSize: 3, Task: "train"})
	require.NoError(t, err)
	require.Equal(t, 3, meta.Size)
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(30 * time.Second):
		t.Fatal("the held rollout was not let through by the trainer's consumption")
	}
	inv, err = f.jobs.Get(ctx, id)
	require.NoError(t, err)
	require.Equal(t, lakeshore.StateSucceeded, inv.State)
	st, err = f.data.Stats(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(6), st.Len)
}

func TestPoolKeepsNInFlight(t *testing.T) {
	ctx := context.Background()
	f := setup(t)
	pool, err := rl.PoolForWindow(f.jobs, 100, 32, func(i int64) any { return map[string]any{"seed": i} })
	require.NoError(t, err)
	require.Equal(t, 3, pool.InFlight)
	small, err := rl.PoolForWindow(f.jobs, 8, 32, func(i int64) any { return i })
	require.NoError(t, err)
	require.Equal(t, 1, small.InFlight)
	var invalid *persist.InvalidError
	_, err = rl.PoolForWindow(f.jobs, 8, 0, nil)
	require.ErrorAs(t, err, &invalid)
	_, err = (&rl.Pool{Queue: f.jobs, InFlight: 0, Payload: func(int64) any { return nil }}).TopUp(ctx)
	require.ErrorAs(t, err, &invalid)

	ids, err := pool.TopUp(ctx)
	require.NoError(t, err)
	require.Len(t, ids, 3)
	ids, err = pool.TopUp(ctx)
	require.NoError(t, err)
	require.Empty(t, ids, "already 3 in flight")
	f.work(t, func(ctx context.Context, job *lakeshore.Job) (any, error) { return nil, nil })
	ids, err = pool.TopUp(ctx)
	require.NoError(t, err)
	require.Len(t, ids, 1, "the finished one is replaced")
	inv, err := f.jobs.Get(ctx, ids[0])
	require.NoError(t, err)
	require.Equal(t, "rollout-3", inv.Key)
	live, total, err := pool.Live(ctx)
	require.NoError(t, err)
	require.Equal(t, [2]int64{3, 4}, [2]int64{live, total})
}

// TestPoolNumbersJobsOnPastTrimmedOnes: the pool's next job number does not go back when
// finished jobs are trimmed (Queue.Trim, or the plane's retention after 7 days): on the old
// code it was the count of the queue's jobs, so after a trim it named job numbers already
// used — whose keys the trim had freed — and submitted their payloads (their seeds) again.
func TestPoolNumbersJobsOnPastTrimmedOnes(t *testing.T) {
	ctx := context.Background()
	f := setup(t)
	pool := &rl.Pool{Queue: f.jobs, InFlight: 2, Payload: func(i int64) any { return map[string]any{"seed": i} }}
	_, err := pool.TopUp(ctx)
	require.NoError(t, err)
	noop := func(ctx context.Context, job *lakeshore.Job) (any, error) { return nil, nil }
	f.work(t, noop)
	f.work(t, noop)
	_, err = pool.TopUp(ctx) // rollout-2 and rollout-3
	require.NoError(t, err)
	f.work(t, noop)
	trimmed, err := f.jobs.Trim(ctx, 0)
	require.NoError(t, err)
	require.EqualValues(t, 3, trimmed, "rollout-0, 1 and 2 finished and trimmed")
	ids, err := pool.TopUp(ctx)
	require.NoError(t, err)
	require.Len(t, ids, 1)
	inv, err := f.jobs.Get(ctx, ids[0])
	require.NoError(t, err)
	require.Equal(t, "rollout-4", inv.Key, "the next number, not a trimmed job's again")
}
