package httpplane_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore/api"
	"github.com/lakeshore-dev/lakeshore/plane"
	"github.com/lakeshore-dev/lakeshore/plane/httpplane"
	"github.com/lakeshore-dev/lakeshore/plane/planetest"
)

// TestSubmitsCoalesce: concurrent submits to one queue go out in fewer requests than
// callers, and each caller gets its own answer: on a queue that admits 10 more invocations
// (max_depth, on_full=reject) a coalesced batch is refused whole by the server, yet exactly
// 10 callers succeed and every other one gets queue_full, as when each submits alone.
func TestSubmitsCoalesce(t *testing.T) {
	t.Parallel()
	drv, ts, back := testServer(t, planetest.Options{}, nil, nil)
	_, err := back.QueueAdmissionSet(t.Context(), &plane.AdmissionParams{Namespace: "default", Queue: "q",
		Admission: plane.Admission{MaxDepth: 10, OnFull: plane.OnFullReject}})
	require.NoError(t, err)
	const callers = 64
	// Count the submit requests; hold the first one until the other callers queued up
	// (queued: every caller is in the held request, which may carry several, or waits
	// behind it).
	var requests, held atomic.Int64
	var mu sync.Mutex
	release := make(chan struct{})
	inner := ts.Config.Handler
	ts.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == "POST" && r.URL.Path != "/v1/settle" {
			if requests.Add(1) == 1 {
				body, err := io.ReadAll(r.Body)
				var req api.SubmitBatchRequest
				if err == nil {
					err = api.Msgpack.Unmarshal(body, &req)
				}
				if err != nil {
					http.Error(w, err.Error(), http.StatusBadRequest)
					return
				}
				r.Body = io.NopCloser(bytes.NewReader(body))
				held.Store(int64(len(req.Invocations)))
				mu.Lock()
				ch := release
				mu.Unlock()
				<-ch
			}
		}
		inner.ServeHTTP(w, r)
	})
	queued := func() bool { return held.Load()+int64(drv.SubmitsWaiting("default", "q")) == callers }
	errs := make([]error, callers)
	ids := make([]string, callers)
	var wg sync.WaitGroup
	for i := range callers {
		wg.Go(func() {
			res, err := drv.InvocationSubmitMany(t.Context(), &plane.SubmitManyParams{Namespace: "default", Queue: "q",
				Invocations: []plane.SubmitParams{{Payload: []byte{0xc0}, Key: fmt.Sprint("k", i)}}})
			errs[i] = err
			if err == nil {
				ids[i] = res[0].ID
			}
		})
	}
	require.Eventually(t, queued, 30*time.Second, time.Millisecond, "every caller in the held request or queued behind it")
	close(release)
	wg.Wait()
	ok := 0
	for i, err := range errs {
		if err == nil {
			ok++
			require.NotEmpty(t, ids[i])
			continue
		}
		require.ErrorIs(t, err, plane.ErrQueueFull, "caller %d", i)
	}
	require.Equal(t, 10, ok)
	n, err := back.InvocationCount(t.Context(), &plane.CountParams{Namespace: "default", Queue: "q", State: plane.StateQueued})
	require.NoError(t, err)
	require.EqualValues(t, 10, n)
	// Each caller alone would be 64 requests; grouped, the held one, one batch and the
	// repeats alone of the refused batch's callers.
	t.Logf("refused: %d submit requests for %d callers", requests.Load(), callers)

	// Admitted: the callers queued behind the held request share requests.
	_, err = back.QueueAdmissionDelete(t.Context(), "default", "q")
	require.NoError(t, err)
	mu.Lock()
	release = make(chan struct{})
	mu.Unlock()
	requests.Store(0)
	held.Store(0)
	for i := range callers {
		wg.Go(func() {
			_, errs[i] = drv.InvocationSubmitMany(t.Context(), &plane.SubmitManyParams{Namespace: "default", Queue: "q",
				Invocations: []plane.SubmitParams{{Payload: []byte{0xc0}, Key: fmt.Sprint("k", i)}}})
		})
	}
	require.Eventually(t, queued, 30*time.Second, time.Millisecond, "every caller in the held request or queued behind it")
	close(release)
	wg.Wait()
	for i, err := range errs {
		require.NoError(t, err, "caller %d", i)
	}
	t.Logf("admitted: %d submit requests for %d callers", requests.Load(), callers)
	require.Less(t, requests.Load(), int64(callers/2))
	n, err = back.InvocationCount(t.Context(), &plane.CountParams{Namespace: "default", Queue: "q", State: plane.StateQueued})
	require.NoError(t, err)
	require.EqualValues(t, callers, n) // the 10 keys already queued answered Existing
}

// TestSubmitsCoalesceThroughOutage: a coalesced submit that meets a server restart is
// repeated, and every caller's invocation exists once: none lost, none twice.
func TestSubmitsCoalesceThroughOutage(t *testing.T) {
	t.Parallel()
	r := newRestartable(t)
	drv, err := httpplane.New(r.url(), &httpplane.Config{Token: "-"})
	require.NoError(t, err)
	defer drv.Close()
	r.kill()
	const callers = 32
	errs := make([]error, callers)
	var wg sync.WaitGroup
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	for i := range callers {
		wg.Go(func() {
			_, errs[i] = drv.InvocationSubmitMany(ctx, &plane.SubmitManyParams{Namespace: "default", Queue: "q",
				Invocations: []plane.SubmitParams{{Payload: []byte{0xc0}}}})
		})
	}
	time.Sleep(time.Second) // the submits retry against a server that is down
	r.start()
	wg.Wait()
	for i, err := range errs {
		require.NoError(t, err, "caller %d", i)
	}
	n, err := drv.InvocationCount(t.Context(), &plane.CountParams{Namespace: "default", Queue: "q", State: plane.StateQueued})
	require.NoError(t, err)
	require.EqualValues(t, callers, n)
}
