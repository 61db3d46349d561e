package lakestore

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/lakeshore-dev/lakeshore/internal/record"
	"github.com/lakeshore-dev/lakeshore/persist"
	"github.com/lakeshore-dev/lakeshore/persist/filestore"
	"github.com/lakeshore-dev/lakeshore/persist/internal/putid"
)

// PutPartition implements persist.Store: one catalog transaction checks and evolves
// the schema, allocates the indexes from the queue's counter (its row locked), appends
// the encoded records to the tail table and extends the partition's segments. The
// records are durable when it returns (PostgreSQL's commit); no object-store round
// trip is made. With opts.ID the id is stored in the catalog (put_ids) in the same
// transaction, after the queue's row is locked, so a repeat through any server answers
// the first put's indexes.
func (s *Store) PutPartition(ctx context.Context, partition string, recs []persist.Record, opts *persist.PutOpts) ([]int64, error) {
	args, err := persist.CheckPut(partition, recs, opts)
	if err != nil || len(recs) == 0 {
		return nil, err
	}
	id, adm, target := args.ID, args.Admission, args.Target
	p, err := filestore.PrepareRecords(recs)
	if err != nil {
		return nil, err
	}
	if err := s.calls.Enter(); err != nil {
		return nil, err
	}
	defer s.calls.Leave()
	return persist.AdmitLoop(ctx, adm, s.Changes, s.calls.Closing(), func() ([]int64, error) {
		return s.putOnce(ctx, partition, len(recs), p, id, adm, target)
	})
}

// putOnce is one attempt of PutPartition.
func (s *Store) putOnce(ctx context.Context, partition string, n int, p *filestore.PreparedRecords, id string, adm *persist.Admission, target int64) ([]int64, error) {
	var lo int64
	var repeat []int64
	err := s.write(ctx, func(tx pgx.Tx) error {
		st, err := s.loadQueue(ctx, tx, true)
		if err != nil {
			return err
		}
		if id != "" {
			var part string
			var plo, pn int64
			err := tx.QueryRow(ctx, `SELECT partition, lo, n FROM put_ids WHERE queue = $1 AND id = $2`, s.name, id).Scan(&part, &plo, &pn)
			if err == nil {
				repeat, err = putid.Repeat(id, part, plo, pn, partition, n)
				if err == nil {
					err = errRepeat // roll back: nothing to write
				}
				return err
			}
			if !errors.Is(err, pgx.ErrNoRows) {
				return fmt.Errorf("read put id: %w", err)
			}
		}
		if err := s.admit(ctx, tx, adm, partition, n, target); err != nil {
			return err
		}
		if lo, err = s.putRows(ctx, tx, st, partition, p); err != nil {
			return err
		}
		if id != "" {
			if _, err := tx.Exec(ctx, `INSERT INTO put_ids(queue, id, partition, lo, n) VALUES ($1, $2, $3, $4, $5)`,
				s.name, id, partition, lo, n); err != nil {
				return fmt.Errorf("record put id: %w", err)
			}
		}
		return s.saveQueue(ctx, tx, st)
	})
	if errors.Is(err, errRepeat) {
		return repeat, nil
	}
	if err != nil {
		return nil, err
	}
	s.puts.Add(int64(n))
	s.noteUnflushed(int64(n))
	out := make([]int64, n)
	for i := range out {
		out[i] = lo + int64(i)
	}
	return out, nil
}

// errRepeat ends the transaction of a put whose id was already stored.
var errRepeat = errors.New("lakestore: repeated put id")

// noteUnflushed counts rows put and kicks the flusher past FlushRows.
func (s *Store) noteUnflushed(n int64) {
	if fr := s.cfg.FlushRows; fr > 0 && s.unflushed.Add(n) >= int64(fr) {
		select {
		case s.kick <- struct{}{}:
		default:
		}
	}
}

// putRows appends p's records to partition inside tx (st locked) and returns the
// first index.
func (s *Store) putRows(ctx context.Context, tx pgx.Tx, st *queueState, partition string, p *filestore.PreparedRecords) (int64, error) {
	if err := st.evolve(p); err != nil {
		return 0, err
	}
	lo, n := st.next, int64(p.Len())
	seq := st.nextSeq
	if _, err := tx.Exec(ctx, `INSERT INTO tail(queue, seq, kind, partition, lo, n, min_idx, max_idx, data) VALUES ($1, $2, 0, $3, $4, $5, $4, $6, $7)`,
		s.name, seq, partition, lo, n, lo+n-1, p.Encoded()); err != nil {
		return 0, fmt.Errorf("insert tail: %w", err)
	}
	st.nextSeq++
	st.next += n
	// Segments: runs of records with the same field set, extending the queue's last
	// segment when it continues it.
	var last *segment
	var lastLo int64 = -1
	row := tx.QueryRow(ctx, `SELECT lo, hi, partition, fields FROM segments WHERE queue = $1 ORDER BY lo DESC LIMIT 1`, s.name)
	var sg segment
	switch err := row.Scan(&sg.sp.Lo, &sg.sp.Hi, &sg.partition, &sg.fields); err {
	case nil:
		last, lastLo = &sg, sg.sp.Lo
	case pgx.ErrNoRows:
	default:
		return 0, fmt.Errorf("read segments: %w", err)
	}
	at := lo
	recs := p.Records()
	for i := 0; i < len(recs); {
		names := recs[i].FieldNames()
		j := i + 1
		for j < len(recs) && slices.Equal(recs[j].FieldNames(), names) {
			j++
		}
		end := at + int64(j-i)
		if last != nil && last.sp.Hi == at && last.partition == partition && slices.Equal(last.fields, names) {
			last.sp.Hi = end
		} else {
			if last != nil {
				if err := s.saveSegment(ctx, tx, last, lastLo); err != nil {
					return 0, err
				}
			}
			last, lastLo = &segment{sp: record.Span{Lo: at, Hi: end}, partition: partition, fields: names}, -1
		}
		at = end
		i = j
	}
	if err := s.saveSegment(ctx, tx, last, lastLo); err != nil {
		return 0, err
	}
	return lo, nil
}

// saveSegment inserts sg, or updates it when it was read from the table (stored ≥ 0).
func (s *Store) saveSegment(ctx context.Context, tx pgx.Tx, sg *segment, stored int64) error {
	var err error
	if stored >= 0 {
		_, err = tx.Exec(ctx, `UPDATE segments SET hi = $3 WHERE queue = $1 AND lo = $2`, s.name, stored, sg.sp.Hi)
	} else {
		if sg.fields == nil {
			sg.fields = []string{}
		}
		_, err = tx.Exec(ctx, `INSERT INTO segments(queue, lo, hi, partition, fields) VALUES ($1, $2, $3, $4, $5)`,
			s.name, sg.sp.Lo, sg.sp.Hi, sg.partition, sg.fields)
	}
	if err != nil {
		return fmt.Errorf("write segment: %w", err)
	}
	return nil
}

// PutFields implements persist.Store. Errors: *persist.NotFoundError for an index not
// in partition (or cleared), *persist.SchemaError, *persist.InvalidError, ErrClosed.
func (s *Store) PutFields(ctx context.Context, partition string, indexes []int64, fields []persist.Record) error {
	if err := persist.CheckName("partition", partition); err != nil {
		return err
	}
	indexes, p, err := filestore.PrepareFieldUpdates(indexes, fields)
	if err != nil {
		return err
	}
	if len(indexes) == 0 {
		return nil
	}
	if err := s.calls.Enter(); err != nil {
		return err
	}
	defer s.calls.Leave()
	err = s.write(ctx, func(tx pgx.Tx) error {
		st, err := s.loadQueue(ctx, tx, true)
		if err != nil {
			return err
		}
		if err := s.putFields(ctx, tx, st, partition, indexes, p); err != nil {
			return err
		}
		return s.saveQueue(ctx, tx, st)
	})
	if err != nil {
		return err
	}
	s.puts.Add(int64(len(indexes)))
	s.noteUnflushed(int64(len(indexes)))
	return nil
}

// putFields appends a field update to the tail and records the production.
func (s *Store) putFields(ctx context.Context, tx pgx.Tx, st *queueState, partition string, indexes []int64, p *filestore.PreparedRecords) error {
	set := record.SetOf(indexes)
	if err := s.requireInPartition(ctx, tx, partition, set); err != nil {
		return err
	}
	if err := st.evolve(p); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, `INSERT INTO tail(queue, seq, kind, partition, lo, n, min_idx, max_idx, idx, data) VALUES ($1, $2, 1, $3, 0, $4, $5, $6, $7, $8)`,
		s.name, st.nextSeq, partition, len(indexes), set[0].Lo, set[len(set)-1].Hi-1, indexes, p.Encoded()); err != nil {
		return fmt.Errorf("insert tail: %w", err)
	}
	st.nextSeq++
	byField := map[string][]int64{}
	for i, rec := range p.Records() {
		for _, f := range rec.FieldNames() {
			byField[f] = append(byField[f], indexes[i])
		}
	}
	for f, idx := range byField {
		if err := insertSpans(ctx, tx, "produced", "queue, field", record.SetOf(idx), s.name, f); err != nil {
			return err
		}
		if err := s.bumpFieldRevision(ctx, tx, f); err != nil {
			return err
		}
	}
	return nil
}
