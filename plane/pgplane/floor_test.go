package pgplane

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore/internal/pgtest"
	"github.com/lakeshore-dev/lakeshore/internal/planekit"
	"github.com/lakeshore-dev/lakeshore/plane"
)

// TestFIFOFloorKept checks that a fifo claim leaves its queue's floor at the oldest job it
// took, trusted, so that the next claim scans the index from there instead of from the
// start (over every dead entry an old snapshot keeps): the mechanism TestLongTransactionSoak
// depends on.
func TestFIFOFloorKept(t *testing.T) {
	url, schema := pgtest.Schema(t)
	d := open(t, url, &Config{Schema: schema})
	d.floors.TTL = time.Hour // the floor is checked after each claim, however slow the machine
	batch := make([]plane.SubmitParams, 30)
	for i := range batch {
		batch[i] = plane.SubmitParams{Payload: []byte{0xc0}}
	}
	_, err := d.InvocationSubmitMany(t.Context(), &plane.SubmitManyParams{Namespace: "default", Queue: "q", Invocations: batch})
	require.NoError(t, err)
	key := planekit.QueueKey("default", "q")
	for round := range 3 {
		jobs, err := d.InvocationClaimMany(t.Context(), &plane.ClaimParams{Namespace: "default", Queue: "q", Max: 10})
		require.NoError(t, err)
		require.Len(t, jobs, 10)
		floor, trusted := d.floors.Get(key)
		require.True(t, trusted, "round %d: the claim left a floor for the next one", round)
		require.Equal(t, jobs[0].ID, floor, "round %d: the floor is the oldest job taken", round)
	}
}
