package persist

import "context"

// Reader does two-phase reads for training loops: GetMeta decides which samples a
// batch holds (and marks them consumed for the task), GetData reads the requested
// fields of those samples. A Reader is a light view of its Queue, safe for concurrent
// use.
type Reader struct {
	s Store
	q *Queue // the queue's warnings about fields asked for (fields.go)
}

// Reader returns a two-phase reader of q.
func (q *Queue) Reader() *Reader { return &Reader{s: q.s, q: q} }

// GetMeta hands out a batch of samples of req.Partition whose req.Fields are all
// produced and that req.Task has not consumed, chosen by req.Sampler (by name and
// parameters), and marks them consumed (unless DeferConsume) in the same transaction.
// A field that no sample has yet is not an error: no sample is ready (a consumer may
// start before its producers). But a field that no record of the queue has (one its
// schema does not have: UnknownFields, probably a misspelt name) is logged once per
// Queue and field at level Warn (Config.Logger, Queue.SetLogger) before the hand-out,
// which then answers no sample (waiting: ErrTimeout) until a put adds the field.
// Errors: *InvalidError (bad request, an unknown sampler or parameters, a sampler's
// rule such as GRPO batch sizes), ErrTimeout (wait mode), ErrClosed, ctx's error.
func (r *Reader) GetMeta(ctx context.Context, req *MetaRequest) (*BatchMeta, error) {
	if req != nil {
		r.q.tellUnknownFields(ctx, req)
	}
	return r.s.GetMeta(ctx, req)
}

// GetData reads the fields of meta for its samples, in meta.Indexes order. The batch
// is columnar (Arrow; Batch.Rows converts to rows). The indexes are global; a
// meta.Partition reads only that partition's records (an index of another partition is
// not found in it), "" reads any partition's. Errors: *InvalidError (nil meta, an index
// outside [0, 2^63−1), a bad partition name: CheckGetData), *NotFoundError for indexes
// that were never put in meta.Partition or were cleared, ErrClosed, I/O errors.
func (r *Reader) GetData(ctx context.Context, meta *BatchMeta) (*Batch, error) {
	if meta != nil {
		if err := CheckGetData(meta); err != nil {
			return nil, err
		}
	}
	return r.s.GetData(ctx, meta)
}

// GetBatch is GetMeta followed by GetData (one request over HTTP). When GetData fails,
// the metadata is returned beside the error: the samples were handed out (and marked
// consumed unless DeferConsume). A field no record of the queue has is logged as by
// GetMeta.
func (r *Reader) GetBatch(ctx context.Context, req *MetaRequest) (*Batch, *BatchMeta, error) {
	if req != nil {
		r.q.tellUnknownFields(ctx, req)
	}
	if bg, ok := r.s.(BatchGetter); ok {
		return bg.GetBatch(ctx, req)
	}
	meta, err := r.s.GetMeta(ctx, req)
	if err != nil {
		return nil, nil, err
	}
	b, err := r.GetData(ctx, meta)
	if err != nil {
		return nil, meta, err
	}
	return b, meta, nil
}
