package sqliteplane

import (
	"fmt"
	"slices"
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
	return t.w.requirements.Satisfied(sqlRows{rs}, p.Offers)
}

// placementTrim are the statements of trimPlacement (planekit.PlacementTrimSQL).
var placementTrim = planekit.PlacementTrimSQL("placement_shapes", "placement_warm", "invocations",
	"INDEXED BY invocations_placed", "?1")

// trimPlacement removes placement_shapes and placement_warm rows idle for
// planekit.PlacementIdleTrim (a maintenance step). The writer's transaction holds every
// write, so no submit runs between a row's check and its removal.
func (t *wtx) trimPlacement() error {
	cutoff := t.ms - planekit.PlacementIdleTrim.Milliseconds()
	for _, table := range placementTrim {
		for i, args := range [][]any{nil, {t.ms}, {cutoff}} {
			if _, err := t.w.conn.ExecContext(t.ctx, table[i], args...); err != nil {
				return fmt.Errorf("maintenance: trim placement: %w", err)
			}
		}
	}
	return nil
}

// warmPairs returns the (host key, shape) pairs of p's queue of p's warm host keys whose
// shape the claim may take (the default shape or one of satisfied); nil without warm keys
// (no read).
func (t *wtx) warmPairs(p *plane.ClaimParams, kind plane.Kind, satisfied []string) ([]planekit.WarmPair, error) {
	if !planekit.WarmClaim(p, kind) {
		return nil, nil
	}
	var out []planekit.WarmPair
	for _, k := range p.WarmHostKeys {
		rs, err := t.w.st.warmPairs.QueryContext(t.ctx, p.Namespace, p.Queue, k)
		if err != nil {
			return nil, fmt.Errorf("claim: read warm host keys: %w", err)
		}
		shapes, err := planekit.Collect(sqlRows{rs}, "claim: read warm host keys", planekit.ScanString)
		if err != nil {
			return nil, err
		}
		for _, shape := range shapes {
			out = append(out, planekit.WarmPair{HostKey: k, Shape: shape})
		}
	}
	return planekit.KeepWarm(out, satisfied), nil
}

// claimPlaced claims up to n jobs (with those in jobs) among the default shape, shapes and
// the warm pairs: each the one planekit.ChoosePlaced chooses among the first head of the
// warm pairs, the first head of shapes and the head of the default shape's unkeyed jobs;
// when the default head goes first, or no shape or pair has a claimable job left, the
// default shape's claim (keys, boltzmann draw) takes it.
func (t *wtx) claimPlaced(p *plane.ClaimParams, kind plane.Kind, n int, lease, cutoff time.Duration, shapes []string, warm []planekit.WarmPair, jobs *[]*plane.Job) error {
	head := planekit.ByOrder(kind, t.w.st.shapeHeadFIFO, t.w.st.shapeHeadFILO, t.w.st.shapeHeadPriority)
	warmHead := planekit.ByOrder(kind, t.w.st.warmHeadFIFO, t.w.st.warmHeadFILO, t.w.st.warmHeadPriority)
	heads := make([]*row, len(shapes))
	warmHeads := make([]*row, len(warm))
	read := func(i int) error {
		rows, err := t.candidates(head, p.Namespace, p.Queue, shapes[i])
		if err != nil {
			return err
		}
		heads[i] = nil
		if len(rows) > 0 {
			heads[i] = rows[0]
		}
		return nil
	}
	readWarm := func() error {
		for i, pr := range warm {
			rows, err := t.candidates(warmHead, p.Namespace, p.Queue, pr.HostKey, pr.Shape, t.ms)
			if err != nil {
				return err
			}
			warmHeads[i] = nil
			if len(rows) > 0 {
				warmHeads[i] = rows[0]
			}
		}
		return nil
	}
	for i := range shapes {
		if err := read(i); err != nil {
			return err
		}
	}
	if err := readWarm(); err != nil {
		return err
	}
	defaultStmt := t.defaultStmt(kind)
	for len(*jobs) < n {
		best, at := planekit.First(kind, heads)
		hot, hotAt := planekit.First(kind, warmHeads)
		if best == nil && hot == nil {
			return t.claimDefault(p, kind, n, lease, cutoff, jobs)
		}
		var def *row
		if rows, err := t.candidates(defaultStmt, p.Namespace, p.Queue, t.ms, 1); err != nil {
			return err
		} else if len(rows) > 0 {
			def = rows[0]
		}
		choice := planekit.ChoosePlaced(kind, hot, best, def)
		if choice == planekit.PlacedDefault {
			before := len(*jobs)
			if err := t.claimDefault(p, kind, before+1, lease, cutoff, jobs); err != nil {
				return err
			}
			if len(*jobs) > before {
				if err := readWarm(); err != nil { // the job taken may have been a warm head
					return err
				}
				continue
			}
			choice = planekit.PlacedShaped
			if best == nil {
				choice = planekit.PlacedWarm
			}
		}
		take, shape := best, -1
		if choice == planekit.PlacedWarm {
			take = hot
			shape = slices.Index(shapes, warm[hotAt].Shape)
		} else {
			shape = at
		}
		job, err := t.start(take, p, lease, cutoff)
		if err != nil {
			return err
		}
		if err := t.runPending(lease, p.Worker); err != nil { // before the next read
			return err
		}
		if shape >= 0 {
			if err := read(shape); err != nil {
				return err
			}
		}
		if err := readWarm(); err != nil {
			return err
		}
		if job != nil {
			*jobs = append(*jobs, job)
		}
	}
	return nil
}
