package pgplane

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore/internal/pgtest"
	"github.com/lakeshore-dev/lakeshore/plane"
)

// statementCounter is a pgx tracer that counts the statements sent, by their SQL, alone or
// in batches.
type statementCounter struct {
	mu    sync.Mutex
	count map[string]int
}

func (c *statementCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.count[data.SQL]++
	return ctx
}

func (c *statementCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// TraceBatchQuery counts a statement of a batch (a transaction's statements go out in
// batches, behind its BEGIN and its queued writes).
func (c *statementCounter) TraceBatchQuery(_ context.Context, _ *pgx.Conn, data pgx.TraceBatchQueryData) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.count[data.SQL]++
}

func (c *statementCounter) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return ctx
}

func (c *statementCounter) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

// take answers the count of sql since the last take and starts it again.
func (c *statementCounter) take(sql string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.count[sql]
	c.count = map[string]int{}
	return n
}

// countedDriver opens a driver of cfg on a new database whose statements counter counts.
func countedDriver(t *testing.T, cfg *Config) (*Driver, *statementCounter) {
	t.Helper()
	pc, _, err := ParseURL(pgtest.Database(t), nil)
	require.NoError(t, err)
	counter := &statementCounter{count: map[string]int{}}
	pc.ConnConfig.Tracer = counter
	pool, err := pgxpool.NewWithConfig(t.Context(), pc)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	d, err := New(pool, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { d.Close() })
	return d, counter
}

// TestSubmitReadsCallersIDOnce checks that a submit carrying both a caller's id and an
// idempotency key looks its id up once: before the insert (planekit.StageSubmit), not again
// when the insert did not take the invocation because its key is held (planekit.Resolve,
// which then reads the key's holder only). It failed before: the id was read twice.
func TestSubmitReadsCallersIDOnce(t *testing.T) {
	d, counter := countedDriver(t, &Config{MaintenanceInterval: time.Hour})
	ids := plane.NewIDGenerator()

	first := submitOne(t, d, plane.SubmitParams{ID: ids.New(time.Now()), Key: "k"})
	counter.take("")
	// Another id, the same key: the insert conflicts on the key; the answer is its holder.
	got := submitOne(t, d, plane.SubmitParams{ID: ids.New(time.Now()), Key: "k"})
	require.Equal(t, first, got)
	require.Equal(t, 1, counter.count[d.kit.IDHolder], "the caller's id is read once")
	require.Equal(t, 1, counter.take(d.kit.KeyHolderID), "the key's holder is read once")

	// The same id again: the look-up before the insert answers it.
	got = submitOne(t, d, plane.SubmitParams{ID: first, Key: "k"})
	require.Equal(t, first, got)
	require.Equal(t, 1, counter.take(d.kit.IDHolder), "the caller's id is read once")
}
