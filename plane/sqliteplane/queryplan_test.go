package sqliteplane

import (
	"context"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore/internal/planekit"
)

// TestQueryPlans guards the cost of the hot path without timing anything: every claim,
// settle and maintenance statement must walk an index (SEARCH … USING INDEX or the primary
// key), never scan the table nor sort rows in a temporary b-tree, so its cost does not grow
// with the queue's depth.
func TestQueryPlans(t *testing.T) {
	t.Parallel()
	d := openTemp(t, nil)
	ctx := context.Background()
	for name, query := range map[string]string{
		"claim fifo":       `SELECT ` + rowColumns + ` ` + claimWhere + ` ORDER BY id LIMIT ?4`,
		"claim filo":       `SELECT ` + rowColumns + ` ` + claimWhere + ` ORDER BY id DESC LIMIT ?4`,
		"claim priority":   `SELECT ` + rowColumns + ` ` + claimWhere + ` ORDER BY priority DESC, id LIMIT ?4`,
		"claim level":      `SELECT ` + rowColumns + ` ` + claimWhere + ` AND priority = ?4 ORDER BY id LIMIT 1`,
		"levels":           `SELECT priority, n FROM counts WHERE namespace = ? AND queue = ? AND state = 0 AND n > 0`,
		"count":            `SELECT COALESCE(SUM(n), 0) FROM counts WHERE namespace = ? AND queue = ? AND state = ?`,
		"by id":            `SELECT seq FROM invocations WHERE id = ?`,
		"by key":           `SELECT id FROM invocations WHERE namespace = ? AND queue = ? AND key = ?`,
		"expired leases":   `SELECT id FROM invocations WHERE state = 1 AND lease_expires_ms <= ? LIMIT 1000`,
		"overdue attempts": `SELECT id FROM invocations WHERE state = 1 AND attempt_deadline_ms > 0 AND attempt_deadline_ms <= ? LIMIT 1000`,
		"deadlines":        `SELECT id FROM invocations WHERE state = 0 AND deadline_ms > 0 AND deadline_ms <= ? LIMIT 1000`,
		"ack rows":         ackRowsSQL(3),
		"run rows":         runRowsSQL(3),
		"run row":          runRowsSQL(1),
		"frames":           `SELECT seq, kind, value, attempt, time_ms FROM frames WHERE journal = ? AND seq > ? ORDER BY seq LIMIT ?`,
		// Concurrency keys (migrations 009 and 014): the ready key in turn order, and a key's
		// head, never a scan of the keys nor of a key's jobs.
		"key ready":               keyReadySQL,
		"key ready head fifo":     keyReadyHeadSQL("id", true),
		"key ready head filo":     keyReadyHeadSQL("id DESC", true),
		"key ready head priority": keyReadyHeadSQL("priority DESC, id", false),
		"key head fifo":           keyHeadLevelSQL("id"),
		"key head filo":           keyHeadLevelSQL("id DESC"),
		"key head priority":       keyHeadPrioritySQL,
		"key level":               keyLevelSQL,
		"keyed deadlines":         `SELECT id FROM invocations WHERE state = -2 AND deadline_ms > 0 AND deadline_ms <= ?1 LIMIT 1000`,
		// Placement (migration 010): a shape's head through its own index, never the state
		// range of invocations_queue filtered by shape.
		"shape head fifo":     shapeHeadSQL("invocations_shaped", "id"),
		"shape head filo":     shapeHeadSQL("invocations_shaped", "id DESC"),
		"shape head priority": shapeHeadSQL("invocations_shaped_priority", "priority DESC, id"),
		"shapes":              `SELECT shape, requirement FROM placement_shapes WHERE namespace = ?1 AND queue = ?2`,
		"shaped deadlines":    `SELECT id FROM invocations WHERE state = -3 AND deadline_ms > 0 AND deadline_ms <= ?1 LIMIT 1000`,
		// Warm host keys (migration 011): a (host key, shape) pair's head through its own
		// index; the pairs of a key; the trim's live probe, one index probe per row.
		// Maintenance's look for settled keys' rows (migration 017): the rate-state index,
		// never the row of every key with work.
		"keys emptied": kitStatements().KeysEmptied,
		// Maintenance's trim of stopped tokens (migration 018): the revoked and expiring
		// indexes, never every token.
		"tokens stopped": kitStatements().TokenTrim,
		// The trims (migration 020): the finished rows without a hold, and the holds that
		// have ended, each through its own index; never invocations_finished, which held
		// the rows a dedup window keeps and had every trim read them again.
		"trim":               finishedBeforeSQL,
		"holds ended":        planekit.HoldsEnded(sqliteDialect.Replace, false),
		"warm head fifo":     warmHeadSQL("invocations_warm", "id"),
		"warm head filo":     warmHeadSQL("invocations_warm", "id DESC"),
		"warm head priority": warmHeadSQL("invocations_warm_priority", "priority DESC, id"),
		"warm pairs":         `SELECT shape FROM placement_warm WHERE namespace = ?1 AND queue = ?2 AND host_key = ?3`,
		"placed live": `SELECT 1 FROM invocations AS i INDEXED BY invocations_placed WHERE i.namespace = ?1 AND i.queue = ?2
			AND i.shape = ?3 AND i.host_key = ?4 AND (i.shape <> '' OR i.host_key <> '') AND i.state < 2`,
	} {
		rows, err := d.readDB.QueryContext(ctx, "EXPLAIN QUERY PLAN "+query, planArgs(query)...)
		require.NoError(t, err, name)
		var plan []string
		for rows.Next() {
			var id, parent, unused int
			var detail string
			require.NoError(t, rows.Scan(&id, &parent, &unused, &detail))
			plan = append(plan, detail)
		}
		require.NoError(t, rows.Close())
		text := strings.Join(plan, "; ")
		t.Logf("%s: %s", name, text)
		require.NotContains(t, text, "TEMP B-TREE", "%s sorts rows: %s", name, text)
		require.NotRegexp(t, `SCAN (invocations|frames|counts|concurrency_keys|tokens)\b`, text, "%s scans a table: %s", name, text)
		require.Contains(t, text, "SEARCH", "%s: %s", name, text)
		if name == "keys emptied" {
			require.Contains(t, text, "USING INDEX concurrency_keys_kept", "%s: %s", name, text)
		}
		if name == "tokens stopped" {
			require.Contains(t, text, "USING INDEX tokens_revoked", "%s: %s", name, text)
			require.Contains(t, text, "USING INDEX tokens_expiring", "%s: %s", name, text)
		}
		if name == "trim" {
			require.Contains(t, text, "USING INDEX invocations_trimmable", "%s: %s", name, text)
		}
		if name == "holds ended" {
			require.Contains(t, text, "USING INDEX invocations_held", "%s: %s", name, text)
		}
		if strings.HasPrefix(name, "shape head") {
			require.Contains(t, text, "USING INDEX invocations_shaped", "%s: %s", name, text)
		}
	}
}

// planArgs are arguments for every parameter of query: "default", "q", 0, 1, then nulls.
// Its numbered parameters (?NNN) come before its anonymous ones (?), as in every statement
// of the plane.
func planArgs(query string) []any {
	n := 0
	for _, m := range regexp.MustCompile(`\?(\d*)`).FindAllStringSubmatch(query, -1) {
		if m[1] == "" {
			n++
			continue
		}
		k, _ := strconv.Atoi(m[1])
		n = max(n, k)
	}
	args := make([]any, n)
	copy(args, []any{"default", "q", 0, 1})
	return args
}
