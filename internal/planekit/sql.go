package planekit

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/lakeshore-dev/lakeshore/plane"
)

// Plane is what a SQL plane gives Verbs: its storage (DB), its notification hub, its
// clock, its open check and its wait.
type Plane struct {
	DB  DB
	Hub *Hub
	// Now reads the plane's clock.
	Now func() time.Time
	// CheckOpen returns plane.ErrClosed once the plane's Close has begun; reads call it first.
	CheckOpen func() error
	// Sleep waits for changed, for wait to pass (→ plane.ErrTimeout), for ctx (→ its error)
	// or for the plane to close (→ plane.ErrClosed); nil when the caller should look again.
	Sleep func(ctx context.Context, changed <-chan struct{}, wait time.Duration) error
	// MaxSchedules is the cap on schedules per namespace (plane.CheckScheduleCount: 0 the
	// default, negative none), from the driver's configuration.
	MaxSchedules int
	// MaxWorkers is the cap on registered workers per namespace (plane.CheckWorkerCount: 0
	// the default, negative none), from the driver's configuration.
	MaxWorkers int
}

// DB is a SQL plane's storage as Verbs use it: reads on its read connections, a write
// transaction, and its error mapping. sqliteplane and pgplane each implement it over their
// connections (database/sql's, pgx's).
type DB interface {
	// Query runs a read outside any write transaction. The caller closes the rows.
	Query(ctx context.Context, query string, args ...any) (ClosingRows, error)
	// QueryRow runs a read of one row outside any write transaction.
	QueryRow(ctx context.Context, query string, args ...any) Scanner
	// Write runs fn in one write transaction of the plane (its clock read once), committed
	// when fn returns nil and rolled back when it returns an error, which Write returns (as
	// the plane maps it: plane.ErrClosed, plane.ErrUnavailable, ctx's error).
	Write(ctx context.Context, fn func(Tx) error) error
	// Failure is the error a read made with ctx returns for err (pgplane's mapping of a lost
	// connection, an ended ctx or a closing plane; err itself on SQLite; nil for nil).
	Failure(ctx context.Context, err error) error
	// Snapshot runs fn's reads in one read-only snapshot (SQLite: a read transaction;
	// PostgreSQL: repeatable read), so what they read was committed together.
	Snapshot(ctx context.Context, fn func(Reader) error) error
}

// Reader runs the reads of one snapshot (DB.Snapshot).
type Reader interface {
	QueryRow(query string, args ...any) Scanner
	// Query reads rows; the caller closes them.
	Query(query string, args ...any) (ClosingRows, error)
}

// ClosingRows are Rows the caller closes.
type ClosingRows interface {
	Rows
	Close()
}

// Tx is one write transaction of a SQL plane, as the shared verbs use it.
type Tx interface {
	// Now is the transaction's time (the plane's clock, read once).
	Now() time.Time
	// Exec runs a write and returns how many rows it changed.
	Exec(query string, args ...any) (int64, error)
	// QueryRow reads one row; it sees the transaction's writes.
	QueryRow(query string, args ...any) Scanner
	// Query reads rows; it sees the transaction's writes. The caller closes them.
	Query(query string, args ...any) (ClosingRows, error)
	// Claimable notes that the transaction made jobs of a queue claimable (a resume, a raised
	// limit): its parked claimers are served before the commit and its waiters woken after.
	Claimable(namespace, queue string)
	// PauseChanged drops what the plane caches of a queue's pause, which the transaction
	// changed.
	PauseChanged(namespace, queue string)
	// Admission reads the admission block of a queue (nil: none), locked as a submit locks it.
	Admission(namespace, queue string) (*Admission, error)
	// Queued is the queued count of a queue as the transaction sees it.
	Queued(namespace, queue string) (int64, error)
	// AdmissionChanged follows a write of a queue's admission block (admissionChanged): it
	// drops what the plane caches of the block.
	AdmissionChanged(namespace, queue string)
	// Head reads the transition fields of invocation id, locked for the transaction; nil
	// when there is none.
	Head(id string) (*Head, error)
	// Apply writes the transition tr of h (a terminal state: its error recorded).
	Apply(h *Head, tr plane.Transition) error
	// Wake marks a hub key whose waiters the commit wakes.
	Wake(key string)
	// SubmitUnadmitted inserts p's invocations without applying the queue's admission block
	// (the caller did), writing their results to out (len(p.Invocations) entries).
	SubmitUnadmitted(p *plane.SubmitManyParams, out []plane.SubmitResult) error
}

// Collect reads every row of rs with scan, closes rs and returns the rows (an empty, non-nil
// slice when there are none). A scan error or rs's error is wrapped with what.
func Collect[T any](rs ClosingRows, what string, scan func(Scanner) (T, error)) ([]T, error) {
	defer rs.Close()
	out := []T{}
	for rs.Next() {
		v, err := scan(rs)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		out = append(out, v)
	}
	if err := rs.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return out, nil
}

// NoRows reports whether err is the "no row" error of a row read: sql.ErrNoRows, which
// pgx.ErrNoRows matches too.
func NoRows(err error) bool { return errors.Is(err, sql.ErrNoRows) }

// ScanString scans a row of one text column (for Collect).
func ScanString(s Scanner) (v string, err error) { return v, s.Scan(&v) }

// read runs query on v's read connections and collects its rows with scan; errors are
// wrapped with what and mapped by DB.Failure.
func read[T any](ctx context.Context, v Verbs, what string, scan func(Scanner) (T, error), query string, args ...any) ([]T, error) {
	db := v.db
	if err := v.p.CheckOpen(); err != nil {
		return nil, err
	}
	rs, err := db.Query(ctx, query, args...)
	if err != nil {
		return nil, db.Failure(ctx, fmt.Errorf("%s: %w", what, err))
	}
	out, err := Collect(rs, what, scan)
	return out, db.Failure(ctx, err)
}

// write runs fn in one write transaction of db. fn returns the caller's error (logical, such
// as plane.ErrNotFound) only before it wrote anything: the transaction commits (with a SQLite
// batch's other work) and write returns it; fn's other errors roll the transaction back.
func write(ctx context.Context, db DB, fn func(Tx) (logical, err error)) error {
	var logical error
	err := db.Write(ctx, func(t Tx) error {
		var err error
		logical, err = fn(t)
		return err
	})
	if err != nil {
		return err
	}
	return logical
}

// exec runs query in one write transaction of db and returns whether it changed a row.
func exec(ctx context.Context, db DB, what string, query string, args func(t Tx) []any) (bool, error) {
	var changed bool
	err := db.Write(ctx, func(t Tx) error {
		n, err := t.Exec(query, args(t)...)
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		changed = n > 0
		return nil
	})
	return changed, err
}

// Verbs are the plane.Driver methods whose logic is the same on every SQL plane: providers
// and named leases (verbs_provider.go), schedules (verbs_schedule.go), queue pauses, tokens
// and workers (verbs_registry.go), admission blocks (verbs_admission.go), InvocationGet, InvocationWait, InvocationCount and
// QueueStatsList, InvocationCancel, InvocationKill and FrameRead (verbs_read.go). A driver embeds Verbs, set in its Open with its DB and
// its statements, and keeps only the SQL text.
type Verbs struct {
	p  Plane
	db DB
	st *Statements
}

// NewVerbs returns the shared verbs over p with the driver's statements st.
func NewVerbs(p Plane, st *Statements) Verbs { return Verbs{p: p, db: p.DB, st: st} }

// Now reads the plane's clock (Plane.Now): a driver embedding Verbs is a plane.Clock, on
// which the server and the SDK stamp and check tokens' expiries.
func (v Verbs) Now() time.Time { return v.p.Now() }

// Statements are a driver's SQL text for Verbs, in its dialect (placeholders, schema,
// collation, locks). Each field names the arguments it is run with, in order ($1 … or ?1 …).
type Statements struct {
	// Row: id → the invocation's row (RowColumns, after its seq when RowSeq).
	Row    string
	RowSeq bool
	// TopicClosed: journal → closed (a bool). Frames: journal, since, limit → seq, kind,
	// value, attempt, time (ms) of the frames after since, in order.
	TopicClosed, Frames string
	// Count: namespace, queue, state, another state (smallints) → the sum of their counters.
	Count string
	// StatsCounts: namespace ("" for all) → namespace, queue, state, count; in (namespace,
	// queue) order. StatsAdmissions: namespace → namespace, queue, then
	// AdmissionColumns (read by ScanAdmission). StatsKeys: KeyStatsSQL.
	StatsCounts, StatsAdmissions, StatsKeys string
	// DemandShapes: namespace ("" for all) → namespace, queue, shape, requirement (JSON
	// text), queued, running, and the available time (ms) of the shape's first claimable
	// job by id (NULL when none: one index probe in the same statement): every row of
	// placement_shapes with its counters summed. DemandHead: namespace, queue → the same
	// time for the default shape's first claimable unkeyed job; no row when none
	// (verbs_demand.go).
	DemandShapes, DemandHead string

	// ProviderSet: namespace, queue, provider reference (JSON text), now (ms). An upsert.
	ProviderSet string
	// ProviderGet: namespace, queue → provider (JSON text).
	ProviderGet string
	// ProviderDelete: namespace, queue.
	ProviderDelete string
	// ProviderList: namespace ("" for all) → namespace, queue, provider; in (namespace,
	// queue) byte order.
	ProviderList string
	// LeaseAcquire: namespace, name, holder, expires (ms), now (ms). An upsert that takes
	// the row only when it is free, expired or already the holder's.
	LeaseAcquire string
	// LeaseRelease: namespace, name, holder.
	LeaseRelease string

	// ScheduleColumns are the columns of a schedule row, in ScanSchedule's order.
	// ScheduleGet: namespace, name → ScheduleColumns, the row locked for the transaction.
	ScheduleGet string
	// ScheduleUpsert and ScheduleInsert: namespace, name, spec, paused, next (ms), now (ms)
	// → ScheduleColumns; ScheduleInsert returns no row when the schedule exists.
	ScheduleUpsert, ScheduleInsert string
	// ScheduleList: the least (namespace, name), the greatest (namespace, name), both
	// inclusive (ScheduleListBounds), limit → ScheduleColumns of the schedules in that
	// range, in (namespace, name) byte order.
	ScheduleList string
	// ScheduleCount: namespace → its number of schedules. CapLock: a cap's key →
	// (anything); run before a cap's count when creating an object it counts (a schedule, a
	// topic, a worker's registration), it holds off every other creation under the key until
	// the transaction ends, so two never both pass the cap (pgplane's advisory lock; a plain
	// SELECT on SQLite, whose writes are serial).
	ScheduleCount, CapLock string
	// ScheduleDelete: namespace, name.
	ScheduleDelete string
	// SchedulePause: paused, next (ms), now (ms), namespace, name.
	SchedulePause string
	// ScheduleDue: now (ms), limit → ScheduleColumns of the due schedules, earliest first,
	// locked for the transaction (skipping rows another transaction locked).
	ScheduleDue string
	// ScheduleFired: next (ms), last fire (ms), last id, namespace, name, spec (nil: keep).
	ScheduleFired string

	// AdmissionSet: namespace, queue, max depth, on full, rate limit, burst, deadline
	// cutoff (ms), now (ms), tokens (the burst, a float), concurrency (EncodeConcurrency).
	// An upsert. AdmissionGet: namespace, queue → AdmissionColumns. AdmissionDelete:
	// namespace, queue.
	AdmissionSet, AdmissionGet, AdmissionDelete string

	// PauseSet: namespace, queue, now (ms), doing nothing when paused. PauseDelete:
	// namespace, queue. PauseList: namespace ("" for all) → namespace, queue.
	PauseSet, PauseDelete, PauseList string

	// WorkerRegister: namespace, id, host, pid, queues, started (ms), seen (ms), provider,
	// launch id, running, idle since (ms), offers (EncodeOffers), warm host keys
	// (EncodeHostKeys). An upsert.
	WorkerRegister string
	// WorkerList: seen since (ms), namespace ("" for all) → id, namespace, host, pid,
	// queues, started, seen, provider, launch id, running, idle since, offers, warm host
	// keys; oldest first.
	WorkerList string
	// WorkerRemove: namespace, id.
	WorkerRemove string
	// WorkerTrim: seen before (ms); deletes the workers silent since (TrimWorkers).
	WorkerTrim string
	// TokenTrim: a cutoff (ms); deletes the tokens revoked or expired before it (TrimTokens).
	TokenTrim string
	// WorkerRefresh: namespace, id, host, pid, queues, seen (ms), provider, launch id,
	// running, idle since (ms), offers, warm host keys; the update of a registered
	// worker's row (WorkerRegister's columns but its start), affecting none when the
	// worker is not registered. WorkerCount: namespace → its number of registered workers
	// (checkWorkerCap).
	WorkerRefresh, WorkerCount string
	// WorkerQueues is how a worker's queues are stored.
	WorkerQueues ListCodec

	// TokenCreate: id, hash, namespace, queue, permissions, created (ms), expires (ms); an
	// insert that does nothing when the id or the hash is stored.
	TokenCreate string
	// TokenGet: hash → TokenColumns. TokenList: → TokenColumns, oldest first.
	TokenGet, TokenList string
	// TokenRevoked: id → revoked (ms), the row locked. TokenRevoke: now (ms), id.
	TokenRevoked, TokenRevoke string
	// Permissions is how a token's permissions are stored.
	Permissions ListCodec

	// KeyHolder: namespace, queue, key → id, created (ms), metadata of the invocation
	// holding the key, locked for the transaction. DebounceHolder: the same → id,
	// metadata, waiting (a bool: waiting out its due time), attempt, available (ms).
	// KeyFree: id; frees the invocation's key (and its hold against trims, plane.KeyHeldUntil). DebounceFold: id, payload, metadata,
	// available (ms). (submit.go)
	KeyHolder, DebounceHolder, KeyFree, DebounceFold string
	// IDHolder: id → namespace, queue of the invocation holding a caller's id.
	// KeyHolderID: namespace, queue, key → id of the invocation holding the key, not
	// locked. (Holder, submitpath.go)
	IDHolder, KeyHolderID string
	// KeyLimitsDelete: namespace, queue; deletes the queue's stored concurrency limits.
	// KeyLimitInsert: namespace, queue, key, limit, weight. KeyLimitsApply: namespace,
	// queue; gives the queue's key counters their limits and weights from the stored ones
	// (KeyLimitsSQL; PostgreSQL locks the counter rows in key order first). (SetKeyLimits,
	// keylimits.go)
	KeyLimitsDelete, KeyLimitInsert, KeyLimitsApply string
	// TopicAppend: topic, closed (a bool: a final post), now (ms) → the topic's next seq,
	// taken (the topic created at seq 0 when it is new); no row when the topic is closed.
	// (TopicSeq, topic.go)
	TopicAppend string
	// TopicCount: the least journal name, the least above every one counted → the number
	// of topics in that range, in byte order (a queue's: TopicRange; a driver's, as it
	// collates). TopicDrop: topic; deletes it.
	TopicCount, TopicDrop string

	// KeysEmptied: namespace, queue, key (a KeyCursor), limit → namespace, queue, key,
	// tokens, tokens (ms), next (ms) of the counter rows of concurrency keys with nothing
	// queued or running, which the counting triggers keep for their rate state, in key
	// order after the cursor (DropSettledKeys). KeyDrop: namespace, queue, key,
	// tokens, tokens (ms), next (ms); deletes the row only while it still counts nothing
	// and holds that rate state.
	KeysEmptied, KeyDrop string

	// KeysHeld: namespace, queue, now (ms) → key, tokens, tokens (ms), next (ms) of the
	// queue's counter rows held back past now with a token bucket drawn from, in key order
	// (EndBucketHolds writes them so: the order every writer of several key rows keeps). KeyHoldEnd: namespace, queue, key, next (ms); ends the row's hold
	// while it is still that one.
	KeysHeld, KeyHoldEnd string
}

// ValidateOptionalNamespace checks a namespace filter: "" (every namespace) or a valid name.
func ValidateOptionalNamespace(namespace string) error {
	if namespace == "" {
		return nil
	}
	return plane.ValidateNamespace(namespace)
}
