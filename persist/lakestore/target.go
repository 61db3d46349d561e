package lakestore

import (
	"context"

	"github.com/lakeshore-dev/lakeshore/persist"
)

func init() {
	persist.RegisterTarget("postgres", openTarget)
	persist.RegisterTarget("postgresql", openTarget)
}

// openTarget opens the store of a persist.Open target "postgres://…?blob=<bucket URL>"
// (see ParseTarget), with persist.Config's FlushInterval, FlushRows, RowGroupRows,
// PollInterval and Logger.
func openTarget(ctx context.Context, name, target string, pc *persist.Config) (persist.Store, error) {
	catalog, blobURL, err := ParseTarget(target)
	if err != nil {
		return nil, err
	}
	cfg := &Config{Catalog: catalog, Blob: blobURL, FlushInterval: pc.FlushInterval, FlushRows: pc.FlushRows,
		RowGroupRows: pc.RowGroupRows, PollInterval: pc.PollInterval, Logger: pc.Logger}
	return Open(ctx, name, cfg)
}
