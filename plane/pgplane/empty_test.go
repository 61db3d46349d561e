package pgplane

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore/internal/pgtest"
	"github.com/lakeshore-dev/lakeshore/plane"
)

// TestKnownEmptyQueue: an empty waiting claim marks its queue known-empty, so the next
// claims skip their statements; a submit of this process or of another one ends the mark,
// and a claim parked on the mark still gets the other process's job at once.
func TestKnownEmptyQueue(t *testing.T) {
	url := pgtest.Database(t)
	d := open(t, url, &Config{PollInterval: time.Minute})
	other := open(t, url, &Config{})
	require.Eventually(t, d.notifier.listening, 5*time.Second, 10*time.Millisecond, "the listener connects")
	key := queueKey("default", "q")
	now := func() int64 { return d.cfg.Now().UnixMilli() }

	jobs, err := d.InvocationClaimMany(t.Context(), &plane.ClaimParams{Namespace: "default", Queue: "q", Wait: 20 * time.Millisecond})
	require.NoError(t, err)
	require.Empty(t, jobs)
	_, ok := d.knownEmpty(key, now())
	require.True(t, ok, "an empty waiting claim marks the queue")

	// A submit of this process ends the mark (its commit wakes the queue).
	id := submitOne(t, d, plane.SubmitParams{})
	_, ok = d.knownEmpty(key, now())
	require.False(t, ok, "a local submit ends the mark")
	require.Equal(t, id, claimOne(t, d, 0).ID)

	// Marked again; then a claim parks on the mark and another process submits: the
	// notification ends the mark and wakes the claim.
	jobs, err = d.InvocationClaimMany(t.Context(), &plane.ClaimParams{Namespace: "default", Queue: "q", Wait: 20 * time.Millisecond})
	require.NoError(t, err)
	require.Empty(t, jobs)
	_, ok = d.knownEmpty(key, now())
	require.True(t, ok)
	claimed := make(chan []*plane.Job, 1)
	go func() {
		jobs, _ := d.InvocationClaimMany(context.Background(), &plane.ClaimParams{Namespace: "default", Queue: "q", Wait: 20 * time.Second})
		claimed <- jobs
	}()
	time.Sleep(100 * time.Millisecond)
	start := time.Now()
	id = submitOne(t, other, plane.SubmitParams{})
	got := <-claimed
	require.Len(t, got, 1)
	require.Equal(t, id, got[0].ID)
	require.Less(t, time.Since(start), 5*time.Second, "woken by the notification, not a poll")
	_, ok = d.knownEmpty(key, now())
	require.False(t, ok, "the notification ended the mark")

	// A mark knows when the earliest delayed job is due, and ends then.
	submitOne(t, other, plane.SubmitParams{Delay: 300 * time.Millisecond})
	jobs, err = d.InvocationClaimMany(t.Context(), &plane.ClaimParams{Namespace: "default", Queue: "q", Wait: 20 * time.Millisecond})
	require.NoError(t, err)
	require.Empty(t, jobs)
	next, ok := d.knownEmpty(key, now())
	require.True(t, ok)
	require.Positive(t, next)
	_, ok = d.knownEmpty(key, next)
	require.False(t, ok, "the mark ends when the delayed job is due")
	jobs, err = d.InvocationClaimMany(t.Context(), &plane.ClaimParams{Namespace: "default", Queue: "q", Wait: 5 * time.Second})
	require.NoError(t, err)
	require.Len(t, jobs, 1, "the delayed job is claimed when due")

	// Without a listener (poll-only) nothing is marked.
	p := open(t, url, &Config{PollOnly: true, PollInterval: 100 * time.Millisecond})
	jobs, err = p.InvocationClaimMany(t.Context(), &plane.ClaimParams{Namespace: "default", Queue: "empty", Wait: 20 * time.Millisecond})
	require.NoError(t, err)
	require.Empty(t, jobs)
	_, ok = p.knownEmpty(queueKey("default", "empty"), p.cfg.Now().UnixMilli())
	require.False(t, ok, "poll-only planes never mark")
}
