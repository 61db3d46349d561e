package pgplane

import (
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/lakeshore-dev/lakeshore/internal/planekit"
)

// Placement (plane/placement.go; migration 0008). A claim with offers reads the queue's
// shapes from placement_shapes, keeps those its offers satisfy, and for each job locks the
// head of each of those shapes (one statement, FOR UPDATE SKIP LOCKED) and compares the
// first with the head of the default shape, taking the first in the claim's order; the
// default shape's own claim (keys, boltzmann draw) takes a default job. Claims with offers
// are served one request at a time (claimGroup groups them by offers).

// claimPlaced claims for r, a request with offers or warm host keys, up to r.n jobs among
// the default shape, the shapes its offers satisfy and its warm (host key, shape) pairs,
// each the one planekit.ChoosePlaced chooses.
func (t *tx) claimPlaced(r *claimRequest) error {
	p := r.P
	t.takeWrites() // the queued writes' rows count for the promote's choice
	// One round trip: promote the due waiting rows, read the deadline cutoff, the queue's
	// shapes and the pairs of the warm host keys.
	warmClaim := planekit.WarmClaim(p, r.Kind)
	b := &pgx.Batch{}
	alone := t.queuePromote(b, p.Namespace, p.Queue)
	b.Queue(t.d.sql.deadlineCutoff, p.Namespace, p.Queue)
	if !p.Offers.IsZero() {
		b.Queue(t.d.sql.shapes, p.Namespace, p.Queue)
	}
	if warmClaim {
		b.Queue(t.d.sql.warmPairs, p.Namespace, p.Queue, p.WarmHostKeys)
	}
	var cutoffMS int64
	var shapes []string
	var warm []planekit.WarmPair
	var leftDue bool // the promote left a due row waiting (another transaction holds it)
	err := func() error {
		br := t.sendBatch(b)
		defer br.Close()
		promoted, left, err := t.readPromote(br, alone) // rows held after one in the transaction: a later claim promotes with promoteHolding
		if err != nil {
			return err
		}
		leftDue = left
		if promoted != nil {
			t.d.promotions.Note(planekit.QueueKey(p.Namespace, p.Queue))
			t.d.floors.Lower(planekit.QueueKey(p.Namespace, p.Queue), *promoted)
		}
		if err := br.QueryRow().Scan(&cutoffMS); err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("claim: read admission: %w", err)
		}
		if !p.Offers.IsZero() {
			rs, err := br.Query()
			if err != nil {
				return fmt.Errorf("claim: read shapes: %w", err)
			}
			if shapes, err = t.d.requirements.Satisfied(rs, p.Offers); err != nil {
				return err
			}
		}
		if warmClaim {
			rs, err := br.Query()
			if err != nil {
				return fmt.Errorf("claim: read warm host keys: %w", err)
			}
			warm, err = planekit.Collect(rs, "claim: read warm host keys", func(s planekit.Scanner) (pr planekit.WarmPair, err error) {
				return pr, s.Scan(&pr.HostKey, &pr.Shape)
			})
			if err != nil {
				return err
			}
			warm = planekit.KeepWarm(warm, shapes)
		}
		return nil
	}()
	if err != nil {
		return err
	}
	claimDefault := planekit.DefaultShapeClaim(r, t.claimFor)
	// A due row the promote left to the transaction holding it: a claim that found nothing
	// reports it as due now (as claimFor does), so its claimer claims again at once.
	defer planekit.NoteDue([]*claimRequest{r}, nil, leftDue, t.ms)
	if len(shapes) == 0 && len(warm) == 0 {
		_, err := claimDefault(r.N)
		return err
	}
	cutoff := time.Duration(cutoffMS) * time.Millisecond
	head := planekit.ByOrder(r.Kind, t.d.sql.shapeHeadFIFO, t.d.sql.shapeHeadFILO, t.d.sql.shapeHeadPriority)
	warmHead := planekit.ByOrder(r.Kind, t.d.sql.warmHeadFIFO, t.d.sql.warmHeadFILO, t.d.sql.warmHeadPriority)
	defaultSQL := planekit.ByOrder(r.Kind, t.d.sql.claimFIFO, t.d.sql.claimFILO, t.d.sql.claimPriority)
	warmKeys, warmShapes := planekit.SplitWarm(warm)
	// Each round, one round trip locks the head of every satisfied shape, of every warm pair
	// and of the default shape.
	err = planekit.ClaimPlaced(r.Kind, r.N, func() int { return len(r.Jobs) }, func() ([]*row, []*row, *row, error) {
		heads, hot, def, err := t.placedHeads(head, warmHead, defaultSQL, p.Namespace, p.Queue, shapes, warmKeys, warmShapes)
		if err != nil || len(def) == 0 {
			return heads, hot, nil, err
		}
		return heads, hot, def[0], nil
	}, claimDefault, func(take *row, _ bool, _ int) error {
		if ended, _ := take.ClaimEnd(t.now, cutoff, t.apply); !ended { // queued writes: never fails
			r.Pending = append(r.Pending, take)
			t.begin([]*claimRequest{r})
		}
		return nil
	})
	if err != nil || len(r.Jobs) >= r.N || leftDue || r.Held {
		return err // r.Held: the default shape's claim (claimFor) found a held row already
	}
	// A claimable row left, of the default shape or a satisfied one, is held by another
	// transaction (claimableLeft): due now, as leftDue's row.
	held, err := t.claimableLeft(p.Namespace, p.Queue, shapes)
	if held {
		planekit.NoteDue([]*claimRequest{r}, nil, true, t.ms)
	}
	return err
}

// placedHeads locks, in one batch, the heads of shapes (headSQL), of the warm pairs
// (warmKeys[i], warmShapes[i]) (warmSQL) and the head of the default shape's unkeyed jobs
// (defaultSQL).
func (t *tx) placedHeads(headSQL, warmSQL, defaultSQL, namespace, queue string, shapes, warmKeys, warmShapes []string) (heads, hot, def []*row, err error) {
	b := &pgx.Batch{}
	if len(shapes) > 0 {
		b.Queue(headSQL, namespace, queue, shapes)
	}
	if len(warmKeys) > 0 {
		b.Queue(warmSQL, namespace, queue, warmKeys, warmShapes)
	}
	b.Queue(defaultSQL, namespace, queue, 1)
	br := t.sendBatch(b)
	defer br.Close()
	if len(shapes) > 0 {
		if heads, err = claimRows(br.Query()); err != nil {
			return nil, nil, nil, err
		}
	}
	if len(warmKeys) > 0 {
		if hot, err = claimRows(br.Query()); err != nil {
			return nil, nil, nil, err
		}
	}
	if def, err = claimRows(br.Query()); err != nil {
		return nil, nil, nil, err
	}
	return heads, hot, def, nil
}

// placementTrimLockTimeout bounds how long a trim waits for the transactions that
// inserted into a placement table; one that waits longer gives up until the next pass.
const placementTrimLockTimeout = "2s"

// TrimPlacement removes placement_shapes and placement_warm rows idle for
// planekit.PlacementIdleTrim (a maintenance step), one table per transaction. Each first
// takes the table in SHARE ROW EXCLUSIVE mode: that waits for every transaction that
// inserted into it — a submit whose trigger found the row present and inserted nothing
// still holds the table's ROW EXCLUSIVE lock until it commits — and holds later inserts
// until the trim commits, so the live probes (statements after the lock, fresh snapshots)
// see every invocation of a row they delete, and a submit after the delete re-creates its
// row; and, unlike SHARE, it excludes another trim (a second process's maintenance pass),
// which would hold the table in SHARE too and refuse this one's writes as this one refused
// its: a deadlock. A lock wait past placementTrimLockTimeout skips the table for this pass.
func (s maintenance) TrimPlacement() error {
	args := planekit.PlacementTrimArgs(s.d.cfg.Now().UnixMilli())
	for _, p := range s.d.sql.placementTrim {
		err := s.d.do(s.ctx, func(t *tx) error {
			if _, err := t.execNow("SET LOCAL lock_timeout = '" + placementTrimLockTimeout + "'"); err != nil {
				return err
			}
			if _, err := t.execNow("LOCK TABLE " + p.Table + " IN SHARE ROW EXCLUSIVE MODE"); err != nil {
				return err
			}
			for i, args := range args {
				if _, err := t.execNow(p.SQL[i], args...); err != nil {
					return err
				}
			}
			return nil
		})
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "55P03" { // lock_not_available: next pass
			continue
		}
		if err != nil {
			return fmt.Errorf("maintenance: trim placement: %w", err)
		}
	}
	return nil
}
