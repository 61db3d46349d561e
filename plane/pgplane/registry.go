package pgplane

import (
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
	t.exec(`UPDATE `+t.d.schema+`.concurrency_keys AS k SET
		limit_n = COALESCE((SELECT l.limit_n FROM `+t.d.schema+`.concurrency_limits l WHERE l.namespace = $1 AND l.queue = $2 AND l.concurrency_key = k.concurrency_key),
			(SELECT l.limit_n FROM `+t.d.schema+`.concurrency_limits l WHERE l.namespace = $1 AND l.queue = $2 AND l.concurrency_key = ''), $3),
		weight = COALESCE((SELECT l.weight FROM `+t.d.schema+`.concurrency_limits l WHERE l.namespace = $1 AND l.queue = $2 AND l.concurrency_key = k.concurrency_key), 1)
		WHERE k.namespace = $1 AND k.queue = $2`, namespace, queue, plane.ConcurrencyUnlimited)
	t.wakeQueue(namespace, queue)
}
