package persisttest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore/persist"
)

// The conformance cases of groups (persist/groups.go, GRPOGroupN's over-sampling,
// zero-variance filter and straggler bound, DropGroup).

func groupCases() []testCase {
	return []testCase{
		{"GroupFilterAndOverSampling", testGroupFilter},
		{"GroupStragglers", testGroupStragglers},
		{"DropGroup", testDropGroup},
		{"GroupDecisionsUnderConcurrentReaders", testGroupsConcurrent},
		{"PartialRollouts", testPartialRollouts},
		{"PatchPartialWithoutPartials", testPatchPartialWithoutPartials},
		{"LeasedGroupsComeBackWhole", testLeasedGroups},
	}
}

// putGroup puts one group of n samples of prompt uid with the given rewards.
func putGroup(t *testing.T, q *persist.Queue, uid string, rewards []float64, at float64) []int64 {
	t.Helper()
	return putN(t, q, persist.DefaultPartition, len(rewards), func(i int) persist.Record {
		return persist.Record{"uid": uid, "reward": rewards[i], "at": at}
	})
}

func groupStats(t *testing.T, q *persist.Queue) (groups, unused int64) {
	t.Helper()
	st, err := q.Stats(context.Background())
	require.NoError(t, err)
	return st.GroupsDropped, st.SamplesUnused
}

// testGroupFilter: DAPO's filter drops groups of equal rewards; over-sampling hands out
// m of n; both are counted and never handed out.
func testGroupFilter(t *testing.T, q *persist.Queue) {
	ctx := context.Background()
	now := float64(time.Now().Unix())
	a := putGroup(t, q, "a", []float64{1, 1, 1, 1}, now) // zero variance: dropped
	b := putGroup(t, q, "b", []float64{0, 1, 0, 1}, now)
	c := putGroup(t, q, "c", []float64{0, 0, 0, 0}, now) // dropped
	d := putGroup(t, q, "d", []float64{1, 0, 0, 0}, now)
	putN(t, q, persist.DefaultPartition, 3, func(i int) persist.Record { return persist.Record{"uid": "e", "reward": float64(i), "at": now} })
	g := persist.GRPOGroupN{N: 4, GroupField: "uid", Use: 2, DropZeroVariance: "reward"}
	req := persist.MetaRequest{Fields: []string{"uid", "reward"}, BatchSize: 4, Task: "train", Sampler: g.Spec()}
	require.Equal(t, []int64{b[0], b[1], d[0], d[1]}, metaIdx(t, q, req), "the first 2 samples of each group with a signal")
	groups, unused := groupStats(t, q)
	require.EqualValues(t, 2, groups, "groups a and c dropped")
	require.EqualValues(t, 4, unused, "2 unused samples of b and of d")
	require.Empty(t, metaIdx(t, q, req), "nothing else is complete: e waits for its 4th sample")
	n, err := q.Consumed(ctx, "train", persist.DefaultPartition)
	require.NoError(t, err)
	require.EqualValues(t, 16, n, "served, dropped and unused samples are all consumed for the task")
	// Another task judges for itself.
	other := req
	other.Task, other.Sampler = "eval", persist.GRPOGroupN{N: 4, GroupField: "uid"}.Spec()
	require.Equal(t, append(append(append([]int64{}, a...), b...), c...)[:8], metaIdx(t, q, persist.MetaRequest{
		Fields: other.Fields, BatchSize: 8, Task: "eval", Sampler: other.Sampler}))
	// A waiting read that finds no full batch leaves an over-sampled group whole: its
	// unused samples go only with its hand-out.
	waiting := persist.MetaRequest{Fields: req.Fields, BatchSize: 8, Task: "wait", Sampler: g.Spec(), Wait: true, Timeout: 50 * time.Millisecond}
	_, err = q.Reader().GetMeta(ctx, &waiting)
	require.ErrorIs(t, err, persist.ErrTimeout)
	_, unusedBefore := groupStats(t, q)
	require.EqualValues(t, 4, unusedBefore, "nothing unused without a hand-out")
	waiting.Wait, waiting.Timeout = false, 0
	require.Equal(t, []int64{b[0], b[1], d[0], d[1]}, metaIdx(t, q, waiting), "the groups are still whole")
	// Bad parameters.
	for _, bad := range []persist.GRPOGroupN{
		{N: 4, Use: 5}, {N: 4, Use: -1}, {N: 4, StragglerSeconds: 1}, {N: 4, StragglerSeconds: -1, TimeField: "at"},
		{N: 4, StragglerSeconds: 1, TimeField: "at", StragglerPolicy: "later"},
	} {
		_, err := q.Reader().GetMeta(ctx, &persist.MetaRequest{Fields: []string{"uid"}, BatchSize: 4, Task: "bad", Sampler: bad.Spec()})
		requireInvalid(t, err)
	}
	_, err = q.Reader().GetMeta(ctx, &persist.MetaRequest{Fields: []string{"uid"}, BatchSize: 4, Task: "bad",
		Sampler: persist.GRPOGroupN{N: 4, GroupField: "uid", DropZeroVariance: "uid"}.Spec()})
	requireInvalid(t, err) // the filter field is not numeric
	_, err = q.Reader().GetMeta(ctx, &persist.MetaRequest{Fields: []string{"uid"}, BatchSize: 3, Task: "bad",
		Sampler: persist.GRPOGroupN{N: 4, GroupField: "uid", Use: 2}.Spec()})
	requireInvalid(t, err) // the batch is not a multiple of use
}

// testLeasedGroups: a leased batch of whole groups comes back whole once its lease
// expires uncommitted; a leased read that over-samples (use < n) is refused, since its
// hand-out consumes the unused samples of each group and the batch, once its lease
// expired, would be the part of a group that never completes again: on the old code it
// was never handed out again (and held producers back for ever), so a restarted trainer
// lost it (found by a trial: after the lease the next read answered the next group).
func testLeasedGroups(t *testing.T, q *persist.Queue) {
	ctx := context.Background()
	now := float64(time.Now().Unix())
	a := putGroup(t, q, "a", []float64{0, 1, 0, 1}, now)
	b := putGroup(t, q, "b", []float64{1, 0, 1, 0}, now)
	r := q.Reader()
	over := persist.MetaRequest{Fields: []string{"uid", "reward"}, BatchSize: 2, Task: "train",
		Sampler: persist.GRPOGroupN{N: 4, GroupField: "uid", Use: 2}.Spec()}
	_, _, err := r.GetBatchLeased(ctx, &over, time.Hour)
	requireInvalid(t, err)
	require.Contains(t, err.Error(), "lease")
	over.Lease = time.Hour
	_, err = r.GetMeta(ctx, &over)
	requireInvalid(t, err)
	n, err := q.Consumed(ctx, "train", persist.DefaultPartition)
	require.NoError(t, err)
	require.Zero(t, n, "a refused read consumes nothing")
	_, unused := groupStats(t, q)
	require.Zero(t, unused)

	// Whole groups (use = n) under a lease come back whole. The lease must outlast the next
	// read, which takes b while a is leased: at 300 ms it expired first on a loaded CI
	// machine (the next read answered a again), so it is seconds long; the last read waits
	// for it to expire.
	const lease = 5 * time.Second
	whole := persist.MetaRequest{Fields: []string{"uid", "reward"}, BatchSize: 4, Task: "train",
		Sampler: persist.GRPOGroupN{N: 4, GroupField: "uid"}.Spec(), Lease: lease}
	require.Equal(t, a, metaIdx(t, q, whole))
	whole.Lease = time.Hour
	require.Equal(t, b, metaIdx(t, q, whole))
	whole.Wait, whole.Timeout = true, 20*time.Second
	require.Equal(t, a, metaIdx(t, q, whole), "the batch comes back whole once its lease expired")
}

// testGroupStragglers: an incomplete group older than the bound is dropped, or served
// partial, by policy; a young one waits.
func testGroupStragglers(t *testing.T, q *persist.Queue) {
	old := float64(time.Now().Add(-time.Hour).Unix())
	young := float64(time.Now().Unix())
	s1 := putGroup(t, q, "s1", []float64{0, 1}, old) // 2 of 4, an hour old
	putGroup(t, q, "s2", []float64{0, 1}, young)     // 2 of 4, just now
	s3 := putGroup(t, q, "s3", []float64{1, 0, 1}, old)
	drop := persist.GRPOGroupN{N: 4, GroupField: "uid", StragglerSeconds: 60, TimeField: "at"}
	req := persist.MetaRequest{Fields: []string{"uid", "at"}, BatchSize: 4, Task: "drop", Sampler: drop.Spec()}
	require.Empty(t, metaIdx(t, q, req), "stragglers are dropped, never served")
	groups, _ := groupStats(t, q)
	require.EqualValues(t, 2, groups, "s1 and s3 dropped")
	require.Empty(t, metaIdx(t, q, req), "s2 waits")
	groups, _ = groupStats(t, q)
	require.EqualValues(t, 2, groups, "a group is dropped once")

	partial := drop
	partial.StragglerPolicy = persist.StragglerPartial
	req.Task, req.Sampler, req.BatchSize = "partial", partial.Spec(), 8
	require.Equal(t, append(append([]int64{}, s1...), s3...), metaIdx(t, q, req), "stragglers served as they are")
	require.Empty(t, metaIdx(t, q, req), "s2 waits")
}

// testDropGroup: the verb marks a group consumed for the task and counts it once.
func testDropGroup(t *testing.T, q *persist.Queue) {
	ctx := context.Background()
	now := float64(time.Now().Unix())
	a := putGroup(t, q, "a", []float64{0, 1}, now)
	b := putGroup(t, q, "b", []float64{0, 1}, now)
	require.NoError(t, q.DropGroup(ctx, "train", "", a))
	require.NoError(t, q.DropGroup(ctx, "train", "", a), "dropping again is a no-op")
	groups, _ := groupStats(t, q)
	require.EqualValues(t, 1, groups)
	g := persist.GRPOGroupN{N: 2, GroupField: "uid"}
	require.Equal(t, b, metaIdx(t, q, persist.MetaRequest{Fields: []string{"uid"}, BatchSize: 4, Task: "train", Sampler: g.Spec()}))
	require.Equal(t, append(append([]int64{}, a...), b...), metaIdx(t, q, persist.MetaRequest{Fields: []string{"uid"}, BatchSize: 4, Task: "other", Sampler: g.Spec()}),
		"dropped for the task only")
	requireInvalid(t, q.DropGroup(ctx, "train", "", nil))
	requireInvalid(t, q.DropGroup(ctx, "", "", a))
	requireInvalid(t, q.DropGroup(ctx, "train", "", []int64{-1}))
	require.ErrorIs(t, q.DropGroup(ctx, "train", "", []int64{b[1] + 100}), persist.ErrNotFound)
}

// testGroupsConcurrent: readers of one task running at once agree on every group: each
// group with a signal is handed out exactly once (m of its n samples), each flat group
// is dropped and counted exactly once, and nothing is both.
func testGroupsConcurrent(t *testing.T, q *persist.Queue) {
	ctx := context.Background()
	const groups, n, use, readers = 40, 4, 2, 4
	now := float64(time.Now().Unix())
	flat := map[string]bool{}
	member := map[int64]string{}
	for i := range groups {
		uid := string(rune('A'+i/26)) + string(rune('a'+i%26))
		rewards := []float64{0, 1, 0, 1}
		if i%3 == 0 {
			rewards = []float64{1, 1, 1, 1}
			flat[uid] = true
		}
		for _, x := range putGroup(t, q, uid, rewards, now) {
			member[x] = uid
		}
	}
	g := persist.GRPOGroupN{N: n, GroupField: "uid", Use: use, DropZeroVariance: "reward"}
	var mu sync.Mutex
	served := map[string][]int64{}
	var wg sync.WaitGroup
	errs := make(chan error, readers)
	for range readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := q.Reader()
			for {
				m, err := r.GetMeta(ctx, &persist.MetaRequest{Fields: []string{"uid", "reward"}, BatchSize: 2 * use, Task: "train", Sampler: g.Spec()})
				if err != nil {
					errs <- err
					return
				}
				if m.Size == 0 {
					return
				}
				mu.Lock()
				for _, x := range m.Indexes {
					served[member[x]] = append(served[member[x]], x)
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	nFlat := 0
	for i := range groups {
		uid := string(rune('A'+i/26)) + string(rune('a'+i%26))
		if flat[uid] {
			nFlat++
			require.Empty(t, served[uid], "flat group %s is never served", uid)
		} else {
			require.Len(t, served[uid], use, "group %s is served once, %d of its samples", uid, use)
		}
	}
	dropped, unused := groupStats(t, q)
	require.EqualValues(t, nFlat, dropped, "each flat group counted once")
	require.EqualValues(t, (groups-nFlat)*(n-use), unused, "each unused sample counted once")
	consumed, err := q.Consumed(ctx, "train", persist.DefaultPartition)
	require.NoError(t, err)
	require.EqualValues(t, groups*n, consumed)
}
