package persisttest

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore/persist"
)

// The conformance cases of weight versions, staleness-bounded sampling, back-pressure
// and leased reads (persist/rl.go).

func rlCases() []testCase {
	return []testCase{
		{"WeightVersions", testWeightVersions},
		{"StalenessBound", testStalenessBound},
		{"StalenessUnderConcurrentProducers", testStalenessConcurrent},
		{"Backpressure", testBackpressure},
		{"BackpressureHoldsFastProducers", testBackpressureHoldsProducers},
		{"WaitingReaderDropsStaleForHeldProducers", testWaitDropsStale},
		{"ReplayAndPriorities", testReplay},
		{"ReplayWeightsStayExact", testReplayWeightsStayExact},
		{"LeasedReads", testLeasedReads},
		{"VersionFieldsCheckedOnEveryWrite", testVersionFieldsChecked},
		{"NullVersionIsAbsent", testNullVersionIsAbsent},
		{"SamplerFieldNoRecordHas", testSamplerFieldNoRecordHas},
		{"WaitingReadSeesLeaseExpire", testWaitSeesLeaseExpire},
		{"IndexesOutOfRange", testIndexesOutOfRange},
		{"TimeoutSaysWhatThePartitionHolds", testTimeoutSaysWhy},
		{"VersionedPutsOnce", testVersionedPutsOnce},
	}
}

// testVersionedPutsOnce: PutVersioned, PutPartial and PutAdmitted repeated with the first
// call's PutOpts.ID (a producer's retry after a lost answer) write nothing and answer the
// first call's indexes, as PutPartitionOnce does for plain puts.
func testVersionedPutsOnce(t *testing.T, q *persist.Queue) {
	ctx := context.Background()
	recs := []persist.Record{{"x": 1}, {"x": 2}}
	puts := []struct {
		name string
		put  func(*persist.PutOpts) ([]int64, error)
	}{
		{"PutVersioned", func(o *persist.PutOpts) ([]int64, error) {
			return q.PutVersioned(ctx, persist.DefaultPartition, recs, 1, -1, o)
		}},
		{"PutPartial", func(o *persist.PutOpts) ([]int64, error) {
			return q.PutPartial(ctx, persist.DefaultPartition, recs, 1, false, o)
		}},
		{"PutAdmitted", func(o *persist.PutOpts) ([]int64, error) {
			return q.PutAdmitted(ctx, persist.DefaultPartition, recs, o)
		}},
	}
	for _, p := range puts {
		opts := &persist.PutOpts{ID: persist.NewPutID(), Admission: &persist.Admission{Task: "t", MaxUnconsumed: 100, MaxAhead: -1}}
		first, err := p.put(opts)
		require.NoError(t, err, p.name)
		before, err := q.Len(ctx)
		require.NoError(t, err)
		again, err := p.put(opts)
		require.NoError(t, err, p.name)
		require.Equal(t, first, again, "%s repeated with its id answers the first call's indexes", p.name)
		after, err := q.Len(ctx)
		require.NoError(t, err)
		require.Equal(t, before, after, "%s repeated with its id writes nothing", p.name)
	}
}

// testTimeoutSaysWhy: a waiting GetMeta that times out says what its partition holds for
// its task — the records put, those the task consumed — and, bounded by staleness, the
// queue's version, the oldest version the bound takes and the records dropped as stale
// (found by a new user's trial, 2026-12-07: a trainer whose set_version had run ahead of
// its rollouts timed out on every read saying only "no full batch", each record it waited
// for having been dropped as stale at once).
func testTimeoutSaysWhy(t *testing.T, q *persist.Queue) {
	ctx := context.Background()
	putVersioned(t, q, 3, 0, 0)
	require.NoError(t, q.SetVersion(ctx, 5))
	_, err := q.Reader().GetMeta(ctx, &persist.MetaRequest{Fields: []string{"x"}, BatchSize: 8, Task: "train",
		Staleness: &persist.Staleness{Max: 1}, Wait: true, Timeout: 50 * time.Millisecond})
	require.ErrorIs(t, err, persist.ErrTimeout)
	require.Contains(t, err.Error(), `no full batch of 8 samples with fields x for task "train" in partition "default"`)
	require.Contains(t, err.Error(), `: partition "default" holds 3 records put, 3 of them consumed by task "train" (stale ones dropped included); `+
		`the queue is at weight version 5 and max_staleness 1 takes versions ≥ 4; 3 records dropped as stale so far (every task)`)

	_, err = q.Reader().GetMeta(ctx, &persist.MetaRequest{Fields: []string{"x"}, BatchSize: 8, Task: "other",
		Wait: true, Timeout: 50 * time.Millisecond})
	require.ErrorIs(t, err, persist.ErrTimeout)
	require.True(t, strings.HasSuffix(err.Error(), `: partition "default" holds 3 records put, 0 of them consumed by task "other" (stale ones dropped included)`), err.Error())
}

// testVersionFieldsChecked: a version field (weight_version, target_weight_version,
// last_weight_version) that is not an integer ≥ 0 is refused by every write path — a
// put (even when another version field is good), PutFields, a KV put — so no record
// carries a version a staleness bound cannot judge (found by a trial: PutFields and KV
// put took -1, -2^63 and 2.5, and such records were never stale).
func testVersionFieldsChecked(t *testing.T, q *persist.Queue) {
	ctx := context.Background()
	idx := putVersioned(t, q, 1, 1, 0)
	bad := []any{int64(-1), int64(math.MinInt64), 2.5, -3.0, "old"}
	for _, f := range persist.VersionFields() {
		for _, v := range bad {
			requireInvalid(t, q.PutFields(ctx, persist.DefaultPartition, idx, []persist.Record{{f: v}}))
			_, err := persist.KV(q).Put(ctx, persist.DefaultPartition, "k", persist.Record{"x": 1, f: v}, nil)
			require.ErrorIs(t, err, persist.ErrInvalid, "KV put of %s %v", f, v)
			_, err = q.PutPartition(ctx, persist.DefaultPartition, []persist.Record{{"x": 2, f: v}})
			require.ErrorIs(t, err, persist.ErrInvalid, "put of %s %v", f, v)
		}
	}
	_, err := q.PutPartition(ctx, persist.DefaultPartition, []persist.Record{{"x": 2, persist.TargetVersionField: int64(5), persist.WeightVersionField: int64(-1)}})
	requireInvalid(t, err)
	// Good versions go through every path.
	require.NoError(t, q.PutFields(ctx, persist.DefaultPartition, idx, []persist.Record{{persist.TargetVersionField: int64(2)}}))
	_, err = persist.KV(q).Put(ctx, persist.DefaultPartition, "k", persist.Record{"x": 3, persist.WeightVersionField: int64(1)}, nil)
	require.NoError(t, err)
	// Nothing bad was written: at version 10 with a bound of 0 every record is stale.
	require.NoError(t, q.SetVersion(ctx, 10))
	require.Equal(t, []int64{}, metaIdx(t, q, persist.MetaRequest{Fields: []string{"x"}, BatchSize: 10, Task: "s", Staleness: &persist.Staleness{Max: 0}}))
	n, err := q.Len(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 2, n)
}

// testNullVersionIsAbsent: a version field set to nil (JSON null) is no version, as an
// absent one, on every write path: a put, PutFields and a KV put take it, the record has no
// version, and a nil target_weight_version leaves the target to weight_version. Before,
// each refused it as invalid while the field left out was taken.
func testNullVersionIsAbsent(t *testing.T, q *persist.Queue) {
	ctx := context.Background()
	idx, err := q.PutPartition(ctx, persist.DefaultPartition, []persist.Record{{"x": 1, persist.WeightVersionField: nil,
		persist.TargetVersionField: nil, persist.LastWeightVersionField: nil}})
	require.NoError(t, err)
	require.NoError(t, q.PutFields(ctx, persist.DefaultPartition, idx, []persist.Record{{"y": 2, persist.WeightVersionField: nil}}))
	_, err = persist.KV(q).Put(ctx, persist.DefaultPartition, "k", persist.Record{"x": 3, persist.TargetVersionField: nil}, nil)
	require.NoError(t, err)
	rows, err := q.Get(ctx, 0, 10, nil)
	require.NoError(t, err)
	require.Len(t, rows, 2) // the put's record and the KV put's
	require.EqualValues(t, 2, rows[0].Fields["y"])
	for _, row := range rows {
		for _, f := range persist.VersionFields() {
			require.NotContains(t, row.Fields, f, "no version")
		}
	}
	// The target is weight_version's when target_weight_version is nil: 2 ahead of the
	// current version 0, past a bound of 1.
	_, err = q.Store().PutPartition(ctx, persist.DefaultPartition, []persist.Record{{"x": 4, persist.TargetVersionField: nil, persist.WeightVersionField: int64(2)}},
		&persist.PutOpts{Admission: &persist.Admission{MaxAhead: 1}})
	var bp *persist.BackpressureError
	require.ErrorAs(t, err, &bp)
	require.EqualValues(t, 2, bp.Target)
}

// testSamplerFieldNoRecordHas: a field a sampler reads by (SampleInput.Values) that no
// record has yet — the weight version of a staleness bound on a queue whose producers do
// not version their records (yet), a seqlen-balanced length field — is no value in every
// sample, as the Values contract says, so the hand-out goes on (a record without a version
// is never stale; a sample without a length counts 0). The file store refused the whole
// GetMeta with the read's *InvalidError naming fields (found by break12: HTTP 400 from a
// file-store server, a batch from the distributed store for the same request).
func testSamplerFieldNoRecordHas(t *testing.T, q *persist.Queue) {
	ctx := context.Background()
	putN(t, q, persist.DefaultPartition, 8, func(i int) persist.Record { return persist.Record{"x": i} })
	require.NoError(t, q.SetVersion(ctx, 3))
	for _, policy := range []persist.StalenessPolicy{persist.StaleDrop, persist.StaleKeep} {
		meta, err := q.Reader().GetMeta(ctx, &persist.MetaRequest{Fields: []string{"x"}, BatchSize: 2, Task: "stale-" + string(policy),
			Staleness: &persist.Staleness{Max: 0, Policy: policy}})
		require.NoError(t, err, "policy %q", policy)
		require.Equal(t, []int64{0, 1}, meta.Indexes, "records without a version are never stale")
	}
	meta, err := q.Reader().GetMeta(ctx, &persist.MetaRequest{Fields: []string{"x"}, BatchSize: 4, Task: "seqlen",
		Sampler: persist.SeqLenBalanced{LengthField: "tokens", Groups: 2}.Spec()})
	require.NoError(t, err)
	require.ElementsMatch(t, []int64{0, 1, 2, 3}, meta.Indexes, "samples without a length count 0")
}

func putVersioned(t *testing.T, q *persist.Queue, n int, version int64, from int) []int64 {
	t.Helper()
	recs := make([]persist.Record, n)
	for i := range recs {
		recs[i] = persist.Record{"x": from + i}
	}
	idx, err := q.PutVersioned(context.Background(), persist.DefaultPartition, recs, version, -1, nil)
	require.NoError(t, err)
	return idx
}

func testWeightVersions(t *testing.T, q *persist.Queue) {
	ctx := context.Background()
	v, err := q.Version(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 0, v)
	require.NoError(t, q.SetVersion(ctx, 3))
	require.NoError(t, q.SetVersion(ctx, 3), "setting the current version again is a no-op")
	requireInvalid(t, q.SetVersion(ctx, 2))
	v, err = q.Version(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 3, v)
	st, err := q.Stats(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 3, st.WeightVersion)

	_, err = q.PutVersioned(ctx, persist.DefaultPartition, []persist.Record{{"x": 1, "big": "payload"}}, 2, 4, nil)
	require.NoError(t, err)
	_, err = q.PutVersioned(ctx, persist.DefaultPartition, []persist.Record{{"x": 2}}, -1, -1, nil)
	requireInvalid(t, err)
	// The version is a column of its own: read alone, without the other fields.
	b, err := q.Reader().GetData(ctx, &persist.BatchMeta{Indexes: []int64{0}, Partition: persist.DefaultPartition,
		Fields: []persist.FieldMeta{{Name: persist.WeightVersionField}, {Name: persist.TargetVersionField}}})
	require.NoError(t, err)
	rows, err := b.Rows()
	b.Release()
	require.NoError(t, err)
	require.Len(t, rows, 1)
	require.Len(t, rows[0].Fields, 2)
	require.EqualValues(t, 2, rows[0].Fields[persist.WeightVersionField])
	require.EqualValues(t, 4, rows[0].Fields[persist.TargetVersionField])
}

func testStalenessBound(t *testing.T, q *persist.Queue) {
	ctx := context.Background()
	putVersioned(t, q, 4, 0, 0)                                                                          // 0..3
	putVersioned(t, q, 4, 1, 4)                                                                          // 4..7
	putN(t, q, persist.DefaultPartition, 1, func(int) persist.Record { return persist.Record{"x": 99} }) // 8: no version
	putVersioned(t, q, 4, 2, 9)                                                                          // 9..12
	require.NoError(t, q.SetVersion(ctx, 2))

	req := persist.MetaRequest{Fields: []string{"x"}, BatchSize: 4, Task: "train", Staleness: &persist.Staleness{Max: 1}}
	require.Equal(t, []int64{4, 5, 6, 7}, metaIdx(t, q, req), "version 0 is 2 behind: dropped")
	st, err := q.Stats(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 4, st.StaleDropped)
	require.EqualValues(t, 8, st.ConsumedByTask[persist.DefaultPartition+"/train"], "dropped samples are consumed for the task")
	require.NoError(t, q.SetVersion(ctx, 3))
	require.Equal(t, []int64{8, 9, 10, 11}, metaIdx(t, q, req), "a record without a version is never stale")
	require.Equal(t, []int64{12}, metaIdx(t, q, req))

	// Keep: stale samples are skipped and left for a replay reader.
	keep := persist.MetaRequest{Fields: []string{"x"}, BatchSize: 20, Task: "keep", Staleness: &persist.Staleness{Max: 0, Policy: persist.StaleKeep}}
	require.Equal(t, []int64{8}, metaIdx(t, q, keep), "nothing is of version 3; 8 has no version")
	replay := persist.MetaRequest{Fields: []string{"x"}, BatchSize: 20, Task: "keep"}
	require.Equal(t, []int64{0, 1, 2, 3, 4, 5, 6, 7, 9, 10, 11, 12}, metaIdx(t, q, replay), "kept stale samples are still there")
	st2, err := q.Stats(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 4, st2.StaleDropped, "keep drops nothing")

	// Any sampler takes the bound.
	stale, err := q.PutVersioned(ctx, "grpo", []persist.Record{{"x": 1}, {"x": 2}}, 2, -1, nil)
	require.NoError(t, err)
	fresh, err := q.PutVersioned(ctx, "grpo", []persist.Record{{"x": 3}, {"x": 4}, {"x": 5}, {"x": 6}}, 3, -1, nil)
	require.NoError(t, err)
	grpo := persist.MetaRequest{Fields: []string{"x"}, BatchSize: 4, Task: "g", Partition: "grpo", Sampler: persist.GRPOGroupN{N: 2}.Spec(), Staleness: &persist.Staleness{Max: 0}}
	require.Equal(t, fresh, metaIdx(t, q, grpo))
	grpo.Staleness = nil
	require.Equal(t, []int64{}, metaIdx(t, q, grpo), "the stale group was dropped for the task (%v)", stale)

	_, err = q.Reader().GetMeta(ctx, &persist.MetaRequest{Fields: []string{"x"}, BatchSize: 1, Task: "t", Staleness: &persist.Staleness{Max: -1}})
	requireInvalid(t, err)
	_, err = q.Reader().GetMeta(ctx, &persist.MetaRequest{Fields: []string{"x"}, BatchSize: 1, Task: "t", Staleness: &persist.Staleness{Policy: "later"}})
	requireInvalid(t, err)
}

// testStalenessConcurrent: producers put at the version they last read while a
// trainer reads with a bound k and advances the version after each batch, and
// another goroutine advances it too; no record handed out is more than k versions
// behind the version current before the read.
func testStalenessConcurrent(t *testing.T, q *persist.Queue) {
	ctx := context.Background()
	const k = 1
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var produced atomic.Int64
	produceAtVersion(t, q, &wg, stop, 3, func(p, i int, v int64) bool {
		recs := []persist.Record{{"x": p*1_000_000 + 2*i}, {"x": p*1_000_000 + 2*i + 1}}
		if _, err := q.PutVersioned(ctx, persist.DefaultPartition, recs, v, -1, nil); err != nil {
			t.Error(err)
			return false
		}
		produced.Add(2)
		return true
	})
	var bumps atomic.Int64
	wg.Go(func() { // a second writer of the version
		for {
			select {
			case <-stop:
				return
			default:
			}
			v, err := q.Version(ctx)
			if err != nil {
				t.Error(err)
				return
			}
			if err := q.SetVersion(ctx, v+1); err != nil && !errors.Is(err, persist.ErrInvalid) {
				t.Error(err)
				return
			}
			bumps.Add(1)
			time.Sleep(time.Millisecond)
		}
	})
	req := persist.MetaRequest{Fields: []string{"x", persist.WeightVersionField}, BatchSize: 4, Task: "train",
		Staleness: &persist.Staleness{Max: k}, Wait: true, Timeout: time.Minute}
	served, violations := 0, 0
	for batch := 0; batch < 40; batch++ {
		before, err := q.Version(ctx)
		require.NoError(t, err)
		b, m, err := q.Reader().GetBatch(ctx, &req)
		require.NoError(t, err)
		rows, err := b.Rows()
		b.Release()
		require.NoError(t, err)
		require.Len(t, rows, len(m.Indexes))
		for _, r := range rows {
			if before-r.Fields[persist.WeightVersionField].(int64) > k {
				violations++
			}
			served++
		}
		now, err := q.Version(ctx)
		require.NoError(t, err)
		if err := q.SetVersion(ctx, now+1); err != nil {
			require.ErrorIs(t, err, persist.ErrInvalid) // the other writer was first
		}
	}
	close(stop)
	wg.Wait()
	require.Zero(t, violations, "records served beyond the staleness bound")
	require.Equal(t, 160, served)
	require.Positive(t, bumps.Load())
	st, err := q.Stats(ctx)
	require.NoError(t, err)
	t.Logf("produced %d, served %d, dropped %d stale, version %d", produced.Load(), served, st.StaleDropped, st.WeightVersion)
}

func testBackpressure(t *testing.T, q *persist.Queue) {
	ctx := context.Background()
	rec := func(n int) []persist.Record {
		out := make([]persist.Record, n)
		for i := range out {
			out[i] = persist.Record{"x": i}
		}
		return out
	}
	adm := &persist.Admission{Task: "train", MaxUnconsumed: 4, MaxAhead: -1}
	_, err := q.PutAdmitted(ctx, persist.DefaultPartition, rec(3), &persist.PutOpts{Admission: adm})
	require.NoError(t, err)
	_, err = q.PutAdmitted(ctx, persist.DefaultPartition, rec(2), &persist.PutOpts{Admission: adm})
	var bp *persist.BackpressureError
	require.ErrorAs(t, err, &bp, "%v", err)
	require.ErrorIs(t, err, persist.ErrQueueFull)
	require.Equal(t, "queue_full", persist.Code(err))
	require.EqualValues(t, 3, bp.Unconsumed)
	n, err := q.Len(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 3, n, "a refused put writes nothing")

	// A blocked put wakes when the trainer consumes.
	blocking := *adm
	blocking.Block, blocking.Timeout = true, time.Minute
	done := make(chan error, 1)
	go func() {
		_, err := q.PutAdmitted(ctx, persist.DefaultPartition, rec(2), &persist.PutOpts{Admission: &blocking})
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("the put did not block: %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	require.Equal(t, []int64{0, 1}, metaIdx(t, q, persist.MetaRequest{Fields: []string{"x"}, BatchSize: 2, Task: "train"}))
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(30 * time.Second):
		t.Fatal("the blocked put did not wake when the trainer consumed")
	}
	// Its deadline is honoured.
	blocking.Timeout = 30 * time.Millisecond
	_, err = q.PutAdmitted(ctx, persist.DefaultPartition, rec(2), &persist.PutOpts{Admission: &blocking})
	require.ErrorAs(t, err, &bp)
	require.Positive(t, bp.Waited)

	// Versions ahead.
	ahead := &persist.Admission{MaxAhead: 1}
	_, err = q.PutVersioned(ctx, "v", rec(1), 0, 2, &persist.PutOpts{Admission: ahead})
	require.ErrorIs(t, err, persist.ErrQueueFull)
	require.NoError(t, q.SetVersion(ctx, 1))
	_, err = q.PutVersioned(ctx, "v", rec(1), 0, 2, &persist.PutOpts{Admission: ahead})
	require.NoError(t, err)

	_, err = q.PutAdmitted(ctx, persist.DefaultPartition, rec(1), &persist.PutOpts{Admission: &persist.Admission{MaxUnconsumed: 3}})
	requireInvalid(t, err)
	require.Contains(t, err.Error(), "admission_task", "the missing task is named by its field")
	_, err = q.PutAdmitted(ctx, persist.DefaultPartition, rec(1), &persist.PutOpts{Admission: &persist.Admission{Task: "t", MaxUnconsumed: -1}})
	requireInvalid(t, err)
	// A task with no bound (nor max_ahead) bounds nothing: refused, naming what to give,
	// and nothing written (before, it was accepted and admitted every put).
	before, err := q.Stats(ctx)
	require.NoError(t, err)
	for _, a := range []persist.Admission{{Task: "t", MaxAhead: -1}, {Task: "t", MaxAhead: -1, Block: true, Timeout: time.Second}, {MaxAhead: -1}} {
		_, err = q.PutAdmitted(ctx, persist.DefaultPartition, rec(1), &persist.PutOpts{Admission: &a})
		requireInvalid(t, err)
		require.Contains(t, err.Error(), "max_unconsumed > 0", "the missing bound is named: %+v", a)
		require.Contains(t, err.Error(), "max_ahead ≥ 0", "the missing bound is named: %+v", a)
	}
	after, err := q.Stats(ctx)
	require.NoError(t, err)
	require.Equal(t, before.NextIndex, after.NextIndex, "a refused put writes nothing")
}

func testLeasedReads(t *testing.T, q *persist.Queue) {
	ctx := context.Background()
	putN(t, q, persist.DefaultPartition, 8, func(i int) persist.Record { return persist.Record{"x": i} })
	r := q.Reader()
	req := persist.MetaRequest{Fields: []string{"x"}, BatchSize: 3, Task: "train"}
	b, a, err := r.GetBatchLeased(ctx, &req, time.Hour)
	require.NoError(t, err)
	b.Release()
	require.Equal(t, []int64{0, 1, 2}, a.Indexes)
	require.NoError(t, r.Commit(ctx, a))
	// A leased batch is held from the task's other reads while its lease lasts: an hour,
	// so that a stalled machine cannot end it between the read and the checks.
	b, l, err := r.GetBatchLeased(ctx, &req, time.Hour)
	require.NoError(t, err)
	b.Release()
	require.Equal(t, []int64{3, 4, 5}, l.Indexes)
	other := persist.MetaRequest{Fields: []string{"x"}, BatchSize: 8, Task: "eval"}
	require.Equal(t, []int64{0, 1, 2, 3, 4, 5, 6, 7}, metaIdx(t, q, other), "leases are per task")
	// A short lease on the rest: once it expires, exactly that batch is ready again —
	// never the committed one, nor the one still leased.
	const lease = 300 * time.Millisecond
	b, l, err = r.GetBatchLeased(ctx, &req, lease)
	require.NoError(t, err)
	b.Release()
	require.Equal(t, []int64{6, 7}, l.Indexes, "a leased batch is held from the task's other reads")
	deadline := time.Now().Add(30 * time.Second)
	var again []int64
	for time.Now().Before(deadline) {
		again = metaIdx(t, q, persist.MetaRequest{Fields: []string{"x"}, BatchSize: 8, Task: "train", Lease: time.Hour})
		if len(again) > 0 {
			break
		}
		time.Sleep(lease / 4)
	}
	require.Equal(t, []int64{6, 7}, again)
	n, err := q.Consumed(ctx, "train", persist.DefaultPartition)
	require.NoError(t, err)
	require.EqualValues(t, 3, n)
	_, _, err = r.GetBatchLeased(ctx, &req, 0)
	requireInvalid(t, err)
	require.NoError(t, q.ResetConsumption(ctx, "train", persist.DefaultPartition))
	require.Equal(t, []int64{0, 1, 2}, metaIdx(t, q, req), "a reset forgets leases")
}

// testIndexesOutOfRange: every path that takes global indexes refuses one outside
// [0, 2^63−1) as invalid (2^63−1 made a span [i, i+1) that wrapped: found by a trial,
// GetData answered a made-up row and MarkConsumed succeeded), while an index in range
// that was never put is still not found.
func testIndexesOutOfRange(t *testing.T, q *persist.Queue) {
	ctx := context.Background()
	idx, err := q.PutPartial(ctx, persist.DefaultPartition, []persist.Record{{"x": 0}}, 0, false, nil)
	require.NoError(t, err)
	fields := []persist.FieldMeta{{Name: "x"}}
	for _, bad := range []int64{math.MaxInt64, -1, math.MinInt64} {
		ix := []int64{idx[0], bad}
		_, err := q.Reader().GetData(ctx, &persist.BatchMeta{Indexes: ix, Partition: persist.DefaultPartition, Fields: fields})
		requireInvalid(t, err)
		requireInvalid(t, q.MarkConsumed(ctx, "m", persist.DefaultPartition, ix))
		requireInvalid(t, q.Reader().Commit(ctx, &persist.BatchMeta{Indexes: ix, Partition: persist.DefaultPartition, Task: "m"}))
		requireInvalid(t, q.ClearSamples(ctx, persist.DefaultPartition, ix))
		requireInvalid(t, q.PutFields(ctx, persist.DefaultPartition, ix, []persist.Record{{"y": 1}, {"y": 2}}))
		_, err = q.Produced(ctx, persist.DefaultPartition, ix, []string{"x"})
		requireInvalid(t, err)
		requireInvalid(t, q.DropGroup(ctx, "m", persist.DefaultPartition, ix))
		requireInvalid(t, q.PatchPartial(ctx, persist.DefaultPartition, ix, nil, 1, false))
		requireInvalid(t, q.UpdatePriorities(ctx, persist.DefaultPartition, "prio", ix, []float64{1, 2}))
	}
	// A priority that is not a finite number is refused (it was stored, and its record never
	// drawn again without a word); 0 or below is a weight, never drawn by design.
	for _, bad := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
		requireInvalid(t, q.UpdatePriorities(ctx, persist.DefaultPartition, "prio", idx[:1], []float64{bad}))
	}
	_, err = q.Reader().GetData(ctx, &persist.BatchMeta{Indexes: []int64{math.MaxInt64 - 1}, Partition: persist.DefaultPartition, Fields: fields})
	require.ErrorIs(t, err, persist.ErrNotFound)
	require.ErrorIs(t, q.MarkConsumed(ctx, "m", persist.DefaultPartition, []int64{1000}), persist.ErrNotFound)
	n, err := q.Consumed(ctx, "m", persist.DefaultPartition)
	require.NoError(t, err)
	require.EqualValues(t, 0, n, "nothing was marked")
	n, err = q.Len(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 1, n, "nothing was cleared")
}

// testWaitSeesLeaseExpire: a waiting GetMeta whose batch is leased (and never
// committed) hands it out once the lease expires, though no commit wakes it (found by a
// trial: the wait timed out though the samples were ready after 1 s).
func testWaitSeesLeaseExpire(t *testing.T, q *persist.Queue) {
	ctx := context.Background()
	putN(t, q, persist.DefaultPartition, 2, func(i int) persist.Record { return persist.Record{"x": i} })
	r := q.Reader()
	req := persist.MetaRequest{Fields: []string{"x"}, BatchSize: 2, Task: "train"}
	const lease = 400 * time.Millisecond
	b, l, err := r.GetBatchLeased(ctx, &req, lease)
	require.NoError(t, err)
	b.Release()
	require.Equal(t, []int64{0, 1}, l.Indexes)
	start := time.Now()
	got := metaIdx(t, q, persist.MetaRequest{Fields: []string{"x"}, BatchSize: 2, Task: "train", Wait: true, Timeout: 20 * time.Second, Lease: lease})
	require.Equal(t, []int64{0, 1}, got)
	require.Less(t, time.Since(start), 10*time.Second, "woken by the lease's expiry, not the deadline")
}

// testBackpressureHoldsProducers: four producers, each far faster than the trainer,
// put groups at the version they read, held by a blocking admission of at most 64
// unconsumed records; the trainer reads batches bounded by staleness k = 1 and
// advances the version after each. The buffer never passes its bound, no record is
// served beyond the bound, and the producers were held (they put no more than the
// trainer consumed plus the bound).
func testBackpressureHoldsProducers(t *testing.T, q *persist.Queue) {
	ctx := context.Background()
	const bound, k, steps = 64, 1, 30
	adm := &persist.Admission{Task: "train", MaxUnconsumed: bound, MaxAhead: -1, Block: true, Timeout: time.Minute}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var produced, held atomic.Int64
	produceAtVersion(t, q, &wg, stop, 4, func(p, _ int, v int64) bool {
		recs := []persist.Record{{"x": p}, {"x": p}, {"x": p}, {"x": p}}
		_, err := q.PutVersioned(ctx, persist.DefaultPartition, recs, v, -1, &persist.PutOpts{Admission: adm})
		var bp *persist.BackpressureError
		switch {
		case errors.As(err, &bp):
			held.Add(1) // a blocked put whose wait ended: try again
		case errors.Is(err, persist.ErrClosed):
			return false
		case err != nil:
			t.Error(err)
			return false
		default:
			produced.Add(4)
		}
		return true
	})
	r := q.Reader()
	served, violations, maxBuffer := 0, 0, int64(0)
	for step := 0; step < steps; step++ {
		before, err := q.Version(ctx)
		require.NoError(t, err)
		b, _, err := r.GetBatch(ctx, &persist.MetaRequest{Fields: []string{"x", persist.WeightVersionField}, BatchSize: 16, Task: "train",
			Staleness: &persist.Staleness{Max: k}, Wait: true, Timeout: time.Minute})
		require.NoError(t, err)
		rows, err := b.Rows()
		b.Release()
		require.NoError(t, err)
		for _, row := range rows {
			if before-row.Fields[persist.WeightVersionField].(int64) > k {
				violations++
			}
		}
		served += len(rows)
		st, err := q.Stats(ctx)
		require.NoError(t, err)
		buffer := st.Partitions[persist.DefaultPartition] - st.ConsumedByTask[persist.DefaultPartition+"/train"]
		maxBuffer = max(maxBuffer, buffer)
		require.NoError(t, q.SetVersion(ctx, before+1))
	}
	close(stop)
	// Unblock producers waiting for room: consume what is left.
	for {
		m, err := r.GetMeta(ctx, &persist.MetaRequest{Fields: []string{"x"}, BatchSize: 64, Task: "train"})
		require.NoError(t, err)
		if len(m.Indexes) == 0 {
			break
		}
	}
	wg.Wait()
	st, err := q.Stats(ctx)
	require.NoError(t, err)
	t.Logf("served %d in %d steps, %d dropped stale, %d produced, buffer at most %d of %d, 0 violations wanted: %d", served, steps,
		st.StaleDropped, produced.Load(), maxBuffer, bound, violations)
	require.Zero(t, violations)
	require.Equal(t, steps*16, served)
	require.LessOrEqual(t, maxBuffer, int64(bound), "the buffer passed its bound")
}

// testWaitDropsStale: the buffer is full of stale records and the producer is held by
// back-pressure; a staleness-bounded reader waiting for a batch drops them even though
// it has no batch yet, which lets the producer in, whose records make the batch.
func testWaitDropsStale(t *testing.T, q *persist.Queue) {
	ctx := context.Background()
	putVersioned(t, q, 4, 0, 0)
	require.NoError(t, q.SetVersion(ctx, 5))
	adm := &persist.Admission{Task: "train", MaxUnconsumed: 4, MaxAhead: -1, Block: true, Timeout: time.Minute}
	done := make(chan error, 1)
	go func() {
		_, err := q.PutVersioned(ctx, persist.DefaultPartition, []persist.Record{{"x": 100}, {"x": 101}}, 5, -1, &persist.PutOpts{Admission: adm})
		done <- err
	}()
	m, err := q.Reader().GetMeta(ctx, &persist.MetaRequest{Fields: []string{"x"}, BatchSize: 2, Task: "train",
		Staleness: &persist.Staleness{Max: 1}, Wait: true, Timeout: time.Minute})
	require.NoError(t, err)
	require.Equal(t, []int64{4, 5}, m.Indexes)
	require.NoError(t, <-done)
	st, err := q.Stats(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 4, st.StaleDropped)
}

// testReplay: replay draws with replacement from a window, weighted by a priority
// field (UpdatePriorities), without consuming anything.
func testReplay(t *testing.T, q *persist.Queue) {
	ctx := context.Background()
	idx := putN(t, q, persist.DefaultPartition, 10, func(i int) persist.Record { return persist.Record{"x": i, "prio": 0.0} })
	putN(t, q, "other", 5, func(i int) persist.Record { return persist.Record{"x": 100 + i, "prio": 1.0} })
	require.NoError(t, q.UpdatePriorities(ctx, "", "prio", []int64{idx[8], idx[9]}, []float64{1, 3}))
	// Rand does not cross HTTP, Seed does: with both, the draw is the same at every run on
	// every store, so the weight check below is decided once, not by chance (unseeded, an
	// HTTP store's draw fell to 265 of 400 for the weight of 3 about once in 20,000 runs).
	rs, err := q.Replay(ctx, &persist.ReplayRequest{Fields: []string{"x"}, Size: 400, Weight: "prio", Rand: rand.New(rand.NewPCG(1, 2)), Seed: 1})
	require.NoError(t, err)
	defer rs.Batch.Release()
	require.Len(t, rs.Draws, 400)
	n := map[int64]int{}
	for _, x := range rs.Draws {
		n[x]++
	}
	require.Len(t, n, 2, "only the samples of positive priority in the partition: %v", n)
	require.Greater(t, n[idx[9]], 2*n[idx[8]], "drawn by weight (1:3): %v", n)
	require.Equal(t, rs.Draws, rs.Batch.Indexes, "one row per draw, in draw order")
	rows, err := rs.Batch.Rows()
	require.NoError(t, err)
	for i, r := range rows {
		require.EqualValues(t, rs.Draws[i], r.Fields["x"], "row %d holds the record drawn", i)
		require.Equal(t, persist.DefaultPartition, r.Partition)
	}

	uniform, err := q.Replay(ctx, &persist.ReplayRequest{Size: 50, Window: 12, Rand: rand.New(rand.NewPCG(3, 4))})
	require.NoError(t, err)
	defer uniform.Batch.Release()
	for _, x := range uniform.Draws {
		require.GreaterOrEqual(t, x, int64(3), "the window holds the last 12 indexes")
		require.Less(t, x, int64(10))
	}
	require.Equal(t, []int64{0, 1, 2, 3}, metaIdx(t, q, persist.MetaRequest{Fields: []string{"x"}, BatchSize: 4, Task: "train"}),
		"replay consumed nothing")
	_, err = q.Replay(ctx, &persist.ReplayRequest{Size: 0})
	requireInvalid(t, err)
	_, err = q.Replay(ctx, &persist.ReplayRequest{Size: 1, Weight: persist.WeightVersionField})
	requireInvalid(t, err)
	require.Error(t, q.UpdatePriorities(ctx, "", "prio", []int64{0}, nil))
	_, err = q.Replay(ctx, &persist.ReplayRequest{Size: 1, Weight: "x\x1f"})
	requireInvalid(t, err)
}

// testReplayWeightsStayExact: Replay's weights (kept in memory between calls) follow
// every change: this handle's UpdatePriorities, new puts, another handle's (another
// process's) PutFields of the weight field, and clears.
func testReplayWeightsStayExact(t *testing.T, q *persist.Queue) {
	ctx := context.Background()
	other := persist.New(q.Store()) // a second handle: its own cache, as another process
	idx := putN(t, q, persist.DefaultPartition, 8, func(i int) persist.Record { return persist.Record{"x": i, "prio": 0.0} })
	drawn := func(size int) map[int64]int {
		t.Helper()
		rs, err := q.Replay(ctx, &persist.ReplayRequest{Fields: []string{}, Size: size, Weight: "prio", Seed: 7})
		require.NoError(t, err)
		defer rs.Batch.Release()
		require.Equal(t, rs.Draws, rs.Batch.Indexes)
		n := map[int64]int{}
		for _, x := range rs.Draws {
			n[x]++
		}
		return n
	}
	require.Empty(t, drawn(10), "every weight is 0: nothing is drawn")
	require.NoError(t, q.UpdatePriorities(ctx, "", "prio", []int64{idx[2]}, []float64{1}))
	require.Equal(t, map[int64]int{idx[2]: 50}, drawn(50), "this handle's update")
	more := putN(t, q, persist.DefaultPartition, 2, func(i int) persist.Record { return persist.Record{"x": 8 + i, "prio": 1e9} })
	n := drawn(100)
	require.Greater(t, n[more[0]]+n[more[1]], 90, "new records are drawn, by weight: %v", n)
	require.NoError(t, other.UpdatePriorities(ctx, "", "prio", more, []float64{0, 0}))
	require.NoError(t, other.UpdatePriorities(ctx, "", "prio", []int64{idx[5]}, []float64{3}))
	n = drawn(400)
	require.Len(t, n, 2, "another handle's updates: %v", n)
	require.Greater(t, n[idx[5]], 2*n[idx[2]], "drawn by weight (1:3): %v", n)
	require.NoError(t, q.Store().PutFields(ctx, persist.DefaultPartition, []int64{idx[5]}, []persist.Record{{"prio": 0.0}}))
	require.Equal(t, map[int64]int{idx[2]: 20}, drawn(20), "a PutFields of the weight field")
	require.NoError(t, other.Store().ClearSamples(ctx, persist.DefaultPartition, []int64{idx[2]}))
	require.Empty(t, drawn(10), "a cleared record is never drawn")
}

// produceAtVersion starts n producers in wg. Producer p, until stop closes, reads q's
// weight version v and calls put(p, i, v) for its i-th put; put returning false ends
// the producer, as does a failed version read (a test error).
func produceAtVersion(t *testing.T, q *persist.Queue, wg *sync.WaitGroup, stop <-chan struct{}, n int, put func(p, i int, v int64) bool) {
	for p := range n {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				v, err := q.Version(context.Background())
				if err != nil {
					t.Error(err)
					return
				}
				if !put(p, i, v) {
					return
				}
			}
		})
	}
}
