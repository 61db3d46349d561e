package sqliteplane

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/lakeshore-dev/lakeshore/internal/planekit"
)

// readStatements are prepared once on the read pool (database/sql re-prepares them per
// connection as needed), so the read path never parses SQL.
type readStatements struct {
	// byText are the statements by their SQL text, for kitDB's reads.
	byText map[string]*sql.Stmt
}

const rowByID = `SELECT ` + rowColumns + ` FROM invocations WHERE id = ?`

// prepare prepares the reads of kit that run most: an invocation's row, a count, a
// topic's state and a page of frames.
func (r *readStatements) prepare(ctx context.Context, db *sql.DB, kit *planekit.Statements) error {
	r.byText = map[string]*sql.Stmt{}
	for _, query := range []string{kit.Row, kit.Count, kit.TopicClosed, kit.Frames} {
		stmt, err := db.PrepareContext(ctx, query)
		if err != nil {
			return fmt.Errorf("prepare %q: %w", query, err)
		}
		r.byText[query] = stmt
	}
	return nil
}
