package record

import (
	"regexp"
	"slices"
)

// Record is one sample: field name → value. Values may be bool, any Go integer that
// fits in int64, float32/float64, string, []byte, lists of numbers ([]int, []int64,
// []float32, []float64, ...), Tensor, the wire codec's tensor types, or any other value
// the wire codec encodes. A nil value means "no value": the field is not produced for
// that sample.
type Record map[string]any

// DefaultPartition is the partition of records put without naming one.
const DefaultPartition = "default"

var nameRule = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

const nameRuleText = "1–128 bytes of [A-Za-z0-9._-], not starting with . _ or -"

func CheckName(field, name string) error {
	if !nameRule.MatchString(name) {
		return &InvalidError{Field: field, Value: name, Rule: nameRuleText}
	}
	return nil
}

// SortedUnique sorts idx and drops duplicates, in place.
func SortedUnique(idx []int64) []int64 {
	slices.Sort(idx)
	out := idx[:0]
	for i, v := range idx {
		if i == 0 || v != idx[i-1] {
			out = append(out, v)
		}
	}
	return out
}
