package planekit

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/lakeshore-dev/lakeshore/plane"
)

// ErrBlocked tells a submitter to wait for room in its queue (OnFullBlock).
var ErrBlocked = errors.New("blocked")

// AdmissionColumns are the columns of a queues row that ScanAdmission reads, in order.
const AdmissionColumns = `max_depth, on_full, rate_limit, burst, deadline_cutoff_ms, tokens, tokens_ms, concurrency`

// Admission is a stored admission block with its token bucket.
type Admission struct {
	// Admission is the block with its defaults filled in (plane.Admission.WithDefaults).
	plane.Admission
	// Follows says which of the block's bursts were never set (stored as 0): shown as
	// their rate's default, they move when a set changes the rate (StoredBlock).
	Follows  BurstsFollow
	Tokens   float64
	TokensMS int64
}

// BurstsFollow says which bursts of a stored block follow their rate.
type BurstsFollow struct {
	// Burst: the queue's bucket (plane.Admission.Burst).
	Burst bool
	// KeyBurst: each concurrency key's bucket (plane.Admission.KeyBurst).
	KeyBurst bool
}

// StoredBlock is block as a set stores it over stored (nil: no block): a burst (Burst,
// KeyBurst) block gives as 0, or gives back as the stored block shows it while that one
// follows its rate (a read, a change and a set of the block read: `lakeshore queue set`,
// UpdateAdmission, Python's dataclasses.replace), is stored as 0, the rate's default;
// any other burst given is stored and then stays whatever the rate. A burst never set
// thus follows the rate; one set explicitly stays (docs/semantics.md, "Admission").
func StoredBlock(block plane.Admission, stored *Admission) plane.Admission {
	if stored != nil {
		if stored.Follows.Burst && block.Burst == stored.Burst {
			block.Burst = 0
		}
		if stored.Follows.KeyBurst && block.KeyBurst == stored.KeyBurst {
			block.KeyBurst = 0
		}
	}
	return block
}

// readAdmission fills in the defaults of a block read from its columns (a burst stored as 0
// is its rate's default) and reports which bursts follow their rate.
func readAdmission(a *plane.Admission) BurstsFollow {
	follows := BurstsFollow{Burst: a.Burst == 0, KeyBurst: a.KeyBurst == 0}
	*a = a.WithDefaults()
	return follows
}

// ScanAdmission reads a row of AdmissionColumns. It returns nil (and no error) when the
// queue has no block (no row: NoRows).
func ScanAdmission(s Scanner) (*Admission, error) {
	var a Admission
	var onFull string
	var cutoffMS int64
	var concurrency []byte
	err := s.Scan(&a.MaxDepth, &onFull, &a.RateLimit, &a.Burst, &cutoffMS, &a.Tokens, &a.TokensMS, &concurrency)
	if err != nil && NoRows(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read admission: %w", err)
	}
	if a.Follows, err = fromColumns(&a.Admission, onFull, cutoffMS, concurrency); err != nil {
		return nil, err
	}
	return &a, nil
}

// fromColumns completes a block whose numeric columns a holds with its other columns as
// stored (on_full, the cutoff in milliseconds, the encoded concurrency limits), defaults
// filled in: the block every read of the row sees (ScanAdmission), and the one a set
// returns (Verbs.QueueAdmissionSet).
func fromColumns(a *plane.Admission, onFull string, cutoffMS int64, concurrency []byte) (BurstsFollow, error) {
	if err := DecodeConcurrency(concurrency, a); err != nil {
		return BurstsFollow{}, err
	}
	a.OnFull, a.DeadlineCutoff = plane.OnFull(onFull), time.Duration(cutoffMS)*time.Millisecond
	return readAdmission(a), nil
}

// Admit applies a's limits (plane's admission policy) to n new invocations of the queue
// (namespace, queue) with the given deadlines, in a transaction whose clock reads now:
// deadline cutoff, then max depth, then the token bucket. ahead reports that earlier
// blocked submits wait in this process's line. queued returns the queue's queued count
// before this submit; it is called only under a depth limit. It returns the bucket after
// the draw (nil without a rate limit) for the caller to store, the caller's error
// (*plane.AdmissionError, *plane.InvalidError, ErrBlocked) or a storage failure of queued.
func (a *Admission) Admit(namespace, queue string, now time.Time, n int64, deadlines []time.Time, ahead bool,
	queued func() (int64, error)) (bucket *plane.TokenBucket, refused, err error) {
	name := namespace + "/" + queue
	if err := a.CheckDeadlines(name, now, deadlines); err != nil {
		return nil, err, nil
	}
	if a.MaxDepth > 0 {
		q, err := queued()
		if err != nil {
			return nil, nil, err
		}
		block, refused := a.CheckDepth(name, q, n, ahead)
		if block {
			return nil, ErrBlocked, nil
		}
		if refused != nil {
			return nil, refused, nil
		}
	}
	if a.RateLimit > 0 {
		b, refused := a.Take(name, plane.TokenBucket{Tokens: a.Tokens, At: time.UnixMilli(a.TokensMS)}, time.UnixMilli(now.UnixMilli()), n)
		if refused != nil {
			return nil, refused, nil
		}
		return &b, nil, nil
	}
	return nil, nil, nil
}

// concurrencyColumn is the stored form of an admission block's concurrency fields (the
// queues table's concurrency column, JSON).
type concurrencyColumn struct {
	Limit      int64              `json:"limit,omitempty"`
	Limits     map[string]int64   `json:"limits,omitempty"`
	Weights    map[string]float64 `json:"weights,omitempty"`
	RateLimit  float64            `json:"rate_limit,omitempty"`
	Burst      int64              `json:"burst,omitempty"`
	RateLimits map[string]float64 `json:"rate_limits,omitempty"`
	Bursts     map[string]int64   `json:"bursts,omitempty"`
}

// EncodeConcurrency is the stored concurrency column of a (nil when it sets none).
func EncodeConcurrency(a plane.Admission) []byte {
	if a.ConcurrencyLimit == 0 && len(a.ConcurrencyLimits) == 0 && len(a.KeyWeights) == 0 && a.KeyRateLimit == 0 &&
		len(a.KeyRateLimits) == 0 && len(a.KeyBursts) == 0 {
		return nil
	}
	b, _ := json.Marshal(concurrencyColumn{a.ConcurrencyLimit, a.ConcurrencyLimits, a.KeyWeights, a.KeyRateLimit, a.KeyBurst,
		a.KeyRateLimits, a.KeyBursts}) // always encodes
	return b
}

// DecodeConcurrency reads a stored concurrency column into a.
func DecodeConcurrency(b []byte, a *plane.Admission) error {
	if len(b) == 0 {
		return nil
	}
	var c concurrencyColumn
	if err := json.Unmarshal(b, &c); err != nil {
		return fmt.Errorf("read admission: concurrency: %w", err)
	}
	a.ConcurrencyLimit, a.ConcurrencyLimits, a.KeyWeights = c.Limit, c.Limits, c.Weights
	a.KeyRateLimit, a.KeyBurst, a.KeyRateLimits, a.KeyBursts = c.RateLimit, c.Burst, c.RateLimits, c.Bursts
	return nil
}

// KeyStatsSQL reads the concurrency keys of QueueStatsList (plane.QueueStats.Keys): at most
// plane.KeyStatsMax per queue, most running first, for the namespace {ns} ("" for all);
// keys with nothing queued or running are listed only while a worker's "slow down" hold
// (next_ms, OutcomeRateLimited) runs past {now} (Unix milliseconds): a key whose only
// job waits out the hold is shown held back, while a row kept only for its token bucket
// is not listed. When a queue has more keys, those with jobs claimable are kept before
// those that only run some, and those before the held ones, so a key holding back a due
// job is always among them while any is (what a worker's ExitWhenIdle reads). {s} is the
// plane's table prefix ("" or "schema."), {ns} and {now} its parameters.
const KeyStatsSQL = `SELECT namespace, queue, concurrency_key, queued, running, limit_n, weight, tokens, tokens_ms, next_ms FROM (
	SELECT namespace, queue, concurrency_key, queued, running, limit_n, weight, tokens, tokens_ms, next_ms,
		row_number() OVER (PARTITION BY namespace, queue ORDER BY queued > 0 DESC, running DESC, concurrency_key) AS n
	FROM {s}concurrency_keys WHERE ({ns} = '' OR namespace = {ns}) AND (queued > 0 OR running > 0 OR next_ms > {now})) AS k
	WHERE n <= 100 ORDER BY namespace, queue, running DESC, concurrency_key`

// KeyLimitsSQL are the SQL expressions, in Statements.Common's form ({s}.table, $N), of
// the limit and the weight of the concurrency key key of queue (namespace, queue) (each a
// SQL expression) from its stored limits (concurrency_limits): the key's own, else the
// queue's default (the key ""), else no limit (plane.ConcurrencyUnlimited); weight 1 by
// default. Both planes' triggers give a new counter row the same (SQLite migration 009,
// PostgreSQL 0007).
func KeyLimitsSQL(namespace, queue, key string) (limit, weight string) {
	of := func(column, k string) string {
		return `(SELECT cl.` + column + ` FROM {s}.concurrency_limits cl WHERE cl.namespace = ` + namespace +
			` AND cl.queue = ` + queue + ` AND cl.concurrency_key = ` + k + `)`
	}
	limit = `COALESCE(` + of(`limit_n`, key) + `, ` + of(`limit_n`, `''`) + `, ` + strconv.FormatInt(plane.ConcurrencyUnlimited, 10) + `)`
	weight = `COALESCE(` + of(`weight`, key) + `, 1)`
	return limit, weight
}

// AddKeyStats adds the rows of KeyStatsSQL to stats, whose queues carry their admission
// blocks already (each key's rate limit and wait come from its queue's block at now).
func AddKeyStats(stats []plane.QueueStats, rows interface {
	Next() bool
	Scanner
}, now time.Time) ([]plane.QueueStats, error) {
	admissions := map[[2]string]plane.Admission{}
	for _, s := range stats {
		if s.Admission != nil {
			admissions[[2]string{s.Namespace, s.Queue}] = *s.Admission
		}
	}
	for rows.Next() {
		var ns, q string
		var k plane.KeyStats
		var tokens float64
		var tokensMS, nextMS int64
		if err := rows.Scan(&ns, &q, &k.Key, &k.Queued, &k.Running, &k.Limit, &k.Weight, &tokens, &tokensMS, &nextMS); err != nil {
			return nil, fmt.Errorf("queue stats: concurrency keys: %w", err)
		}
		if k.Limit >= plane.ConcurrencyUnlimited {
			k.Limit = 0
		}
		a := admissions[[2]string{ns, q}]
		k.RateLimit, k.Burst = a.KeyRate(k.Key)
		var held time.Time
		if nextMS > 0 {
			held = time.UnixMilli(nextMS)
		}
		k.RateWait = a.KeyRateWait(k.Key, tokens, time.UnixMilli(tokensMS), held, now)
		stats = plane.AddKeyStats(stats, ns, q, k)
	}
	return stats, nil
}

// KeyCursor is where DropSettledKeys goes on: the counter row (namespace, queue, key) it
// looked at last; the zero KeyCursor is the first row.
type KeyCursor struct{ Namespace, Queue, Key string }

// DropSettledKeys deletes, in t, the counter rows of concurrency keys that count nothing
// queued or running and keep no rate state at the transaction's time
// (plane.Admission.KeyRateSettled: the token bucket full again, no "slow down" hold
// running). The counting triggers keep such a row past the key's last job while its
// bucket refills or its hold runs, so that the key's next job starts under them; the
// maintenance pass drops it after. It looks at up to limit rows, in key order after
// *after, which it moves past them (back to the first row once it has read the last), so
// that successive passes reach every kept row however many of them must still be kept (a
// hold may last months); it returns how many it dropped.
func DropSettledKeys(t Tx, st *Statements, after *KeyCursor, limit int) (int, error) {
	type emptied struct {
		namespace, queue, key string
		tokens                float64
		tokensMS, nextMS      int64
	}
	rs, err := t.Query(st.KeysEmptied, after.Namespace, after.Queue, after.Key, limit)
	if err != nil {
		return 0, fmt.Errorf("concurrency keys: %w", err)
	}
	rows, err := Collect(rs, "concurrency keys", func(s Scanner) (emptied, error) {
		var e emptied
		err := s.Scan(&e.namespace, &e.queue, &e.key, &e.tokens, &e.tokensMS, &e.nextMS)
		return e, err
	})
	if err != nil {
		return 0, err
	}
	if len(rows) < limit {
		*after = KeyCursor{}
	} else {
		last := rows[len(rows)-1]
		*after = KeyCursor{last.namespace, last.queue, last.key}
	}
	dropped := 0
	var queue [2]string // the queue whose admission a holds (rows come in queue order)
	var a plane.Admission
	for _, e := range rows {
		if queue != [2]string{e.namespace, e.queue} {
			queue, a = [2]string{e.namespace, e.queue}, plane.Admission{}
			// Read, not locked as a submit locks it: the drop may wait for a key's row (a
			// claim or a settle holding it), and the queue's submits must not wait with it.
			// A block changed meanwhile only moves the bucket's reset by that moment.
			if block, err := ScanAdmission(t.QueryRow(st.AdmissionGet, e.namespace, e.queue)); err != nil {
				return dropped, fmt.Errorf("concurrency keys: read admission: %w", err)
			} else if block != nil {
				a = block.Admission
			}
		}
		var held time.Time
		if e.nextMS > 0 {
			held = time.UnixMilli(e.nextMS)
		}
		if !a.KeyRateSettled(e.key, e.tokens, time.UnixMilli(e.tokensMS), held, t.Now()) {
			continue
		}
		n, err := t.Exec(st.KeyDrop, e.namespace, e.queue, e.key, e.tokens, e.tokensMS, e.nextMS)
		if err != nil {
			return dropped, fmt.Errorf("concurrency keys: %w", err)
		}
		dropped += int(n)
	}
	return dropped, nil
}
