package filestore

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore/persist"
	"github.com/lakeshore-dev/lakeshore/persist/persisttest"
)

func TestSequentialSampler(t *testing.T) {
	t.Parallel()
	idx, err := persist.Sequential{}.Sample(context.Background(), &persist.SampleInput{Ready: []int64{3, 5, 9}, BatchSize: 2})
	require.NoError(t, err)
	require.Equal(t, []int64{3, 5}, idx)
	idx, err = persist.Sequential{}.Sample(context.Background(), &persist.SampleInput{Ready: []int64{3}, BatchSize: 2})
	require.NoError(t, err)
	require.Equal(t, []int64{3}, idx)
}

func TestRankAwareSampler(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	q := openTemp(t, nil)
	putN(t, q, persist.DefaultPartition, 20, func(i int) persist.Record { return persist.Record{"x": i} })
	r := q.fileReader()
	req := func(dp, step int) persist.MetaRequest {
		return persist.MetaRequest{Fields: []string{"x"}, BatchSize: 4, Task: "train", Sampler: persist.RankAware{}.Spec(), DPRank: dp, BatchIndex: step}
	}
	g0 := metaIdx(t, r, req(0, 0))
	require.Equal(t, []int64{0, 1, 2, 3}, g0)
	require.Equal(t, g0, metaIdx(t, r, req(0, 0)), "another rank of DP group 0 gets the same batch")
	g1 := metaIdx(t, r, req(1, 0))
	require.Equal(t, []int64{4, 5, 6, 7}, g1, "DP group 1 gets a disjoint batch")
	require.Equal(t, g1, metaIdx(t, r, req(1, 0)))
	require.Equal(t, []int64{8, 9, 10, 11}, metaIdx(t, r, req(0, 1)), "next step")
	require.Equal(t, g0, metaIdx(t, r, req(0, 0)), "step 0 is still remembered")

	// The assignment is stored in meta.db: it survives a restart.
	q = reopen(t, q)
	r = q.fileReader()
	require.Equal(t, g1, metaIdx(t, r, req(1, 0)))
	// ResetConsumption also clears the assignments.
	require.NoError(t, q.ResetConsumption(ctx, "train", persist.DefaultPartition))
	require.Equal(t, []int64{0, 1, 2, 3}, metaIdx(t, r, req(1, 0)))
}

func TestGRPOGroupNBlocks(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	q := openTemp(t, nil)
	r := q.fileReader()
	// Another partition interleaves: blocks are counted within the partition.
	putN(t, q, "grpo", 6, func(i int) persist.Record { return persist.Record{"x": i} })  // 0..5
	putN(t, q, "other", 3, func(i int) persist.Record { return persist.Record{"x": i} }) // 6..8
	putN(t, q, "grpo", 4, func(i int) persist.Record { return persist.Record{"x": i} })  // 9..12
	req := persist.MetaRequest{Fields: []string{"x"}, BatchSize: 8, Task: "t", Partition: "grpo", Sampler: persist.GRPOGroupNOf(4).Spec()}
	// Partition samples: 0..5, 9..12 → blocks {0,1,2,3}, {4,5,9,10}, {11,12,..}.
	require.Equal(t, []int64{0, 1, 2, 3, 4, 5, 9, 10}, metaIdx(t, r, req))
	require.Equal(t, []int64{}, metaIdx(t, r, req), "the last block has 2 of 4 samples")
	putN(t, q, "grpo", 2, func(i int) persist.Record { return persist.Record{"x": i} }) // 13, 14
	require.Equal(t, []int64{11, 12, 13, 14}, metaIdx(t, r, req))

	_, err := r.GetMeta(ctx, &persist.MetaRequest{Fields: []string{"x"}, BatchSize: 6, Task: "u", Partition: "grpo", Sampler: persist.GRPOGroupNOf(4).Spec()})
	require.ErrorIs(t, err, persist.ErrInvalid)
	require.ErrorContains(t, err, "multiple of the GRPO group size 4")
}

func TestGRPOGroupNByField(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	q := openTemp(t, nil)
	r := q.fileReader()
	// Responses of prompts A, B, C arrive interleaved; C's last response has no reward yet.
	uids := []string{"A", "B", "A", "C", "B", "C", "A", "B", "C"}
	idx := putN(t, q, persist.DefaultPartition, len(uids), func(i int) persist.Record { return persist.Record{"uid": uids[i], "resp": i} })
	var withReward []int64
	var rewards []persist.Record
	for i, x := range idx {
		if i != 8 {
			withReward = append(withReward, x)
			rewards = append(rewards, persist.Record{"reward": float64(i)})
		}
	}
	require.NoError(t, q.PutFields(ctx, persist.DefaultPartition, withReward, rewards))
	req := persist.MetaRequest{Fields: []string{"resp", "reward"}, BatchSize: 6, Task: "t",
		Sampler: persist.GRPOGroupN{N: 3, GroupField: "uid"}.Spec()}
	require.Equal(t, []int64{0, 2, 6, 1, 4, 7}, metaIdx(t, r, req), "groups A and B, whole, in order of first index")
	require.Equal(t, []int64{}, metaIdx(t, r, req), "group C is incomplete: never a partial group")
	require.NoError(t, q.PutFields(ctx, persist.DefaultPartition, []int64{8}, []persist.Record{{"reward": 8.0}}))
	require.Equal(t, []int64{3, 5, 8}, metaIdx(t, r, req))

	// A batch smaller than two groups gets one group.
	require.NoError(t, q.ResetConsumption(ctx, "t", persist.DefaultPartition))
	req.BatchSize = 3
	require.Equal(t, []int64{0, 2, 6}, metaIdx(t, r, req))
}

// evenOnly is a user-written sampler: only even indexes.
type evenOnly struct{}

func (evenOnly) Sample(_ context.Context, in *persist.SampleInput) ([]int64, error) {
	var out []int64
	for _, x := range in.Ready {
		if x%2 == 0 && len(out) < in.BatchSize {
			out = append(out, x)
		}
	}
	return out, nil
}

// badSampler returns an index that is not ready.
type badSampler struct{}

func (badSampler) Sample(context.Context, *persist.SampleInput) ([]int64, error) {
	return []int64{1000}, nil
}

// testSamplers returns DefaultSamplers with the two test samplers added.
func testSamplers(t *testing.T) persist.Samplers {
	set := persist.DefaultSamplers()
	for name, s := range map[string]persist.Sampler{"test-even-only": evenOnly{}, "test-bad": badSampler{}} {
		var err error
		set, err = set.With(name, func(json.RawMessage) (persist.Sampler, error) { return s, nil })
		require.NoError(t, err)
	}
	return set
}

func TestCustomSampler(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	q := openTemp(t, &persist.Config{Samplers: testSamplers(t)})
	r := q.fileReader()
	putN(t, q, persist.DefaultPartition, 6, func(i int) persist.Record { return persist.Record{"x": i} })
	require.Equal(t, []int64{0, 2}, metaIdx(t, r, persist.MetaRequest{Fields: []string{"x"}, BatchSize: 2, Task: "t", Sampler: persist.SamplerSpec{Name: "test-even-only"}}))
	require.Equal(t, []int64{4}, metaIdx(t, r, persist.MetaRequest{Fields: []string{"x"}, BatchSize: 2, Task: "t", Sampler: persist.SamplerSpec{Name: "test-even-only"}}))
	_, err := r.GetMeta(ctx, &persist.MetaRequest{Fields: []string{"x"}, BatchSize: 2, Task: "t", Sampler: persist.SamplerSpec{Name: "test-bad"}})
	require.ErrorIs(t, err, persist.ErrInvalid)
	require.ErrorContains(t, err, "not ready")
	// Nothing was consumed by the rejected call.
	require.Equal(t, []int64{1, 3}, metaIdx(t, r, persist.MetaRequest{Fields: []string{"x"}, BatchSize: 2, Task: "t"}))
}

func TestSeqLenBalancedSampler(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	q := openTemp(t, nil)
	r := q.fileReader()
	lens := []int{10, 1, 1, 1, 9, 2, 2, 2, 5, 5}
	putN(t, q, persist.DefaultPartition, len(lens), func(i int) persist.Record { return persist.Record{"tokens": make([]int, lens[i])} })
	m, err := r.GetMeta(ctx, &persist.MetaRequest{Fields: []string{"tokens"}, BatchSize: 8, Task: "t", Sampler: persist.SeqLenBalanced{LengthField: "tokens", Groups: 2}.Spec()})
	require.NoError(t, err)
	// The first 8 samples (lengths 10,1,1,1,9,2,2,2), longest first to the lighter
	// half: [10,2,1,1] (indexes 0,6,1,2) and [9,2,2,1] (4,5,7,3), 14 tokens each.
	require.Equal(t, []int64{0, 6, 1, 2, 4, 5, 7, 3}, m.Indexes)
	sum := func(idx []int64) (s int) {
		for _, x := range idx {
			s += lens[x]
		}
		return s
	}
	require.Equal(t, sum(m.Indexes[:4]), sum(m.Indexes[4:]))
	// GetData keeps the sampler's order.
	b, err := r.GetData(ctx, m)
	require.NoError(t, err)
	defer b.Release()
	require.Equal(t, m.Indexes, b.Indexes)
	_, err = r.GetMeta(ctx, &persist.MetaRequest{Fields: []string{"tokens"}, BatchSize: 3, Task: "u", Sampler: persist.SeqLenBalanced{LengthField: "tokens", Groups: 2}.Spec()})
	require.ErrorIs(t, err, persist.ErrInvalid)
}

// TestSamplerRulesBeforeAnyData: a consumer that starts before any sample has its
// fields still gets the sampler's rule errors at once (a GRPO batch size that is not a
// multiple of N), instead of an empty batch or, in wait mode, ErrTimeout after the
// whole wait.
func TestSamplerRulesBeforeAnyData(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	q := openTemp(t, nil)
	r := q.fileReader()
	for _, wait := range []bool{false, true} {
		for _, s := range []persist.SamplerSpec{persist.GRPOGroupNOf(4).Spec(), persist.GRPOGroupN{N: 0}.Spec(), persist.SeqLenBalanced{LengthField: "n", Groups: 4}.Spec()} {
			_, err := r.GetMeta(ctx, &persist.MetaRequest{Fields: []string{"prompt"}, BatchSize: 6, Task: "t",
				Sampler: s, Wait: wait, Timeout: time.Minute})
			require.ErrorIs(t, err, persist.ErrInvalid, "wait %v, sampler %+v", wait, s)
		}
	}
	// Valid requests still see an empty queue as nothing ready.
	m, err := r.GetMeta(ctx, &persist.MetaRequest{Fields: []string{"prompt"}, BatchSize: 8, Task: "t", Sampler: persist.GRPOGroupNOf(4).Spec()})
	require.NoError(t, err)
	require.Equal(t, 0, m.Size)
	_, err = r.GetMeta(ctx, &persist.MetaRequest{Fields: []string{"prompt"}, BatchSize: 8, Task: "t", Sampler: persist.RankAware{}.Spec(),
		Wait: true, Timeout: 50 * time.Millisecond})
	require.ErrorIs(t, err, persist.ErrTimeout)
}

// TestRankAwareDeferConsumeDisjoint (issue 11 item 12): with DeferConsume the samples
// of one data-parallel group stay ready until marked consumed, but they are never
// offered to another group; once consumed or reset they are decided as usual.
func TestRankAwareDeferConsumeDisjoint(t *testing.T) {
	t.Parallel()
	q := openTemp(t, nil)
	persisttest.RankAwareDeferConsume(t, persist.New(q), func() *persist.Queue {
		q = reopen(t, q)
		return persist.New(q)
	})
}

// TestRankAwareHeldBackfill: a queue whose assignments were stored before holds were
// recorded gets its holds from the assignments at Open.
func TestRankAwareHeldBackfill(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	q := openTemp(t, nil)
	putN(t, q, persist.DefaultPartition, 8, func(i int) persist.Record { return persist.Record{"x": i} })
	req := func(dp int) persist.MetaRequest {
		return persist.MetaRequest{Fields: []string{"x"}, BatchSize: 4, Task: "train", Sampler: persist.RankAware{}.Spec(), DPRank: dp, DeferConsume: true}
	}
	require.Equal(t, []int64{0, 1, 2, 3}, metaIdx(t, q.fileReader(), req(0)))
	// Make the queue look older: no holds, never backfilled.
	require.NoError(t, q.w.do(ctx, func(t *wtx) error {
		if _, err := t.exec(`DELETE FROM held`); err != nil {
			return err
		}
		_, err := t.exec(`UPDATE meta SET value = 0 WHERE key = 'held_backfilled'`)
		return err
	}))
	q = reopen(t, q)
	require.Equal(t, []int64{4, 5, 6, 7}, metaIdx(t, q.fileReader(), req(1)))
}

// TestSamplerByName: samplers are chosen by name and JSON parameters, as a request
// that crossed a network carries them; unknown names and bad parameters are
// *InvalidError naming the problem in JSON terms.
func TestSamplerByName(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	q := openTemp(t, nil)
	r := q.fileReader()
	putN(t, q, persist.DefaultPartition, 8, func(i int) persist.Record { return persist.Record{"x": i} })
	req := func(spec persist.SamplerSpec) *persist.MetaRequest {
		return &persist.MetaRequest{Fields: []string{"x"}, BatchSize: 4, Task: "t", Sampler: spec, DeferConsume: true}
	}
	m, err := r.GetMeta(ctx, req(persist.SamplerSpec{Name: "grpo-group-n", Params: json.RawMessage(`{"n": 2}`)}))
	require.NoError(t, err)
	require.Equal(t, []int64{0, 1, 2, 3}, m.Indexes)
	require.Equal(t, persist.SamplerSpec{Name: "grpo-group-n", Params: json.RawMessage(`{"n":2}`)}, persist.GRPOGroupN{N: 2}.Spec())
	require.Equal(t, persist.SamplerSpec{Name: "rank-aware"}, persist.RankAware{}.Spec())
	for _, c := range []struct {
		spec persist.SamplerSpec
		msg  string
	}{
		{persist.SamplerSpec{Name: "nope"}, `"nope"`},
		{persist.SamplerSpec{Name: "grpo-group-n", Params: json.RawMessage(`{"n": 2, "m": 1}`)}, `unknown field "m"`},
		{persist.SamplerSpec{Name: "grpo-group-n", Params: json.RawMessage(`{"n": "two"}`)}, "n must be a JSON number"},
		{persist.SamplerSpec{Name: "grpo-group-n", Params: json.RawMessage(`{"n": 0}`)}, "parameter n"},
		{persist.SamplerSpec{Name: "seqlen-balanced", Params: json.RawMessage(`{"groups": 2}`)}, "length_field"},
		{persist.SamplerSpec{Name: "sequential", Params: json.RawMessage(`{"x": 1}`)}, `unknown field "x"`},
	} {
		_, err := r.GetMeta(ctx, req(c.spec))
		require.ErrorIs(t, err, persist.ErrInvalid, "%+v", c.spec)
		require.ErrorContains(t, err, c.msg)
		require.NotContains(t, err.Error(), "persist.", "no Go type names")
	}
	require.Contains(t, persist.DefaultSamplers().Names(), "seqlen-balanced")
	_, err = persist.DefaultSamplers().With("rank-aware", func(json.RawMessage) (persist.Sampler, error) { return persist.RankAware{}, nil })
	require.ErrorIs(t, err, persist.ErrInvalid)
}

// memSource is a SampleSource over a slice, as a store other than the file store
// would give one: the built-in samplers run on it unchanged.
type memSource struct {
	ready    []int64
	assigned map[int][]int64
	dp       int
}

func (m *memSource) ReadyAfter(after int64, n int) ([]int64, bool) {
	var out []int64
	for i, x := range m.ready {
		if x > after {
			out = m.ready[i:min(i+n, len(m.ready))]
			return out, i+n < len(m.ready)
		}
	}
	return nil, false
}
func (m *memSource) ReadyUnheld(n int) ([]int64, error) {
	held := map[int64]bool{}
	for _, idx := range m.assigned {
		for _, x := range idx {
			held[x] = true
		}
	}
	var out []int64
	for _, x := range m.ready {
		if !held[x] && len(out) < n {
			out = append(out, x)
		}
	}
	return out, nil
}
func (m *memSource) Values(context.Context, string, []int64) ([]any, error) { return nil, nil }
func (m *memSource) Ordinals(idx []int64) []int64                           { return idx }
func (m *memSource) Assignment() ([]int64, bool, error) {
	a, ok := m.assigned[m.dp]
	return a, ok, nil
}
func (m *memSource) Assign(idx []int64) error { m.assigned[m.dp] = idx; return nil }

// TestSamplersOnAnotherStore: the built-in samplers use only SampleInput and its
// Source, so they run on any store's SampleSource.
func TestSamplersOnAnotherStore(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// 3 of 4 samples of 2,000 blocks, then one whole block.
	var ready []int64
	for b := int64(0); b < 2000; b++ {
		ready = append(ready, 4*b, 4*b+1, 4*b+2)
	}
	ready = append(ready, 8000, 8001, 8002, 8003)
	src := &memSource{ready: ready, assigned: map[int][]int64{}}
	in := &persist.SampleInput{Ready: ready[:1024], MoreReady: true, BatchSize: 4, Source: src}
	idx, err := persist.GRPOGroupNOf(4).Sample(ctx, in)
	require.NoError(t, err)
	require.Equal(t, []int64{8000, 8001, 8002, 8003}, idx)

	in = &persist.SampleInput{Ready: ready[:1024], MoreReady: true, BatchSize: 2, Source: src}
	idx, err = persist.RankAware{}.Sample(ctx, in)
	require.NoError(t, err)
	require.Equal(t, []int64{0, 1}, idx)
	src.dp = 1
	idx, err = persist.RankAware{}.Sample(ctx, in)
	require.NoError(t, err)
	require.Equal(t, []int64{2, 4}, idx, "held by group 0: skipped")
}
