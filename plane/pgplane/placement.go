package pgplane

import (
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/lakeshore-dev/lakeshore/internal/planekit"
	"github.com/lakeshore-dev/lakeshore/plane"
)

// Placement (plane/placement.go; migration 0008). A claim with offers reads the queue's
// shapes from placement_shapes, keeps those its offers satisfy, and for each job locks the
// head of each of those shapes (one statement, FOR UPDATE SKIP LOCKED) and compares the
// first with the head of the default shape, taking the first in the claim's order; the
// default shape's own claim (keys, boltzmann draw) takes a default job. Claims with offers
// are served one request at a time (claimGroup groups them by offers).

// satisfied returns the shapes of rs (shape, requirement rows of placement_shapes) that
// offers satisfy.
func (t *tx) satisfied(rs pgx.Rows, offers *plane.Offers) ([]string, error) {
	var out []string
	for rs.Next() {
		var shape, stored string
		if err := rs.Scan(&shape, &stored); err != nil {
			return nil, fmt.Errorf("claim: read shapes: %w", err)
		}
		var req *plane.Requirement
		if v, ok := t.d.requirements.Load(shape); ok {
			req = v.(*plane.Requirement)
		} else {
			var err error
			if req, err = plane.DecodeRequirement([]byte(stored)); err != nil {
				return nil, fmt.Errorf("claim: shape %s: %w", shape, err)
			}
			t.d.requirements.Store(shape, req) // a shape is a digest of its requirement: never changes
		}
		if offers.Satisfies(req) {
			out = append(out, shape)
		}
	}
	return out, rs.Err()
}

// claimPlaced claims for r, a request with offers, up to r.n jobs among the default shape
// and the shapes its offers satisfy.
func (t *tx) claimPlaced(r *claimRequest) error {
	p := r.p
	if err := t.flush(); err != nil {
		return err
	}
	// One round trip: promote the due waiting rows, read the deadline cutoff and the
	// queue's shapes.
	b := &pgx.Batch{}
	b.Queue(t.d.sql.promote, p.Namespace, p.Queue, t.ms)
	b.Queue(t.d.sql.deadlineCutoff, p.Namespace, p.Queue)
	b.Queue(t.d.sql.shapes, p.Namespace, p.Queue)
	var cutoffMS int64
	var shapes []string
	err := func() error {
		br := t.tx.SendBatch(t.ctx, b)
		defer br.Close()
		var promoted *string
		if err := br.QueryRow().Scan(&promoted); err != nil {
			return fmt.Errorf("claim: promote: %w", err)
		}
		if promoted != nil {
			t.d.floors.lower(planekit.QueueKey(p.Namespace, p.Queue), *promoted)
		}
		if err := br.QueryRow().Scan(&cutoffMS); err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("claim: read admission: %w", err)
		}
		rs, err := br.Query()
		if err != nil {
			return fmt.Errorf("claim: read shapes: %w", err)
		}
		defer rs.Close()
		var err2 error
		shapes, err2 = t.satisfied(rs, p.Offers)
		return err2
	}()
	if err != nil {
		return err
	}
	// The default shape's claim, for n more jobs: a request of its own, so its bookkeeping
	// counts only what it takes.
	plain := *p
	plain.Offers = nil
	claimDefault := func(n int) (int, error) {
		d := &claimRequest{p: &plain, kind: r.kind, n: n, lease: r.lease}
		if err := t.claimFor([]*claimRequest{d}); err != nil {
			return 0, err
		}
		r.jobs = append(r.jobs, d.jobs...)
		if len(r.jobs) == 0 {
			r.next = d.next
		}
		return len(d.jobs), nil
	}
	if len(shapes) == 0 {
		_, err := claimDefault(r.n)
		return err
	}
	cutoff := time.Duration(cutoffMS) * time.Millisecond
	head := planekit.ByOrder(r.kind, t.d.sql.shapeHeadFIFO, t.d.sql.shapeHeadFILO, t.d.sql.shapeHeadPriority)
	defaultSQL := planekit.ByOrder(r.kind, t.d.sql.claimFIFO, t.d.sql.claimFILO, t.d.sql.claimPriority)
	for len(r.jobs) < r.n {
		// One round trip: lock the head of every satisfied shape and of the default shape.
		heads, def, err := t.placedHeads(head, defaultSQL, p.Namespace, p.Queue, shapes)
		if err != nil {
			return err
		}
		var best *row
		for _, h := range heads {
			if best == nil || plane.KeyTurnFirst(r.kind, h.ID, h.Priority, best.ID, best.Priority) {
				best = h
			}
		}
		if best == nil {
			_, err := claimDefault(r.n - len(r.jobs))
			return err
		}
		if len(def) > 0 && !plane.KeyTurnFirst(r.kind, best.ID, best.Priority, def[0].ID, def[0].Priority) {
			got, err := claimDefault(1)
			if err != nil {
				return err
			}
			if got > 0 {
				continue
			}
		}
		if !t.expired(best, cutoff) {
			r.pending = append(r.pending, best)
			t.begin([]*claimRequest{r})
		}
	}
	return nil
}

// placedHeads locks, in one batch, the heads of shapes (headSQL) and the head of the
// default shape's unkeyed jobs (defaultSQL).
func (t *tx) placedHeads(headSQL, defaultSQL, namespace, queue string, shapes []string) (heads, def []*row, err error) {
	if err := t.flush(); err != nil {
		return nil, nil, err
	}
	b := &pgx.Batch{}
	b.Queue(headSQL, namespace, queue, shapes)
	b.Queue(defaultSQL, namespace, queue, 1)
	br := t.tx.SendBatch(t.ctx, b)
	defer br.Close()
	if heads, err = claimRows(br.Query()); err != nil {
		return nil, nil, err
	}
	if def, err = claimRows(br.Query()); err != nil {
		return nil, nil, err
	}
	return heads, def, nil
}
