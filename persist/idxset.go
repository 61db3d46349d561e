package persist

import "sort"

// span is the half-open range of global indexes [lo, hi).
type span struct{ lo, hi int64 }

// idxset is a set of global indexes kept as sorted, disjoint, non-adjacent spans.
type idxset []span

// setOf builds a set from indexes in any order.
func setOf(idx []int64) idxset {
	if len(idx) == 0 {
		return nil
	}
	s := append([]int64(nil), idx...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	var out idxset
	for _, i := range s {
		if n := len(out); n > 0 && out[n-1].hi >= i {
			if out[n-1].hi == i {
				out[n-1].hi = i + 1
			}
			continue
		}
		out = append(out, span{i, i + 1})
	}
	return out
}

// spansOf converts sorted, possibly overlapping or adjacent spans into a normalized set.
func spansOf(spans []span) idxset {
	sort.Slice(spans, func(i, j int) bool { return spans[i].lo < spans[j].lo })
	var out idxset
	for _, sp := range spans {
		if sp.hi <= sp.lo {
			continue
		}
		if n := len(out); n > 0 && out[n-1].hi >= sp.lo {
			if sp.hi > out[n-1].hi {
				out[n-1].hi = sp.hi
			}
			continue
		}
		out = append(out, sp)
	}
	return out
}

// count returns the number of indexes in s.
func (s idxset) count() int64 {
	var n int64
	for _, sp := range s {
		n += sp.hi - sp.lo
	}
	return n
}

// contains reports whether i is in s.
func (s idxset) contains(i int64) bool {
	k := sort.Search(len(s), func(k int) bool { return s[k].hi > i })
	return k < len(s) && s[k].lo <= i
}

// union returns s ∪ t.
func (s idxset) union(t idxset) idxset {
	all := make([]span, 0, len(s)+len(t))
	all = append(all, s...)
	all = append(all, t...)
	return spansOf(all)
}

// intersect returns s ∩ t.
func (s idxset) intersect(t idxset) idxset {
	var out idxset
	i, j := 0, 0
	for i < len(s) && j < len(t) {
		lo := max(s[i].lo, t[j].lo)
		hi := min(s[i].hi, t[j].hi)
		if lo < hi {
			out = append(out, span{lo, hi})
		}
		if s[i].hi < t[j].hi {
			i++
		} else {
			j++
		}
	}
	return out
}

// minus returns s \ t.
func (s idxset) minus(t idxset) idxset {
	var out idxset
	j := 0
	for _, sp := range s {
		lo := sp.lo
		for j < len(t) && t[j].hi <= lo {
			j++
		}
		k := j
		for k < len(t) && t[k].lo < sp.hi {
			if t[k].lo > lo {
				out = append(out, span{lo, t[k].lo})
			}
			if t[k].hi > lo {
				lo = t[k].hi
			}
			k++
		}
		if lo < sp.hi {
			out = append(out, span{lo, sp.hi})
		}
	}
	return out
}

// first returns up to n indexes of s in ascending order, all of them if n < 0.
func (s idxset) first(n int) []int64 {
	var out []int64
	for _, sp := range s {
		for i := sp.lo; i < sp.hi; i++ {
			if n >= 0 && len(out) >= n {
				return out
			}
			out = append(out, i)
		}
	}
	return out
}

// from returns the part of s at or above lo.
func (s idxset) from(lo int64) idxset {
	return s.intersect(idxset{{lo, 1<<62 - 1}})
}
