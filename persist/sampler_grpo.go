package persist

import (
	"context"
	"fmt"
	"sort"

	"github.com/lakeshore-dev/lakeshore/internal/record"
)

// GRPOGroupN hands out only whole groups of N samples of one prompt, never a partial
// or mixed group. Groups are the samples sharing a value of GroupField, or, when
// GroupField is "", aligned blocks of N consecutive samples of the partition (the
// partition's samples 0..N-1, N..2N-1, ...). A group is handed out when N of its
// samples are ready; groups go in the order of their first index. The batch size must
// be a multiple of N.
type GRPOGroupN struct {
	N          int    `json:"n"`                     // samples per prompt, ≥ 1
	GroupField string `json:"group_field,omitempty"` // field holding the prompt id; "" for aligned blocks
}

func (g GRPOGroupN) validate() error {
	if g.N < 1 {
		return &InvalidError{Field: "sampler grpo-group-n parameter n", Value: g.N, Rule: "≥ 1"}
	}
	if g.GroupField != "" {
		return record.CheckFieldName(g.GroupField)
	}
	return nil
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

// Sample returns whole groups, at most BatchSize samples. It pages through every ready
// sample (SampleInput.ReadyAfter) until it has found enough complete groups, so a
// complete group is handed out however many incomplete groups (failed generations)
// come before it; ClearSamples drops those for good. Errors: *InvalidError when N < 1
// or BatchSize is not a multiple of N.
func (g GRPOGroupN) Sample(ctx context.Context, in *SampleInput) ([]int64, error) {
	if err := g.validate(); err != nil {
		return nil, err
	}
	if in.BatchSize%g.N != 0 {
		return nil, &InvalidError{Field: "batch_size", Value: in.BatchSize,
			Rule: fmt.Sprintf("a multiple of the GRPO group size %d (whole groups only)", g.N)}
	}
	type group struct {
		first int64
		idx   []int64
	}
	groups := map[any]*group{}
	var complete []*group
	completeSamples := 0
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
			}
			if len(gr.idx) < g.N {
				gr.idx = append(gr.idx, x)
				if len(gr.idx) == g.N {
					complete = append(complete, gr)
					completeSamples += g.N
				}
			}
		}
		if completeSamples >= in.BatchSize || !more {
			break
		}
		page, more = in.ReadyAfter(page[len(page)-1], window)
	}
	sort.SliceStable(complete, func(a, b int) bool { return complete[a].first < complete[b].first })
	var out []int64
	for _, gr := range complete {
		if len(out)+g.N > in.BatchSize {
			break
		}
		out = append(out, gr.idx...)
	}
	return out, nil
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
