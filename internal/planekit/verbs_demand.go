package planekit

import (
	"context"
	"fmt"
	"time"

	"github.com/lakeshore-dev/lakeshore/plane"
)

// DemandList implements plane.Driver: in one snapshot, each queue's counts by state (the
// counts table, as QueueStatsList reads them), its shapes with their counters
// (placement_counts, kept by the triggers of SQLite's migration 012 and PostgreSQL's
// 0010) and the available time of each one's first claimable job by id (one index probe
// per shape, in the same statement), and for each queue's default shape with queued jobs
// the same time (one probe). The default shape's counts are the queue's less the sum of
// its shapes'. Nothing reads the queued jobs themselves.
func (v Verbs) DemandList(ctx context.Context, namespace string) ([]plane.ShapeDemand, error) {
	if err := ValidateOptionalNamespace(namespace); err != nil {
		return nil, err
	}
	if err := v.p.CheckOpen(); err != nil {
		return nil, err
	}
	now := v.p.Now()
	var out []plane.ShapeDemand
	err := v.db.Snapshot(ctx, func(q Reader) error {
		out = out[:0]
		totals := map[[2]string]*plane.ShapeDemand{}
		var order [][2]string
		rs, err := q.Query(v.st.StatsCounts, namespace)
		if err != nil {
			return fmt.Errorf("demand: %w", err)
		}
		err = func() error {
			defer rs.Close()
			for rs.Next() {
				var ns, queue string
				var state int16
				var n int64
				if err := rs.Scan(&ns, &queue, &state, &n); err != nil {
					return fmt.Errorf("demand: %w", err)
				}
				k := [2]string{ns, queue}
				d := totals[k]
				if d == nil {
					d = &plane.ShapeDemand{Namespace: ns, Queue: queue}
					totals[k] = d
					order = append(order, k)
				}
				switch StateName(int(state)) {
				case plane.StateQueued:
					d.Queued += n
				case plane.StateRunning:
					d.Running += n
				}
			}
			return rs.Err()
		}()
		if err != nil {
			return err
		}
		var shaped []plane.ShapeDemand
		rs, err = q.Query(v.st.DemandShapes, namespace)
		if err != nil {
			return fmt.Errorf("demand: %w", err)
		}
		err = func() error {
			defer rs.Close()
			for rs.Next() {
				var d plane.ShapeDemand
				var stored string
				var head *int64
				if err := rs.Scan(&d.Namespace, &d.Queue, &d.Shape, &stored, &d.Queued, &d.Running, &head); err != nil {
					return fmt.Errorf("demand: %w", err)
				}
				if head != nil {
					d.OldestReady = max(0, now.Sub(time.UnixMilli(*head)))
				}
				if d.Requirement, err = plane.DecodeRequirement([]byte(stored)); err != nil {
					return fmt.Errorf("demand: shape %s: %w", d.Shape, err)
				}
				d.Queued, d.Running = max(d.Queued, 0), max(d.Running, 0)
				shaped = append(shaped, d)
				if def := totals[[2]string{d.Namespace, d.Queue}]; def != nil {
					def.Queued -= d.Queued
					def.Running -= d.Running
				}
			}
			return rs.Err()
		}()
		if err != nil {
			return err
		}
		rs, err = q.Query(v.st.PauseList, namespace)
		if err != nil {
			return fmt.Errorf("demand: %w", err)
		}
		keys, err := Collect(rs, "demand: paused queues", scanQueueKey)
		if err != nil {
			return err
		}
		paused := pausedSet(keys)
		for _, k := range order {
			d := totals[k]
			d.Queued, d.Running = max(d.Queued, 0), max(d.Running, 0)
			if d.Queued == 0 && d.Running == 0 {
				continue
			}
			out = append(out, *d)
		}
		out = append(out, shaped...)
		for i := range out {
			d := &out[i]
			d.Paused = paused[[2]string{d.Namespace, d.Queue}]
			if d.Shape != "" || d.Queued == 0 {
				continue
			}
			var ms int64
			if err := q.QueryRow(v.st.DemandHead, d.Namespace, d.Queue).Scan(&ms); err != nil {
				if NoRows(err) {
					continue
				}
				return fmt.Errorf("demand: oldest of %s/%s: %w", d.Namespace, d.Queue, err)
			}
			d.OldestReady = max(0, now.Sub(time.UnixMilli(ms)))
		}
		return nil
	})
	if err != nil {
		return nil, v.db.Failure(ctx, err)
	}
	plane.SortDemand(out)
	return out, nil
}
