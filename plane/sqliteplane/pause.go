package sqliteplane

import (
	"database/sql"
	"errors"
	"fmt"
)

// paused reports whether a queue is paused, from the writer's cache when it holds it.
func (t *wtx) paused(namespace, queue string) (bool, error) {
	key := [2]string{namespace, queue}
	if p, ok := t.w.paused[key]; ok {
		return p, nil
	}
	var one int
	err := t.w.st.paused.QueryRowContext(t.ctx, namespace, queue).Scan(&one)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return false, fmt.Errorf("read pause: %w", err)
	}
	t.w.paused[key] = err == nil
	return err == nil, nil
}
