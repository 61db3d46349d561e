package filestore

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/lakeshore-dev/lakeshore/persist"
)

var (
	_ persist.Store       = (*fileQueue)(nil)
	_ persist.Compacter   = (*fileQueue)(nil)
	_ persist.BatchGetter = (*fileQueue)(nil)
)

// Scan implements Store.
func (q *fileQueue) Scan(ctx context.Context, offset int64, limit int, opts *persist.GetOpts) (*persist.Batch, int64, error) {
	return q.read(ctx, offset, limit, opts)
}

// GetMeta implements Store.
func (q *fileQueue) GetMeta(ctx context.Context, req *persist.MetaRequest) (*persist.BatchMeta, error) {
	return q.fileReader().GetMeta(ctx, req)
}

// GetBatch implements persist.BatchGetter (fileReader.GetBatch).
func (q *fileQueue) GetBatch(ctx context.Context, req *persist.MetaRequest) (*persist.Batch, *persist.BatchMeta, error) {
	return q.fileReader().GetBatch(ctx, req)
}

// GetData implements Store.
func (q *fileQueue) GetData(ctx context.Context, meta *persist.BatchMeta) (*persist.Batch, error) {
	return q.fileReader().GetData(ctx, meta)
}

// KVPut implements Store.
func (q *fileQueue) KVPut(ctx context.Context, partition string, keys []string, fields []persist.Record, tags []map[string]string) ([]int64, error) {
	return fileKVOf(q).BatchPut(ctx, partition, keys, fields, tags)
}

// KVGet implements Store.
func (q *fileQueue) KVGet(ctx context.Context, partition string, keys []string, fields []string) ([]persist.KVEntry, error) {
	return fileKVOf(q).BatchGet(ctx, partition, keys, fields)
}

// KVList implements Store.
func (q *fileQueue) KVList(ctx context.Context, partition string) ([]persist.KVEntry, error) {
	return fileKVOf(q).List(ctx, partition)
}

var _ persist.KVPager = (*fileQueue)(nil)

// KVListPage implements persist.KVPager.
func (q *fileQueue) KVListPage(ctx context.Context, partition string, offset int64, limit int) ([]persist.KVEntry, error) {
	return fileKVOf(q).ListPage(ctx, partition, offset, limit)
}

// KVClear implements Store.
func (q *fileQueue) KVClear(ctx context.Context, partition string, keys []string) error {
	return fileKVOf(q).Clear(ctx, partition, keys)
}

// Counts implements Store.
func (q *fileQueue) Counts(ctx context.Context) (next, live int64, err error) {
	if err := q.calls.Enter(); err != nil {
		return 0, 0, err
	}
	defer q.calls.Leave()
	tx, err := q.rdb.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return 0, 0, fmt.Errorf("read counts: %w", err)
	}
	defer tx.Rollback()
	if next, err = metaGet(ctx, tx, "next_index"); err != nil {
		return 0, 0, err
	}
	var cleared sql.NullInt64
	if err := tx.QueryRowContext(ctx, `SELECT SUM(hi - lo) FROM tombstones`).Scan(&cleared); err != nil {
		return 0, 0, fmt.Errorf("count tombstones: %w", err)
	}
	return next, next - cleared.Int64, nil
}

// Changes implements Store.
func (q *fileQueue) Changes() (<-chan struct{}, func()) {
	ch, release := q.hub.watch()
	select {
	case <-q.calls.Closing():
		release()
		return q.calls.Closing(), func() {}
	default:
		return ch, release
	}
}
