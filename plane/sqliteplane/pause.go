package sqliteplane

import (
	"database/sql"
	"errors"
	"fmt"

	"github.com/lakeshore-dev/lakeshore/internal/planekit"
)

// paused reports whether a queue is paused, from the writer's cache when it holds it
// (planekit.Cached).
func (t *wtx) paused(namespace, queue string) (bool, error) {
	return planekit.Cached(t.w.paused, [2]string{namespace, queue}, func() (bool, error) {
		var one int
		err := t.w.st.paused.QueryRowContext(t.ctx, namespace, queue).Scan(&one)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return false, fmt.Errorf("read pause: %w", err)
		}
		return err == nil, nil
	})
}
