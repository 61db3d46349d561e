package lakeshore_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore"
)

// TestSDKCoversTheDriver: the verbs the CLI used to reach through Dispatch.Driver() for
// (stats, workers, tokens, trim across queues, maintenance) are in the SDK.
func TestSDKCoversTheDriver(t *testing.T) {
	t.Parallel()
	q, b := setup(t, nil)
	d := b.d
	ctx := t.Context()

	t.Run("QueueStats", func(t *testing.T) {
		_, err := q.Submit(ctx, 1, nil)
		require.NoError(t, err)
		require.NoError(t, q.SetAdmission(ctx, lakeshore.Admission{MaxDepth: 10}))
		stats, err := d.QueueStats(ctx, d.Namespace())
		require.NoError(t, err)
		require.NotEmpty(t, stats)
		var found bool
		for _, s := range stats {
			if s.Queue == q.Name() {
				found = true
				require.GreaterOrEqual(t, s.Counts[lakeshore.StateQueued], int64(1))
				require.NotNil(t, s.Admission)
				require.Equal(t, int64(10), s.Admission.MaxDepth)
			}
		}
		require.True(t, found)
		_, err = d.QueueStats(ctx, "bad/ns")
		require.ErrorIs(t, err, lakeshore.ErrInvalid)
	})

	t.Run("Workers", func(t *testing.T) {
		started := make(chan struct{})
		release := make(chan struct{})
		w, err := lakeshore.NewWorker(d, []lakeshore.Handler{lakeshore.Handle("reg", func(ctx context.Context, job *lakeshore.Job) (any, error) {
			close(started)
			<-release
			return nil, nil
		})}, &lakeshore.WorkerOptions{ID: "w-sdk", Logger: testLogger(t)})
		require.NoError(t, err)
		rq, err := d.Queue("reg", nil)
		require.NoError(t, err)
		_, err = rq.Submit(ctx, nil, nil)
		require.NoError(t, err)
		require.NoError(t, w.Start(ctx))
		<-started
		ws, err := d.Workers(ctx, nil)
		require.NoError(t, err)
		require.Len(t, ws, 1)
		require.Equal(t, "w-sdk", ws[0].ID)
		require.Equal(t, []string{"reg"}, ws[0].Queues)
		all, err := d.Workers(ctx, &lakeshore.WorkersOptions{AllNamespaces: true})
		require.NoError(t, err)
		require.Len(t, all, 1)
		close(release)
		require.NoError(t, w.Stop(ctx))
		ws, err = d.Workers(ctx, nil)
		require.NoError(t, err)
		require.Empty(t, ws, "a stopped worker deregisters")
		_, err = d.Workers(ctx, &lakeshore.WorkersOptions{SeenWithin: -time.Second})
		require.ErrorIs(t, err, lakeshore.ErrInvalid)
	})

	t.Run("Tokens", func(t *testing.T) {
		admin := d.Admin()
		_, _, err := admin.CreateToken(ctx, nil)
		require.ErrorIs(t, err, lakeshore.ErrInvalid, "scope must be explicit")
		_, _, err = admin.CreateToken(ctx, &lakeshore.TokenOptions{Permissions: []lakeshore.Permission{lakeshore.PermissionRead}, Queue: "*"})
		require.ErrorIs(t, err, lakeshore.ErrInvalid, "no namespace: never every tenant by default")
		_, _, err = admin.CreateToken(ctx, &lakeshore.TokenOptions{Namespace: "a", Queue: "*", Permissions: []lakeshore.Permission{"root"}})
		require.ErrorIs(t, err, lakeshore.ErrInvalid)
		secret, tok, err := admin.CreateToken(ctx, &lakeshore.TokenOptions{ID: "t1", Namespace: "team-a", Queue: "*",
			Permissions: []lakeshore.Permission{lakeshore.PermissionSubmit}, TTL: time.Hour})
		require.NoError(t, err)
		require.Contains(t, secret, lakeshore.TokenSecretPrefix)
		require.Equal(t, "t1", tok.ID)
		require.False(t, tok.ExpiresAt.IsZero())
		toks, err := admin.Tokens(ctx)
		require.NoError(t, err)
		require.Len(t, toks, 1)
		ok, err := admin.RevokeToken(ctx, "t1")
		require.NoError(t, err)
		require.True(t, ok)
		_, err = admin.RevokeToken(ctx, "nope")
		require.ErrorIs(t, err, lakeshore.ErrNotFound)
	})

	t.Run("TrimAndMaintain", func(t *testing.T) {
		tq, err := d.Queue("trim-me", nil)
		require.NoError(t, err)
		oq, err := d.Queue("trim-other", nil)
		require.NoError(t, err)
		for _, qq := range []*lakeshore.Queue{tq, oq} {
			id, err := qq.Submit(ctx, nil, nil)
			require.NoError(t, err)
			_, err = qq.Cancel(ctx, id)
			require.NoError(t, err)
		}
		n, err := d.Admin().Trim(ctx, &lakeshore.TrimOptions{Namespace: d.Namespace(), Queue: "trim-me"})
		require.NoError(t, err)
		require.Equal(t, int64(1), n)
		n, err = d.Admin().Trim(ctx, &lakeshore.TrimOptions{Namespace: d.Namespace()})
		require.NoError(t, err)
		require.GreaterOrEqual(t, n, int64(1))
		_, err = d.Admin().Trim(ctx, &lakeshore.TrimOptions{OlderThan: -time.Second})
		require.ErrorIs(t, err, lakeshore.ErrInvalid)
		require.NoError(t, d.Admin().Maintain(ctx))
	})

	t.Run("SubmitManyResults", func(t *testing.T) {
		res, err := q.SubmitManyResults(ctx, []lakeshore.Submission{
			{Payload: 1, SubmitOptions: lakeshore.SubmitOptions{Key: "k-results"}},
			{Payload: 2, SubmitOptions: lakeshore.SubmitOptions{Key: "k-results"}},
		})
		require.NoError(t, err)
		require.Len(t, res, 2)
		require.False(t, res[0].Existing)
		require.True(t, res[1].Existing)
		require.Equal(t, res[0].ID, res[1].ID)
	})

	t.Run("NegativeDelayInvalid", func(t *testing.T) {
		_, err := q.Submit(ctx, 1, &lakeshore.SubmitOptions{Delay: -time.Second})
		require.ErrorIs(t, err, lakeshore.ErrInvalid)
	})

	t.Run("ListValidates", func(t *testing.T) {
		_, err := q.List(ctx, &lakeshore.ListOptions{State: "bogus"})
		require.ErrorIs(t, err, lakeshore.ErrInvalid)
		_, err = q.List(ctx, &lakeshore.ListOptions{Limit: 5000})
		require.ErrorIs(t, err, lakeshore.ErrInvalid)
	})
}

// TestQueueList pages through a queue with cursors. Needs Driver.InvocationList (branch
// core); skipped while the plane answers ErrNotImplemented.
func TestQueueList(t *testing.T) {
	t.Parallel()
	q, _ := setup(t, nil)
	ctx := t.Context()
	var ids []string
	for i := range 7 {
		id, err := q.Submit(ctx, i, &lakeshore.SubmitOptions{Key: map[bool]string{true: "even/", false: "odd/"}[i%2 == 0] + string(rune('a'+i))})
		require.NoError(t, err)
		ids = append(ids, id)
	}
	page, err := q.List(ctx, &lakeshore.ListOptions{Limit: 3})
	if errors.Is(err, lakeshore.ErrNotImplemented) {
		t.Skip("the plane does not list invocations yet")
	}
	require.NoError(t, err)
	require.Len(t, page.Invocations, 3)
	require.Equal(t, ids[6], page.Invocations[0].ID, "newest first")
	require.NotEmpty(t, page.Next)
	var all []string
	for inv, err := range q.All(ctx, &lakeshore.ListOptions{Limit: 2, Oldest: true}) {
		require.NoError(t, err)
		all = append(all, inv.ID)
	}
	require.Equal(t, ids, all, "every invocation once, oldest first, across pages")
	even, err := q.List(ctx, &lakeshore.ListOptions{KeyPrefix: "even/"})
	require.NoError(t, err)
	require.Len(t, even.Invocations, 4)
	require.Empty(t, even.Next)
	running, err := q.List(ctx, &lakeshore.ListOptions{State: lakeshore.StateRunning})
	require.NoError(t, err)
	require.Empty(t, running.Invocations)
}

// TestSubmitDelay: a delayed job is queued but not claimable before its due time. Needs
// the plane's delayed submit (branch core); skipped while the plane ignores it.
func TestSubmitDelay(t *testing.T) {
	t.Parallel()
	q, _ := setup(t, nil)
	ctx := t.Context()
	late, err := q.Submit(ctx, "late", &lakeshore.SubmitOptions{Delay: time.Hour})
	require.NoError(t, err)
	job, err := q.Claim(ctx, nil)
	require.NoError(t, err)
	if job != nil && job.ID == late {
		t.Skip("the plane ignores SubmitParams.Delay (delayed submit not merged yet)")
	}
	require.Nil(t, job, "not claimable for an hour")
	n, err := q.Len(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(1), n, "but queued")
	soon, err := q.Submit(ctx, "soon", &lakeshore.SubmitOptions{NotBefore: time.Now().Add(300 * time.Millisecond)})
	require.NoError(t, err)
	job, err = q.Claim(ctx, &lakeshore.ClaimOptions{Wait: 5 * time.Second})
	require.NoError(t, err)
	require.NotNil(t, job, "due within the wait")
	require.Equal(t, soon, job.ID)
}

// TestOpenDriver opens a plane's driver for a program that serves it.
func TestOpenDriver(t *testing.T) {
	t.Parallel()
	drv, err := lakeshore.OpenDriver(t.Context(), filepath.Join(t.TempDir(), "p.db"), &lakeshore.Config{Logger: testLogger(t)})
	require.NoError(t, err)
	require.NoError(t, drv.Close())
	_, err = lakeshore.OpenDriver(t.Context(), "ftp://x", nil)
	require.ErrorIs(t, err, lakeshore.ErrInvalid)
}

// TestWaitReleased: after a kill, the worker confirms that the handler returned.
func TestWaitReleased(t *testing.T) {
	t.Parallel()
	q, d, _ := setupWorker(t)
	ctx := t.Context()
	id, err := q.Submit(ctx, nil, nil)
	require.NoError(t, err)
	started := make(chan struct{})
	returned := make(chan time.Time, 1)
	w, err := lakeshore.NewWorker(d, []lakeshore.Handler{lakeshore.Handle("test", func(ctx context.Context, job *lakeshore.Job) (any, error) {
		close(started)
		<-ctx.Done()
		time.Sleep(100 * time.Millisecond) // cleaning up
		returned <- time.Now()
		return nil, ctx.Err()
	})}, &lakeshore.WorkerOptions{LeaseTTL: 10 * time.Second, HeartbeatInterval: 200 * time.Millisecond, Logger: testLogger(t)})
	require.NoError(t, err)
	require.NoError(t, w.Start(ctx))
	defer w.Stop(ctx) //nolint:errcheck
	<-started
	_, err = q.WaitReleased(ctx, id, &lakeshore.ListenOptions{Timeout: 50 * time.Millisecond})
	require.ErrorIs(t, err, lakeshore.ErrTimeout, "nothing to confirm before the kill")
	killed, err := q.Kill(ctx, id)
	require.NoError(t, err)
	require.True(t, killed)
	// Forged confirmations (another worker's name, another attempt, not a map) are ignored:
	// WaitReleased still waits for the worker that ran the attempt.
	forge, err := q.Topic(lakeshore.ReleasedTopicPrefix + id)
	require.NoError(t, err)
	for _, v := range []any{
		map[string]any{"id": id, "attempt": int64(1), "worker": "fake"},
		map[string]any{"id": id, "attempt": int64(2), "worker": ""},
		"released",
	} {
		_, err := forge.Post(ctx, v)
		require.NoError(t, err)
	}
	attempt, err := q.WaitReleased(ctx, id, &lakeshore.ListenOptions{Timeout: 10 * time.Second})
	require.NoError(t, err)
	require.Equal(t, 1, attempt)
	select {
	case at := <-returned:
		require.False(t, at.After(time.Now()), "confirmed after the handler returned")
	default:
		t.Fatal("confirmed before the handler returned")
	}
}

// TestQueuePauseResume: Queue.Pause stops claims while submits are accepted, Paused reports
// it, and Resume hands the queued job to a claimer that was waiting (issue 29 item 18).
func TestQueuePauseResume(t *testing.T) {
	t.Parallel()
	q, _ := setup(t, nil)
	ctx := t.Context()
	changed, err := q.Pause(ctx)
	require.NoError(t, err)
	require.True(t, changed)
	paused, err := q.Paused(ctx)
	require.NoError(t, err)
	require.True(t, paused)
	id, err := q.Submit(ctx, "held", nil)
	require.NoError(t, err, "a paused queue accepts submits")
	job, err := q.Claim(ctx, nil)
	require.NoError(t, err)
	require.Nil(t, job, "a paused queue gives a claim nothing")
	got := make(chan *lakeshore.Job, 1)
	go func() {
		j, err := q.Claim(ctx, &lakeshore.ClaimOptions{Wait: 20 * time.Second})
		if err != nil {
			j = nil
		}
		got <- j
	}()
	select {
	case j := <-got:
		t.Fatalf("a claimer of a paused queue returned %v", j)
	case <-time.After(200 * time.Millisecond):
	}
	changed, err = q.Resume(ctx)
	require.NoError(t, err)
	require.True(t, changed)
	select {
	case j := <-got:
		require.NotNil(t, j)
		require.Equal(t, id, j.ID)
	case <-time.After(10 * time.Second):
		t.Fatal("the resume did not wake the waiting claimer")
	}
	changed, err = q.Resume(ctx)
	require.NoError(t, err)
	require.False(t, changed)
}
