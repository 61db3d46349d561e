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
	return t.w.requirements.Satisfied(sqlRows{rs}, p.Offers)
}

// placementTrim are the statements of trimPlacement (planekit.PlacementTrimSQL).
var placementTrim = planekit.PlacementTrimSQL("placement_shapes", "placement_warm", "invocations",
	"INDEXED BY invocations_placed", "?1")

// TrimPlacement removes placement_shapes and placement_warm rows idle for
// planekit.PlacementIdleTrim (a maintenance step). The writer's transaction holds every
// write, so no submit runs between a row's check and its removal.
func (s maintenance) TrimPlacement() error {
	t := s.t
	for _, table := range placementTrim {
		for i, args := range planekit.PlacementTrimArgs(t.ms) {
			if _, err := t.w.conn.ExecContext(t.ctx, table.SQL[i], args...); err != nil {
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
	defaultStmt := t.defaultStmt(kind)
	return planekit.ClaimPlacedProbed(kind, n, func() int { return len(*jobs) }, shapes, warm, func(shape string) (*row, error) {
		return t.first(head, p.Namespace, p.Queue, shape)
	}, func(pr planekit.WarmPair) (*row, error) {
		return t.first(warmHead, p.Namespace, p.Queue, pr.HostKey, pr.Shape, t.ms)
	}, func() (*row, error) {
		return t.first(defaultStmt, p.Namespace, p.Queue, t.ms, 1)
	}, func(more int) (int, error) {
		before := len(*jobs)
		err := t.claimDefault(p, kind, before+more, lease, cutoff, jobs)
		return len(*jobs) - before, err
	}, func(r *row) error {
		if _, err := t.take(r, p, lease, cutoff, jobs); err != nil {
			return err
		}
		return t.runPending(lease, p.Worker) // before the next read
	})
}
