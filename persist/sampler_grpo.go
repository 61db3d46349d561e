package persist

import (
	"context"
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/lakeshore-dev/lakeshore/internal/record"
)

// GRPOGroupN hands out only whole groups of N samples of one prompt, never a partial
// or mixed group. Groups are the samples sharing a value of GroupField, or, when
// GroupField is "", aligned blocks of N consecutive samples of the partition (the
// partition's samples 0..N-1, N..2N-1, ...). A group is handed out when N of its
// samples are ready (the barrier); groups go in the order of their first index. The
// batch size must be a multiple of Use (N when Use is 0).
//
// What happens to a group is decided in the GetMeta's transaction (the store's
// GroupDropper), so concurrent readers of one task never disagree and every drop is
// counted once (Stats.GroupsDropped, Stats.SamplesUnused):
//
//   - Over-sampling: with Use = m < N, a complete group hands out its first m samples
//     (by index) and the other N − m are marked consumed for the task, unused.
//   - Filter: with DropZeroVariance naming a numeric field (the reward), a complete
//     group whose N values of it are all equal — no learning signal (DAPO's dynamic
//     sampling) — is dropped: marked consumed for the task, counted, never handed out.
//   - Stragglers: with StragglerSeconds > 0, an incomplete group whose oldest ready
//     sample's TimeField (seconds since the Unix epoch, set by the producer) is more
//     than StragglerSeconds before the reader's clock is dropped
//     (StragglerPolicy "drop", the default) or handed out as it is, with fewer than N
//     samples ("partial"; the filter does not apply to it). Samples of that group
//     that arrive later form a group of their own, judged the same way.
type GRPOGroupN struct {
	N          int    `json:"n"`                     // samples per prompt, ≥ 1
	GroupField string `json:"group_field,omitempty"` // field holding the prompt id; "" for aligned blocks
	// Use is how many samples of a complete group are handed out, 1 ≤ Use ≤ N (0: N).
	Use int `json:"use,omitempty"`
	// DropZeroVariance names the numeric field whose equal values across a complete
	// group drop it ("" no filter).
	DropZeroVariance string `json:"drop_zero_variance,omitempty"`
	// StragglerSeconds > 0 bounds how long an incomplete group waits (0: forever);
	// TimeField (required with it) names the numeric field holding each sample's
	// production time in seconds since the Unix epoch.
	StragglerSeconds float64 `json:"straggler_seconds,omitempty"`
	TimeField        string  `json:"time_field,omitempty"`
	// StragglerPolicy is StragglerDrop ("drop", the default when "") or StragglerPartial.
	StragglerPolicy string `json:"straggler_policy,omitempty"`
}

// The straggler policies of GRPOGroupN.
const (
	StragglerDrop    = "drop"
	StragglerPartial = "partial"
)

func (g GRPOGroupN) validate() error {
	if g.N < 1 {
		return &InvalidError{Field: "sampler grpo-group-n parameter n", Value: g.N, Rule: "≥ 1"}
	}
	if g.Use < 0 || g.Use > g.N {
		return &InvalidError{Field: "sampler grpo-group-n parameter use", Value: g.Use, Rule: fmt.Sprintf("0 (all) to n (%d)", g.N)}
	}
	for _, f := range []string{g.GroupField, g.DropZeroVariance, g.TimeField} {
		if f != "" {
			if err := record.CheckFieldName(f); err != nil {
				return err
			}
		}
	}
	if !(g.StragglerSeconds >= 0) || math.IsInf(g.StragglerSeconds, 0) {
		return &InvalidError{Field: "sampler grpo-group-n parameter straggler_seconds", Value: g.StragglerSeconds, Rule: "≥ 0 seconds (0: wait forever)"}
	}
	if g.StragglerSeconds > 0 && g.TimeField == "" {
		return &InvalidError{Field: "sampler grpo-group-n parameter time_field", Value: "", Rule: "the numeric field holding each sample's production time (Unix seconds), required with straggler_seconds"}
	}
	switch g.StragglerPolicy {
	case "", StragglerDrop, StragglerPartial:
	default:
		return &InvalidError{Field: "sampler grpo-group-n parameter straggler_policy", Value: g.StragglerPolicy, Rule: `"drop" or "partial"`}
	}
	return nil
}

// checkLeasedSampler refuses a lease (MetaRequest.Lease) with a sampler that cannot hand
// a leased batch out again once its lease expired: GRPOGroupN with Use < N, whose
// hand-out consumes the unused samples of each group, so that the batch, ready again,
// would be the part of a group that never completes (never handed out, and counted by
// back-pressure as unconsumed, for ever). Errors: *InvalidError naming lease.
func checkLeasedSampler(s Sampler, lease time.Duration) error {
	if g, ok := s.(GRPOGroupN); ok && g.use() < g.N {
		return &InvalidError{Field: "lease", Value: lease, Rule: fmt.Sprintf("no lease with sampler %s's use (%d) below n (%d): its hand-out consumes "+
			"the unused samples of each group, so a leased batch could not come back whole once its lease expired (read without a lease, or use all n)",
			SamplerGRPOGroupN, g.Use, g.N)}
	}
	return nil
}

// use returns the samples handed out of a complete group.
func (g GRPOGroupN) use() int {
	if g.Use == 0 {
		return g.N
	}
	return g.Use
}

// GRPOGroupNOf returns a GRPOGroupN sampler of n samples per prompt grouped by aligned
// blocks of n consecutive samples of the partition.
func GRPOGroupNOf(n int) GRPOGroupN { return GRPOGroupN{N: n} }

// Window is the page size: how many ready samples Sample examines at a time.
func (g GRPOGroupN) Window(batchSize int) int {
	if g.GroupField != "" {
		return max(16*batchSize, 8192)
	}
	return max(4*batchSize, 1024) + g.N
}

// GroupDropper is implemented by a store's SampleSource (every store of this
// repository): what GRPOGroupN decided to drop, written by the GetMeta's transaction
// with the batch (even when no batch is handed out). DropGroups marks each group's
// samples consumed for the task and counts the groups that had any sample not yet
// consumed (Stats.GroupsDropped); DropUnused marks samples consumed and counts those
// not yet consumed (Stats.SamplesUnused).
type GroupDropper interface {
	DropGroups(groups [][]int64)
	DropUnused(indexes []int64)
}

// Sample returns whole groups, at most BatchSize samples. It pages through every ready
// sample (SampleInput.ReadyAfter) until it has found enough groups to hand out, so a
// complete group is handed out however many incomplete groups (failed generations)
// come before it; ClearSamples, DropGroup or a straggler bound drop those for good.
// Errors: *InvalidError when the parameters are bad, BatchSize is not a multiple of
// Use, the filter or time field is not numeric, or the store cannot drop groups.
func (g GRPOGroupN) Sample(ctx context.Context, in *SampleInput) ([]int64, error) {
	if err := g.validate(); err != nil {
		return nil, err
	}
	use := g.use()
	if in.BatchSize%use != 0 {
		return nil, &InvalidError{Field: "batch_size", Value: in.BatchSize,
			Rule: fmt.Sprintf("a multiple of the GRPO group size %d (whole groups only)", use)}
	}
	var dropper GroupDropper
	if g.Use != 0 && g.Use < g.N || g.DropZeroVariance != "" || g.StragglerSeconds > 0 {
		d, ok := in.Source.(GroupDropper)
		if !ok {
			return nil, &InvalidError{Field: "sampler grpo-group-n", Value: g, Rule: "use, drop_zero_variance and straggler_seconds need a store that drops groups"}
		}
		dropper = d
	}
	type group struct {
		first int64
		idx   []int64
	}
	groups := map[any]*group{}
	var order []*group // every group seen, by first index
	var serve [][]int64
	served := 0
	var dropped [][]int64
	var unused []int64
	// decide judges a complete group: serve it (its first use samples) or drop it.
	decide := func(gr *group) error {
		if g.DropZeroVariance != "" {
			flat, err := g.zeroVariance(ctx, in, gr.idx)
			if err != nil {
				return err
			}
			if flat {
				dropped = append(dropped, gr.idx)
				return nil
			}
		}
		if served+use > in.BatchSize {
			return nil
		}
		serve = append(serve, gr.idx[:use])
		unused = append(unused, gr.idx[use:]...)
		served += use
		return nil
	}
	page, more := in.Ready, in.MoreReady
	window := max(g.Window(in.BatchSize), in.BatchSize, len(page))
	for len(page) > 0 {
		var keys []any
		if g.GroupField == "" {
			for _, o := range in.Ordinals(page) {
				keys = append(keys, o/int64(g.N))
			}
		} else {
			vals, err := in.Values(ctx, g.GroupField, page)
			if err != nil {
				return nil, err
			}
			for _, v := range vals {
				keys = append(keys, groupKey(v))
			}
		}
		for i, x := range page {
			k := keys[i]
			if k == nil {
				continue // no group id: never handed out by this sampler
			}
			gr := groups[k]
			if gr == nil {
				gr = &group{first: x}
				groups[k] = gr
				order = append(order, gr)
			}
			if len(gr.idx) < g.N {
				gr.idx = append(gr.idx, x)
				if len(gr.idx) == g.N {
					if err := decide(gr); err != nil {
						return nil, err
					}
				}
			}
		}
		if served >= in.BatchSize || !more {
			break
		}
		page, more = in.ReadyAfter(page[len(page)-1], window)
	}
	if g.StragglerSeconds > 0 && served < in.BatchSize {
		var incomplete []*group
		for _, gr := range order {
			if len(gr.idx) < g.N {
				incomplete = append(incomplete, gr)
			}
		}
		late, err := g.stragglers(ctx, in, len(incomplete), func(i int) []int64 { return incomplete[i].idx })
		if err != nil {
			return nil, err
		}
		for _, i := range late {
			gr := incomplete[i]
			if g.StragglerPolicy == StragglerPartial {
				if served+len(gr.idx) <= in.BatchSize {
					serve = append(serve, gr.idx)
					served += len(gr.idx)
				}
				continue
			}
			dropped = append(dropped, gr.idx)
		}
	}
	if dropper != nil {
		if len(dropped) > 0 {
			dropper.DropGroups(dropped)
		}
		if len(unused) > 0 {
			dropper.DropUnused(unused)
		}
	}
	sort.SliceStable(serve, func(a, b int) bool { return serve[a][0] < serve[b][0] })
	var out []int64
	for _, s := range serve {
		out = append(out, s...)
	}
	return out, nil
}

// zeroVariance reports whether the values of the filter field over idx are all equal
// (a sample without a value makes the group not judged: false).
func (g GRPOGroupN) zeroVariance(ctx context.Context, in *SampleInput, idx []int64) (bool, error) {
	vals, err := in.Values(ctx, g.DropZeroVariance, idx)
	if err != nil {
		return false, err
	}
	var first float64
	for i, v := range vals {
		x, ok, err := numeric(g.DropZeroVariance, v)
		if err != nil || !ok {
			return false, err
		}
		if i == 0 {
			first = x
		} else if x != first {
			return false, nil
		}
	}
	return true, nil
}

// stragglers returns the positions of the n incomplete groups (members(i)) whose
// oldest sample's TimeField is more than StragglerSeconds ago.
func (g GRPOGroupN) stragglers(ctx context.Context, in *SampleInput, n int, members func(i int) []int64) ([]int, error) {
	if n == 0 {
		return nil, nil
	}
	var all []int64
	for i := range n {
		all = append(all, members(i)...)
	}
	vals, err := in.Values(ctx, g.TimeField, all)
	if err != nil {
		return nil, err
	}
	at := make(map[int64]float64, len(all))
	for i, x := range all {
		t, ok, err := numeric(g.TimeField, vals[i])
		if err != nil {
			return nil, err
		}
		if ok {
			at[x] = t
		}
	}
	now := float64(time.Now().UnixNano()) / 1e9
	var out []int
	for i := range n {
		oldest, seen := 0.0, false
		for _, x := range members(i) {
			if t, ok := at[x]; ok && (!seen || t < oldest) {
				oldest, seen = t, true
			}
		}
		if seen && now-oldest > g.StragglerSeconds {
			out = append(out, i)
		}
	}
	return out, nil
}

// numeric converts a stored value of a numeric field (nil: ok false). Errors:
// *InvalidError for a value that is not a number.
func numeric(field string, v any) (float64, bool, error) {
	switch x := v.(type) {
	case nil:
		return 0, false, nil
	case int64:
		return float64(x), true, nil
	case float64:
		return x, true, nil
	case int:
		return float64(x), true, nil
	}
	return 0, false, &InvalidError{Field: "sampler grpo-group-n field " + field, Value: v, Rule: "a numeric field (int64 or float64)"}
}

// groupKey makes a map key of a group-field value.
func groupKey(v any) any {
	switch x := v.(type) {
	case nil:
		return nil
	case []byte:
		return "b:" + string(x)
	case string:
		return "s:" + x
	case int64, float64, bool:
		return x
	default:
		return fmt.Sprint(x)
	}
}

var _ WindowSampler = GRPOGroupN{}
