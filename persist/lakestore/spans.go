package lakestore

import "sort"

// span is the half-open index range [lo, hi).
type span struct{ lo, hi int64 }

// spanSet is a sorted list of disjoint, non-adjacent spans: a set of global indexes.
type spanSet []span

// setOf returns the set of indexes (any order, duplicates allowed).
func setOf(idx []int64) spanSet {
	if len(idx) == 0 {
		return nil
	}
	s := append([]int64(nil), idx...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	var out spanSet
	for _, x := range s {
		if n := len(out); n > 0 && x <= out[n-1].hi {
			if x == out[n-1].hi {
				out[n-1].hi++
			}
			continue
		}
		out = append(out, span{x, x + 1})
	}
	return out
}

// spansOf normalizes spans in any order, overlapping or not.
func spansOf(spans []span) spanSet {
	s := append([]span(nil), spans...)
	sort.Slice(s, func(i, j int) bool { return s[i].lo < s[j].lo })
	var out spanSet
	for _, sp := range s {
		if sp.hi <= sp.lo {
			continue
		}
		if n := len(out); n > 0 && sp.lo <= out[n-1].hi {
			out[n-1].hi = max(out[n-1].hi, sp.hi)
			continue
		}
		out = append(out, sp)
	}
	return out
}

func (s spanSet) count() int64 {
	var n int64
	for _, sp := range s {
		n += sp.hi - sp.lo
	}
	return n
}

func (s spanSet) contains(x int64) bool {
	i := sort.Search(len(s), func(i int) bool { return s[i].hi > x })
	return i < len(s) && s[i].lo <= x
}

func (s spanSet) union(t spanSet) spanSet { return spansOf(append(append([]span(nil), s...), t...)) }

func (s spanSet) intersect(t spanSet) spanSet {
	var out spanSet
	i, j := 0, 0
	for i < len(s) && j < len(t) {
		lo, hi := max(s[i].lo, t[j].lo), min(s[i].hi, t[j].hi)
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

func (s spanSet) minus(t spanSet) spanSet {
	var out spanSet
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
			lo = max(lo, t[k].hi)
			k++
		}
		if lo < sp.hi {
			out = append(out, span{lo, sp.hi})
		}
	}
	return out
}

// first returns up to n indexes of s, ascending.
func (s spanSet) first(n int) []int64 {
	var out []int64
	for _, sp := range s {
		for x := sp.lo; x < sp.hi && len(out) < n; x++ {
			out = append(out, x)
		}
		if len(out) >= n {
			break
		}
	}
	return out
}

// from returns the part of s at or above lo.
func (s spanSet) from(lo int64) spanSet {
	return s.intersect(spanSet{{lo, 1 << 62}})
}
