package planekit

import (
	"strings"

	"github.com/lakeshore-dev/lakeshore/plane"
)

// ListStates are the stored states a listing of invocations in state s ("" for every
// state) walks; delayed adds StateDelayed, which only sqliteplane stores.
func ListStates(s plane.State, delayed bool) []int {
	var states []int
	switch s {
	case "":
		states = []int{StateShaped, StateKeyed}
		for n := StateQueued; n <= StateTimeout; n++ {
			states = append(states, n)
		}
	case plane.StateQueued:
		states = []int{StateQueued, StateKeyed, StateShaped}
	default:
		return []int{StateNumber(s)}
	}
	if delayed {
		states = append(states, StateDelayed)
	}
	return states
}

// ListWalk builds a listing's page from its candidates in page order, which next returns
// one at a time (an id, its key, and what the page holds of it; ok false after the last).
// It examines at most budget candidates and keeps those whose key starts with prefix, up
// to limit; cursor, when a candidate is left after the page or the budget, is the last id
// examined ("" when none is left).
func ListWalk[T any](budget, limit int, prefix string, next func() (id, key string, v T, ok bool, err error)) (page []T, cursor string, err error) {
	examined, last := 0, ""
	page = []T{}
	for {
		id, key, v, ok, err := next()
		if err != nil {
			return nil, "", err
		}
		if !ok {
			return page, "", nil
		}
		if examined == budget || len(page) == limit {
			return page, last, nil // a candidate beyond the page, or beyond the budget
		}
		examined++
		last = id
		if strings.HasPrefix(key, prefix) {
			page = append(page, v)
		}
	}
}

// ByID indexes items by their ids (id reads one's): a read of many rows by id, answered in
// its caller's order.
func ByID[T any](items []T, id func(T) string) map[string]T {
	byID := make(map[string]T, len(items))
	for _, v := range items {
		byID[id(v)] = v
	}
	return byID
}

// InOrder appends to page the invocations of rows in the order of ids (a listing's page,
// whose rows were read by id after its ids), leaving out an id without a row (trimmed
// since its id was read).
func InOrder(page []*plane.Invocation, ids []string, rows []*Row) []*plane.Invocation {
	byID := ByID(rows, func(r *Row) string { return r.ID })
	for _, id := range ids {
		if r := byID[id]; r != nil {
			page = append(page, r.Invocation())
		}
	}
	return page
}
