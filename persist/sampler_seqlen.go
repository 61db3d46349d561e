package persist

import (
	"context"
	"fmt"
	"sort"

	"github.com/lakeshore-dev/lakeshore/internal/record"
)

// SeqLenBalanced takes the first BatchSize ready samples (like Sequential) and orders
// them so that splitting the batch into Groups equal-count consecutive parts (micro-
// batches, or data-parallel ranks) gives parts whose total sequence length is as even
// as the greedy longest-first assignment makes it. A sample's length is the value of
// LengthField: an integer or float as is; a string, bytes or list by its length; a
// tensor by its element count. Samples without a value count as 0.
type SeqLenBalanced struct {
	LengthField string `json:"length_field"` // field holding the length (or the sequence itself); required
	Groups      int    `json:"groups"`       // number of parts; BatchSize must be a multiple of it
}

func (s SeqLenBalanced) validate() error {
	if s.LengthField == "" {
		return &InvalidError{Field: "sampler seqlen-balanced parameter length_field", Value: "", Rule: "a field name"}
	}
	if s.Groups < 1 {
		return &InvalidError{Field: "sampler seqlen-balanced parameter groups", Value: s.Groups, Rule: "≥ 1"}
	}
	return record.CheckFieldName(s.LengthField)
}

// Sample picks and orders the batch. Errors: *InvalidError when LengthField is empty,
// Groups < 1 or BatchSize is not a multiple of Groups.
func (s SeqLenBalanced) Sample(ctx context.Context, in *SampleInput) ([]int64, error) {
	if err := s.validate(); err != nil {
		return nil, err
	}
	if in.BatchSize%s.Groups != 0 {
		return nil, &InvalidError{Field: "batch_size", Value: in.BatchSize, Rule: fmt.Sprintf("a multiple of the seqlen-balanced parameter groups (%d)", s.Groups)}
	}
	n := min(in.BatchSize, len(in.Ready))
	n -= n % s.Groups // only equal-count parts
	if n == 0 {
		return nil, nil
	}
	chosen := append([]int64(nil), in.Ready[:n]...)
	vals, err := in.Values(ctx, s.LengthField, chosen)
	if err != nil {
		return nil, err
	}
	type item struct {
		idx int64
		len float64
	}
	items := make([]item, n)
	for i, x := range chosen {
		items[i] = item{x, seqLen(vals[i])}
	}
	sort.SliceStable(items, func(a, b int) bool { return items[a].len > items[b].len })
	per := n / s.Groups
	groups := make([][]int64, s.Groups)
	totals := make([]float64, s.Groups)
	for _, it := range items {
		best := -1
		for g := range groups {
			if len(groups[g]) < per && (best < 0 || totals[g] < totals[best]) {
				best = g
			}
		}
		groups[best] = append(groups[best], it.idx)
		totals[best] += it.len
	}
	out := make([]int64, 0, n)
	for _, g := range groups {
		out = append(out, g...)
	}
	return out, nil
}

func seqLen(v any) float64 {
	switch x := v.(type) {
	case int64:
		return float64(x)
	case float64:
		return x
	case string:
		return float64(len(x))
	case []byte:
		return float64(len(x))
	case []int64:
		return float64(len(x))
	case []float64:
		return float64(len(x))
	case Tensor:
		n := 1
		for _, d := range x.Shape {
			n *= d
		}
		return float64(n)
	case []any:
		return float64(len(x))
	}
	if k, t, ok, _ := record.WireTensor("", v); ok && k != "" {
		return seqLen(t)
	}
	return 0
}

var _ Sampler = SeqLenBalanced{}
