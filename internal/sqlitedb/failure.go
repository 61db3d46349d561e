package sqlitedb

import (
	"errors"
	"fmt"
	"syscall"

	"github.com/lakeshore-dev/lakeshore/plane"
)

// FullError is plane.DiskFull(what, path) when err says the disk holding the file at path
// had no room (SQLite's SQLITE_FULL, or the system's ENOSPC), else nil. what is the file in
// words ("the plane's database", "the data queue's meta.db").
func FullError(err error, what, path string) error {
	if err != nil && (IsFull(err) || errors.Is(err, syscall.ENOSPC)) {
		return plane.DiskFull(what, path)
	}
	return nil
}

// WriteError is what a store on a Writer tells its caller of err, a failed write of the
// file at path (what: the file in words): FullError's plane.DiskFull for a full disk;
// plane.ErrUnavailable wrapping the *SchemaNewerError when a newer build migrated the file
// while this one had it open (this process may no longer write; the newer build's may);
// else err itself. The SQLite plane and the file data store both answer through it.
func WriteError(err error, what, path string) error {
	if full := FullError(err, what, path); full != nil {
		return full
	}
	if errors.Is(err, ErrSchemaNewer) {
		return fmt.Errorf("%w: %s: %w", plane.ErrUnavailable, path, err)
	}
	return err
}
