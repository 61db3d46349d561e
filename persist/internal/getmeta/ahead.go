package getmeta

import (
	"context"
	"slices"

	"github.com/lakeshore-dev/lakeshore/persist"
)

// Ahead is a store's GetBatch read of a batch's data started once the samples are
// chosen, before the hand-out commits: the read and the commit overlap, and the batch
// is still returned only after the commit (the store waits for both). A read whose
// hand-out did not commit is discarded. Its methods are safe on a nil Ahead and on one
// never started; one goroutine uses it.
type Ahead struct {
	fields []string
	idx    []int64
	done   chan struct{} // closed when the read ends; nil when no read is held
	b      *persist.Batch
	err    error
}

// Start discards the read held, if any, and runs read in the background for the samples
// idx and the fields (kept to match the hand-out's metadata in Result).
func (a *Ahead) Start(fields []string, idx []int64, read func() (*persist.Batch, error)) {
	if a == nil {
		return
	}
	a.Discard()
	a.fields, a.idx = fields, idx
	done := make(chan struct{})
	a.done = done
	go func() {
		defer close(done)
		a.b, a.err = read()
	}()
}

// Discard waits for the read held, if any, and drops it.
func (a *Ahead) Discard() {
	if a == nil || a.done == nil {
		return
	}
	<-a.done
	if a.b != nil {
		a.b.Release()
	}
	a.done, a.b, a.err = nil, nil, nil
}

// Result returns the read's batch or error (ok) when a read is held for exactly meta's
// samples and fields; else it discards any read held and returns ok false, and the
// caller reads after the commit (GetData).
func (a *Ahead) Result(meta *persist.BatchMeta) (b *persist.Batch, ok bool, err error) {
	if a == nil || a.done == nil {
		return nil, false, nil
	}
	if meta == nil || !slices.Equal(a.idx, meta.Indexes) || !slices.Equal(a.fields, meta.FieldNames()) {
		a.Discard()
		return nil, false, nil
	}
	<-a.done
	b, err = a.b, a.err
	a.done, a.b, a.err = nil, nil, nil
	return b, true, err
}

// Batch returns the batch of meta, handed out by the GetMeta of a GetBatch: the read
// held for it (Result; held true), else getData's read after the commit (the store's
// GetData). Errors: the read's.
func (a *Ahead) Batch(ctx context.Context, meta *persist.BatchMeta, getData func(context.Context, *persist.BatchMeta) (*persist.Batch, error)) (b *persist.Batch, held bool, err error) {
	if b, ok, err := a.Result(meta); ok {
		return b, true, err
	}
	b, err = getData(ctx, meta)
	return b, false, err
}
