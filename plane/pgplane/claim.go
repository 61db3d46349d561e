package pgplane

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"time"

	"github.com/lakeshore-dev/lakeshore/plane"
)

// InvocationClaimMany implements plane.Driver. A claim first makes the queue's due delayed
// rows claimable, then takes rows in the order of its kind with FOR UPDATE SKIP LOCKED from
// the partial index of claimable rows, so concurrent claimers never wait on each other and
// never take one row twice.
func (d *Driver) InvocationClaimMany(ctx context.Context, p *plane.ClaimParams) ([]*plane.Job, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	kind, _ := plane.ParseKind(string(p.Kind))
	n := max(p.Max, 1)
	lease := cmp.Or(p.LeaseTTL, plane.LeaseTTLDefault)
	waitUntil := time.Now().Add(p.Wait)
	key := queueKey(p.Namespace, p.Queue)
	for {
		var changed <-chan struct{}
		release := func() {}
		if p.Wait > 0 {
			changed, release = d.hub.watch(key)
		}
		var jobs []*plane.Job
		var nextMS int64
		err := d.do(ctx, func(t *tx) error {
			var err error
			jobs, nextMS, err = t.claim(p, kind, n, lease)
			return err
		})
		if err != nil || len(jobs) > 0 || p.Wait == 0 {
			release()
			return jobs, err
		}
		wait := time.Until(waitUntil)
		if nextMS > 0 { // a queued invocation becomes due before the wait ends
			wait = min(wait, max(time.Duration(nextMS-d.cfg.Now().UnixMilli())*time.Millisecond, time.Millisecond))
		}
		err = d.sleep(ctx, changed, wait)
		release()
		if err != nil && err != plane.ErrTimeout {
			return nil, err
		}
		if time.Until(waitUntil) <= 0 {
			return nil, nil
		}
	}
}

// claim claims up to n invocations in kind's order. When it claims none, nextMS is when the
// earliest waiting invocation becomes due (0: none).
func (t *tx) claim(p *plane.ClaimParams, kind plane.Kind, n int, lease time.Duration) ([]*plane.Job, int64, error) {
	t.exec(t.d.sql.promote, p.Namespace, p.Queue, t.ms)
	var cutoff time.Duration
	a, err := t.admission(p.Namespace, p.Queue, false)
	if err != nil {
		return nil, 0, err
	}
	if a != nil {
		cutoff = a.DeadlineCutoff
	}
	var jobs []*plane.Job
	if kind == plane.KindBoltzmann {
		if jobs, err = t.claimBoltzmann(p, n, lease, cutoff); err != nil {
			return nil, 0, err
		}
	} else {
		sql := t.d.sql.claimFIFO
		switch kind {
		case plane.KindFILO:
			sql = t.d.sql.claimFILO
		case plane.KindPriority:
			sql = t.d.sql.claimPriority
		}
		for len(jobs) < n {
			rows, err := t.candidates(sql, p.Namespace, p.Queue, n-len(jobs))
			if err != nil {
				return nil, 0, err
			}
			started, skipped := t.start(rows, p, lease, cutoff)
			jobs = append(jobs, started...)
			if skipped == 0 || len(rows) == 0 {
				break
			}
		}
	}
	if len(jobs) > 0 {
		return jobs, 0, nil
	}
	var next *int64
	if err := t.queryRow(t.d.sql.nextAvailable, p.Namespace, p.Queue).Scan(&next); err != nil {
		return nil, 0, fmt.Errorf("claim: %w", err)
	}
	if next != nil && *next > t.ms {
		return nil, *next, nil
	}
	return nil, 0, nil
}

// candidates reads and locks claimable rows.
func (t *tx) candidates(sql string, args ...any) ([]*row, error) {
	rs, err := t.query(sql, args...)
	if err != nil {
		return nil, fmt.Errorf("claim: %w", err)
	}
	defer rs.Close()
	var out []*row
	for rs.Next() {
		r, err := scanRow(rs)
		if err != nil {
			return nil, fmt.Errorf("claim: %w", err)
		}
		out = append(out, r)
	}
	return out, rs.Err()
}

// start begins a new attempt of each row under a fresh lease (one write for all), or,
// when a row's deadline has passed or is nearer than the queue's cutoff, ends it as timeout
// without running it (counted in skipped).
func (t *tx) start(rows []*row, p *plane.ClaimParams, lease, cutoff time.Duration) (jobs []*plane.Job, skipped int) {
	expires := t.ms + lease.Milliseconds()
	var ids, tokens []string
	for _, r := range rows {
		h := &head{id: r.id, namespace: r.namespace, queue: r.queue, state: r.state,
			priority: r.priority, attempt: r.attempt, maxAttempts: r.maxAttempts, nextFrame: r.nextFrame}
		if r.deadlineMS > 0 && r.deadlineMS <= t.ms {
			t.finish(h, stateTimeout, nil, &plane.ErrorInfo{Type: "deadline", Message: "deadline passed before the invocation ran"})
			skipped++
			continue
		}
		if r.deadlineMS > 0 && cutoff > 0 && r.deadlineMS < t.ms+cutoff.Milliseconds() {
			t.finish(h, stateTimeout, nil, &plane.ErrorInfo{Type: "deadline",
				Message: fmt.Sprintf("deadline nearer than the queue's cutoff %s at claim", cutoff)})
			skipped++
			continue
		}
		token := plane.NewToken(t.now)
		ids = append(ids, r.id)
		tokens = append(tokens, token)
		t.count(r.namespace, r.queue, stateQueued, r.priority, -1)
		t.count(r.namespace, r.queue, stateRunning, r.priority, +1)
		jobs = append(jobs, &plane.Job{
			ID:             r.id,
			Namespace:      r.namespace,
			Queue:          r.queue,
			Key:            deref(r.key),
			Payload:        r.payload,
			Metadata:       decodeMetadata(r.metadata),
			Priority:       r.priority,
			Attempt:        r.attempt + 1,
			MaxAttempts:    r.maxAttempts,
			AttemptTimeout: time.Duration(r.attemptTimeoutMS) * time.Millisecond,
			Deadline:       fromMS(r.deadlineMS),
			Token:          token,
			LeaseExpiresAt: fromMS(expires),
		})
	}
	if len(ids) > 0 {
		t.exec(t.d.sql.setRunning, t.ms, expires, p.Worker, ids, tokens)
	}
	return jobs, skipped
}

type level struct {
	priority float64
	n        int64
}

// claimBoltzmann draws a priority level with probability ∝ count·exp((p − pmax)/T) from the
// counters, then takes that level's oldest claimable invocation; n draws cost O(n · levels).
func (t *tx) claimBoltzmann(p *plane.ClaimParams, n int, lease, cutoff time.Duration) ([]*plane.Job, error) {
	levels, err := t.levels(p.Namespace, p.Queue)
	if err != nil {
		return nil, err
	}
	var jobs []*plane.Job
	for len(jobs) < n && len(levels) > 0 {
		i := drawLevel(levels, p.Temperature, t.d.float64())
		rows, err := t.candidates(t.d.sql.claimLevel, p.Namespace, p.Queue, levels[i].priority)
		if err != nil {
			return nil, err
		}
		if len(rows) == 0 { // every job of the level is waiting, or locked by another claim
			levels = append(levels[:i], levels[i+1:]...)
			continue
		}
		started, _ := t.start(rows, p, lease, cutoff)
		if levels[i].n--; levels[i].n <= 0 {
			levels = append(levels[:i], levels[i+1:]...)
		}
		jobs = append(jobs, started...)
	}
	return jobs, nil
}

func (t *tx) levels(namespace, queue string) ([]level, error) {
	rs, err := t.query(t.d.sql.levels, namespace, queue)
	if err != nil {
		return nil, fmt.Errorf("claim: read levels: %w", err)
	}
	defer rs.Close()
	var out []level
	for rs.Next() {
		var l level
		if err := rs.Scan(&l.priority, &l.n); err != nil {
			return nil, fmt.Errorf("claim: read levels: %w", err)
		}
		out = append(out, l)
	}
	return out, rs.Err()
}

// drawLevel returns the index of the level drawn by u (uniform in [0,1)) with weights
// count·exp((p − pmax)/T). Subtracting pmax keeps every weight in (0, count] so no
// temperature overflows.
func drawLevel(levels []level, temperature, u float64) int {
	pmax := math.Inf(-1)
	for _, l := range levels {
		pmax = max(pmax, l.priority)
	}
	weights := make([]float64, len(levels))
	var total float64
	for i, l := range levels {
		weights[i] = float64(l.n) * math.Exp((l.priority-pmax)/temperature)
		total += weights[i]
	}
	x := u * total
	for i, w := range weights {
		if x < w {
			return i
		}
		x -= w
	}
	for i := len(weights) - 1; i >= 0; i-- {
		if weights[i] > 0 {
			return i
		}
	}
	return 0
}
