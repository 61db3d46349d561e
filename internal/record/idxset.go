package record

import "sort"

// Span is the half-open range of global indexes [lo, hi).
type Span struct{ Lo, Hi int64 }

// IndexSet is a set of global indexes kept as sorted, disjoint, non-adjacent spans.
type IndexSet []Span

// SetOf builds a set from indexes in any order.
func SetOf(idx []int64) IndexSet {
	if len(idx) == 0 {
		return nil
	}
	s := append([]int64(nil), idx...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	var out IndexSet
	for _, i := range s {
		if n := len(out); n > 0 && out[n-1].Hi >= i {
			if out[n-1].Hi == i {
				out[n-1].Hi = i + 1
			}
			continue
		}
		out = append(out, Span{i, i + 1})
	}
	return out
}

// SpansOf converts sorted, possibly overlapping or adjacent spans into a normalized set.
func SpansOf(spans []Span) IndexSet {
	sort.Slice(spans, func(i, j int) bool { return spans[i].Lo < spans[j].Lo })
	var out IndexSet
	for _, sp := range spans {
		if sp.Hi <= sp.Lo {
			continue
		}
		if n := len(out); n > 0 && out[n-1].Hi >= sp.Lo {
			if sp.Hi > out[n-1].Hi {
				out[n-1].Hi = sp.Hi
			}
			continue
		}
		out = append(out, sp)
	}
	return out
}

// Count returns the number of indexes in s.
func (s IndexSet) Count() int64 {
	var n int64
	for _, sp := range s {
		n += sp.Hi - sp.Lo
	}
	return n
}

// Contains reports whether i is in s.
func (s IndexSet) Contains(i int64) bool {
	k := sort.Search(len(s), func(k int) bool { return s[k].Hi > i })
	return k < len(s) && s[k].Lo <= i
}

// Union returns s ∪ t.
func (s IndexSet) Union(t IndexSet) IndexSet {
	all := make([]Span, 0, len(s)+len(t))
	all = append(all, s...)
	all = append(all, t...)
	return SpansOf(all)
}

// Intersect returns s ∩ t.
func (s IndexSet) Intersect(t IndexSet) IndexSet {
	var out IndexSet
	i, j := 0, 0
	for i < len(s) && j < len(t) {
		lo := max(s[i].Lo, t[j].Lo)
		hi := min(s[i].Hi, t[j].Hi)
		if lo < hi {
			out = append(out, Span{lo, hi})
		}
		if s[i].Hi < t[j].Hi {
			i++
		} else {
			j++
		}
	}
	return out
}

// Minus returns s \ t.
func (s IndexSet) Minus(t IndexSet) IndexSet {
	var out IndexSet
	j := 0
	for _, sp := range s {
		lo := sp.Lo
		for j < len(t) && t[j].Hi <= lo {
			j++
		}
		k := j
		for k < len(t) && t[k].Lo < sp.Hi {
			if t[k].Lo > lo {
				out = append(out, Span{lo, t[k].Lo})
			}
			if t[k].Hi > lo {
				lo = t[k].Hi
			}
			k++
		}
		if lo < sp.Hi {
			out = append(out, Span{lo, sp.Hi})
		}
	}
	return out
}

// First returns up to n indexes of s in ascending order, all of them if n < 0.
func (s IndexSet) First(n int) []int64 {
	var out []int64
	for _, sp := range s {
		for i := sp.Lo; i < sp.Hi; i++ {
			if n >= 0 && len(out) >= n {
				return out
			}
			out = append(out, i)
		}
	}
	return out
}

// From returns the part of s at or above lo.
func (s IndexSet) From(lo int64) IndexSet {
	return s.Intersect(IndexSet{{lo, 1<<62 - 1}})
}

// Below returns, for each of indexes, how many indexes of s are smaller: its position
// among s's indexes (a sampler's ordinal of a sample within its partition's spans).
func (s IndexSet) Below(indexes []int64) []int64 {
	out := make([]int64, len(indexes))
	for i, x := range indexes {
		var before int64
		for _, sp := range s {
			if sp.Lo > x {
				break
			}
			before += min(sp.Hi, x) - sp.Lo
		}
		out[i] = before
	}
	return out
}
