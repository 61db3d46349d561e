package server_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore/api"
)

// TestWaitingClaimWokenWhenFreedKeyIsRateHeld is a reproduction of a defect of the SQLite
// plane, found as a new user (a Python run_worker(concurrency=4) on a queue with
// concurrency_limit 1 and key_rate_limit 2 started one job of a key every 5 s — its slots'
// long-poll — instead of every 0.5 s): a claim parked while a key is at its concurrency
// limit is taken by the settle that frees the slot (the direct handoff), finds the key held
// by its rate limit for 0.5 s, and is put back to sleep for the rest of its wait, never
// re-armed for the token's time. plane/sqliteplane/handoff.go's handOff drops the claim's
// next-due time (`jobs, _, err := t.claim(…)`); pgplane's handOff keeps it (`due`) and
// wakes the queue after the commit, so there the same claim gets the job at 0.5 s (checked
// through the Go SDK). A fix tried and reverted (outside this helper's remit): in handOff,
// keep the next-due time and, when the waiter got nothing but a job is due, t.wake(key)
// after putting it back, so it tries again after the commit and sleeps until then — this
// test then passes in 0.58 s. Skipped until sqliteplane is fixed; remove the skip then.
func TestWaitingClaimWokenWhenFreedKeyIsRateHeld(t *testing.T) {
	t.Skip("known defect of plane/sqliteplane's handOff (a waiting claim is not re-armed for a rate-held key's token): see the comment")
	t.Parallel()
	b := setup(t, nil)
	Q := "/v1/namespaces/default/queues/q"
	require.Equal(t, 200, b.do(t, "PUT", Q+"/admission", api.ContentTypeJSON,
		[]byte(`{"concurrency_limit": 1, "key_rate_limit": 2, "key_burst": 1}`), "").status)
	for range 2 {
		require.Equal(t, 200, b.do(t, "POST", Q+"/invocations", api.ContentTypeJSON, []byte(`{"payload": 1, "concurrency_key": "a"}`), "").status)
	}
	type claimed struct {
		Jobs []struct{ ID, Token string } `json:"jobs"`
	}
	var first claimed
	require.NoError(t, json.Unmarshal(b.do(t, "POST", Q+"/claim", api.ContentTypeJSON, []byte(`{"max": 1}`), "").body, &first))
	require.Len(t, first.Jobs, 1)
	began := time.Now()
	got := make(chan claimed, 1)
	go func() {
		var c claimed
		_ = json.Unmarshal(b.do(t, "POST", Q+"/claim", api.ContentTypeJSON, []byte(`{"max": 1, "wait": 5}`), "").body, &c)
		got <- c
	}()
	time.Sleep(100 * time.Millisecond) // the claim parks: the key is at its limit
	ack := []byte(`{"token": "` + first.Jobs[0].Token + `", "outcome": "succeeded", "result": 1}`)
	require.Equal(t, 200, b.do(t, "POST", "/v1/invocations/"+first.Jobs[0].ID+"/settle", api.ContentTypeJSON, ack, "").status)
	c := <-got
	require.Len(t, c.Jobs, 1, "the waiting claim gets the key's next job when its token comes, within its wait")
	require.Less(t, time.Since(began), 2*time.Second, "at the token's time (0.5 s after the first start), not at the end of the wait")
}
