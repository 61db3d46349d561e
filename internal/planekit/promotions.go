package planekit

import (
	"sync"
	"time"
)

// Promotions keep, per queue, when a promote of this process last made rows of the queue
// claimable (moved due waiting rows), so that a claim of the queue that comes up short
// within HeldDueRetry of it asks whether a claimable row is left that it did not take
// (pgplane's claimableLeft): one is, of the default shape, of a shape the claim's offers
// satisfy or of a ready concurrency key, a row another transaction holds, which the claim
// reports as due now (ClaimRequest.Held) and tries again for.
//
// Why promotions: in PostgreSQL's READ COMMITTED, a promote statement (maintenance's,
// another claim's, another process's) whose snapshot began before this promote committed
// finds the row it moved still waiting, locks the row's newest version when it reaches it
// (FOR UPDATE SKIP LOCKED follows the update), fails its re-check, and keeps the row
// locked until its transaction ends: the claim's candidates (FOR UPDATE SKIP LOCKED) skip
// it. Without the question a claim alone on its queue, without waiting, came back empty
// with its job due (planetest's NackRetryBacksOffThenFails over HTTP on PostgreSQL, under
// load; TestClaimTakesWhatItPromotedWhileAnotherPromoteHoldsIt). Only a queue with recent
// promotions pays the question: a burndown of jobs submitted claimable never does.
type Promotions struct {
	mu sync.Mutex
	at map[string]time.Time
}

// Note records that a promote of this process made rows of queue key claimable now.
func (p *Promotions) Note(key string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.at == nil {
		p.at = make(map[string]time.Time)
	}
	now := time.Now()
	p.at[key] = now
	if len(p.at) > 1024 { // forget the queues promoted longer than HeldDueRetry ago
		for k, at := range p.at {
			if now.Sub(at) > HeldDueRetry {
				delete(p.at, k)
			}
		}
	}
}

// Recent reports whether a promote of this process made rows of queue key claimable within
// the last HeldDueRetry.
func (p *Promotions) Recent(key string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	at, ok := p.at[key]
	return ok && time.Since(at) <= HeldDueRetry
}
