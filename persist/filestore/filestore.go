// Package filestore is the file store of persist's data queues: a queue is a directory
// {Config.Dir}/{name}/ holding meta.db (SQLite, WAL) and data/*.parquet. A put is one
// group-committed SQLite transaction into the durable tail (the put returns its
// indexes after the fsync). Flushes (by row count, by interval, on Close, or explicit)
// move the tail into immutable Parquet fragments — temporary name, fsync, rename, then
// one transaction that publishes the fragment in the manifest and drops the tail rows —
// so a flush costs only the rows it moves. Background compaction merges small
// fragments the same way. Recovery at Open rolls back what a crashed process left half
// done and deletes files the manifest does not name. Several processes may use one
// queue at once; they see each other's rows.
//
// It also exports the Parquet fragment format and record preparation that
// persist/lakestore shares with it (storekit.go), so that both stores write the same
// files. Programs reach it through persist.Open with Driver(), or Open for the Store:
//
//	q, err := persist.Open(ctx, "rollouts", &persist.Config{Dir: root}, filestore.Driver())
//
// See docs/persist.md for the on-disk layout, guarantees and design decisions.
package filestore

import (
	"context"

	"github.com/lakeshore-dev/lakeshore/persist"
)

var _ persist.Store = (*fileQueue)(nil)

// Driver returns the file store's entry for persist.Open: it serves targets that are
// directory paths (persist.Config.Dir, or a $LAKESHORE_URL that is not a URL), opening
// the queue under {Dir}/{name}/ as Open does.
func Driver() persist.StoreDriver {
	return persist.StoreDriver{Paths: true, Open: func(ctx context.Context, name, target string, cfg *persist.Config) (persist.Store, error) {
		c := persist.Config{}
		if cfg != nil {
			c = *cfg
		}
		c.Dir, c.URL = target, ""
		return Open(ctx, name, &c)
	}}
}

// Open opens (creating if needed) the queue name in the file store under cfg.Dir/name/
// (Parquet fragments and a SQLite catalog, meta.db) and returns it as a Store (for
// persist.New, or to serve it): it recovers from any crash of a previous writer
// (pending fragments of dead processes are rolled back and orphan files deleted), and
// starts the writer, the background flusher, the compactor and the change watcher;
// Close stops them. name must be 1–128 bytes of [A-Za-z0-9._-], not starting with . _
// or -. With cfg.Existing, a queue whose directory holds no meta.db is
// *persist.NotFoundError. Errors: *persist.InvalidError for a bad name or Config, and
// I/O or SQLite errors.
func Open(ctx context.Context, name string, cfg *persist.Config) (persist.Store, error) {
	q, err := openFile(ctx, name, cfg)
	if err != nil {
		return nil, err
	}
	return q, nil
}
