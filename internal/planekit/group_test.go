package planekit

import (
	"context"
	"runtime"
	"slices"
	"sync"
	"testing"
)

// queued waits until n callers queue in g (none of them running a group).
func queued[T any](g *Grouper[T], n int) {
	for {
		g.mu.Lock()
		k := len(g.pending)
		g.mu.Unlock()
		if k >= n {
			return
		}
		runtime.Gosched()
	}
}

// TestGrouperLanes: a grouper with two lanes runs a second group while the first is in
// flight, queues callers once both are, and serves those with the next group when a lane
// frees; with one lane a caller queues behind the group in flight.
func TestGrouperLanes(t *testing.T) {
	open := func() error { return nil }
	size := func(int) int { return 1 }

	t.Run("TwoLanes", func(t *testing.T) {
		hold := map[int]chan struct{}{1: make(chan struct{}), 2: make(chan struct{})}
		started := make(chan int, 4)
		var mu sync.Mutex
		var groups [][]int
		inFlight, most := 0, 0
		g := NewGrouperLanes(open, 100, func(_ context.Context, reqs []int) {
			mu.Lock()
			groups = append(groups, slices.Clone(reqs))
			inFlight++
			most = max(most, inFlight)
			mu.Unlock()
			started <- reqs[0]
			if h := hold[reqs[0]]; h != nil {
				<-h
			}
			mu.Lock()
			inFlight--
			mu.Unlock()
		}, size, 2)
		var wg sync.WaitGroup
		do := func(r int) { wg.Go(func() { _ = g.Do(context.Background(), r) }) }
		do(1)
		if got := <-started; got != 1 {
			t.Fatalf("started %d, want 1", got)
		}
		do(2) // a lane is free: runs while 1 is in flight
	second:
		for {
			select {
			case got := <-started:
				if got != 2 {
					t.Fatalf("started %d, want 2 in the second lane", got)
				}
				break second
			default:
			}
			g.mu.Lock()
			k := len(g.pending)
			g.mu.Unlock()
			if k > 0 {
				close(hold[1])
				t.Fatal("2 queued behind the group in flight with a lane free")
			}
			runtime.Gosched()
		}
		do(3)
		queued(g, 1) // both lanes busy: 3 queues, then 4
		do(4)
		queued(g, 2)
		close(hold[1])
		if got := <-started; got != 3 {
			t.Fatalf("started %d, want 3 (the queue's first) once a lane freed", got)
		}
		close(hold[2])
		wg.Wait()
		mu.Lock()
		defer mu.Unlock()
		if most != 2 {
			t.Fatalf("%d groups in flight at the most, want 2", most)
		}
		var served []int
		for _, gr := range groups {
			served = append(served, gr...)
		}
		slices.Sort(served)
		if !slices.Equal(served, []int{1, 2, 3, 4}) {
			t.Fatalf("served %v (groups %v), want each of 1..4 once", served, groups)
		}
		if !slices.Equal(groups[2], []int{3, 4}) {
			t.Fatalf("groups %v: want 3 and 4, queued together, served in one group", groups)
		}
	})

	t.Run("OneLane", func(t *testing.T) {
		hold := make(chan struct{})
		var mu sync.Mutex
		var groups [][]int
		started := make(chan struct{}, 2)
		g := NewGrouper(open, 100, func(_ context.Context, reqs []int) {
			mu.Lock()
			groups = append(groups, slices.Clone(reqs))
			mu.Unlock()
			started <- struct{}{}
			if reqs[0] == 1 {
				<-hold
			}
		}, size)
		var wg sync.WaitGroup
		wg.Go(func() { _ = g.Do(context.Background(), 1) })
		<-started
		wg.Go(func() { _ = g.Do(context.Background(), 2) })
		queued(g, 1) // 2 queues behind 1
		close(hold)
		wg.Wait()
		if len(groups) != 2 || !slices.Equal(groups[1], []int{2}) {
			t.Fatalf("groups %v, want [1] then [2]", groups)
		}
	})
}
