package lakestore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/lakeshore-dev/lakeshore/internal/record"
	"github.com/lakeshore-dev/lakeshore/persist"
	"github.com/lakeshore-dev/lakeshore/persist/filestore"
	"github.com/lakeshore-dev/lakeshore/persist/internal/getmeta"
)

var errNotFull = errors.New("batch not full")

// errNotFullDropped is errNotFull from a GetMeta transaction that dropped stale samples:
// that transaction commits (the drops), and the GetMeta waits on.
var errNotFullDropped = errors.New("batch not full; stale samples dropped")

// GetMeta implements persist.Store. The decision is one catalog transaction holding
// the row lock of (queue, partition, task) in the consumers table: the sampler runs
// and the consumption (and assignments) are written while no other server can decide
// for the same consumer, so two consumers of one task never get overlapping samples
// unless the sampler says so (RankAware groups).
func (s *Store) GetMeta(ctx context.Context, req *persist.MetaRequest) (*persist.BatchMeta, error) {
	if req == nil {
		return nil, &persist.InvalidError{Field: "request", Value: nil, Rule: "a MetaRequest"}
	}
	return getmeta.Loop(req, s.cfg.Samplers, s.calls.Enter, s.calls.Leave, func() (persist.Stats, error) { return s.Stats(ctx) }, func(rq *persist.MetaRequest, sampler persist.Sampler, deadline <-chan time.Time) (*persist.BatchMeta, bool, error) {
		return s.getMetaOnce(ctx, rq, sampler, deadline, nil)
	})
}

// GetBatch implements persist.BatchGetter: GetMeta then GetData, with the data read
// (its own catalog snapshot and the fragments) started as soon as the sampler has
// chosen, while the hand-out's transaction writes the consumption and commits; the
// batch is returned only after that commit. Errors as for GetMeta and GetData; when
// reading fails after the hand-out, the metadata is returned beside the error.
func (s *Store) GetBatch(ctx context.Context, req *persist.MetaRequest) (*persist.Batch, *persist.BatchMeta, error) {
	if req == nil {
		return nil, nil, &persist.InvalidError{Field: "request", Value: nil, Rule: "a MetaRequest"}
	}
	ahead := &getmeta.Ahead{}
	meta, err := getmeta.Loop(req, s.cfg.Samplers, s.calls.Enter, s.calls.Leave, func() (persist.Stats, error) { return s.Stats(ctx) }, func(rq *persist.MetaRequest, sampler persist.Sampler, deadline <-chan time.Time) (*persist.BatchMeta, bool, error) {
		return s.getMetaOnce(ctx, rq, sampler, deadline, ahead)
	})
	if err != nil {
		ahead.Discard()
		return nil, nil, err
	}
	b, _, err := ahead.Batch(ctx, meta, s.GetData)
	if err != nil {
		return nil, meta, err
	}
	return b, meta, nil
}

// getMetaOnce is one attempt of GetMeta (getmeta.Attempt): one catalog transaction, then,
// with no full batch and the wait not over, the wait for the next change.
//
// With ahead (GetBatch), the chosen samples' data is read while the transaction
// finishes; a read whose transaction did not commit is discarded.
func (s *Store) getMetaOnce(ctx context.Context, rq *persist.MetaRequest, sampler persist.Sampler, deadline <-chan time.Time, ahead *getmeta.Ahead) (*persist.BatchMeta, bool, error) {
	woken, release := s.Changes()
	defer release()
	var idx []int64
	var schema persist.Schema
	dropped := false
	err := s.handOut(ctx, func(tx *handOutTx) error {
		var err error
		idx, schema, err = s.getMeta(ctx, tx, rq, sampler, ahead)
		if errors.Is(err, errNotFullDropped) {
			dropped = true
			return nil // commit the drops
		}
		return err
	})
	if err == nil && dropped {
		err = errNotFull
	}
	if err != nil {
		ahead.Discard()
	}
	if err == nil {
		meta, err := s.batchMeta(ctx, rq, idx, schema)
		return meta, true, err
	}
	if !errors.Is(err, errNotFull) {
		return nil, true, err
	}
	if err := getmeta.AwaitChange(ctx, rq, woken, deadline, s.calls.Closing(), s.nextLeaseExpiry); err != nil {
		return nil, true, err
	}
	return nil, false, nil
}

// createConsumerSQL and lockConsumerSQL, in this order, take the row lock of consumer
// (queue $1, partition $2, task $3), creating the row.
const (
	createConsumerSQL = `INSERT INTO consumers(queue, partition, task) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING`
	lockConsumerSQL   = `SELECT 1 FROM consumers WHERE queue = $1 AND partition = $2 AND task = $3 FOR UPDATE`
)

// consumedSQL reads the consumed spans of (queue $1, partition $2, task $3).
const consumedSQL = `SELECT lo, hi FROM consumed WHERE queue = $1 AND partition = $2 AND task = $3`

// lockConsumer takes the row lock of (partition, task), creating the row.
func (s *Store) lockConsumer(ctx context.Context, tx querier, partition, task string) error {
	if _, err := tx.Exec(ctx, createConsumerSQL, s.name, partition, task); err != nil {
		return fmt.Errorf("lock consumer: %w", err)
	}
	var one int
	if err := tx.QueryRow(ctx, lockConsumerSQL, s.name, partition, task).Scan(&one); err != nil {
		return fmt.Errorf("lock consumer: %w", err)
	}
	return nil
}

// getMeta is the transaction of GetMeta.
func (s *Store) getMeta(ctx context.Context, tx *handOutTx, rq *persist.MetaRequest, sampler persist.Sampler, ahead *getmeta.Ahead) ([]int64, persist.Schema, error) {
	h, err := s.readHandOut(ctx, tx, rq)
	if err != nil {
		return nil, persist.Schema{}, err
	}
	st, consumed, version := h.queue, h.consumed, h.version
	part := spansOfSegments(h.segs)
	ready := h.ready(rq.Fields)
	window := persist.SamplerWindow(sampler, rq.BatchSize)
	// A staleness-bounded sampler's writes (assignments) are under a savepoint, so that a
	// wait that finds no full batch keeps its drops and forgets the rest.
	// (Every error rolls the whole transaction back, the savepoint with it.)
	sampled := rq.Staleness != nil
	if sampled {
		if _, err := tx.Exec(ctx, `SAVEPOINT sampled`); err != nil {
			return nil, st.schema, fmt.Errorf("savepoint: %w", err)
		}
	}
	src := &sampleSource{s: s, ctx: ctx, tx: tx, rq: rq, ready: ready, part: part, schema: st.schema, version: version}
	first := ready.First(window)
	in := &persist.SampleInput{Ready: first, MoreReady: int64(len(first)) < ready.Count(),
		BatchSize: rq.BatchSize, Task: rq.Task, Partition: rq.Partition, DPRank: rq.DPRank, BatchIndex: rq.BatchIndex, Source: src}
	idx, err := sampler.Sample(ctx, in)
	if err != nil {
		return nil, st.schema, err
	}
	if len(idx) > rq.BatchSize {
		return nil, st.schema, fmt.Errorf("%w: sampler %s returned %d samples for a batch of %d", persist.ErrInvalid, rq.Sampler.Name, len(idx), rq.BatchSize)
	}
	chosen := record.SetOf(idx)
	if int(chosen.Count()) != len(idx) {
		return nil, st.schema, fmt.Errorf("%w: sampler %s returned an index twice", persist.ErrInvalid, rq.Sampler.Name)
	}
	bad := chosen.Minus(ready)
	if len(bad) > 0 {
		if stored, ok, err := src.Assignment(); err != nil {
			return nil, st.schema, err
		} else if ok {
			bad = bad.Minus(record.SetOf(stored))
		}
	}
	if len(bad) > 0 {
		return nil, st.schema, fmt.Errorf("%w: sampler %s returned index %d, which is not ready for task %q", persist.ErrInvalid, rq.Sampler.Name, bad[0].Lo, rq.Task)
	}
	if rq.Wait && len(idx) < rq.BatchSize {
		// Unused samples of an over-sampled group go with its hand-out only.
		if len(src.dropped) > 0 || len(src.droppedGroups) > 0 {
			// Stale samples and dropped groups are dropped even when no batch is handed
			// out: producers held by back-pressure get the room.
			if sampled {
				if _, err := tx.Exec(ctx, `ROLLBACK TO SAVEPOINT sampled`); err != nil { // an assignment the sampler stored
					return nil, st.schema, fmt.Errorf("roll back the sampler's writes: %w", err)
				}
			}
			if err := s.dropStale(ctx, tx, rq, src.dropped, nil, consumed); err != nil {
				return nil, st.schema, err
			}
			if err := s.dropGroups(ctx, tx, rq.Partition, rq.Task, src.droppedGroups, nil, nil, consumed); err != nil {
				return nil, st.schema, err
			}
			if err := s.announce(ctx, tx); err != nil {
				return nil, st.schema, err
			}
			return nil, st.schema, errNotFullDropped
		}
		return nil, st.schema, errNotFull // rolls back any assignment the sampler stored
	}
	if ahead != nil && len(idx) > 0 {
		// Chosen for good unless this transaction fails: read while it finishes.
		m := &persist.BatchMeta{Indexes: idx, Partition: rq.Partition}
		for _, f := range rq.Fields {
			m.Fields = append(m.Fields, persist.FieldMeta{Name: f})
		}
		ahead.Start(rq.Fields, idx, func() (*persist.Batch, error) { return s.GetData(ctx, m) })
	}
	if sampled {
		if _, err := tx.Exec(ctx, `RELEASE SAVEPOINT sampled`); err != nil {
			return nil, st.schema, fmt.Errorf("release savepoint: %w", err)
		}
	}
	if len(src.dropped) > 0 {
		if err := s.dropStale(ctx, tx, rq, src.dropped, chosen, consumed); err != nil {
			return nil, st.schema, err
		}
	}
	if len(src.droppedGroups) > 0 || len(src.unused) > 0 {
		if err := s.dropGroups(ctx, tx, rq.Partition, rq.Task, src.droppedGroups, src.unused, chosen, consumed); err != nil {
			return nil, st.schema, err
		}
	}
	// The drops above are disjoint from chosen: their order with the consumption does
	// not matter. The notification wakes producers blocked by back-pressure, in every
	// process. This commits: nothing may fail after it.
	if idx == nil {
		idx = []int64{}
	}
	if err := s.recordHandOut(ctx, tx, rq, chosen, consumed, (!rq.DeferConsume && len(idx) > 0) || src.drops()); err != nil {
		return nil, st.schema, err
	}
	return idx, st.schema, nil
}

// sampleSource answers a sampler's questions from the catalog, inside the GetMeta
// transaction.
type sampleSource struct {
	s      *Store
	ctx    context.Context
	tx     querier
	rq     *persist.MetaRequest
	ready  record.IndexSet
	part   record.IndexSet
	schema persist.Schema
	// version is the queue's weight version (held FOR SHARE) when the request is
	// staleness-bounded; dropped the stale samples the sampler saw.
	version int64
	dropped []int64
	// droppedGroups and unused are what GRPOGroupN dropped (persist.GroupDropper).
	droppedGroups [][]int64
	unused        []int64
}

func (c *sampleSource) ReadyAfter(after int64, n int) ([]int64, bool) {
	rest := c.ready.From(after + 1)
	page := rest.First(n)
	return page, int64(len(page)) < rest.Count()
}

func (c *sampleSource) Values(ctx context.Context, field string, indexes []int64) ([]any, error) {
	k, ok := c.schema.Kind(field)
	if !ok {
		return make([]any, len(indexes)), nil
	}
	sorted := record.SetOf(indexes)
	idx := sorted.First(int(sorted.Count()))
	recs, parts, err := c.s.load(ctx, c.tx, idx)
	if err != nil {
		return nil, err
	}
	b := filestore.NewBatch([]persist.Field{{Name: field, Kind: k}}, idx, parts, recs)
	defer b.Release()
	return b.ValuesAt(field, indexes)
}

func (c *sampleSource) Ordinals(indexes []int64) []int64 { return c.part.Below(indexes) }

func (c *sampleSource) Assignment() ([]int64, bool, error) {
	var idx []int64
	err := c.tx.QueryRow(c.ctx, `SELECT indexes FROM assignments WHERE queue = $1 AND partition = $2 AND task = $3 AND dp_rank = $4 AND batch_index = $5`,
		c.s.name, c.rq.Partition, c.rq.Task, c.rq.DPRank, c.rq.BatchIndex).Scan(&idx)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("read assignment: %w", err)
	}
	return idx, true, nil
}

func (c *sampleSource) Assign(indexes []int64) error {
	if indexes == nil {
		indexes = []int64{}
	}
	if _, err := c.tx.Exec(c.ctx, `INSERT INTO assignments(queue, partition, task, dp_rank, batch_index, indexes) VALUES ($1, $2, $3, $4, $5, $6)
		ON CONFLICT (queue, partition, task, dp_rank, batch_index) DO UPDATE SET indexes = EXCLUDED.indexes`,
		c.s.name, c.rq.Partition, c.rq.Task, c.rq.DPRank, c.rq.BatchIndex, indexes); err != nil {
		return fmt.Errorf("store assignment: %w", err)
	}
	held, err := c.held()
	if err != nil {
		return err
	}
	return insertSpans(c.ctx, c.tx, "held", "queue, partition, task", record.SetOf(indexes).Minus(held), c.s.name, c.rq.Partition, c.rq.Task)
}

func (c *sampleSource) held() (record.IndexSet, error) {
	return loadSpans(c.ctx, c.tx, `SELECT lo, hi FROM held WHERE queue = $1 AND partition = $2 AND task = $3`, c.s.name, c.rq.Partition, c.rq.Task)
}

func (c *sampleSource) ReadyUnheld(n int) ([]int64, error) {
	held, err := c.held()
	if err != nil {
		return nil, err
	}
	return c.ready.Minus(held).First(n), nil
}

// batchMeta builds the BatchMeta of handed-out indexes, reading tensor dtypes and
// shapes.
func (s *Store) batchMeta(ctx context.Context, rq *persist.MetaRequest, idx []int64, sc persist.Schema) (*persist.BatchMeta, error) {
	m, tensors := getmeta.Fields(rq, idx, sc)
	if len(tensors) == 0 || len(idx) == 0 {
		return m, nil
	}
	set := record.SetOf(idx)
	sorted := set.First(int(set.Count()))
	var recs []filestore.StoredRecord
	err := s.view(ctx, func(tx pgx.Tx) error {
		var err error
		recs, _, err = s.load(ctx, tx, sorted)
		return err
	})
	if err != nil {
		return nil, err
	}
	for _, i := range tensors {
		fm := &m.Fields[i]
		firstSeen := true
		for _, r := range recs {
			v, _, ok := r.Value(fm.Name)
			if !ok {
				continue
			}
			tn, ok := v.(persist.Tensor)
			if !ok {
				continue
			}
			getmeta.Fold(fm, tn.DType, tn.Shape, firstSeen)
			firstSeen = false
		}
	}
	return m, nil
}

// MarkConsumed implements persist.Store. Errors: *persist.InvalidError,
// *persist.NotFoundError for indexes not in partition, ErrClosed.
func (s *Store) MarkConsumed(ctx context.Context, task, partition string, indexes []int64) error {
	if err := persist.CheckTaskPartition(task, partition); err != nil {
		return err
	}
	if len(indexes) == 0 {
		return nil
	}
	return s.consuming(ctx, task, partition, indexes, func(tx pgx.Tx, set record.IndexSet, consumed record.IndexSet) error {
		return insertSpans(ctx, tx, "consumed", "queue, partition, task", set.Minus(consumed), s.name, partition, task)
	})
}

// consuming runs change in a write transaction that holds task's consumer row locked, once
// every one of indexes is known to be in partition (else *persist.NotFoundError), with the
// indexes as a set and the task's consumed spans; then it wakes producers blocked by
// back-pressure. MarkConsumed and DropGroup share it.
func (s *Store) consuming(ctx context.Context, task, partition string, indexes []int64,
	change func(tx pgx.Tx, set, consumed record.IndexSet) error) error {
	if err := s.calls.Enter(); err != nil {
		return err
	}
	defer s.calls.Leave()
	set := record.SetOf(indexes)
	return s.write(ctx, func(tx pgx.Tx) error {
		if err := s.lockConsumer(ctx, tx, partition, task); err != nil {
			return err
		}
		if err := s.requireInPartition(ctx, tx, partition, set); err != nil {
			return err
		}
		consumed, err := loadSpans(ctx, tx, consumedSQL, s.name, partition, task)
		if err != nil {
			return err
		}
		if err := change(tx, set, consumed); err != nil {
			return err
		}
		return s.announce(ctx, tx) // wake producers blocked by back-pressure
	})
}

// ResetConsumption implements persist.Store.
func (s *Store) ResetConsumption(ctx context.Context, task, partition string) error {
	if err := persist.CheckTaskPartition(task, partition); err != nil {
		return err
	}
	if err := s.calls.Enter(); err != nil {
		return err
	}
	defer s.calls.Leave()
	return s.write(ctx, func(tx pgx.Tx) error {
		if err := s.lockConsumer(ctx, tx, partition, task); err != nil {
			return err
		}
		for _, table := range []string{"consumed", "assignments", "held", "leases"} {
			if _, err := tx.Exec(ctx, `DELETE FROM `+table+` WHERE queue = $1 AND partition = $2 AND task = $3`, s.name, partition, task); err != nil {
				return fmt.Errorf("reset consumption: %w", err)
			}
		}
		return s.notify(ctx, tx) // samples are ready again
	})
}

// Consumed implements persist.Store.
func (s *Store) Consumed(ctx context.Context, task, partition string) (int64, error) {
	if err := persist.CheckTaskPartition(task, partition); err != nil {
		return 0, err
	}
	if err := s.calls.Enter(); err != nil {
		return 0, err
	}
	defer s.calls.Leave()
	var n int64
	err := s.pool.QueryRow(ctx, `SELECT coalesce(sum(hi - lo), 0) FROM consumed WHERE queue = $1 AND partition = $2 AND task = $3`, s.name, partition, task).Scan(&n)
	if err != nil {
		return 0, s.failure(ctx, fmt.Errorf("lakestore: count consumed: %w", err))
	}
	return n, nil
}

// ClearSamples implements persist.Store: tombstones for the samples of partition
// among indexes (others are ignored), and their KV keys forgotten. Idempotent.
func (s *Store) ClearSamples(ctx context.Context, partition string, indexes []int64) error {
	if err := persist.CheckName("partition", partition); err != nil {
		return err
	}
	if len(indexes) == 0 {
		return nil
	}
	return s.writeLocked(ctx, func(tx pgx.Tx) error {
		in, err := s.partitionSet(ctx, tx, partition, record.SetOf(indexes))
		if err != nil {
			return err
		}
		return s.clearSpans(ctx, tx, partition, in)
	})
}

// clearSpans tombstones set (samples of partition, not cleared) and forgets the KV keys
// naming them; the queue row must be locked.
func (s *Store) clearSpans(ctx context.Context, tx pgx.Tx, partition string, set record.IndexSet) error {
	if len(set) == 0 {
		return nil
	}
	for _, sp := range set {
		if _, err := tx.Exec(ctx, `DELETE FROM kv WHERE queue = $1 AND partition = $2 AND idx >= $3 AND idx < $4`, s.name, partition, sp.Lo, sp.Hi); err != nil {
			return fmt.Errorf("forget cleared keys: %w", err)
		}
	}
	if err := s.addTombstones(ctx, tx, set); err != nil {
		return err
	}
	return s.notify(ctx, tx)
}

// ClearPartition implements persist.Store.
func (s *Store) ClearPartition(ctx context.Context, partition string) error {
	if err := persist.CheckName("partition", partition); err != nil {
		return err
	}
	return s.writeLocked(ctx, func(tx pgx.Tx) error {
		_, live, err := s.partitionLive(ctx, tx, partition)
		if err != nil {
			return err
		}
		if err := s.clearSpans(ctx, tx, partition, live); err != nil {
			return err
		}
		for _, table := range []string{"consumed", "assignments", "held", "leases"} {
			if _, err := tx.Exec(ctx, `DELETE FROM `+table+` WHERE queue = $1 AND partition = $2`, s.name, partition); err != nil {
				return fmt.Errorf("clear partition %s: %w", table, err)
			}
		}
		return s.notify(ctx, tx)
	})
}
