package filestore

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/lakeshore-dev/lakeshore/persist"
)

// Read-ahead of a trainer loop (GetBatch): after a GetBatch of the Sequential sampler
// hands out a batch, the file store chooses the next batch of the same request on a
// read snapshot and reads its data, in the background, while the caller works with the
// batch it got. Nothing is recorded: the samples chosen ahead are neither consumed nor
// held, so a reader that stops (or a process that dies) leaves them as they were. The
// next GetBatch of the same request takes the choice only when no commit changed the
// partition since the snapshot (a watch taken before it, checked inside the write
// transaction that records the hand-out, after the check for other processes' commits),
// so it hands out exactly what choosing afresh would; it then records it as GetMeta
// does (the recheck of a snapshot's choice, one commit, durable before the batch is
// returned). Any other request, a changed partition, or leases of the task (which end
// with time, not a commit) make it choose afresh, as without read-ahead.

// readAhead is the file store's one batch chosen ahead.
type readAhead struct {
	mu   sync.Mutex
	next *aheadBatch // nil: none
	// misses counts choices ahead dropped unused in a row; after missLimit of them the
	// store stops choosing ahead for a while (missPause GetBatches), so that readers
	// that keep changing the partition (several readers of one task) do not pay for
	// reads nobody takes.
	misses, pause int
}

const (
	missLimit = 3
	missPause = 64
	// aheadTTL is how long a batch chosen ahead is kept for a next GetBatch that does
	// not come: its watch of the partition keeps the writer polling for other
	// processes' commits, and its data takes memory.
	aheadTTL = 2 * time.Second
)

// aheadBatch is a batch chosen ahead for rq, and its data.
type aheadBatch struct {
	rq      persist.MetaRequest
	woken   <-chan struct{} // closed by the first commit that changes rq.Partition
	release func()
	planned chan struct{} // closed once plan is set (nil: nothing to hand out ahead)
	done    chan struct{} // closed once b is set (nil: the read failed)
	plan    *metaPlan
	b       *persist.Batch
}

// readsAhead reports whether requests like rq are read ahead: the Sequential sampler
// (whose choice depends only on what the snapshot shows), no wait, no lease, no
// staleness bound (versions move without touching the partition).
func readsAhead(rq *persist.MetaRequest, sampler persist.Sampler) bool {
	_, seq := sampler.(persist.Sequential)
	return seq && !rq.Wait && rq.Lease == 0 && rq.Staleness == nil
}

// sameRequest reports whether a and b ask for the same batch.
func sameRequest(a, b *persist.MetaRequest) bool {
	return slices.Equal(a.Fields, b.Fields) && a.BatchSize == b.BatchSize && a.Task == b.Task &&
		a.Partition == b.Partition && a.Sampler.Name == b.Sampler.Name && len(a.Sampler.Params) == 0 &&
		len(b.Sampler.Params) == 0 && a.DeferConsume == b.DeferConsume && a.DPRank == b.DPRank &&
		a.BatchIndex == b.BatchIndex && a.Wait == b.Wait && a.Lease == b.Lease && a.Staleness == nil && b.Staleness == nil
}

// discard waits for a's read and drops it.
func (a *aheadBatch) discard() {
	<-a.done
	a.release()
	if a.b != nil {
		a.b.Release()
	}
}

// start chooses and reads the batch after the one just handed out for rq, in the
// background (when rq reads ahead and the store is not pausing after misses).
func (q *fileQueue) startReadAhead(rq persist.MetaRequest, sampler persist.Sampler) {
	if !readsAhead(&rq, sampler) {
		return
	}
	r := &q.ahead
	r.mu.Lock()
	if r.pause > 0 {
		r.pause--
		r.mu.Unlock()
		return
	}
	old := r.next
	r.next = nil
	r.mu.Unlock()
	if old != nil {
		old.discard()
	}
	if err := q.calls.Enter(); err != nil {
		return
	}
	// Taken before the snapshot, so that no commit after it is missed.
	woken, release := q.hub.watchPartition(rq.Partition)
	a := &aheadBatch{rq: rq, woken: woken, release: release, planned: make(chan struct{}), done: make(chan struct{})}
	r.mu.Lock()
	r.next = a
	r.mu.Unlock()
	time.AfterFunc(aheadTTL, func() {
		r.mu.Lock()
		stale := r.next == a
		if stale {
			r.next = nil
		}
		r.mu.Unlock()
		if stale {
			a.discard()
		}
	})
	go func() {
		defer close(a.done)
		defer q.calls.Leave()
		planned := false
		defer func() {
			if !planned {
				close(a.planned)
			}
		}()
		ctx := context.Background()
		var p *metaPlan
		leased := false
		err := q.readSnapshot(ctx, func(t *wtx) error {
			var err error
			if p, err = t.loadMetaState(&a.rq); err != nil {
				return err
			}
			l, err := t.activeLeases(a.rq.Partition, a.rq.Task, time.Now())
			leased = len(l) > 0
			return err
		})
		if err != nil || leased {
			return
		}
		if err := p.sample(ctx, &a.rq, sampler); err != nil || len(p.idx) == 0 || p.src.assigned != nil || p.src.drops() {
			return // nothing to read ahead, or a choice with more to record than consumption
		}
		a.plan, planned = p, true
		close(a.planned) // the next GetBatch may record it while the data is read
		if b, err := q.readData(ctx, a.rq.Partition, a.rq.Fields, p.idx, false); err == nil {
			a.b = b
		}
	}()
}

// takeReadAhead returns the batch chosen ahead for rq, if any (the caller owns it).
func (q *fileQueue) takeReadAhead(rq *persist.MetaRequest) *aheadBatch {
	r := &q.ahead
	r.mu.Lock()
	a := r.next
	r.next = nil
	r.mu.Unlock()
	if a == nil {
		return nil
	}
	if !sameRequest(&a.rq, rq) {
		a.discard()
		q.aheadMissed()
		return nil
	}
	return a
}

// aheadMissed counts a batch chosen ahead that was not used.
func (q *fileQueue) aheadMissed() {
	r := &q.ahead
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.misses++; r.misses >= missLimit {
		r.misses, r.pause = 0, missPause
	}
}

// useReadAhead hands out a, chosen ahead for rq: it records the choice (with the
// recheck of a snapshot's choice) unless the partition changed since a's snapshot,
// while a's data may still be being read. ok false: a is dropped and the caller chooses
// afresh. With ok, b is nil when a's read failed: the caller reads after (GetData).
func (q *fileQueue) useReadAhead(ctx context.Context, rq *persist.MetaRequest, a *aheadBatch) (meta *persist.BatchMeta, b *persist.Batch, ok bool, err error) {
	<-a.planned
	if a.plan == nil {
		a.discard()
		q.aheadMissed()
		return nil, nil, false, nil
	}
	err = q.w.do(ctx, func(t *wtx) error {
		// After BEGIN and the check for other processes' commits: every commit that
		// changed the partition has closed woken by now, but those of this transaction.
		select {
		case <-a.woken:
			return errHandOutConflict
		default:
		}
		if _, changed := t.parts[rq.Partition]; changed {
			return errHandOutConflict
		}
		return t.recordMeta(rq, a.plan, true)
	})
	if err != nil {
		a.discard()
		q.aheadMissed()
		return nil, nil, false, nil // choose afresh (which reports a lasting error again)
	}
	a.release()
	q.ahead.mu.Lock()
	q.ahead.misses = 0
	q.ahead.mu.Unlock()
	<-a.done
	meta, err = q.batchMeta(ctx, rq, a.plan.idx, a.plan.schema)
	if err != nil {
		if a.b != nil {
			a.b.Release()
		}
		return nil, nil, true, err
	}
	return meta, a.b, true, nil
}

// dropReadAhead drops the batch chosen ahead, if any (Close).
func (q *fileQueue) dropReadAhead() {
	r := &q.ahead
	r.mu.Lock()
	a := r.next
	r.next = nil
	r.mu.Unlock()
	if a != nil {
		a.discard()
	}
}
