package sqliteplane

import (
	"fmt"
	"time"

	"github.com/lakeshore-dev/lakeshore/internal/planekit"
	"github.com/lakeshore-dev/lakeshore/plane"
)

// Placement (plane/placement.go; migration 010). A claim with offers reads the queue's
// shapes from placement_shapes, keeps those its offers satisfy, and compares the head of
// each (one probe of invocations_shaped or invocations_shaped_priority) with the head of
// the default shape, taking the first in the claim's order.

// satisfiedShapes returns the shapes of p's queue that p.Offers satisfy (nil without
// offers: no read).
func (t *wtx) satisfiedShapes(p *plane.ClaimParams) ([]string, error) {
	if p.Offers.IsZero() {
		return nil, nil
	}
	rs, err := t.w.st.shapes.QueryContext(t.ctx, p.Namespace, p.Queue)
	if err != nil {
		return nil, fmt.Errorf("claim: read shapes: %w", err)
	}
	defer rs.Close()
	var out []string
	for rs.Next() {
		var shape string
		var stored []byte
		if err := rs.Scan(&shape, &stored); err != nil {
			return nil, fmt.Errorf("claim: read shapes: %w", err)
		}
		req, ok := t.w.requirements[shape]
		if !ok {
			if req, err = plane.DecodeRequirement(stored); err != nil {
				return nil, fmt.Errorf("claim: shape %s: %w", shape, err)
			}
			t.w.requirements[shape] = req // a shape is a digest of its requirement: never changes
		}
		if p.Offers.Satisfies(req) {
			out = append(out, shape)
		}
	}
	return out, rs.Err()
}

// claimPlaced claims up to n jobs (with those in jobs) among the default shape and shapes,
// each the first in kind's order (plane.KeyTurnFirst) of the head of every shape and the
// head of the default shape's unkeyed jobs; when the default head goes first, or no shape
// has a claimable job left, the default shape's claim (keys, boltzmann draw) takes it.
func (t *wtx) claimPlaced(p *plane.ClaimParams, kind plane.Kind, n int, lease, cutoff time.Duration, shapes []string, jobs *[]*plane.Job) error {
	head := planekit.ByOrder(kind, t.w.st.shapeHeadFIFO, t.w.st.shapeHeadFILO, t.w.st.shapeHeadPriority)
	heads := make(map[string]*row, len(shapes))
	read := func(shape string) error {
		rows, err := t.candidates(head, p.Namespace, p.Queue, shape)
		if err != nil {
			return err
		}
		if len(rows) == 0 {
			delete(heads, shape)
		} else {
			heads[shape] = rows[0]
		}
		return nil
	}
	for _, s := range shapes {
		if err := read(s); err != nil {
			return err
		}
	}
	defaultStmt := t.defaultStmt(kind)
	for len(*jobs) < n {
		var best *row
		var shape string
		for _, s := range shapes {
			if r := heads[s]; r != nil && (best == nil || plane.KeyTurnFirst(kind, r.ID, r.Priority, best.ID, best.Priority)) {
				best, shape = r, s
			}
		}
		if best == nil {
			return t.claimDefault(p, kind, n, lease, cutoff, jobs)
		}
		def, err := t.candidates(defaultStmt, p.Namespace, p.Queue, t.ms, 1)
		if err != nil {
			return err
		}
		if len(def) > 0 && !plane.KeyTurnFirst(kind, best.ID, best.Priority, def[0].ID, def[0].Priority) {
			before := len(*jobs)
			if err := t.claimDefault(p, kind, before+1, lease, cutoff, jobs); err != nil {
				return err
			}
			if len(*jobs) > before {
				continue
			}
		}
		job, err := t.start(best, p, lease, cutoff)
		if err != nil {
			return err
		}
		if err := t.runPending(lease, p.Worker); err != nil { // before the next read
			return err
		}
		if err := read(shape); err != nil {
			return err
		}
		if job != nil {
			*jobs = append(*jobs, job)
		}
	}
	return nil
}
