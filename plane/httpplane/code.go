package httpplane

import (
	"context"
	"errors"
	"fmt"

	"github.com/lakeshore-dev/lakeshore/api"
	"github.com/lakeshore-dev/lakeshore/plane"
)

// CodeUpload puts a code archive (docs/fabric.md, "Code shipped with the run") in queue
// namespace/queue's code store under digest, unless the server holds it already: it asks
// first (HEAD) and calls archive — which builds the gzip-compressed tar, e.g.
// fabric.Snapshot.BuildArchive — only when the server lacks it. It reports whether it
// uploaded. The server checks the archive against the digest. Needs the submit right on
// the queue. Errors: *plane.InvalidError for a bad name or digest; archive's error;
// plane.ErrNotImplemented from a server that keeps no code; the server's refusals (an
// archive over its size bound, a digest that does not match).
func (d *Driver) CodeUpload(ctx context.Context, namespace, queue, digest string, archive func() ([]byte, error)) (bool, error) {
	if err := validQueue(namespace, queue); err != nil {
		return false, err
	}
	path := queuePath(namespace, queue) + "/code/" + digest
	err := d.do(ctx, &call{method: "HEAD", path: path, safe: true})
	if err == nil {
		return false, nil
	}
	if !errors.Is(err, plane.ErrNotFound) {
		if errors.Is(err, plane.ErrNotImplemented) {
			return false, &plane.Error{Code: plane.ErrNotImplemented.Code, Message: "the server keeps no code archives (it runs without a code directory): ship code to a `lakeshore serve` or the local daemon, or set code: false on the mode"}
		}
		return false, err
	}
	data, err := archive()
	if err != nil {
		return false, err
	}
	// A PUT of the same digest stores one copy: safe to repeat.
	if err := d.do(ctx, &call{method: "PUT", path: path, raw: data, contentType: api.ContentTypeGzip, out: &api.CodeResponse{}, safe: true}); err != nil {
		return false, fmt.Errorf("upload code %s: %w", digest, err)
	}
	return true, nil
}
