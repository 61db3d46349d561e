package sqliteplane

import "context"

const rowByID = `SELECT ` + rowColumns + ` FROM invocations WHERE id = ?`

// prepareReads prepares, once on the read pool (database/sql re-prepares them per
// connection as needed), the reads of kit that run most, so the read path never parses
// SQL: an invocation's row, a count, a topic's state and a page of frames. kitDB finds
// them by their text.
func (d *Driver) prepareReads(ctx context.Context) error {
	for _, query := range []string{d.kit.Row, d.kit.Count, d.kit.TopicClosed, d.kit.Frames} {
		if _, err := d.reads.Prepare(ctx, d.db.Read, query); err != nil {
			return err
		}
	}
	return nil
}
