package pgplane

import (
	"strings"

	"github.com/lakeshore-dev/lakeshore/internal/planekit"
	"github.com/lakeshore-dev/lakeshore/plane"
)

// setKeyLimits replaces the stored concurrency limits of a queue (plane.Admission's
// KeyLimits; nil: none) and applies them to the queue's key counters at once. A raised
// limit may make keys claimable, so the queue's claimers are woken.
func (t *tx) setKeyLimits(namespace, queue string, limits []plane.KeyLimit) {
	keys := make([]string, len(limits))
	counts := make([]int64, len(limits))
	weights := make([]float64, len(limits))
	for i, l := range limits {
		keys[i], counts[i], weights[i] = l.Key, l.Limit, l.Weight
	}
	t.exec(`DELETE FROM `+t.d.schema+`.concurrency_limits WHERE namespace = $1 AND queue = $2`, namespace, queue)
	t.exec(`INSERT INTO `+t.d.schema+`.concurrency_limits (namespace, queue, concurrency_key, limit_n, weight)
		SELECT $1, $2, u.k, u.n, u.w FROM unnest($3::text[], $4::bigint[], $5::float8[]) AS u(k, n, w)`,
		namespace, queue, keys, counts, weights)
	// The queue's counter rows, locked in key order first (lockKeys: a settle may hold some).
	limit, weight := planekit.KeyLimitsSQL(`$1`, `$2`, `k.concurrency_key`)
	t.exec(strings.ReplaceAll(`UPDATE {s}.concurrency_keys AS k SET limit_n = `+limit+`, weight = `+weight+`
		WHERE (k.namespace, k.queue, k.concurrency_key) IN (SELECT namespace, queue, concurrency_key FROM {s}.concurrency_keys
			WHERE namespace = $1 AND queue = $2 ORDER BY concurrency_key FOR UPDATE)`, "{s}", t.d.schema), namespace, queue)
	t.wakeQueue(namespace, queue)
}
