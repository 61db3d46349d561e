package httpstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore/persist"
	"github.com/lakeshore-dev/lakeshore/server"
)

// TestHTTPBlockedPutWaitsItsWholeTimeout: a put blocked by back-pressure waits for its
// Admission's Timeout over HTTP as it does in process, even past the server's cap of one
// long-poll (LongPollMax): the store repeats the put (with its put id) until the
// trainer makes room or the Timeout passes. On the old code the put failed with
// queue_full as soon as the server's cap passed, long before its own Timeout.
func TestHTTPBlockedPutWaitsItsWholeTimeout(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := startDataServer(t, &server.Config{LongPollMax: 200 * time.Millisecond})
	q := persist.New(d.open(t, "q", nil))
	a := &persist.Admission{Task: "train", MaxUnconsumed: 1, MaxAhead: -1, Block: true, Timeout: 20 * time.Second}
	_, err := q.PutAdmitted(ctx, "", []persist.Record{{"x": 1}}, &persist.PutOpts{Admission: a})
	require.NoError(t, err)

	// The trainer consumes the first record well after the server's cap of one wait.
	consumed := make(chan error, 1)
	go func() {
		time.Sleep(time.Second)
		_, err := q.Reader().GetMeta(ctx, &persist.MetaRequest{Fields: []string{"x"}, BatchSize: 1, Task: "train"})
		consumed <- err
	}()
	start := time.Now()
	idx, err := q.PutAdmitted(ctx, "", []persist.Record{{"x": 2}}, &persist.PutOpts{Admission: a})
	require.NoError(t, err, "the blocked put waits its own Timeout, not only the server's LongPollMax (returned after %v)", time.Since(start))
	require.Equal(t, []int64{1}, idx, "one record, put once")
	require.NoError(t, <-consumed)

	// Its Timeout still bounds it, and the error says how long it waited in all.
	a.Timeout = 700 * time.Millisecond
	start = time.Now()
	_, err = q.PutAdmitted(ctx, "", []persist.Record{{"x": 3}, {"x": 4}}, &persist.PutOpts{Admission: a})
	var bp *persist.BackpressureError
	require.True(t, errors.As(err, &bp), "%v", err)
	require.ErrorIs(t, err, persist.ErrQueueFull)
	require.GreaterOrEqual(t, time.Since(start), 600*time.Millisecond)
	require.GreaterOrEqual(t, bp.Waited, 600*time.Millisecond, "Waited counts every repeat")
	n, err := q.Len(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 2, n, "a refused put wrote nothing, however many times it was repeated")
}
