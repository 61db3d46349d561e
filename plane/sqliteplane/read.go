package sqliteplane

import (
	"context"
	"database/sql"
	"fmt"
)

// readStatements are prepared once on the read pool (database/sql re-prepares them per
// connection as needed), so the read path never parses SQL.
type readStatements struct {
	// byText are the statements by their SQL text, for kitDB's reads.
	byText map[string]*sql.Stmt
}

const (
	rowByID     = `SELECT ` + rowColumns + ` FROM invocations WHERE id = ?`
	countState  = `SELECT COALESCE(SUM(n), 0) FROM counts WHERE namespace = ?1 AND queue = ?2 AND state IN (?3, ?4)`
	topicClosed = `SELECT closed FROM topics WHERE journal = ?`
	framesAfter = `SELECT seq, kind, value, attempt, time_ms FROM frames WHERE journal = ? AND seq > ? ORDER BY seq LIMIT +?`
)

func (r *readStatements) prepare(ctx context.Context, db *sql.DB) error {
	r.byText = map[string]*sql.Stmt{}
	for _, query := range []string{rowByID, countState, topicClosed, framesAfter} {
		stmt, err := db.PrepareContext(ctx, query)
		if err != nil {
			return fmt.Errorf("prepare %q: %w", query, err)
		}
		r.byText[query] = stmt
	}
	return nil
}
