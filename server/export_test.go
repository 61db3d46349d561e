package server

import (
	"context"
	"sync/atomic"
)

// countedCodeStore is a code store that counts the listings of its namespaces (usage).
type countedCodeStore struct {
	codeStore
	listings *atomic.Int64
}

func (c countedCodeStore) usage(ctx context.Context, namespace string) (int, int64, error) {
	c.listings.Add(1)
	return c.codeStore.usage(ctx, namespace)
}

// CountCodeListings makes s's code store count the listings of a namespace's archives
// and returns the count; call it before s serves.
func CountCodeListings(s *Server) *atomic.Int64 {
	n := new(atomic.Int64)
	s.code = countedCodeStore{s.code, n}
	return n
}
