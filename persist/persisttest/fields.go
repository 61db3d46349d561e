package persisttest

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lakeshore-dev/lakeshore/persist"
)

// LogRecords is a slog.Handler that keeps every record logged through it (of every
// level), for tests that check what a Queue logged: NewLogger gives the logger to pass.
// It is safe for concurrent use; attributes added by Logger.With and groups are dropped
// (a Queue's warnings use neither).
type LogRecords struct {
	mu      sync.Mutex
	records []slog.Record
}

// NewLogger returns a logger whose records l keeps.
func (l *LogRecords) NewLogger() *slog.Logger { return slog.New(l) }

// Enabled implements slog.Handler: every level.
func (l *LogRecords) Enabled(context.Context, slog.Level) bool { return true }

// Handle implements slog.Handler: it keeps a copy of r.
func (l *LogRecords) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.records = append(l.records, r.Clone())
	return nil
}

// WithAttrs implements slog.Handler (attrs dropped).
func (l *LogRecords) WithAttrs([]slog.Attr) slog.Handler { return l }

// WithGroup implements slog.Handler (the group dropped).
func (l *LogRecords) WithGroup(string) slog.Handler { return l }

// Records returns the records kept so far.
func (l *LogRecords) Records() []slog.Record {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.records)
}

// Attrs returns r's attributes by key, as their values' strings.
func Attrs(r slog.Record) map[string]string {
	out := map[string]string{}
	r.Attrs(func(a slog.Attr) bool {
		out[a.Key] = a.Value.String()
		return true
	})
	return out
}

// testUnknownFieldWarned: a batch hand-out of a field no record of the queue has (a
// misspelt name) answered an empty batch in silence (and, waiting, ErrTimeout after the
// whole wait). It is still not refused (a later PutFields may add the field), but the
// Queue logs it once per field at level Warn, naming the queue, the field and the queue's
// fields, as the Python SDK does; a field of the queue, and any field of a queue nothing
// was put to yet (no schema to compare with), is not logged.
func testUnknownFieldWarned(t *testing.T, q *persist.Queue) {
	ctx := context.Background()
	var logs LogRecords
	q.SetLogger(logs.NewLogger())
	r := q.Reader()

	m, err := r.GetMeta(ctx, &persist.MetaRequest{Fields: []string{"a"}, BatchSize: 2, Task: "t"})
	require.NoError(t, err, "a consumer may start before its producers")
	require.Zero(t, m.Size)
	require.Empty(t, logs.Records(), "a queue without records has no schema to compare with")

	putN(t, q, persist.DefaultPartition, 4, func(i int) persist.Record { return persist.Record{"a": i} })
	b, m, err := r.GetBatch(ctx, &persist.MetaRequest{Fields: []string{"a"}, BatchSize: 2, Task: "t"})
	require.NoError(t, err)
	b.Release()
	require.Equal(t, 2, m.Size)
	require.Empty(t, logs.Records(), "a field of the queue is not logged")

	b, m, err = r.GetBatch(ctx, &persist.MetaRequest{Fields: []string{"nope"}, BatchSize: 2, Task: "t"})
	require.NoError(t, err, "not refused: a later PutFields may add the field")
	b.Release()
	require.Zero(t, m.Size)
	m, err = q.Reader().GetMeta(ctx, &persist.MetaRequest{Fields: []string{"nope", "a"}, BatchSize: 2, Task: "u"})
	require.NoError(t, err)
	require.Zero(t, m.Size)
	_, _, err = r.GetBatchLeased(ctx, &persist.MetaRequest{Fields: []string{"nope"}, BatchSize: 2, Task: "t",
		Wait: true, Timeout: 50 * time.Millisecond}, time.Minute)
	require.ErrorIs(t, err, persist.ErrTimeout)

	logged := logs.Records()
	require.Len(t, logged, 1, "once per queue and field")
	require.Equal(t, slog.LevelWarn, logged[0].Level)
	require.Equal(t, map[string]string{"queue": q.Name(), "fields": "[nope]", "queue_fields": "[a]"}, Attrs(logged[0]))

	// Field-level readiness: once a put adds the field, the hand-out serves it.
	require.NoError(t, q.PutFields(ctx, persist.DefaultPartition, []int64{2, 3}, []persist.Record{{"nope": 1}, {"nope": 2}}))
	m, err = r.GetMeta(ctx, &persist.MetaRequest{Fields: []string{"nope"}, BatchSize: 2, Task: "t"})
	require.NoError(t, err)
	require.Equal(t, []int64{2, 3}, m.Indexes)
	_, err = r.GetMeta(ctx, &persist.MetaRequest{Fields: []string{"other"}, BatchSize: 2, Task: "t"})
	require.NoError(t, err)
	logged = logs.Records()
	require.Len(t, logged, 2)
	require.Equal(t, map[string]string{"queue": q.Name(), "fields": "[other]", "queue_fields": "[a nope]"}, Attrs(logged[1]))
}
