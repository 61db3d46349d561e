package sqliteplane

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/lakeshore-dev/lakeshore/plane"
	"github.com/stretchr/testify/require"
)

func openTemp(t *testing.T, cfg *Config) *Driver {
	t.Helper()
	d, err := Open(context.Background(), filepath.Join(t.TempDir(), "lakeshore.db"), cfg)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, d.Close()) })
	return d
}

func TestSmokeLifecycle(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"file", "memory"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			var d *Driver
			if name == "file" {
				d = openTemp(t, nil)
			} else {
				var err error
				d, err = Open(ctx, ":memory:", nil)
				require.NoError(t, err)
				t.Cleanup(func() { d.Close() })
			}
			res, err := d.InvocationSubmitMany(ctx, &plane.SubmitManyParams{Namespace: "default", Queue: "q",
				Invocations: []plane.SubmitParams{{Payload: []byte{1}}, {Payload: []byte{2}, Key: "k"}}})
			require.NoError(t, err)
			require.Len(t, res, 2)
			jobs, err := d.InvocationClaimMany(ctx, &plane.ClaimParams{Namespace: "default", Queue: "q", Max: 5})
			require.NoError(t, err)
			require.Len(t, jobs, 2)
			require.Equal(t, res[0].ID, jobs[0].ID)
			seq, err := d.FramePost(ctx, &plane.FramePostParams{Journal: plane.Journal{InvocationID: jobs[0].ID}, Token: jobs[0].Token, Value: []byte{7}})
			require.NoError(t, err)
			require.Equal(t, int64(0), seq)
			errs, err := d.InvocationSettleMany(ctx, []plane.SettleParams{{ID: jobs[0].ID, Token: jobs[0].Token, Outcome: plane.OutcomeSucceeded, Result: []byte{9}}})
			require.NoError(t, err)
			require.NoError(t, errs[0])
			inv, err := d.InvocationWait(ctx, &plane.WaitParams{ID: jobs[0].ID, Timeout: time.Second})
			require.NoError(t, err)
			require.Equal(t, plane.StateSucceeded, inv.State)
			fr, err := d.FrameRead(ctx, &plane.FrameReadParams{Journal: plane.Journal{InvocationID: jobs[0].ID}, Since: -1})
			require.NoError(t, err)
			require.Len(t, fr.Frames, 2)
			require.Equal(t, plane.FrameEnd, fr.Frames[1].Kind)
			n, err := d.InvocationCount(ctx, &plane.CountParams{Namespace: "default", Queue: "q", State: plane.StateRunning})
			require.NoError(t, err)
			require.Equal(t, int64(1), n)
			// A waiting claimer is woken by a submit.
			done := make(chan []*plane.Job)
			go func() {
				jobs, _ := d.InvocationClaimMany(ctx, &plane.ClaimParams{Namespace: "default", Queue: "w", Wait: 5 * time.Second})
				done <- jobs
			}()
			_, err = d.InvocationSubmitMany(ctx, &plane.SubmitManyParams{Namespace: "default", Queue: "w", Invocations: []plane.SubmitParams{{}}})
			require.NoError(t, err)
			require.Len(t, <-done, 1)
		})
	}
}

// TestDurableByDefault: a file plane runs in WAL mode with synchronous=FULL (2) unless the
// Config asks for NORMAL (1): every commit is on disk before any caller hears of it.
func TestDurableByDefault(t *testing.T) {
	t.Parallel()
	for mode, want := range map[string]int{"": 2, "FULL": 2, "NORMAL": 1} {
		d := openTemp(t, &Config{Synchronous: mode})
		var journal string
		var synchronous int
		require.NoError(t, d.do(context.Background(), func(tx *wtx) error { // on the writer's own connection
			if err := tx.w.conn.QueryRowContext(tx.ctx, "PRAGMA journal_mode").Scan(&journal); err != nil {
				return err
			}
			return tx.w.conn.QueryRowContext(tx.ctx, "PRAGMA synchronous").Scan(&synchronous)
		}))
		require.Equal(t, "wal", journal)
		require.Equal(t, want, synchronous, "synchronous for Config.Synchronous %q", mode)
	}
}
